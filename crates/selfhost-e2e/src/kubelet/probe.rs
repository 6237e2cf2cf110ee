//! Probe bookkeeping for one container instance, as the kubelet's prober workers keep it.
//!
//! Each probe ticks every `periodSeconds`, the first tick `initialDelaySeconds` after the
//! container started. The startup probe gates the others: until it has succeeded, readiness
//! and liveness are not probed (the container is not `started`), and once it has succeeded it
//! is never probed again. A result counts only after `successThreshold` equal results in a
//! row (`failureThreshold` for failures). A liveness or startup failure past its threshold
//! means the container must be killed; its probe then holds until the next instance.
//! Initial results: readiness fails, liveness succeeds, startup is unknown.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::jiff::Timestamp;

use super::clock::{after, elapsed};

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ProbeKind {
    /// `startupProbe`.
    Startup,
    /// `readinessProbe`.
    Readiness,
    /// `livenessProbe`.
    Liveness,
}

impl ProbeKind {
    /// The kind as the kubelet names it in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Liveness => "Liveness",
        }
    }

    /// The container's probe of this kind.
    pub(crate) fn of(self, container: &Container) -> Option<&Probe> {
        match self {
            ProbeKind::Startup => container.startup_probe.as_ref(),
            ProbeKind::Readiness => container.readiness_probe.as_ref(),
            ProbeKind::Liveness => container.liveness_probe.as_ref(),
        }
    }
}

/// A probe's schedule and thresholds, with the API's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProbeTiming {
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
}

impl ProbeTiming {
    /// The timing of `probe`: defaults 0 s delay, 10 s period, 1 s timeout, thresholds 1
    /// and 3; zero or negative values count as the API's minimum.
    pub(crate) fn of(probe: &Probe) -> Self {
        let secs = |v: Option<i32>, default: i32, min: i32| {
            Duration::from_secs(u64::try_from(v.unwrap_or(default).max(min)).unwrap_or(0))
        };
        let count =
            |v: Option<i32>, default: i32| u32::try_from(v.unwrap_or(default).max(1)).unwrap_or(1);
        ProbeTiming {
            initial_delay: secs(probe.initial_delay_seconds, 0, 0),
            period: secs(probe.period_seconds, 10, 1),
            timeout: secs(probe.timeout_seconds, 1, 1),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
        }
    }
}

/// What one probe result changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing visible.
    Unchanged,
    /// The probe's result flipped to this.
    Changed(bool),
    /// Liveness or startup failed past the threshold: kill the container.
    Kill,
}

/// One probe of one container instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeTracker {
    pub kind: ProbeKind,
    pub timing: ProbeTiming,
    result: Option<bool>,
    last: Option<bool>,
    run: u32,
    next_at: Timestamp,
    in_flight: bool,
    on_hold: bool,
}

impl ProbeTracker {
    pub(crate) fn new(kind: ProbeKind, timing: ProbeTiming, started_at: Timestamp) -> Self {
        ProbeTracker {
            kind,
            timing,
            result: match kind {
                ProbeKind::Readiness => Some(false),
                ProbeKind::Liveness => Some(true),
                ProbeKind::Startup => None,
            },
            last: None,
            run: 0,
            next_at: after(started_at, timing.initial_delay),
            in_flight: false,
            on_hold: false,
        }
    }

    /// The result in force.
    pub(crate) fn result(&self) -> Option<bool> {
        self.result
    }

    /// When it next wants to probe.
    pub(crate) fn next_at(&self) -> Option<Timestamp> {
        (!self.in_flight && !self.on_hold).then_some(self.next_at)
    }

    /// Whether to probe at `now`; `started` is whether the container's startup probe (if
    /// any) has succeeded. A tick that the gate skips is lost, as a prober worker's is.
    pub(crate) fn poll(&mut self, now: Timestamp, started: bool) -> bool {
        if self.in_flight || self.on_hold || now < self.next_at {
            return false;
        }
        let period = self.timing.period.max(Duration::from_millis(1));
        let behind = elapsed(self.next_at, now).as_nanos() / period.as_nanos();
        let ticks = u32::try_from(behind + 1).unwrap_or(u32::MAX);
        self.next_at = after(self.next_at, period.saturating_mul(ticks));
        let probe = match self.kind {
            ProbeKind::Startup if started => {
                self.on_hold = true;
                false
            }
            ProbeKind::Startup => true,
            _ => started,
        };
        self.in_flight = probe;
        probe
    }

    /// Applies one probe result.
    pub(crate) fn record(&mut self, success: bool) -> Verdict {
        self.in_flight = false;
        if self.last == Some(success) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(success);
            self.run = 1;
        }
        let threshold = if success {
            self.timing.success_threshold
        } else {
            self.timing.failure_threshold
        };
        if self.run < threshold {
            return Verdict::Unchanged;
        }
        let changed = self.result != Some(success);
        self.result = Some(success);
        if !success && self.kind != ProbeKind::Readiness {
            self.on_hold = true;
            self.run = 0;
            return Verdict::Kill;
        }
        if changed {
            Verdict::Changed(success)
        } else {
            Verdict::Unchanged
        }
    }

    /// A probe that could not be run at all: its result is thrown away.
    pub(crate) fn discard(&mut self) {
        self.in_flight = false;
    }
}

/// The probes of one container instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Probes {
    trackers: Vec<ProbeTracker>,
}

impl Probes {
    /// The probes `container` declares, for an instance started at `started_at`.
    pub(crate) fn for_container(container: &Container, started_at: Timestamp) -> Self {
        let trackers = [
            ProbeKind::Startup,
            ProbeKind::Readiness,
            ProbeKind::Liveness,
        ]
        .into_iter()
        .filter_map(|kind| {
            let probe = kind.of(container)?;
            Some(ProbeTracker::new(kind, ProbeTiming::of(probe), started_at))
        })
        .collect();
        Probes { trackers }
    }

    fn get(&self, kind: ProbeKind) -> Option<&ProbeTracker> {
        self.trackers.iter().find(|t| t.kind == kind)
    }

    /// Whether the container counts as started (its startup probe, if any, succeeded).
    pub(crate) fn started(&self) -> bool {
        self.get(ProbeKind::Startup)
            .is_none_or(|t| t.result() == Some(true))
    }

    /// Whether the container is ready (started, and its readiness probe, if any, passes).
    pub(crate) fn ready(&self) -> bool {
        self.started()
            && self
                .get(ProbeKind::Readiness)
                .is_none_or(|t| t.result() == Some(true))
    }

    /// The probes to run at `now`. A stopping container is probed for readiness only.
    pub(crate) fn due(&mut self, now: Timestamp, stopping: bool) -> Vec<ProbeKind> {
        let started = self.started();
        self.trackers
            .iter_mut()
            .filter(|t| !stopping || t.kind == ProbeKind::Readiness)
            .filter_map(|t| t.poll(now, started).then_some(t.kind))
            .collect()
    }

    /// When a probe next wants to run.
    pub(crate) fn next_at(&self, stopping: bool) -> Option<Timestamp> {
        self.trackers
            .iter()
            .filter(|t| !stopping || t.kind == ProbeKind::Readiness)
            .filter_map(ProbeTracker::next_at)
            .min()
    }

    /// Applies a result of the `kind` probe.
    pub(crate) fn record(&mut self, kind: ProbeKind, success: bool) -> Verdict {
        self.trackers
            .iter_mut()
            .find(|t| t.kind == kind)
            .map_or(Verdict::Unchanged, |t| t.record(success))
    }

    /// Throws away a probe that could not run.
    pub(crate) fn discard(&mut self, kind: ProbeKind) {
        if let Some(t) = self.trackers.iter_mut().find(|t| t.kind == kind) {
            t.discard();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::clock::t;

    fn probe(delay: i32, period: i32, success: i32, failure: i32) -> Probe {
        Probe {
            initial_delay_seconds: Some(delay),
            period_seconds: Some(period),
            success_threshold: Some(success),
            failure_threshold: Some(failure),
            ..Probe::default()
        }
    }

    #[test]
    fn timings_default_as_the_api_does() {
        let timing = ProbeTiming::of(&Probe::default());
        assert_eq!(
            timing,
            ProbeTiming {
                initial_delay: Duration::ZERO,
                period: Duration::from_secs(10),
                timeout: Duration::from_secs(1),
                success_threshold: 1,
                failure_threshold: 3,
            }
        );
        let odd = ProbeTiming::of(&Probe {
            period_seconds: Some(0),
            failure_threshold: Some(-1),
            ..Probe::default()
        });
        assert_eq!(
            (odd.period, odd.failure_threshold),
            (Duration::from_secs(1), 1)
        );
    }

    /// A probe kind, its (success, failure) thresholds, the results fed in, and the verdict
    /// after each.
    type Case = (ProbeKind, (i32, i32), &'static [bool], &'static [Verdict]);

    #[test]
    fn thresholds_decide_when_a_result_counts() {
        // (threshold settings, results fed in, verdict after each)
        use Verdict::*;
        let cases: [Case; 5] = [
            (
                ProbeKind::Readiness,
                (1, 3),
                &[true, true, false, false, false, true],
                &[
                    Changed(true),
                    Unchanged,
                    Unchanged,
                    Unchanged,
                    Changed(false),
                    Changed(true),
                ],
            ),
            (
                ProbeKind::Readiness,
                (2, 1),
                &[true, false, true, true],
                &[Unchanged, Unchanged, Unchanged, Changed(true)],
            ),
            (
                ProbeKind::Liveness,
                (1, 2),
                &[false, true, false, false],
                &[Unchanged, Unchanged, Unchanged, Kill],
            ),
            (
                ProbeKind::Startup,
                (1, 3),
                &[false, false, true],
                &[Unchanged, Unchanged, Changed(true)],
            ),
            (
                ProbeKind::Startup,
                (1, 2),
                &[false, false],
                &[Unchanged, Kill],
            ),
        ];
        for (kind, (success, failure), results, verdicts) in cases {
            let mut tracker =
                ProbeTracker::new(kind, ProbeTiming::of(&probe(0, 1, success, failure)), t(0));
            let got: Vec<Verdict> = results.iter().map(|r| tracker.record(*r)).collect();
            assert_eq!(got, verdicts, "{kind:?} {results:?}");
        }
    }

    #[test]
    fn probes_tick_after_the_initial_delay_and_startup_gates_the_others() {
        let container = Container {
            startup_probe: Some(probe(10, 5, 1, 3)),
            readiness_probe: Some(probe(0, 1, 1, 3)),
            liveness_probe: Some(probe(0, 10, 1, 3)),
            ..Container::default()
        };
        let mut probes = Probes::for_container(&container, t(0));
        assert!(!probes.started() && !probes.ready());
        // Readiness and liveness ticks are lost while the startup probe has not passed.
        assert_eq!(probes.due(t(0), false), []);
        assert_eq!(probes.next_at(false), Some(t(1)));
        assert_eq!(probes.due(t(9), false), []);
        assert_eq!(probes.due(t(10), false), [ProbeKind::Startup]);
        // In flight: not due again until its result is in.
        assert_eq!(probes.due(t(16), false), []);
        assert_eq!(
            probes.record(ProbeKind::Startup, true),
            Verdict::Changed(true)
        );
        assert!(probes.started() && !probes.ready());
        assert_eq!(probes.due(t(17), false), [ProbeKind::Readiness]);
        assert_eq!(
            probes.record(ProbeKind::Readiness, true),
            Verdict::Changed(true)
        );
        assert!(probes.ready());
        // The startup probe never runs again; liveness's next tick is at 20 s.
        assert_eq!(
            probes.due(t(20), false),
            [ProbeKind::Readiness, ProbeKind::Liveness]
        );
        assert_eq!(
            probes.record(ProbeKind::Liveness, false),
            Verdict::Unchanged
        );
        assert_eq!(
            probes.record(ProbeKind::Readiness, false),
            Verdict::Unchanged
        );
        // A stopping container is only probed for readiness.
        assert_eq!(probes.due(t(30), true), [ProbeKind::Readiness]);
        probes.discard(ProbeKind::Readiness);
        assert_eq!(probes.next_at(true), Some(t(31)));
    }

    #[test]
    fn a_container_without_probes_is_started_and_ready() {
        let mut probes = Probes::for_container(&Container::default(), t(0));
        assert!(probes.started() && probes.ready());
        assert_eq!(probes.due(t(100), false), []);
        assert_eq!(probes.next_at(false), None);
    }
}
