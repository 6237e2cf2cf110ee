//! SIGINT (Ctrl-C) and SIGTERM (what `kill`, systemd and Kubernetes send) both ask a command
//! to stop; a long-running command listens for them here.

use std::fmt;

/// Which request to stop arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM.
    Terminate,
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stop::Interrupt => "Ctrl-C (SIGINT)",
            Stop::Terminate => "SIGTERM",
        })
    }
}

/// Listens for SIGINT and SIGTERM from creation on, so that a second signal is seen too.
pub struct StopSignals {
    #[cfg(unix)]
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl StopSignals {
    /// Starts listening (must run inside the runtime).
    pub fn listen() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let streams = signal(SignalKind::interrupt())
                .and_then(|int| Ok((int, signal(SignalKind::terminate())?)))
                .ok();
            StopSignals { streams }
        }
        #[cfg(not(unix))]
        {
            StopSignals {}
        }
    }

    /// Waits for the next SIGINT or SIGTERM.
    pub async fn next(&mut self) -> Stop {
        #[cfg(unix)]
        if let Some((int, term)) = &mut self.streams {
            return tokio::select! {
                _ = int.recv() => Stop::Interrupt,
                _ = term.recv() => Stop::Terminate,
            };
        }
        // Without signal streams, Ctrl-C is all there is to wait for; if even that cannot be
        // listened to, never return rather than report a stop nobody asked for.
        match tokio::signal::ctrl_c().await {
            Ok(()) => Stop::Interrupt,
            Err(_) => std::future::pending().await,
        }
    }
}
