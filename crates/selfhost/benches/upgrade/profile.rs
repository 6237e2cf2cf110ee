//! Where an upgrade's time goes, independent of how loaded the machine is: one timeline of
//! what the simulator's store committed (control-plane pods, Leases, DaemonSets in
//! kube-system, stamped in-process the moment they commit) and what the engine did (its
//! events), so that every wait's slack — from the moment its condition became true in the
//! simulator to the moment the engine acted — can be read off. Used by `-- profile N`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use selfhost::events::Stamped;
use selfhost_sim::Store;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// One line of the timeline.
pub struct Line {
    pub at: Duration,
    pub text: String,
}

/// The simulator side: a task copying every committed change of interest.
pub struct StoreTap {
    lines: Arc<Mutex<Vec<Line>>>,
    task: JoinHandle<()>,
}

fn short(obj: &Value, path: &[&str]) -> String {
    let mut v = obj;
    for p in path {
        v = &v[*p];
    }
    v.as_str().unwrap_or("-").to_string()
}

fn pod_line(obj: &Value) -> String {
    let ready = obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .map(|c| c["status"].as_str().unwrap_or("?").to_string())
        .unwrap_or_else(|| "-".into());
    let started = obj["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        .as_str()
        .unwrap_or("-")
        .to_string();
    let deleting = obj["metadata"]["deletionTimestamp"].is_string();
    format!(
        "pod {} phase={} ready={ready} started={started}{}",
        short(obj, &["metadata", "name"]),
        short(obj, &["status", "phase"]),
        if deleting { " DELETING" } else { "" }
    )
}

fn lease_line(obj: &Value) -> String {
    format!(
        "lease {} holder={} renew={}",
        short(obj, &["metadata", "name"]),
        short(obj, &["spec", "holderIdentity"]),
        short(obj, &["spec", "renewTime"]),
    )
}

fn ds_line(obj: &Value) -> String {
    let s = &obj["status"];
    format!(
        "ds {} gen={} observed={} desired={} updated={} ready={} unavailable={}",
        short(obj, &["metadata", "name"]),
        obj["metadata"]["generation"],
        s["observedGeneration"],
        s["desiredNumberScheduled"],
        s["updatedNumberScheduled"],
        s["numberReady"],
        s["numberUnavailable"],
    )
}

impl StoreTap {
    /// Starts copying from `store`, timing from `zero`.
    pub fn start(store: Store, zero: Instant) -> StoreTap {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let lines = Arc::clone(&lines);
            async move {
                let mut revisions = store.subscribe_revisions();
                let mut last = store.revision();
                while revisions.changed().await.is_ok() {
                    let at = zero.elapsed();
                    let Ok(events) = store.events_after(last) else {
                        last = store.revision();
                        continue;
                    };
                    for event in events {
                        last = last.max(event.revision);
                        let obj = &event.object;
                        if obj["metadata"]["namespace"] != "kube-system" {
                            continue;
                        }
                        let kind = event.event_type.as_str();
                        let text = match event.resource.plural {
                            "pods" => pod_line(obj),
                            "leases" => lease_line(obj),
                            "daemonsets" => ds_line(obj),
                            _ => continue,
                        };
                        lines.lock().expect("lines").push(Line {
                            at,
                            text: format!("  sim {kind:<8} {text}"),
                        });
                    }
                }
            }
        });
        StoreTap { lines, task }
    }

    /// Stops and returns what was seen.
    pub fn finish(self) -> Vec<Line> {
        self.task.abort();
        std::mem::take(&mut *self.lines.lock().expect("lines"))
    }
}

/// The engine side: its events, timed from `zero` (`offset` is the events clock's lead).
pub fn engine_lines(mut events: mpsc::UnboundedReceiver<Stamped>, offset: Duration) -> Vec<Line> {
    let mut lines = Vec::new();
    while let Ok(stamped) = events.try_recv() {
        let text = serde_json::to_string(&stamped.event).expect("event");
        lines.push(Line {
            at: offset + Duration::from_secs_f64(stamped.at),
            text: format!("ENGINE {text}"),
        });
    }
    lines
}

/// Prints both sides merged in time order.
pub fn print(mut lines: Vec<Line>) {
    lines.sort_by_key(|l| l.at);
    for line in lines {
        println!("{:>8.3} {}", line.at.as_secs_f64(), line.text);
    }
}
