//! `selfhost front`: the node-local API front. It listens on the node's API port and passes
//! each new connection, TLS untouched, to one of the node's kube-apiservers whose `/readyz`
//! passes; it runs until SIGINT or SIGTERM, then stops accepting and lets the open
//! connections finish. It says on stderr each change of a backend's health, never a
//! connection.

use selfhost::{Front, FrontEvent, FrontOptions};
use tokio_util::sync::CancellationToken;

use crate::args::FrontArgs;
use crate::exit::{CliError, Outcome};
use crate::ui;

/// Runs the front until stopped.
pub async fn run(args: &FrontArgs) -> Result<Outcome, CliError> {
    let mut options = FrontOptions::new(args.listen, args.backends.clone());
    options.ca_file = args.ca_file.clone();
    options.check_server_name = args.check_server_name.clone();
    options.check_interval = args.check_interval;
    options.hold = args.hold;
    options.drain = args.drain_timeout;
    let front = Front::bind(options)
        .await
        .map_err(|e| CliError::from(selfhost::Error::from(e)))?;
    let listening = front.local_addr().map_or(args.listen, |a| a);
    let backends: Vec<String> = args.backends.iter().map(ToString::to_string).collect();
    ui::say(format!(
        "front: listening on {listening}, passing connections to {} once their /readyz passes",
        backends.join(", ")
    ));

    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let mut stops = super::signals::StopSignals::listen();
    let drain = args.drain_timeout;
    let signals = tokio::spawn(async move {
        let signal = stops.next().await;
        ui::say(format!(
            "front: {signal}: no longer accepting; open connections may finish (up to {})",
            humantime::format_duration(drain)
        ));
        stop.cancel();
    });
    let hold = args.hold;
    let stopped = front
        .run(cancel, move |event| ui::say(say(event, hold)))
        .await;
    signals.abort();
    if stopped.cut == 0 {
        ui::say("front: stopped, every connection finished");
    } else {
        ui::say(format!(
            "front: stopped, {} connection(s) still open were cut",
            stopped.cut
        ));
    }
    Ok(Outcome::Done)
}

/// The line that says `event`.
fn say(event: &FrontEvent, hold: std::time::Duration) -> String {
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
    }
}
