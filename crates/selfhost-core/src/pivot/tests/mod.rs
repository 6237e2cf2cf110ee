//! Table-driven tests of the pivot: one row per situation, one line of setup each.

mod ambiguous_holder;
mod attribution;
mod backing_up;
mod backup_identities;
mod builder;
mod builder_backup;
mod builder_rollout;
mod drain;
mod finishing;
mod front;
mod front_laws;
mod hold;
mod laws;
mod leases;
mod outages;
mod phase;
mod podless;
mod resume;
mod rolling_out;
mod start;
mod successor;
mod survivor;
mod tainted;
mod unplaced_holder;
mod vacate;

use super::{Step, Target, next_step};
use crate::observation::Observation;

/// One situation and what must happen in it.
pub(crate) struct Row {
    /// What the row is about.
    pub(crate) case: &'static str,
    pub(crate) obs: Observation,
    pub(crate) target: Target,
    /// The expected step's name.
    pub(crate) step: &'static str,
    /// Texts the step must mention (in its reason, fix, pending lines or fields).
    pub(crate) mentions: &'static [&'static str],
}

pub(crate) fn row(
    case: &'static str,
    obs: Observation,
    target: Target,
    step: &'static str,
    mentions: &'static [&'static str],
) -> Row {
    Row {
        case,
        obs,
        target,
        step,
        mentions,
    }
}

/// Runs every row and reports every mismatch at once.
pub(crate) fn check(rows: Vec<Row>) {
    let mut failures = Vec::new();
    for row in rows {
        let step = next_step(&row.obs, &row.target);
        let text = serde_json::to_string(&step).expect("steps serialise");
        if step.name() != row.step {
            failures.push(format!(
                "{}: expected {}, got {}: {}",
                row.case,
                row.step,
                step.name(),
                step.description()
            ));
            continue;
        }
        failures.extend(crate::test_support::missing_mentions(
            row.case,
            step.name(),
            &text,
            row.mentions,
        ));
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// The target with its options changed.
pub(crate) fn with(mut target: Target, f: impl FnOnce(&mut super::PivotOptions)) -> Target {
    f(&mut target.options);
    target
}

/// The step for one observation.
pub(crate) fn decide(obs: &Observation, target: &Target) -> Step {
    next_step(obs, target)
}
