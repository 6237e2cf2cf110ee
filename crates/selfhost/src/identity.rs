//! Remembering when each kube-apiserver process took its identity Lease.
//!
//! A snapshot of an identity Lease says who holds it now, not since when; when every process
//! on a host takes the same Lease over in turn, only a watcher that saw the hand-over knows
//! that the new holder is new. This tracker is that memory, for the length of one run: the
//! one fact the engine keeps between observations, and it only ever makes the engine more
//! cautious when it is missing (a holder without `holder_since` vouches for no new pod).

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use selfhost_core::observation::IdentitySighting;

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
    /// Records the identity Leases as they are now, and returns one sighting per (Lease,
    /// holder) still fresh enough to matter, with `holder_since` filled in where a hand-over
    /// was seen.
    pub fn observe(
        &mut self,
        leases: &[std::sync::Arc<Lease>],
        now: Timestamp,
    ) -> Vec<IdentitySighting> {
        for lease in leases {
            let Some(sighting) = IdentitySighting::from_lease(lease) else {
                continue;
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
        self.leases
            .values()
            .flat_map(|h| h.holders.values())
            .filter(|s| s.is_fresh(now))
            .cloned()
            .collect()
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
    fn a_lease_named_after_its_holder_is_dated_by_its_creation() {
        let mut tracker = IdentityTracker::default();
        let seen = tracker.observe(&[lease("proc-1", "proc-1", 5, 6)], ts(6));
        assert_eq!(seen[0].holder_since, Some(ts(5)));
    }
}
