//! Table-driven tests of the checkpointer: one row per situation on one node, one line of
//! setup each.

mod activate;
mod builder;
mod keep;
mod laws;
mod leases;
mod node;
mod retire;

use k8s_openapi::jiff::Timestamp;

use super::{CheckpointPhase, CheckpointPolicy, CheckpointStep, NodeCheckpoints, next_step, phase};
use crate::component::Component;

/// One situation and what must happen in it.
struct Row {
    /// What the row is about.
    case: &'static str,
    obs: NodeCheckpoints,
    component: Component,
    phase: CheckpointPhase,
    /// Texts the step must mention (in its fields, as serialised).
    mentions: &'static [&'static str],
    /// The wait's `recheck_at`, when the row expects a wait.
    recheck_at: Option<Timestamp>,
}

fn row(
    case: &'static str,
    obs: NodeCheckpoints,
    component: Component,
    phase: CheckpointPhase,
    mentions: &'static [&'static str],
) -> Row {
    Row {
        case,
        obs,
        component,
        phase,
        mentions,
        recheck_at: None,
    }
}

impl Row {
    /// The row with the wait's expected `recheck_at`.
    fn recheck_at(mut self, at: Timestamp) -> Row {
        self.recheck_at = Some(at);
        self
    }
}

/// The one step each phase gives.
fn step_of(phase: CheckpointPhase) -> &'static str {
    match phase {
        CheckpointPhase::TakingOver | CheckpointPhase::Superseded => "retire",
        CheckpointPhase::Keeping => "keep",
        CheckpointPhase::Kept | CheckpointPhase::StaticOnNode => "nothing",
        CheckpointPhase::Orphaned => "activate",
        CheckpointPhase::HolderGone => "hand-over",
        CheckpointPhase::Activated
        | CheckpointPhase::Unserved
        | CheckpointPhase::Soaking
        | CheckpointPhase::ServedLocally
        | CheckpointPhase::Unkept
        | CheckpointPhase::InGrace
        | CheckpointPhase::AwaitingApiServer => "wait",
    }
}

/// Runs every row with the default policy and reports every mismatch at once.
fn check(rows: Vec<Row>) {
    let policy = CheckpointPolicy::default();
    let mut failures = Vec::new();
    for row in rows {
        let found = phase(&row.obs, row.component, &policy);
        let step = next_step(&row.obs, row.component, &policy);
        if found != row.phase {
            failures.push(format!(
                "{}: expected phase {}, got {}: {step}",
                row.case,
                row.phase.name(),
                found.name()
            ));
            continue;
        }
        if step.name() != step_of(found) {
            failures.push(format!(
                "{}: phase {} gave {}: {step}",
                row.case,
                found.name(),
                step.name()
            ));
            continue;
        }
        let text = serde_json::to_string(&step).expect("steps serialise");
        failures.extend(crate::test_support::missing_mentions(
            row.case,
            step.name(),
            &text,
            row.mentions,
        ));
        if let CheckpointStep::Wait { recheck_at, .. } = &step
            && *recheck_at != row.recheck_at
        {
            failures.push(format!(
                "{}: rechecks at {recheck_at:?}, expected {:?}",
                row.case, row.recheck_at
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
