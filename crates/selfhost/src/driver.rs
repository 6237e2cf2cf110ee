//! The one loop every change of a component runs, the upgrade's and the conversion's alike:
//! observe, decide, then act or wait, and again — after every action and after every change
//! the watches report. The loop keeps no memory of the cluster: stop it anywhere and a new
//! run continues from what the cluster shows. What it does keep is what a loop needs to be
//! safe: it names each step once, notices an action that has no effect, waits until the
//! watches show its own write before deciding again, and stops only at a safe point.
//!
//! A kind of change supplies the rest through [`Change`]: its observation and decision
//! function, its actions, and what an action without effect means for it.

use std::time::Duration;

use selfhost_core::Component;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::events::{Event, Events};
use crate::outcome::ComponentOutcome;

/// How long to wait for the watches to show a write of ours before deciding again: deciding
/// on the object as it was would ask for the same action again.
pub const READ_OWN_WRITE: Duration = Duration::from_secs(10);
/// An action decided again this many times in a row after it was carried out means the
/// cluster does not take it: the change stops rather than loop. "Again" means the same step on
/// the same subject: deleting one pod after another (every possible Lease holder on a node, the
/// old pods of a rollout) is progress, not a repeat.
pub const MAX_REPEATS: u32 = 5;
/// After a write answered 409 or 404 (the cluster moved on since the observation), how long
/// to wait for the watches to show the change before deciding again.
const SUPERSEDED_WAIT: Duration = Duration::from_millis(500);

/// A step as events name it: a stable name and what it does in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepName {
    /// The stable name (`create-backup`, `wait-for-rollout`, `label-node`, ...).
    pub name: String,
    /// What it does, in words.
    pub description: String,
    /// The object it acts on where consecutive steps of one name act on different ones (the pod
    /// it deletes); `None` where the name says it all.
    pub subject: Option<String>,
}

impl StepName {
    /// Whether `other` is this step decided again: the same name and the same subject.
    fn repeats(&self, other: &StepName) -> bool {
        self.name == other.name && self.subject == other.subject
    }
}

/// What a decision function says to do next.
#[derive(Debug)]
pub enum Decision<A> {
    /// The change of this component ends so.
    End(ComponentOutcome),
    /// Nothing to do until the cluster changes, or until `wake`.
    Wait {
        /// What is waited for.
        condition: String,
        /// What is still missing.
        pending: Vec<String>,
        /// When to decide again if nothing changes before.
        wake: Instant,
    },
    /// Carry out this action.
    Act(A),
}

/// How an action went.
#[derive(Debug)]
pub enum Acted {
    /// Written (in a dry run: accepted by the API server's dry run); `detail` says what.
    Written {
        /// What was done, in words.
        detail: String,
    },
    /// The cluster moved on since the observation (409, 404): nothing was written; decide
    /// again once the watches show the change.
    Superseded {
        /// Why.
        why: String,
    },
    /// Nothing was written, and nothing needs to show in the watches: decide again now.
    Nothing,
    /// The change ends so (an action that failed for good and cannot be undone).
    Ended(ComponentOutcome),
}

/// What one kind of change supplies to [`drive`].
pub(crate) trait Change {
    /// One action of its decisions.
    type Action;
    /// Why it cannot go on at all (as opposed to an outcome its decisions chose).
    type Error;

    /// The component it changes.
    fn component(&self) -> Component;

    /// Observes the cluster and decides what to do next.
    async fn decide(&mut self) -> Result<(StepName, Decision<Self::Action>), Self::Error>;

    /// Carries out `action`.
    async fn act(&mut self, action: &Self::Action) -> Result<Acted, Self::Error>;

    /// Waits until the watches show the effect of `action`, at most until `until`.
    async fn read_own_write(&mut self, action: &Self::Action, until: Instant);

    /// Waits until the watches report a change, at most until `until`.
    async fn next_change(&mut self, until: Instant);

    /// The action of `step` was carried out [`MAX_REPEATS`] times, or was superseded for
    /// [`READ_OWN_WRITE`], and the cluster does not show its effect: the outcome this means,
    /// or `None` to decide again (the change switched to undoing itself).
    fn without_effect(&mut self, step: &StepName) -> Result<Option<ComponentOutcome>, Self::Error>;
}

/// Whether the run makes its writes for real or as server-side dry runs, and how far a dry
/// run goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DriveMode {
    /// Every write for real.
    #[default]
    Real,
    /// Server-side dry run of what the cluster shows now: the change ends at its first wait,
    /// or once the API server has accepted its first write (what follows depends on how the
    /// cluster takes that write, which a dry run cannot show).
    DryRunFirstChange,
    /// Server-side dry run of the whole change on a prediction: the change's own `act` and
    /// `next_change` advance the prediction, so the loop goes on to the end.
    DryRunPredicted,
}

impl DriveMode {
    fn dry_run(self) -> bool {
        self != DriveMode::Real
    }
}

/// Runs `change` until an outcome, reporting to `events`; `cancel` stops it at the next
/// safe point (before an action or during a wait).
pub(crate) async fn drive<C: Change>(
    change: &mut C,
    mode: DriveMode,
    events: &Events,
    cancel: &CancellationToken,
) -> Result<ComponentOutcome, C::Error> {
    let component = change.component();
    let started = Instant::now();
    events.emit(Event::ComponentStarted { component });
    let mut last_step: Option<StepName> = None;
    let mut last_pending: Option<Vec<String>> = None;
    let mut repeats = 0;
    // Since when the same action has been superseded without a write in between.
    let mut superseded_since: Option<Instant> = None;
    let outcome = loop {
        let (step, decision) = change.decide().await?;
        if last_step.as_ref() != Some(&step) {
            events.emit(Event::Step {
                component,
                step: step.name.clone(),
                description: step.description.clone(),
            });
            last_pending = None;
        }
        let same_as_before = last_step.as_ref().is_some_and(|s| s.repeats(&step));
        last_step = Some(step.clone());

        let action = match decision {
            Decision::End(outcome) => break outcome,
            _ if cancel.is_cancelled() => {
                break ComponentOutcome::Interrupted { step: step.name };
            }
            Decision::Wait { condition, .. } if mode == DriveMode::DryRunFirstChange => {
                break ComponentOutcome::DryRun {
                    summary: format!("would now wait: {condition}"),
                    writes: 0,
                };
            }
            Decision::Wait {
                condition,
                pending,
                wake,
            } => {
                repeats = 0;
                if last_pending.as_ref() != Some(&pending) {
                    events.emit(Event::Waiting {
                        component,
                        step: step.name.clone(),
                        condition,
                        pending: pending.clone(),
                    });
                    last_pending = Some(pending);
                }
                tokio::select! {
                    () = change.next_change(wake) => {}
                    () = cancel.cancelled() => {}
                }
                continue;
            }
            Decision::Act(action) => action,
        };

        repeats = if same_as_before { repeats + 1 } else { 1 };
        if !same_as_before {
            superseded_since = None;
        }
        let superseded_too_long = superseded_since.is_some_and(|at| at.elapsed() > READ_OWN_WRITE);
        if repeats > MAX_REPEATS || superseded_too_long {
            match change.without_effect(&step)? {
                Some(outcome) => break outcome,
                None => {
                    repeats = 0;
                    superseded_since = None;
                    continue;
                }
            }
        }
        match change.act(&action).await? {
            Acted::Written { detail } => {
                superseded_since = None;
                events.emit(Event::Action {
                    component,
                    step: step.name.clone(),
                    detail: detail.clone(),
                    dry_run: mode.dry_run(),
                });
                if mode == DriveMode::DryRunFirstChange {
                    break ComponentOutcome::DryRun {
                        summary: format!(
                            "a real run goes on once the cluster shows the effect of {}",
                            step.name
                        ),
                        writes: 1,
                    };
                }
                change
                    .read_own_write(&action, Instant::now() + READ_OWN_WRITE)
                    .await;
            }
            Acted::Superseded { why } => {
                tracing::debug!(%component, step = step.name, %why, "action superseded; observing again");
                // Not an action without effect: the API is ahead of the watches (a concurrent
                // writer, a pod already gone, a watch relisting after 410). Deciding again at
                // once would decide on the same stale view and use up the repeats in
                // milliseconds; wait for the view to change, for at most READ_OWN_WRITE in all.
                repeats -= 1;
                superseded_since.get_or_insert_with(Instant::now);
                change.next_change(Instant::now() + SUPERSEDED_WAIT).await;
            }
            Acted::Nothing => {}
            Acted::Ended(outcome) => break outcome,
        }
    };
    events.component_finished(component, &outcome, started);
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::VecDeque;

    use super::*;

    /// A change that decides a scripted list of deletions, then ends done; an action without
    /// effect ends it failed.
    struct Scripted {
        script: VecDeque<&'static str>,
        acted: Vec<&'static str>,
    }

    impl Scripted {
        fn new(pods: &[&'static str]) -> Scripted {
            Scripted {
                script: pods.iter().copied().collect(),
                acted: Vec::new(),
            }
        }
    }

    impl Change for Scripted {
        type Action = &'static str;
        type Error = std::convert::Infallible;

        fn component(&self) -> Component {
            Component::Scheduler
        }

        async fn decide(&mut self) -> Result<(StepName, Decision<&'static str>), Self::Error> {
            let Some(pod) = self.script.pop_front() else {
                let done = ComponentOutcome::Done {
                    summary: "every pod stopped".to_string(),
                    handover_gap_seconds: None,
                    measured: None,
                };
                let name = StepName {
                    name: "done".to_string(),
                    description: "done".to_string(),
                    subject: None,
                };
                return Ok((name, Decision::End(done)));
            };
            let name = StepName {
                name: "stop-possible-lease-holder".to_string(),
                description: format!("stop pod {pod}"),
                subject: Some(pod.to_string()),
            };
            Ok((name, Decision::Act(pod)))
        }

        async fn act(&mut self, pod: &&'static str) -> Result<Acted, Self::Error> {
            self.acted.push(pod);
            Ok(Acted::Written {
                detail: format!("deleted {pod}"),
            })
        }

        async fn read_own_write(&mut self, _: &&'static str, _: Instant) {}

        async fn next_change(&mut self, _: Instant) {}

        fn without_effect(
            &mut self,
            step: &StepName,
        ) -> Result<Option<ComponentOutcome>, Self::Error> {
            Ok(Some(ComponentOutcome::Failed {
                reason: format!("{} without effect", step.description),
                state: String::new(),
                resume: None,
            }))
        }
    }

    async fn run(change: &mut Scripted) -> ComponentOutcome {
        let cancel = CancellationToken::new();
        drive(change, DriveMode::Real, &Events::none(), &cancel)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn deleting_one_pod_after_another_is_progress_however_many_there_are() {
        // Six possible Lease holders: three nodes that share one machine hostname, a real and a
        // backup pod on each.
        let pods = [
            "real-1", "real-2", "real-3", "backup-1", "backup-2", "backup-3",
        ];
        let mut change = Scripted::new(&pods);
        let outcome = run(&mut change).await;
        assert_eq!(outcome.name(), "done", "{outcome:?}");
        assert_eq!(change.acted, pods);
    }

    #[tokio::test]
    async fn the_same_pod_decided_again_and_again_stops_the_change() {
        let mut change = Scripted::new(&["real-1"; 10]);
        let outcome = run(&mut change).await;
        assert_eq!(outcome.name(), "failed", "{outcome:?}");
        assert_eq!(change.acted.len(), MAX_REPEATS as usize);
    }
}
