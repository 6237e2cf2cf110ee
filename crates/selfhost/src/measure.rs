//! What a run cost, as the engine itself saw it: the plan states the expected
//! disruption per component; this records what happened, from the engine's own observations,
//! so that `apply` can report the two side by side.
//!
//! - **API health**: every `/readyz` probe the engine made while deciding (at most one per
//!   0.5 s, and only while it decides: a sample, not a prober) — or, with an availability
//!   budget, every 0.5 s throughout, deciding or not ([`crate::Observer::probe_steadily`]).
//!   A probe answered 500 only
//!   because the answering apiserver is in its `--shutdown-delay-duration` counts as
//!   *draining*, not failed: that apiserver still serves every request, and says so on
//!   purpose so that load balancers drain it.
//! - **Leader changes** of the controller-manager and scheduler Leases, seen in every change
//!   of the Leases: the leaderless gap of a change is at most from the old holder's last
//!   renewal to the new holder's acquisition (the old one may have acted until it exited,
//!   somewhat after its last renewal; no leader acts without a renewed Lease after that).
//! - **Wall time** per component.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use selfhost_core::Component;
use selfhost_core::disruption::ExpectedDisruption;
use selfhost_core::observation::ApiHealth;
use serde::Serialize;
use tokio::time::Instant;

/// How a `/readyz` probe went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// 200.
    Ok,
    /// 500 with only the `shutdown` check failing: an apiserver draining as designed.
    Draining,
    /// Anything else: no answer, or not ready for another reason.
    Failed,
}

impl ProbeOutcome {
    /// Classifies a health probe.
    pub fn of(health: &ApiHealth) -> ProbeOutcome {
        if health.readyz_ok {
            return ProbeOutcome::Ok;
        }
        let detail = health.readyz_detail.as_deref().unwrap_or_default();
        if detail
            .split_once("failing checks ")
            .is_some_and(|(_, checks)| checks.trim() == "shutdown")
        {
            ProbeOutcome::Draining
        } else {
            ProbeOutcome::Failed
        }
    }
}

/// One change of leader of a controller-manager or scheduler Lease.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeaderChange {
    /// The Lease.
    pub lease: String,
    /// The previous holder, if one was seen.
    pub from: Option<String>,
    /// The new holder.
    pub to: String,
    /// At most this long no process held the Lease: from the previous holder's last renewal
    /// to the new holder's acquisition (`None` when either time is unknown).
    pub leaderless_seconds: Option<f64>,
}

#[derive(Debug, Default)]
struct LeaderState {
    holder: Option<String>,
    renewed: Option<Timestamp>,
}

/// The record of a run, filled as the engine observes.
#[derive(Debug, Default)]
pub struct Recorder {
    probes: Vec<(Instant, ProbeOutcome)>,
    changes: Vec<(Instant, LeaderChange)>,
    leaders: BTreeMap<String, LeaderState>,
}

/// The leader-election Leases of the controller-manager and the scheduler.
fn is_leader_lease(name: &str) -> bool {
    Component::ALL
        .iter()
        .any(|c| c.leader_lease_name() == Some(name))
}

impl Recorder {
    /// Records a health probe made at `at`.
    pub fn probe(&mut self, at: Instant, health: &ApiHealth) {
        self.probes.push((at, ProbeOutcome::of(health)));
    }

    /// Records one state of a Lease seen at `at`; only leader-election Leases matter.
    pub fn lease(&mut self, lease: &Lease, at: Instant) {
        let Some(name) = lease
            .metadata
            .name
            .as_deref()
            .filter(|n| is_leader_lease(n))
        else {
            return;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.filter(|h| !h.is_empty());
        let state = self.leaders.entry(name.to_string()).or_default();
        let first_sight = state.holder.is_none() && state.renewed.is_none();
        match holder {
            // Released: keep the last holder and renewal, the gap runs from there.
            None => {}
            Some(holder) if state.holder.as_ref() == Some(&holder) => {
                let renewed = spec.renew_time.map(|t| t.0);
                state.renewed = state.renewed.max(renewed);
            }
            Some(holder) => {
                if !first_sight {
                    let acquired = spec
                        .acquire_time
                        .clone()
                        .or(spec.renew_time.clone())
                        .map(|t| t.0);
                    let leaderless_seconds = match (state.renewed, acquired) {
                        (Some(renewed), Some(acquired)) => Some(
                            Duration::try_from(acquired.duration_since(renewed))
                                .unwrap_or(Duration::ZERO)
                                .as_secs_f64(),
                        ),
                        _ => None,
                    };
                    let change = LeaderChange {
                        lease: name.to_string(),
                        from: state.holder.clone(),
                        to: holder.clone(),
                        leaderless_seconds,
                    };
                    self.changes.push((at, change));
                }
                state.holder = Some(holder);
                state.renewed = spec.renew_time.map(|t| t.0);
            }
        }
    }

    /// What was seen in `[from, to]`.
    pub fn measure(&self, from: Instant, to: Instant) -> MeasuredDisruption {
        let within = |at: &Instant| *at >= from && *at <= to;
        let probes: Vec<&(Instant, ProbeOutcome)> =
            self.probes.iter().filter(|(at, _)| within(at)).collect();
        let count = |outcome: ProbeOutcome| {
            u32::try_from(probes.iter().filter(|(_, o)| *o == outcome).count()).unwrap_or(u32::MAX)
        };
        let mut longest = Duration::ZERO;
        let mut failing_since: Option<Instant> = None;
        for (at, outcome) in &probes {
            match (outcome, failing_since) {
                (ProbeOutcome::Failed, None) => failing_since = Some(*at),
                (ProbeOutcome::Failed, Some(_)) => {}
                (_, Some(since)) => {
                    longest = longest.max(at.duration_since(since));
                    failing_since = None;
                }
                (_, None) => {}
            }
        }
        if let Some(since) = failing_since {
            longest = longest.max(to.duration_since(since));
        }
        MeasuredDisruption {
            wall_seconds: to.duration_since(from).as_secs_f64(),
            health_probes: u32::try_from(probes.len()).unwrap_or(u32::MAX),
            failed_health_probes: count(ProbeOutcome::Failed),
            draining_health_probes: count(ProbeOutcome::Draining),
            longest_failing_seconds: longest.as_secs_f64(),
            leader_changes: self
                .changes
                .iter()
                .filter(|(at, _)| within(at))
                .map(|(_, change)| change.clone())
                .collect(),
        }
    }
}

/// What one component's upgrade cost, as the engine saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredDisruption {
    /// Wall time spent on the component.
    pub wall_seconds: f64,
    /// `/readyz` probes the engine made.
    pub health_probes: u32,
    /// Of those, how many got no answer or a not-ready answer (other than draining).
    pub failed_health_probes: u32,
    /// Of those, how many were answered by an apiserver draining in its shutdown delay.
    pub draining_health_probes: u32,
    /// The longest stretch from a failed probe to the next probe that did not fail.
    pub longest_failing_seconds: f64,
    /// The leader changes of the controller-manager and scheduler Leases meanwhile.
    pub leader_changes: Vec<LeaderChange>,
}

impl MeasuredDisruption {
    /// The longest leaderless gap among the leader changes, in seconds.
    pub fn longest_leaderless_seconds(&self) -> Option<f64> {
        self.leader_changes
            .iter()
            .filter_map(|c| c.leaderless_seconds)
            .reduce(f64::max)
    }
}

/// Expected against measured, for one component.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentDisruption {
    /// The component.
    pub component: Component,
    /// What the plan expected on this cluster (from the first observation of the run).
    pub expected: ExpectedDisruption,
    /// What the engine saw.
    pub measured: MeasuredDisruption,
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};

    use super::*;

    fn ts(ms: i64) -> Timestamp {
        Timestamp::from_millisecond(1_800_000_000_000 + ms).expect("timestamp")
    }

    fn lease(name: &str, holder: &str, acquired: i64, renewed: i64) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                acquire_time: Some(MicroTime(ts(acquired))),
                renew_time: Some(MicroTime(ts(renewed))),
                ..Default::default()
            }),
        }
    }

    fn health(ok: bool, detail: &str) -> ApiHealth {
        ApiHealth {
            readyz_ok: ok,
            readyz_detail: (!detail.is_empty()).then(|| detail.to_string()),
            git_version: None,
            unreachable_until: None,
        }
    }

    #[test]
    fn a_leader_change_is_leaderless_from_the_last_renewal_to_the_acquisition() {
        let t0 = Instant::now();
        let mut r = Recorder::default();
        let kcm = "kube-controller-manager";
        r.lease(&lease(kcm, "old", 0, 1_000), t0);
        r.lease(&lease(kcm, "old", 0, 3_000), t0);
        // Handed over: the Lease is released, then a standby takes it.
        r.lease(&lease(kcm, "", 0, 3_000), t0);
        r.lease(&lease(kcm, "new", 3_400, 3_400), t0);
        r.lease(&lease(kcm, "new", 3_400, 5_000), t0);
        r.lease(&lease("apiserver-abc", "someone", 0, 0), t0);
        let measured = r.measure(t0, t0);
        assert_eq!(
            measured.leader_changes,
            vec![LeaderChange {
                lease: kcm.into(),
                from: Some("old".into()),
                to: "new".into(),
                leaderless_seconds: Some(0.4),
            }]
        );
        assert_eq!(measured.longest_leaderless_seconds(), Some(0.4));
    }

    #[test]
    fn probes_count_failures_and_the_longest_failing_stretch_but_not_draining() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut r = Recorder::default();
        let draining = "HTTP 500: failing checks shutdown";
        let probes = [
            (0, health(true, "")),
            (500, health(false, "connection refused")),
            (1_000, health(false, "HTTP 500: failing checks etcd")),
            (1_500, health(false, draining)),
            (2_000, health(true, "")),
            (2_500, health(false, "timed out")),
        ];
        for (ms, h) in &probes {
            r.probe(at(*ms), h);
        }
        let m = r.measure(t0, at(3_000));
        assert_eq!(m.health_probes, 6);
        assert_eq!(m.failed_health_probes, 3);
        assert_eq!(m.draining_health_probes, 1);
        assert!((m.longest_failing_seconds - 1.0).abs() < 1e-9, "{m:?}");
        assert!((m.wall_seconds - 3.0).abs() < 1e-9);
        let later = r.measure(at(1_800), at(3_000));
        assert_eq!(later.health_probes, 2, "only the window's probes");
        assert!((later.longest_failing_seconds - 0.5).abs() < 1e-9);
    }
}
