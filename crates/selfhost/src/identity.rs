//! Remembering when each kube-apiserver process took its identity Lease.
//!
//! A snapshot of an identity Lease says who holds it now, not since when; when every process
//! on a host takes the same Lease over in turn, only a watcher that saw the hand-over knows
//! that the new holder is new. This tracker is that memory, for the length of one run: the
//! one fact the engine keeps between observations, and it only ever makes the engine more
//! cautious when it is missing (a holder without `holder_since` vouches for no new pod).
//!
//! It is fed every change of every identity Lease, not only the Lease as it is when the engine
//! happens to decide: two apiserver processes on one host whose renewals fall close together
//! (each renews every 10 s on its own timer) leave the Lease with one holder almost all the
//! time, and the other holds it only for the moment between the two writes. A snapshot would
//! almost never show that holder, and the pod behind it would never count as serving.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use selfhost_core::component::NAMESPACE;
use selfhost_core::observation::{IDENTITY_LABEL, IDENTITY_LABEL_VALUE, IdentitySighting};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::measure::Recorder;

/// Per identity Lease: the holder last seen, and what is known about each holder.
#[derive(Debug, Default)]
pub struct IdentityTracker {
    leases: BTreeMap<String, LeaseHistory>,
}

#[derive(Debug, Default)]
struct LeaseHistory {
    current: Option<String>,
    holders: BTreeMap<String, IdentitySighting>,
}

impl IdentityTracker {
    /// Records one state of an identity Lease (seen at `now`); Leases without the identity
    /// label or a holder are ignored.
    pub fn record(&mut self, lease: &Lease, now: Timestamp) {
        let Some(sighting) = IdentitySighting::from_lease(lease) else {
            return;
        };
        let history = self.leases.entry(sighting.lease.clone()).or_default();
        let taken_over = history
            .current
            .as_ref()
            .is_some_and(|previous| *previous != sighting.holder);
        let entry = history
            .holders
            .entry(sighting.holder.clone())
            .or_insert_with(|| {
                let mut first = sighting.clone();
                first.first_seen = Some(now);
                if first.holder_since.is_none() && taken_over {
                    // Seen replacing another holder: it started holding at this renewal.
                    first.holder_since = sighting.last_renewed.or(Some(now));
                }
                first
            });
        if sighting.last_renewed > entry.last_renewed {
            entry.last_renewed = sighting.last_renewed;
        }
        if entry.holder_since.is_none() {
            entry.holder_since = sighting.holder_since;
        }
        history.current = Some(sighting.holder);
    }

    /// One sighting per (Lease, holder) still fresh enough to matter at `now`, with
    /// `holder_since` filled in where a hand-over was seen.
    pub fn sightings(&self, now: Timestamp) -> Vec<IdentitySighting> {
        self.leases
            .values()
            .flat_map(|h| h.holders.values())
            .filter(|s| s.is_fresh(now))
            .cloned()
            .collect()
    }

    /// Records the identity Leases as they are now, and returns [`IdentityTracker::sightings`].
    pub fn observe(&mut self, leases: &[Arc<Lease>], now: Timestamp) -> Vec<IdentitySighting> {
        for lease in leases {
            self.record(lease, now);
        }
        self.sightings(now)
    }
}

/// The engine's own watch of the kube-system Leases, fed change by change: identity Leases
/// into the [`IdentityTracker`], leader-election Leases into the run's [`Recorder`].
pub struct LeaseWatch {
    tracker: Arc<Mutex<IdentityTracker>>,
    recorder: Arc<Mutex<Recorder>>,
    changed: Arc<Notify>,
    /// Whether the watch has listed the Leases once: from then on it sees every change.
    listed: tokio::sync::watch::Receiver<bool>,
    task: JoinHandle<()>,
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LeaseWatch {
    /// Starts watching the Leases in kube-system (with the engine's watch backoff, so the watch
    /// outlives an apiserver hand-over).
    pub fn start(client: &kube::Client) -> LeaseWatch {
        let tracker = Arc::new(Mutex::new(IdentityTracker::default()));
        let recorder = Arc::new(Mutex::new(Recorder::default()));
        let changed = Arc::new(Notify::new());
        let (listed_tx, listed) = tokio::sync::watch::channel(false);
        let api: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
        let task = tokio::spawn({
            let (tracker, recorder) = (Arc::clone(&tracker), Arc::clone(&recorder));
            let changed = Arc::clone(&changed);
            async move {
                let mut stream = watcher(api, watcher::Config::default())
                    .backoff(crate::reconnect::WatchBackoff::new())
                    .boxed();
                while let Some(event) = stream.next().await {
                    let lease = match event {
                        Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => {
                            lease
                        }
                        Ok(watcher::Event::InitDone) => {
                            listed_tx.send_replace(true);
                            continue;
                        }
                        Ok(_) => continue,
                        Err(error) => {
                            tracing::debug!(%error, "Lease watch interrupted; it resumes by itself");
                            continue;
                        }
                    };
                    let is_identity = lease
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(IDENTITY_LABEL))
                        .is_some_and(|v| v == IDENTITY_LABEL_VALUE);
                    if is_identity {
                        if let Ok(mut tracker) = tracker.lock() {
                            tracker.record(&lease, Timestamp::now());
                        }
                        changed.notify_one();
                    } else if let Ok(mut recorder) = recorder.lock() {
                        recorder.lease(&lease, Instant::now());
                    }
                }
            }
        });
        LeaseWatch {
            tracker,
            recorder,
            changed,
            listed,
            task,
        }
    }

    /// Resolves once the watch has listed the Leases, so that every later hand-over is seen.
    pub async fn listed(&self) {
        let mut listed = self.listed.clone();
        // An error means the watch task ended (aborted with the run): nothing more to wait for.
        let _ = listed.wait_for(|done| *done).await;
    }

    /// Records Leases seen elsewhere (the view's cache) and returns the identity sightings at
    /// `now`.
    pub fn observe(&self, leases: &[Arc<Lease>], now: Timestamp) -> Vec<IdentitySighting> {
        match self.tracker.lock() {
            Ok(mut tracker) => tracker.observe(leases, now),
            // Nothing in `record` panics, so the lock is never poisoned; were it, knowing
            // nothing only makes the engine more cautious.
            Err(_) => Vec::new(),
        }
    }

    /// The run's record (health probes are added by the observer).
    pub fn recorder(&self) -> &Arc<Mutex<Recorder>> {
        &self.recorder
    }

    /// Resolves at the next change of an identity Lease.
    pub async fn changed(&self) {
        self.changed.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};

    use super::*;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).expect("timestamp")
    }

    fn lease(name: &str, holder: &str, created: i64, renewed: i64) -> std::sync::Arc<Lease> {
        std::sync::Arc::new(Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                creation_timestamp: Some(Time(ts(created))),
                labels: Some(
                    [
                        (
                            "apiserver.kubernetes.io/identity".to_string(),
                            "kube-apiserver".to_string(),
                        ),
                        ("kubernetes.io/hostname".to_string(), "cp-1".to_string()),
                    ]
                    .into(),
                ),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(ts(renewed))),
                ..Default::default()
            }),
        })
    }

    #[test]
    fn a_holder_seen_taking_over_a_shared_lease_is_dated() {
        let mut tracker = IdentityTracker::default();
        let first = tracker.observe(&[lease("apiserver-abc", "old-process", 0, 100)], ts(100));
        assert_eq!(first.len(), 1);
        assert_eq!(
            first[0].holder_since, None,
            "already there when we started: unproven"
        );

        let later = tracker.observe(&[lease("apiserver-abc", "new-process", 0, 110)], ts(110));
        let new = later
            .iter()
            .find(|s| s.holder == "new-process")
            .expect("new holder");
        assert_eq!(new.holder_since, Some(ts(110)));
        // The old process is remembered while its last renewal is fresh.
        assert!(later.iter().any(|s| s.holder == "old-process"));

        let much_later = tracker.observe(&[lease("apiserver-abc", "new-process", 0, 200)], ts(200));
        assert_eq!(much_later.len(), 1, "the old holder went stale");
        assert_eq!(much_later[0].holder_since, Some(ts(110)));
        assert_eq!(much_later[0].last_renewed, Some(ts(200)));
    }

    #[test]
    fn a_holder_that_held_the_lease_only_between_two_writes_is_dated() {
        // Two processes on one host renewing back to back: the Lease rests on the old holder,
        // and the new one holds it only between the two writes. Every change counts.
        let mut tracker = IdentityTracker::default();
        tracker.record(&lease("apiserver-abc", "old-process", 0, 100), ts(100));
        tracker.record(&lease("apiserver-abc", "new-process", 0, 101), ts(101));
        tracker.record(&lease("apiserver-abc", "old-process", 0, 101), ts(101));
        let seen = tracker.sightings(ts(102));
        let new = seen
            .iter()
            .find(|s| s.holder == "new-process")
            .expect("the brief holder is remembered");
        assert_eq!(new.holder_since, Some(ts(101)));
        let old = seen
            .iter()
            .find(|s| s.holder == "old-process")
            .expect("old");
        assert_eq!(old.holder_since, None, "never seen taking over");
        assert_eq!(old.last_renewed, Some(ts(101)));
    }

    #[test]
    fn a_lease_named_after_its_holder_is_dated_by_its_creation() {
        let mut tracker = IdentityTracker::default();
        let seen = tracker.observe(&[lease("proc-1", "proc-1", 5, 6)], ts(6));
        assert_eq!(seen[0].holder_since, Some(ts(5)));
    }
}
