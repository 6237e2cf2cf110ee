//! The upgrade (`apply`): the pivot of every component in order — kube-apiserver, then
//! kube-controller-manager, then kube-scheduler — stopping at the first that does not end on
//! its target.

mod component;

use k8s_openapi::jiff::Timestamp;
use selfhost_core::Component;
use selfhost_core::disruption::{ClusterShape, expected_disruption};
use selfhost_core::pivot::{PivotOptions, Target};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::events::Events;
use crate::measure::ComponentDisruption;
use crate::observer::Observer;
use crate::outcome::ComponentOutcome;
use crate::target::Targets;
use component::run_component;
pub use component::{ExecuteError, ExecuteOptions};

/// How a whole run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// Every component is on the target.
    Done,
    /// `--dry-run`: nothing was changed.
    DryRun,
    /// A component failed and was rolled back; the ones before it are upgraded.
    RolledBack {
        /// The component that failed.
        component: Component,
        /// Why.
        reason: String,
    },
    /// The first component refused before anything changed.
    Refused {
        /// The component.
        component: Component,
        /// Why.
        reason: String,
        /// What to do.
        fix: String,
    },
    /// A component failed and was not restored, or refused after others were upgraded.
    Failed {
        /// The component.
        component: Component,
        /// What failed.
        reason: String,
        /// The state the cluster is in.
        state: String,
        /// The command that continues.
        resume: String,
    },
    /// Stopped on request at a safe point.
    Interrupted {
        /// The component it stopped in.
        component: Component,
        /// The command that continues.
        resume: String,
    },
}

/// The result of a run: its outcome and each component's.
#[derive(Debug, Clone, PartialEq)]
pub struct RunReport {
    /// The overall outcome.
    pub outcome: RunOutcome,
    /// Each component that was worked on, with its outcome and seconds spent.
    pub components: Vec<(Component, ComponentOutcome, f64)>,
    /// Each component that was worked on: the disruption expected on this cluster and what
    /// the engine measured.
    pub disruption: Vec<ComponentDisruption>,
}

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    /// Options of the state machine.
    pub pivot: PivotOptions,
    /// Options of the executor.
    pub execute: ExecuteOptions,
    /// The command that continues an interrupted or failed run, for messages.
    pub resume_command: String,
}

/// Runs the upgrade to `targets`.
pub async fn apply(
    observer: &mut Observer,
    client: &kube::Client,
    targets: &Targets,
    options: &ApplyOptions,
    events: &Events,
    cancel: &CancellationToken,
) -> Result<RunReport, ExecuteError> {
    let (pivot, execute, resume_command) = (
        &options.pivot,
        &options.execute,
        options.resume_command.as_str(),
    );
    let run_started_at = Timestamp::now();
    let mut report = RunReport {
        outcome: RunOutcome::Done,
        components: Vec::new(),
        disruption: Vec::new(),
    };
    if pivot.budget.is_set() {
        observer.probe_steadily();
    }
    let mut upgraded: Vec<Component> = Vec::new();
    for component in Component::ALL {
        let Some(template) = targets.templates.get(&component) else {
            continue;
        };
        let target = Target {
            version: targets.version.clone(),
            template: template.clone(),
            run_started_at,
            options: pivot.clone(),
        };
        let started = events.elapsed();
        let started_at = Instant::now();
        // One fresh probe per component, so that its measurement starts from a known state;
        // then the shape before anything changes, as the plan saw it.
        observer.api_health(std::time::Duration::ZERO).await;
        let before = observer.observe(component).await;
        let expected = expected_disruption(component, &ClusterShape::observe(&before, template));
        let outcome = run_component(
            observer, client, component, &target, execute, events, cancel,
        )
        .await?;
        report
            .components
            .push((component, outcome.clone(), events.elapsed() - started));
        report.disruption.push(ComponentDisruption {
            component,
            expected,
            measured: observer.measured(started_at, Instant::now()),
        });
        let stop = match outcome {
            ComponentOutcome::Done { .. } => {
                upgraded.push(component);
                None
            }
            ComponentOutcome::DryRun { .. } => {
                report.outcome = RunOutcome::DryRun;
                None
            }
            ComponentOutcome::Refused { reason, fix } if upgraded.is_empty() => {
                Some(RunOutcome::Refused {
                    component,
                    reason,
                    fix,
                })
            }
            ComponentOutcome::Refused { reason, fix } => Some(RunOutcome::Failed {
                component,
                reason: format!("{reason} ({fix})"),
                state: format!(
                    "{} upgraded to {}; {component} and the components after it unchanged",
                    upgraded
                        .iter()
                        .map(|c| c.name())
                        .collect::<Vec<_>>()
                        .join(", "),
                    targets.version
                ),
                resume: resume_command.to_string(),
            }),
            ComponentOutcome::RolledBack { reason } => {
                Some(RunOutcome::RolledBack { component, reason })
            }
            ComponentOutcome::Failed {
                reason,
                state,
                resume,
            } => Some(RunOutcome::Failed {
                component,
                reason,
                state,
                resume: resume.unwrap_or_else(|| resume_command.to_string()),
            }),
            ComponentOutcome::Interrupted { .. } => Some(RunOutcome::Interrupted {
                component,
                resume: resume_command.to_string(),
            }),
        };
        if let Some(outcome) = stop {
            report.outcome = outcome;
            break;
        }
    }
    Ok(report)
}
