//! The availability budget of `apply`: how much unavailability of the API, as the engine's own
//! probes see it, an upgrade of the kube-apiserver may cost before it is rolled back.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::observation::AvailabilitySoFar;

/// What the operator allows (`--max-unavailable-seconds`, `--max-failed-probes`); a bound
/// left out is not checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AvailabilityBudget {
    /// The longest stretch the API may go without a good probe.
    pub max_unavailable: Option<Duration>,
    /// How many probes may fail in all.
    pub max_failed_probes: Option<u32>,
}

/// How the budget was exceeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "bound")]
pub enum BudgetOverrun {
    /// The API was unavailable longer than allowed.
    Unavailable {
        /// The longest stretch measured, in milliseconds.
        measured_ms: u64,
        /// The budget, in milliseconds.
        allowed_ms: u64,
    },
    /// More probes failed than allowed.
    FailedProbes {
        /// Failed probes.
        measured: u32,
        /// The budget.
        allowed: u32,
    },
}

impl AvailabilityBudget {
    /// Whether any bound is set.
    pub fn is_set(&self) -> bool {
        self.max_unavailable.is_some() || self.max_failed_probes.is_some()
    }

    /// The first bound `so_far` exceeds, if any. Reaching a bound is within it.
    pub fn overrun(&self, so_far: &AvailabilitySoFar) -> Option<BudgetOverrun> {
        let measured = Duration::try_from_secs_f64(so_far.longest_unavailable_seconds)
            .unwrap_or(Duration::ZERO);
        let unavailable = self
            .max_unavailable
            .filter(|allowed| measured > *allowed)
            .map(|allowed| BudgetOverrun::Unavailable {
                measured_ms: millis(measured),
                allowed_ms: millis(allowed),
            });
        let failed = self
            .max_failed_probes
            .filter(|allowed| so_far.failed_probes > *allowed)
            .map(|allowed| BudgetOverrun::FailedProbes {
                measured: so_far.failed_probes,
                allowed,
            });
        unavailable.or(failed)
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds as seconds with one decimal, rounded up so that an overrun never reads as
/// equal to its budget.
fn seconds(ms: u64) -> String {
    let tenths = ms.div_ceil(100);
    format!("{}.{} s", tenths / 10, tenths % 10)
}

impl fmt::Display for BudgetOverrun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BudgetOverrun::Unavailable {
                measured_ms,
                allowed_ms,
            } => write!(
                f,
                "availability budget exceeded: the API was unavailable for {} to the engine's \
                 probes, {} over the budget of {} (--max-unavailable-seconds)",
                seconds(measured_ms),
                seconds(measured_ms.saturating_sub(allowed_ms)),
                seconds(allowed_ms)
            ),
            BudgetOverrun::FailedProbes { measured, allowed } => write!(
                f,
                "availability budget exceeded: {measured} of the engine's probes of the API \
                 failed, {} over the budget of {allowed} (--max-failed-probes)",
                measured - allowed
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn so_far(failed_probes: u32, longest: f64) -> AvailabilitySoFar {
        AvailabilitySoFar {
            failed_probes,
            longest_unavailable_seconds: longest,
        }
    }

    #[test]
    fn each_bound_is_checked_only_when_set_and_reaching_it_is_within_it() {
        let seconds = |s: u64| AvailabilityBudget {
            max_unavailable: Some(Duration::from_secs(s)),
            max_failed_probes: None,
        };
        let probes = |n: u32| AvailabilityBudget {
            max_unavailable: None,
            max_failed_probes: Some(n),
        };
        let rows: &[(&str, AvailabilityBudget, AvailabilitySoFar, Option<&str>)] = &[
            (
                "no budget",
                AvailabilityBudget::default(),
                so_far(99, 99.0),
                None,
            ),
            ("within the seconds", seconds(2), so_far(9, 1.5), None),
            ("at the seconds", seconds(2), so_far(9, 2.0), None),
            (
                "over the seconds",
                seconds(1),
                so_far(3, 3.04),
                Some(
                    "the API was unavailable for 3.1 s to the engine's probes, 2.1 s over the \
                     budget of 1.0 s (--max-unavailable-seconds)",
                ),
            ),
            ("within the probes", probes(3), so_far(3, 50.0), None),
            (
                "over the probes",
                probes(3),
                so_far(5, 0.0),
                Some("5 of the engine's probes of the API failed, 2 over the budget of 3"),
            ),
            (
                "zero failed probes allowed",
                probes(0),
                so_far(1, 0.0),
                Some("1 of the engine's probes of the API failed, 1 over the budget of 0"),
            ),
        ];
        for (name, budget, measured, expected) in rows {
            let overrun = budget.overrun(measured).map(|o| o.to_string());
            match (expected, &overrun) {
                (None, None) => {}
                (Some(words), Some(text)) => assert!(
                    text.starts_with("availability budget exceeded: ") && text.contains(words),
                    "{name}: {text}"
                ),
                _ => panic!("{name}: expected {expected:?}, got {overrun:?}"),
            }
        }
    }

    #[test]
    fn the_unavailable_time_is_reported_before_the_probe_count() {
        let budget = AvailabilityBudget {
            max_unavailable: Some(Duration::from_secs(1)),
            max_failed_probes: Some(0),
        };
        let overrun = budget.overrun(&so_far(4, 2.0));
        assert!(matches!(overrun, Some(BudgetOverrun::Unavailable { .. })));
        assert!(budget.is_set());
        assert!(!AvailabilityBudget::default().is_set());
    }
}
