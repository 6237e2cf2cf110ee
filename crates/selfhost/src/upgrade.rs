//! The executor: runs the pivot for one component by asking the pure state machine what to do
//! next, doing it, and asking again — after every action, and after every change the watches
//! see. It keeps no state of its own: stop it anywhere and a new run continues from what the
//! cluster shows.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use selfhost_core::Component;
use selfhost_core::pivot::{Step, Target, Watch, next_step};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::ApiCallError;
use crate::events::{Event, Events};
use crate::execute::{Applied, perform};
use crate::observe::Observer;
use crate::retry::RetryPolicy;

/// While a wait needs `/readyz` or `/version`, how often they are probed. Only the
/// apiserver's final verification waits on them, with nothing else to wake it: a probe a
/// tenth of a second costs little and ends that wait soon after it can end.
const HEALTH_POLL: Duration = Duration::from_millis(100);
/// The longest a wait goes without re-observing, even if nothing changed: a safety net for a
/// change no watch reports (a clock-driven deadline is re-checked at its own time anyway).
const IDLE_RECHECK: Duration = Duration::from_secs(5);
/// How long to wait for the watches to show our own write before observing again.
const READ_OWN_WRITE: Duration = Duration::from_secs(10);
/// An action the state machine keeps asking for after it was done this many times in a row
/// means the cluster does not take it; stop rather than loop.
const MAX_REPEATS: u32 = 5;
/// After a 409 or 404 (the cluster moved on since the observation), how long to wait for the
/// watches to show the change before deciding again.
const SUPERSEDED_WAIT: Duration = Duration::from_millis(500);

/// How a component's run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ComponentOutcome {
    /// On the target, verified.
    Done {
        /// What was verified.
        summary: String,
    },
    /// Refused before anything that matters changed.
    Refused {
        /// What is wrong.
        reason: String,
        /// What to do about it.
        fix: String,
    },
    /// Failed and rolled back to the original template.
    RolledBack {
        /// What failed.
        reason: String,
    },
    /// Failed and not restored.
    Failed {
        /// What failed.
        reason: String,
        /// The state the cluster is in.
        state: String,
        /// The command that resumes.
        resume: String,
    },
    /// Stopped at a safe point on request (Ctrl-C).
    Interrupted {
        /// The step it stopped at.
        step: String,
    },
    /// `--dry-run`: the first action was accepted by server-side dry run; nothing changed.
    DryRun {
        /// The step that would come first, and the rest of the pivot in words.
        plan: String,
    },
}

impl ComponentOutcome {
    fn name(&self) -> &'static str {
        match self {
            ComponentOutcome::Done { .. } => "done",
            ComponentOutcome::Refused { .. } => "refused",
            ComponentOutcome::RolledBack { .. } => "rolled-back",
            ComponentOutcome::Failed { .. } => "failed",
            ComponentOutcome::Interrupted { .. } => "interrupted",
            ComponentOutcome::DryRun { .. } => "dry-run",
        }
    }

    fn message(&self) -> String {
        match self {
            ComponentOutcome::Done { summary } => summary.clone(),
            ComponentOutcome::Refused { reason, fix } => format!("{reason}; {fix}"),
            ComponentOutcome::RolledBack { reason } => reason.clone(),
            ComponentOutcome::Failed {
                reason,
                state,
                resume,
            } => {
                format!("{reason}. State: {state}. Resume with: {resume}")
            }
            ComponentOutcome::Interrupted { step } => format!("stopped before {step}"),
            ComponentOutcome::DryRun { plan } => plan.clone(),
        }
    }
}

/// Why the executor itself could not go on (as opposed to an outcome the state machine chose).
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    /// An API write failed for good.
    #[error(transparent)]
    Api(#[from] ApiCallError),
    /// The same action was asked for again and again without effect.
    #[error(
        "{component}: the step {step} was carried out {MAX_REPEATS} times but the cluster does not show its effect: {detail}"
    )]
    Stuck {
        /// The component.
        component: Component,
        /// The step.
        step: String,
        /// The last observed state, in words.
        detail: String,
    },
}

/// What the executor needs besides the observation.
#[derive(Debug, Clone, Default)]
pub struct ExecuteOptions {
    /// Retry policy of every write.
    pub retry: RetryPolicy,
    /// Server-side dry run: perform nothing for real and stop after the first action.
    pub dry_run: bool,
}

/// Whether `step` was decided on the API's health: the apiserver's verification, its end,
/// and a failure (which may be the verification's deadline).
fn reads_health(component: Component, step: &Step) -> bool {
    component == Component::ApiServer
        && matches!(
            step,
            Step::Verify(_) | Step::Done { .. } | Step::Failed { .. }
        )
}

fn instant_of(at: Timestamp) -> Instant {
    let now = Timestamp::now();
    let ahead = at.duration_since(now);
    let ahead = Duration::try_from(ahead).unwrap_or(Duration::ZERO);
    Instant::now() + ahead
}

/// Runs the pivot of `component` to `target` until an outcome.
pub async fn run_component(
    observer: &mut Observer,
    client: &kube::Client,
    component: Component,
    target: &Target,
    options: &ExecuteOptions,
    events: &Events,
    cancel: &CancellationToken,
) -> Result<ComponentOutcome, ExecuteError> {
    let started = Instant::now();
    events.emit(Event::ComponentStarted { component });
    let mut last_step: Option<(String, String)> = None;
    let mut last_pending: Option<Vec<String>> = None;
    let mut repeats = 0;
    // Since when the same action has been answered 409/404 without a write in between.
    let mut superseded_since: Option<Instant> = None;
    // Whether the API's health was probed for the decision being made.
    let mut probed = false;
    let outcome = loop {
        let obs = observer.observe(component).await;
        let step = next_step(&obs, target);
        // An observation carries the last probe's health, of any age; a decision that reads
        // it is made again on a fresh one.
        let stale = observer
            .health_age()
            .is_none_or(|age| age >= HEALTH_POLL / 2);
        if reads_health(component, &step) && stale && !probed {
            observer.api_health(Duration::ZERO).await;
            probed = true;
            continue;
        }
        probed = false;
        let key = (step.name().to_string(), step.description());
        if last_step.as_ref() != Some(&key) {
            events.emit(Event::Step {
                component,
                step: key.0.clone(),
                description: key.1.clone(),
            });
            last_pending = None;
        }
        let same_as_before = last_step.as_ref().is_some_and(|(name, _)| *name == key.0);
        last_step = Some(key);

        match &step {
            Step::Done { summary } => {
                break ComponentOutcome::Done {
                    summary: summary.clone(),
                };
            }
            Step::Refuse { reason, fix } => {
                break ComponentOutcome::Refused {
                    reason: reason.clone(),
                    fix: fix.clone(),
                };
            }
            Step::RolledBack { reason } => {
                break ComponentOutcome::RolledBack {
                    reason: reason.clone(),
                };
            }
            Step::Failed {
                reason,
                state,
                resume,
            } => {
                break ComponentOutcome::Failed {
                    reason: reason.clone(),
                    state: state.clone(),
                    resume: resume.clone(),
                };
            }
            _ => {}
        }
        if cancel.is_cancelled() {
            break ComponentOutcome::Interrupted {
                step: step.name().to_string(),
            };
        }

        if let Some(wait) = step.wait() {
            if options.dry_run {
                break ComponentOutcome::DryRun {
                    plan: format!("would now wait: {}", wait.condition),
                };
            }
            repeats = 0;
            if last_pending.as_ref() != Some(&wait.pending) {
                events.emit(Event::Waiting {
                    component,
                    step: step.name().to_string(),
                    condition: wait.condition.clone(),
                    pending: wait.pending.clone(),
                });
                last_pending = Some(wait.pending.clone());
            }
            let needs_health = wait.watch.iter().any(|w| matches!(w, Watch::ApiHealth));
            let mut wake = Instant::now()
                + if needs_health {
                    HEALTH_POLL
                } else {
                    IDLE_RECHECK
                };
            if let Some(at) = wait.recheck_at {
                wake = wake.min(instant_of(at).max(Instant::now() + Duration::from_millis(10)));
            }
            tokio::select! {
                _ = observer.next_change(wake) => {}
                _ = cancel.cancelled() => {}
            }
            continue;
        }

        // An action.
        repeats = if same_as_before { repeats + 1 } else { 1 };
        if !same_as_before {
            superseded_since = None;
        }
        let superseded_too_long = superseded_since.is_some_and(|at| at.elapsed() > READ_OWN_WRITE);
        if repeats > MAX_REPEATS || superseded_too_long {
            return Err(ExecuteError::Stuck {
                component,
                step: step.name().to_string(),
                detail: step.description(),
            });
        }
        let live = |name: &str| observer.daemonset(name).map(|d| (*d).clone());
        let Some(result) = perform(client, &step, live, &options.retry, options.dry_run).await
        else {
            continue;
        };
        match result? {
            Applied::Written {
                kind,
                name,
                resource_version,
            } => {
                superseded_since = None;
                events.emit(Event::Action {
                    component,
                    step: step.name().to_string(),
                    detail: step.description(),
                    dry_run: options.dry_run,
                });
                if options.dry_run {
                    break ComponentOutcome::DryRun {
                        plan: format!("the API server accepted (dry run): {}", step.description()),
                    };
                }
                if let Step::HandOverLease { uid: Some(uid), .. } = &step {
                    observer.handed_over(component, uid);
                }
                // Read our own write before deciding again, or the next decision would see
                // the object as it was and ask for the same action.
                let deadline = Instant::now() + READ_OWN_WRITE;
                let deletion = matches!(
                    step,
                    Step::DeleteOldPod { .. }
                        | Step::StopPossibleLeaseHolder { .. }
                        | Step::RemoveBackup { .. }
                        | Step::HandOverLease { .. }
                );
                let _ = observer
                    .view
                    .wait_until(
                        "our write to show in the watch",
                        deadline,
                        |v| match &step {
                            // The Lease we deleted is gone from the cache, or already recreated
                            // by a standby (a different resourceVersion).
                            Step::HandOverLease {
                                lease,
                                resource_version: deleted,
                                ..
                            } => v.leases.state().iter().all(|l| {
                                l.metadata.name.as_deref() != Some(lease.as_str())
                                    || l.metadata.resource_version.as_ref() != Some(deleted)
                            }),
                            _ => v.shows(kind, &name, resource_version.as_deref(), deletion),
                        },
                    )
                    .await;
            }
            Applied::Superseded { why } => {
                tracing::debug!(%component, step = step.name(), %why, "action superseded; observing again");
                // Not an action without effect: the API is ahead of our watches (a concurrent
                // writer, a pod already gone, a watch relisting after 410). Deciding again at
                // once would decide on the same stale view and burn the repeats in
                // milliseconds; wait for the view to change, for at most READ_OWN_WRITE in all.
                repeats -= 1;
                superseded_since.get_or_insert_with(Instant::now);
                let _ = observer.next_change(Instant::now() + SUPERSEDED_WAIT).await;
            }
        }
    };
    events.emit(Event::ComponentFinished {
        component,
        outcome: outcome.name().to_string(),
        message: outcome.message(),
        elapsed_seconds: started.elapsed().as_secs_f64(),
    });
    Ok(outcome)
}
