//! `selfhost front`: the node-local API front. It checks the node's kube-apiservers, then
//! listens on the node's API port (on the socket of the front serving before it, taken over,
//! or afresh) and passes each new connection, TLS untouched, to one whose `/readyz` passes; it
//! runs until SIGINT or SIGTERM, then stops accepting and lets the open connections finish.
//! When a new front takes its socket, it stops accepting, lets its connections finish and
//! idles until told to stop. It says on stderr each change of a backend's health and of its
//! own, never a connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use selfhost::{Front, FrontEvent, FrontListening, FrontOptions, FrontStart};
use tokio_util::sync::CancellationToken;

use crate::args::{FrontAction, FrontArgs, FrontProxyArgs, GlobalArgs};
use crate::exit::{CliError, Outcome};
use crate::ui;

/// Runs `selfhost front`: the front until stopped, or one of its subcommands.
pub async fn run(global: &GlobalArgs, args: &FrontArgs) -> Result<Outcome, CliError> {
    match &args.action {
        Some(FrontAction::Install(install)) => {
            super::front_placement::install(global, install).await
        }
        Some(FrontAction::Remove(remove)) => super::front_placement::remove(global, remove).await,
        None => run_front(&args.proxy).await,
    }
}

/// Runs the front until stopped.
async fn run_front(args: &FrontProxyArgs) -> Result<Outcome, CliError> {
    let listen = args.listen.ok_or_else(|| {
        CliError::bad_input(anyhow::anyhow!(
            "selfhost front needs --listen ADDR:PORT: the node's API address (or a subcommand: \
             install, remove)"
        ))
    })?;
    let mut options = FrontOptions::new(listen, args.backends.clone());
    options.ca_file = args.ca_file.clone();
    options.check_server_name = args.check_server_name.clone();
    options.check_interval = args.check_interval;
    options.hold = args.hold;
    options.drain = args.drain_timeout;
    options.start_patience = args.start_patience;
    options.handover = Some(args.handover_socket.clone());
    let front = Front::bind(options)
        .await
        .map_err(|e| CliError::from(selfhost::Error::from(e)))?;
    let listening = front.local_addr().map_or(listen, |a| a);
    ui::say(found(front.start(), args.backends.len(), args.hold));
    let backends: Vec<String> = args.backends.iter().map(ToString::to_string).collect();
    ui::say(format!(
        "front: listening on {listening}, {}; passing connections to {} once their /readyz \
         passes",
        how(&front.start().listening),
        backends.join(", ")
    ));

    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let mut stops = super::signals::StopSignals::listen();
    let drain = args.drain_timeout;
    // Once handed over, a signal ends the front at once: it accepts nothing, and has drained.
    let handed = Arc::new(AtomicBool::new(false));
    let idle = handed.clone();
    let signals = tokio::spawn(async move {
        let signal = stops.next().await;
        if idle.load(Ordering::Relaxed) {
            ui::say(format!("front: {signal}: stopping"));
        } else {
            ui::say(format!(
                "front: {signal}: no longer accepting; open connections may finish (up to {})",
                humantime::format_duration(drain)
            ));
        }
        stop.cancel();
    });
    let hold = args.hold;
    let stopped = front
        .run(cancel, move |event| {
            if *event == FrontEvent::HandedOver {
                handed.store(true, Ordering::Relaxed);
            }
            ui::say(say(event, hold, drain));
        })
        .await;
    signals.abort();
    if stopped.handed_over {
        ui::say("front: stopped; a new front serves in its place");
    } else if stopped.cut == 0 {
        ui::say("front: stopped, every connection finished");
    } else {
        ui::say(format!(
            "front: stopped, {} connection(s) still open were cut",
            stopped.cut
        ));
    }
    Ok(Outcome::Done)
}

/// The line that says what the checks before listening found, of `count` backends.
fn found(start: &FrontStart, count: usize, hold: Duration) -> String {
    let waited = Duration::from_millis(u64::try_from(start.found.waited.as_millis()).unwrap_or(0));
    if start.found.ready.is_empty() {
        format!(
            "front: no backend ready after {}; listening anyway: new connections are held up \
             to {}, then closed, until one is",
            humantime::format_duration(waited),
            humantime::format_duration(hold)
        )
    } else {
        format!(
            "front: checked the backends before listening: {} of {count} ready after {}",
            start.found.ready.len(),
            humantime::format_duration(waited)
        )
    }
}

/// How it came by its listening socket.
fn how(listening: &FrontListening) -> String {
    match listening {
        FrontListening::TakenOver { path } => format!(
            "taken over from the front at {} (no connection waiting is lost)",
            path.display()
        ),
        FrontListening::Fresh { why } => format!("bound afresh ({why})"),
    }
}

/// The line that says `event`.
fn say(event: &FrontEvent, hold: Duration, drain: Duration) -> String {
    match event {
        FrontEvent::Healthy { backend } => {
            format!("front: {backend} is ready: it takes new connections")
        }
        FrontEvent::Unhealthy { backend, reason } => format!(
            "front: {backend} is not ready ({reason}): no new connections; its open ones go on"
        ),
        FrontEvent::Available { closed: 0 } => "front: serving".to_string(),
        FrontEvent::Available { closed } => {
            format!("front: serving again; {closed} connection(s) were closed unserved meanwhile")
        }
        FrontEvent::Unavailable => format!(
            "front: no backend is ready: new connections are held up to {}, then closed",
            humantime::format_duration(hold)
        ),
        FrontEvent::Closing => format!(
            "front: closing connections unserved: no backend became ready within {}",
            humantime::format_duration(hold)
        ),
        FrontEvent::HandedOver => format!(
            "front: a new front took the listening socket: no longer accepting; open \
             connections may finish (up to {})",
            humantime::format_duration(drain)
        ),
        FrontEvent::Drained { cut: 0 } => {
            "front: every connection finished; idle until stopped".to_string()
        }
        FrontEvent::Drained { cut } => {
            format!("front: {cut} connection(s) still open were cut; idle until stopped")
        }
    }
}
