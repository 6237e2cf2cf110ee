//! The proxy: accepts on the front's address and passes each connection, bytes untouched, to
//! a healthy backend until either side closes. The backend of a connection is chosen once,
//! when it arrives; a connection passed on is never cut when its backend turns unhealthy.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::state::Shared;

/// The proxy's bounds.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How long a new connection waits for a healthy backend before it is closed.
    pub hold: Duration,
    /// How long a connection to a backend may take.
    pub connect: Duration,
    /// How long open connections may take to finish once the front stops.
    pub drain: Duration,
}

/// After an accept error (too many open files, say), the pause before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Accepts until `cancel`, then stops accepting (closes its copy of the listening socket; a
/// front it was handed over to keeps its own) and waits up to `timing.drain` for the open
/// connections to finish. Returns how many were still open and cut at the end.
pub async fn serve(
    listener: Arc<TcpListener>,
    shared: Arc<Shared>,
    timing: Timing,
    cancel: CancellationToken,
) -> usize {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            // Stopping comes first: once told, not one more connection is accepted.
            biased;
            () = cancel.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    connections.spawn(pass_on(client, shared.clone(), timing));
                }
                Err(error) => {
                    tracing::debug!(%error, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(timing.drain, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_ok() {
        return 0;
    }
    let cut = connections.len();
    connections.shutdown().await;
    cut
}

/// Passes `client` on to a healthy backend, waiting up to `timing.hold` for one.
async fn pass_on(mut client: TcpStream, shared: Arc<Shared>, timing: Timing) {
    let deadline = Instant::now() + timing.hold;
    let mut healthy = shared.watch_healthy();
    loop {
        if let Some(index) = shared.pick() {
            let Some(&addr) = shared.backends().get(index) else {
                // The pool and the addresses are built from the same list.
                shared.release(index);
                return;
            };
            match connect(addr, timing.connect).await {
                Ok(mut backend) => {
                    let _ = client.set_nodelay(true);
                    let _ = backend.set_nodelay(true);
                    // Either side's error (a reset) ends the connection as a close would.
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
                    shared.release(index);
                    return;
                }
                Err(reason) => {
                    shared.connect_failed(index, reason);
                    continue;
                }
            }
        }
        match tokio::time::timeout_at(deadline, healthy.changed()).await {
            Ok(Ok(())) => continue,
            // The deadline passed, or the front is gone.
            Ok(Err(_)) | Err(_) => {
                shared.closed_unserved();
                return;
            }
        }
    }
}

async fn connect(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, String> {
    match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(e)) => Err(format!("cannot connect: {e}")),
        Err(_) => Err(format!("cannot connect within {} ms", timeout.as_millis())),
    }
}
