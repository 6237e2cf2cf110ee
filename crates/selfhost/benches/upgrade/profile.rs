//! Where an upgrade's time goes, independent of how loaded the machine is: one timeline of
//! what the simulator's store committed (control-plane pods, Leases, DaemonSets in
//! kube-system, stamped in-process the moment they commit) and what the engine did (its
//! events), so that every wait's slack — from the moment its condition became true in the
//! simulator to the moment the engine acted — can be read off. Used by `-- profile N`, which
//! ends with an accounting of the run's time above the lower bound, per component (see
//! [`account`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use selfhost::{Event, Stamped};
use selfhost_core::Component;
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

/// A committed change the accounting reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    /// A leader-election Lease was deleted (by the engine: nothing else deletes them here).
    LeaseGone { lease: String, holder: String },
    /// A leader-election Lease was created by `holder` (a standby acquiring, or a leader that
    /// found its Lease gone creating it again).
    LeaseTaken { lease: String, holder: String },
    /// A standby took a leader-election Lease over without the engine deleting it (the
    /// holder's renewals stopped and the Lease expired): `waited` from the old holder's last
    /// write to the takeover.
    LeaseTakenOver { lease: String, waited: Duration },
    /// A pod of a real (not backup) DaemonSet of `component` became Ready.
    RealPodReady { component: Component },
}

/// One committed change, timed like the lines.
pub struct Seen {
    pub at: Duration,
    pub fact: Fact,
}

/// The simulator side: a task copying every committed change of interest.
pub struct StoreTap {
    lines: Arc<Mutex<Vec<Line>>>,
    facts: Arc<Mutex<Vec<Seen>>>,
    task: JoinHandle<()>,
}

fn is_ready(obj: &Value) -> bool {
    obj["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The component whose leader Lease this is.
fn leader_lease_component(name: &str) -> Option<Component> {
    Component::ALL
        .into_iter()
        .find(|c| c.leader_lease_name() == Some(name))
}

/// The component whose real DaemonSet owns a pod of this name.
fn real_pod_component(name: &str) -> Option<Component> {
    Component::ALL.into_iter().find(|c| {
        name.strip_prefix(&c.daemonset_name())
            .is_some_and(|rest| rest.starts_with('-'))
    })
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

/// Turns committed changes into [`Fact`]s; remembers what a fact depends on.
#[derive(Default)]
struct Classifier {
    /// Real pods seen Ready, so that only a change to Ready counts.
    ready: BTreeSet<String>,
    /// Each leader Lease's holder and when it last wrote the Lease.
    holders: BTreeMap<String, (String, Duration)>,
}

impl Classifier {
    /// The fact a change of `plural` named `name` (`kind`: ADDED, MODIFIED, DELETED) is, if
    /// any.
    fn classify(
        &mut self,
        plural: &str,
        kind: &str,
        name: &str,
        obj: &Value,
        at: Duration,
    ) -> Option<Fact> {
        match plural {
            "leases" if leader_lease_component(name).is_some() => {
                let lease = name.to_string();
                let holder = short(obj, &["spec", "holderIdentity"]);
                let before = self.holders.insert(lease.clone(), (holder.clone(), at));
                match kind {
                    "ADDED" => Some(Fact::LeaseTaken { lease, holder }),
                    "DELETED" => Some(Fact::LeaseGone { lease, holder }),
                    _ => match before {
                        Some((previous, written)) if previous != holder => {
                            Some(Fact::LeaseTakenOver {
                                lease,
                                waited: at.saturating_sub(written),
                            })
                        }
                        _ => None,
                    },
                }
            }
            "pods" => {
                let component = real_pod_component(name)?;
                (kind != "DELETED" && is_ready(obj) && self.ready.insert(name.to_string()))
                    .then_some(Fact::RealPodReady { component })
            }
            _ => None,
        }
    }
}

impl StoreTap {
    /// Starts copying from `store`, timing from `zero`.
    pub fn start(store: Store, zero: Instant) -> StoreTap {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let facts = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let lines = Arc::clone(&lines);
            let facts = Arc::clone(&facts);
            async move {
                let mut classifier = Classifier::default();
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
                        let name = short(obj, &["metadata", "name"]);
                        let fact = classifier.classify(event.resource.plural, kind, &name, obj, at);
                        if let Some(fact) = fact {
                            facts.lock().expect("facts").push(Seen { at, fact });
                        }
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
        StoreTap { lines, facts, task }
    }

    /// Stops and returns what was seen: the lines, and the facts the accounting reads.
    pub fn finish(self) -> (Vec<Line>, Vec<Seen>) {
        self.task.abort();
        (
            std::mem::take(&mut *self.lines.lock().expect("lines")),
            std::mem::take(&mut *self.facts.lock().expect("facts")),
        )
    }
}

/// An engine event, timed like the lines.
pub struct Did {
    pub at: Duration,
    pub event: Event,
}

/// The engine side: its events, timed from `zero` (`offset` is the events clock's lead), as
/// lines and as events.
pub fn engine_lines(
    mut events: mpsc::UnboundedReceiver<Stamped>,
    offset: Duration,
) -> (Vec<Line>, Vec<Did>) {
    let (mut lines, mut did) = (Vec::new(), Vec::new());
    while let Ok(stamped) = events.try_recv() {
        let text = serde_json::to_string(&stamped.event).expect("event");
        let at = offset + Duration::from_secs_f64(stamped.at);
        lines.push(Line {
            at,
            text: format!("ENGINE {text}"),
        });
        did.push(Did {
            at,
            event: stamped.event,
        });
    }
    (lines, did)
}

/// Prints both sides merged in time order.
pub fn print(mut lines: Vec<Line>) {
    lines.sort_by_key(|l| l.at);
    for line in lines {
        println!("{:>8.3} {}", line.at.as_secs_f64(), line.text);
    }
}

/// What one component's time above its share of the lower bound went to.
#[derive(Debug, Default, Clone, Copy)]
struct Excess {
    elapsed: Duration,
    /// Standbys acquiring after the engine deleted a gone holder's Lease: from the deletion
    /// to the Lease's creation by another holder.
    acquisitions: Duration,
    /// Streaks of hand-overs of a holder that was alive (it created its Lease again after the
    /// deletion): from the first such deletion to the holder's last re-creation.
    live_holder_handed_over: Duration,
    /// Leases taken over by a standby after they expired (not handed over): from the old
    /// holder's last write to the takeover.
    expiries: Duration,
    /// From the last real pod's Ready to the backup's removal (committed): for the apiserver
    /// this includes waiting for the new process's identity Lease to be attributable.
    ready_to_removal: Duration,
}

fn secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

fn component_of(event: &Event) -> Option<Component> {
    match event {
        Event::ComponentStarted { component }
        | Event::Step { component, .. }
        | Event::Waiting { component, .. }
        | Event::Action { component, .. }
        | Event::ComponentFinished { component, .. } => Some(*component),
    }
}

fn excess_of(component: Component, facts: &[Seen], did: &[Did]) -> Option<Excess> {
    let mine: Vec<&Did> = did
        .iter()
        .filter(|d| component_of(&d.event) == Some(component))
        .collect();
    let started = mine
        .iter()
        .find(|d| matches!(d.event, Event::ComponentStarted { .. }))?
        .at;
    let finished = mine
        .iter()
        .find(|d| matches!(d.event, Event::ComponentFinished { .. }))?
        .at;
    let mut excess = Excess {
        elapsed: finished.saturating_sub(started),
        ..Excess::default()
    };
    if let Some(lease) = component.leader_lease_name() {
        let changes = facts
            .iter()
            .filter(|s| (started..=finished).contains(&s.at))
            .filter_map(|s| match &s.fact {
                Fact::LeaseGone { lease: l, holder } if l == lease => {
                    Some((s.at, false, holder.as_str()))
                }
                Fact::LeaseTaken { lease: l, holder } if l == lease => {
                    Some((s.at, true, holder.as_str()))
                }
                _ => None,
            });
        excess.expiries = facts
            .iter()
            .filter(|s| (started..=finished).contains(&s.at))
            .filter_map(|s| match &s.fact {
                Fact::LeaseTakenOver { lease: l, waited } if l == lease => Some(*waited),
                _ => None,
            })
            .sum();
        let mut gone: Option<(Duration, &str)> = None;
        let mut streak: Option<(Duration, Duration)> = None;
        for (at, taken, holder) in changes {
            match (taken, gone.take()) {
                (false, _) => gone = Some((at, holder)),
                (true, Some((gone_at, previous))) if previous == holder => {
                    let first = streak.map_or(gone_at, |(first, _)| first);
                    streak = Some((first, at));
                }
                (true, Some((gone_at, _))) => {
                    excess.acquisitions += at.saturating_sub(gone_at);
                    if let Some((first, last)) = streak.take() {
                        excess.live_holder_handed_over += last.saturating_sub(first);
                    }
                }
                (true, None) => {}
            }
        }
        if let Some((first, last)) = streak {
            excess.live_holder_handed_over += last.saturating_sub(first);
        }
    }
    let removal = mine
        .iter()
        .find(|d| matches!(&d.event, Event::Action { step, .. } if step == "remove-backup"));
    if let Some(removal) = removal {
        let last_ready = facts
            .iter()
            .filter(|s| s.at <= removal.at && s.at >= started)
            .filter(|s| s.fact == Fact::RealPodReady { component })
            .map(|s| s.at)
            .max();
        if let Some(ready) = last_ready {
            excess.ready_to_removal = removal.at.saturating_sub(ready);
        }
    }
    Some(excess)
}

/// Prints where the run's time above the lower bound went: per component its time, its
/// share of the bound (`bound_per_component`), the named waits, and the rest (the simulated
/// controllers' and kubelets' reactions and the engine's own decisions and round trips).
pub fn account(facts: &[Seen], did: &[Did], bound_per_component: Duration, wall: Duration) {
    println!();
    println!(
        "accounting (seconds; bound {} per component):",
        secs(bound_per_component)
    );
    println!(
        "{:<24} {:>7} {:>7} {:>13} {:>13} {:>13} {:>13} {:>7}",
        "component",
        "elapsed",
        "excess",
        "acquisitions",
        "live holder",
        "lease expiry",
        "ready->remove",
        "rest"
    );
    let first_start = did
        .iter()
        .find(|d| matches!(d.event, Event::ComponentStarted { .. }))
        .map_or(Duration::ZERO, |d| d.at);
    let mut total = Excess::default();
    let mut total_excess = 0.0;
    for component in Component::ALL {
        let Some(e) = excess_of(component, facts, did) else {
            continue;
        };
        let over = e.elapsed.as_secs_f64() - bound_per_component.as_secs_f64();
        let rest = over
            - e.acquisitions.as_secs_f64()
            - e.live_holder_handed_over.as_secs_f64()
            - e.expiries.as_secs_f64()
            - e.ready_to_removal.as_secs_f64();
        println!(
            "{:<24} {:>7} {:>7.3} {:>13} {:>13} {:>13} {:>13} {:>7.3}",
            component.name(),
            secs(e.elapsed),
            over,
            secs(e.acquisitions),
            secs(e.live_holder_handed_over),
            secs(e.expiries),
            secs(e.ready_to_removal),
            rest
        );
        total.elapsed += e.elapsed;
        total.acquisitions += e.acquisitions;
        total.live_holder_handed_over += e.live_holder_handed_over;
        total.expiries += e.expiries;
        total.ready_to_removal += e.ready_to_removal;
        total_excess += over;
    }
    let named = total.acquisitions
        + total.live_holder_handed_over
        + total.expiries
        + total.ready_to_removal;
    println!(
        "{:<24} {:>7} {:>7.3} {:>13} {:>13} {:>13} {:>13} {:>7.3}",
        "all",
        secs(total.elapsed),
        total_excess,
        secs(total.acquisitions),
        secs(total.live_holder_handed_over),
        secs(total.expiries),
        secs(total.ready_to_removal),
        total_excess - named.as_secs_f64()
    );
    println!(
        "before the first component (watches listed, plan): {}; wall {}",
        secs(first_start),
        secs(wall)
    );
}
