//! The upgrade of one component: the pivot's decisions ([`next_step`]) and actions, run by
//! the loop of [`crate::driver`]. It keeps no state of its own: stop it anywhere and a new run
//! continues from what the cluster shows.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use selfhost_core::Component;
use selfhost_core::observation::AvailabilitySoFar;
use selfhost_core::pivot::{Step, Target, Watch, next_step};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api_call::ApiCallError;
use crate::api_write::{Applied, Kind, perform};
use crate::driver::{Acted, Change, Decision, DriveMode, MAX_REPEATS, StepName, drive};
use crate::events::Events;
use crate::observer::Observer;
use crate::outcome::ComponentOutcome;
use crate::retry::RetryPolicy;

/// While a wait needs `/readyz` or `/version`, how often they are probed. Only the
/// apiserver's final verification waits on them, with nothing else to wake it: a probe a
/// tenth of a second costs little and ends that wait soon after it can end.
const HEALTH_POLL: Duration = Duration::from_millis(100);
/// The longest a wait goes without re-observing, even if nothing changed: a safety net for a
/// change no watch reports (a clock-driven deadline is re-checked at its own time anyway).
const IDLE_RECHECK: Duration = Duration::from_secs(5);

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

/// The upgrade of one component, as the loop of [`crate::driver`] runs it.
struct Upgrade<'a> {
    observer: &'a mut Observer,
    client: &'a kube::Client,
    component: Component,
    target: &'a Target,
    options: &'a ExecuteOptions,
    /// The health probe read by the decision being made is fresh.
    probed: bool,
    /// When this run began on the component: the availability budget counts from here.
    started: Instant,
    /// The object the last action wrote, and its new resourceVersion, to read back.
    written: Option<(Kind, String, Option<String>)>,
}

impl Change for Upgrade<'_> {
    type Action = Step;
    type Error = ExecuteError;

    fn component(&self) -> Component {
        self.component
    }

    async fn decide(&mut self) -> Result<(StepName, Decision<Step>), ExecuteError> {
        let (component, target) = (self.component, self.target);
        let step = loop {
            let mut obs = self.observer.observe(component).await;
            let measured = self.observer.measured(self.started, Instant::now());
            obs.availability = AvailabilitySoFar {
                failed_probes: measured.failed_health_probes,
                longest_unavailable_seconds: measured.longest_failing_seconds,
            };
            let step = next_step(&obs, target);
            // An observation carries the last probe's health, of any age; a decision that
            // reads it is made again on a fresh one.
            let stale = self
                .observer
                .health_age()
                .is_none_or(|age| age >= HEALTH_POLL / 2);
            if reads_health(component, &step) && stale && !self.probed {
                self.observer.api_health(Duration::ZERO).await;
                self.probed = true;
                continue;
            }
            self.probed = false;
            break step;
        };
        let name = StepName {
            name: step.name().to_string(),
            description: step.description(),
            subject: step.subject().map(str::to_string),
        };
        let decision = match step {
            Step::Done { summary } => Decision::End(ComponentOutcome::Done {
                summary,
                handover_gap_seconds: None,
                measured: None,
            }),
            Step::Refuse { reason, fix } => {
                Decision::End(ComponentOutcome::Refused { reason, fix })
            }
            Step::RolledBack { reason } => Decision::End(ComponentOutcome::RolledBack { reason }),
            Step::Failed {
                reason,
                state,
                resume,
            } => Decision::End(ComponentOutcome::Failed {
                reason,
                state,
                resume: Some(resume),
            }),
            step => match step.wait() {
                Some(wait) => {
                    let needs_health = wait.watch.iter().any(|w| matches!(w, Watch::ApiHealth));
                    let mut wake = Instant::now()
                        + if needs_health {
                            HEALTH_POLL
                        } else {
                            IDLE_RECHECK
                        };
                    if let Some(at) = wait.recheck_at {
                        wake = wake
                            .min(instant_of(at).max(Instant::now() + Duration::from_millis(10)));
                    }
                    Decision::Wait {
                        condition: wait.condition.clone(),
                        pending: wait.pending.clone(),
                        wake,
                    }
                }
                None => Decision::Act(step),
            },
        };
        Ok((name, decision))
    }

    async fn act(&mut self, step: &Step) -> Result<Acted, ExecuteError> {
        let observer = &*self.observer;
        let live = |name: &str| observer.daemonset(name).map(|d| (*d).clone());
        let Some(result) = perform(
            self.client,
            step,
            live,
            &self.options.retry,
            self.options.dry_run,
        )
        .await
        else {
            return Ok(Acted::Nothing);
        };
        Ok(match result? {
            Applied::Written {
                kind,
                name,
                resource_version,
            } => {
                // The step's line says what it does; this says what the API server took.
                let what = format!("{} {name}", kind.name());
                self.written = Some((kind, name, resource_version));
                if let Step::HandOverLease { uid: Some(uid), .. } = step
                    && !self.options.dry_run
                {
                    self.observer.handed_over(self.component, uid);
                }
                Acted::Written {
                    detail: if self.options.dry_run {
                        format!("accepted by the API server's dry run: {what}")
                    } else {
                        format!("accepted by the API server: {what}")
                    },
                }
            }
            Applied::Superseded { why } => Acted::Superseded { why },
        })
    }

    async fn read_own_write(&mut self, step: &Step, until: Instant) {
        let Some((kind, name, resource_version)) = self.written.take() else {
            return;
        };
        let deletion = matches!(
            step,
            Step::DeleteOldPod { .. }
                | Step::StopPossibleLeaseHolder { .. }
                | Step::RemoveBackup { .. }
                | Step::HandOverLease { .. }
        );
        let _ = self
            .observer
            .view
            .wait_until("our write to show in the watch", until, |v| match step {
                // The Lease we deleted is gone from the cache, or already recreated by a
                // standby (a different resourceVersion).
                Step::HandOverLease {
                    lease,
                    resource_version: deleted,
                    ..
                } => v.leases.state().iter().all(|l| {
                    l.metadata.name.as_deref() != Some(lease.as_str())
                        || l.metadata.resource_version.as_ref() != Some(deleted)
                }),
                _ => v.shows(kind, &name, resource_version.as_deref(), deletion),
            })
            .await;
    }

    async fn next_change(&mut self, until: Instant) {
        self.observer.next_change(until).await;
    }

    fn without_effect(
        &mut self,
        step: &StepName,
    ) -> Result<Option<ComponentOutcome>, ExecuteError> {
        Err(ExecuteError::Stuck {
            component: self.component,
            step: step.name.clone(),
            detail: step.description.clone(),
        })
    }
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
    let mut upgrade = Upgrade {
        observer,
        client,
        component,
        target,
        options,
        probed: false,
        started: Instant::now(),
        written: None,
    };
    let mode = if options.dry_run {
        DriveMode::DryRunFirstChange
    } else {
        DriveMode::Real
    };
    drive(&mut upgrade, mode, events, cancel).await
}
