//! A conversion's run: preflight, then each component in kubeadm's order, its decisions
//! ([`next_step`]) and actions run by the loop of [`crate::driver`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use selfhost_core::Component;
use selfhost_core::conversion::decide::{ConvertStep, Mode, NodeComponent, next_step};
use selfhost_core::observation::ApiHealth;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::action::{Context, perform};
use super::conversion_view::ConversionView;
use super::preflight::plan;
use super::{ConvertError, ConvertReport, ConvertRequest};
use crate::client::Clients;
use crate::driver::{Acted, Change, Decision, DriveMode, MAX_REPEATS, StepName, drive};
use crate::events::{Event, Events};
use crate::health;
use crate::measure::Recorder;
use crate::node_files::NodeFiles;
use crate::outcome::ComponentOutcome;

/// The longest a wait goes without deciding again, even if no watch reported a change: time
/// itself matters (deadlines, identity Lease freshness).
const RECHECK: Duration = Duration::from_millis(500);
/// How often a run probes `/readyz` while it converts a component: the apiserver gap it
/// reports is measured by these probes.
const HEALTH_SAMPLE: Duration = Duration::from_millis(100);

/// Probes `/readyz` every [`HEALTH_SAMPLE`] into the run's record until dropped.
struct HealthSampler(tokio::task::JoinHandle<()>);

impl HealthSampler {
    fn start(probe: kube::Client, recorder: Arc<Mutex<Recorder>>) -> HealthSampler {
        HealthSampler(tokio::spawn(async move {
            loop {
                let health = health::readyz(&probe).await;
                let api = ApiHealth {
                    readyz_ok: health.healthy,
                    readyz_detail: health.problem,
                    git_version: None,
                    unreachable_until: None,
                };
                if let Ok(mut recorder) = recorder.lock() {
                    recorder.probe(Instant::now(), &api);
                }
                tokio::time::sleep(HEALTH_SAMPLE).await;
            }
        }))
    }
}

impl Drop for HealthSampler {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs the conversion of `request.node`: preflight, then each component in order until one
/// does not end done. Refusals change nothing; with `dry_run` only the plan is made.
pub async fn convert(
    clients: &Clients,
    view: &mut ConversionView,
    request: &ConvertRequest,
    events: &Events,
    cancel: &CancellationToken,
) -> Result<ConvertReport, ConvertError> {
    let files = NodeFiles::open(&request.manifests_dir)?;
    let plan = plan(view, &clients.api, request).await?;
    let mut report = ConvertReport {
        components: Vec::new(),
        backup_dir: files.backup_dir.clone(),
        checkpointer: None,
    };
    if let Some(refused) = plan.components.iter().find(|c| c.action == "refuse") {
        report.components.push((
            refused.component,
            ComponentOutcome::Refused {
                reason: refused.detail.clone(),
                fix: "nothing was changed".into(),
            },
        ));
        return Ok(report);
    }
    if request.dry_run {
        return super::dry_run::walk(clients, view, request, &files, events, cancel, report).await;
    }
    // The checkpointer comes first: a static manifest moves aside only once it keeps the
    // DaemonSet pod that replaces the static pod.
    if let Some(outcome) = super::checkpointer::prepare(clients, request, false).await? {
        let runs = outcome.succeeded();
        report.checkpointer = Some(outcome);
        if !runs {
            return Ok(report);
        }
    }
    for component in Component::ALL {
        let outcome =
            run_component(clients, view, request, &files, component, events, cancel).await?;
        let done = matches!(outcome, ComponentOutcome::Done { .. });
        report.components.push((component, outcome));
        if !done {
            return Ok(report);
        }
    }
    if let Some(outcome) = super::checkpointer::finish(clients, request, false).await? {
        report.checkpointer = Some(outcome);
    }
    Ok(report)
}

/// The conversion of one component on one node, as the loop of [`crate::driver`] runs it.
/// Its own memory is its mode (converting, or restoring after a failure) and, for the
/// report, when it restarted a static pod to add port sharing.
struct Conversion<'a> {
    ctx: Context<'a>,
    view: &'a mut ConversionView,
    events: &'a Events,
    mode: Mode,
    /// Until when the component may take: a wait past it fails (and restores).
    deadline: Timestamp,
    /// The static pod restarted for port sharing at the first instant, and something served
    /// again at the second: the hand-over's only gap on this node.
    gap: (Option<Instant>, Option<Instant>),
    /// The node's state in words as last observed, for a failure that cannot be undone.
    state: String,
    started: Instant,
}

impl Conversion<'_> {
    /// After a failure: restore the node, or, when restoring failed too, the outcome.
    fn failed(&mut self, reason: String) -> Option<ComponentOutcome> {
        match &self.mode {
            Mode::Forward => {
                self.events.emit(Event::Step {
                    component: self.ctx.component,
                    step: "restore".into(),
                    description: format!(
                        "putting {} back as it was: {reason}",
                        self.ctx.request.node
                    ),
                });
                self.mode = Mode::Restore { reason };
                self.deadline = Timestamp::now() + self.ctx.request.deadline;
                None
            }
            Mode::Restore { reason: first } => Some(ComponentOutcome::Failed {
                reason: format!("{first}; restoring failed too: {reason}"),
                state: self.state.clone(),
                resume: None,
            }),
        }
    }
}

impl Change for Conversion<'_> {
    type Action = ConvertStep;
    type Error = ConvertError;

    fn component(&self) -> Component {
        self.ctx.component
    }

    async fn decide(&mut self) -> Result<(StepName, Decision<ConvertStep>), ConvertError> {
        let component = self.ctx.component;
        loop {
            let obs =
                self.view
                    .observe(component, self.ctx.request, self.ctx.files, self.deadline)?;
            self.state = describe(&obs, self.ctx.files);
            if let (Some(_), None) = self.gap
                && ((obs.mirror_permits_port_sharing && obs.mirror_serving.is_ok())
                    || obs.daemonset_pod_serving.is_ok())
            {
                self.gap.1 = Some(Instant::now());
            }
            let step = next_step(self.ctx.request.direction, &self.mode, &obs);
            let name = StepName {
                name: step.name().to_string(),
                description: step.to_string(),
                subject: None,
            };
            let decision = match step {
                ConvertStep::Done { summary } => {
                    if let Err(reason) = api_ready(self.ctx.clients, self.deadline).await {
                        match self.failed(reason) {
                            None => continue,
                            Some(outcome) => return Ok((name, Decision::End(outcome))),
                        }
                    }
                    let measured = match self.view.recorder().lock() {
                        Ok(recorder) => recorder.measure(self.started, Instant::now()),
                        // Never poisoned (nothing panics while it is held); an empty record then.
                        Err(_) => Recorder::default().measure(self.started, Instant::now()),
                    };
                    let gap = self.gap;
                    Decision::End(ComponentOutcome::Done {
                        summary,
                        handover_gap_seconds: gap
                            .0
                            .map(|from| gap.1.unwrap_or_else(Instant::now).duration_since(from))
                            .map(|gap| gap.as_secs_f64()),
                        measured: Some(measured),
                    })
                }
                ConvertStep::Refuse { reason, fix } => {
                    Decision::End(ComponentOutcome::Refused { reason, fix })
                }
                ConvertStep::RolledBack { reason } => Decision::End(ComponentOutcome::RolledBack {
                    reason: format!("{reason}; the node was put back as it was"),
                }),
                ConvertStep::Fail { reason } => match self.failed(reason) {
                    None => continue,
                    Some(outcome) => Decision::End(outcome),
                },
                ConvertStep::Wait { condition, pending } => Decision::Wait {
                    condition,
                    pending,
                    wake: Instant::now() + RECHECK,
                },
                action => Decision::Act(action),
            };
            return Ok((name, decision));
        }
    }

    async fn act(&mut self, action: &ConvertStep) -> Result<Acted, ConvertError> {
        match perform(&self.ctx, self.view, action).await {
            Ok(detail) => {
                if *action == ConvertStep::AddPortSharing
                    && self.mode == Mode::Forward
                    && self.gap.0.is_none()
                {
                    self.gap.0 = Some(Instant::now());
                }
                Ok(Acted::Written { detail })
            }
            Err(e) => {
                let reason = match &self.mode {
                    Mode::Forward => format!("{}: {e}", action.name()),
                    Mode::Restore { .. } => e.to_string(),
                };
                Ok(match self.failed(reason) {
                    None => Acted::Nothing,
                    Some(outcome) => Acted::Ended(outcome),
                })
            }
        }
    }

    async fn read_own_write(&mut self, action: &ConvertStep, until: Instant) {
        while !reflected(self.view, self.ctx.component, action) && Instant::now() < until {
            self.view.next_change(until).await;
        }
    }

    async fn next_change(&mut self, until: Instant) {
        self.view.next_change(until).await;
    }

    fn without_effect(
        &mut self,
        step: &StepName,
    ) -> Result<Option<ComponentOutcome>, ConvertError> {
        Ok(self.failed(format!(
            "{} was done {MAX_REPEATS} times without the cluster showing it",
            step.description
        )))
    }
}

async fn run_component(
    clients: &Clients,
    view: &mut ConversionView,
    request: &ConvertRequest,
    files: &NodeFiles,
    component: Component,
    events: &Events,
    cancel: &CancellationToken,
) -> Result<ComponentOutcome, ConvertError> {
    let _sampler = HealthSampler::start(clients.probe.clone(), Arc::clone(view.recorder()));
    let mut conversion = Conversion {
        ctx: Context {
            clients,
            request,
            files,
            component,
        },
        view,
        events,
        mode: Mode::Forward,
        deadline: Timestamp::now() + request.deadline,
        gap: (None, None),
        state: String::new(),
        started: Instant::now(),
    };
    drive(&mut conversion, DriveMode::Real, events, cancel).await
}

/// Waits until `/readyz` answers 200, or `deadline`.
async fn api_ready(clients: &Clients, deadline: Timestamp) -> Result<(), String> {
    loop {
        let health = health::readyz(&clients.probe).await;
        if health.healthy {
            return Ok(());
        }
        if Timestamp::now() >= deadline {
            return Err(format!(
                "the API server is not ready: {}",
                health.problem.unwrap_or_default()
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The node's state in words, for a failure that could not be undone.
fn describe(obs: &NodeComponent, files: &NodeFiles) -> String {
    let c = obs.component;
    let manifest = if obs.manifest_on_disk {
        format!(
            "the static manifest is at {}",
            files.manifest_path(c).display()
        )
    } else if obs.manifest_in_backup {
        format!(
            "the static manifest is moved aside to {}",
            files.backup_path(c).display()
        )
    } else {
        "there is no static manifest".to_string()
    };
    let ds = match &obs.daemonset {
        Some(ds) => format!(
            "DaemonSet {} runs on {}",
            ds.name,
            if obs.gated_nodes.is_empty() {
                "no node".to_string()
            } else {
                obs.gated_nodes.join(", ")
            }
        ),
        None => format!("there is no {} DaemonSet", c),
    };
    format!("{}: {manifest}; {ds}", obs.node)
}

/// Whether the watches show the effect of `step`.
fn reflected(view: &ConversionView, component: Component, step: &ConvertStep) -> bool {
    match step {
        ConvertStep::LabelNode { node } => view.gated_nodes(component).contains(node),
        ConvertStep::UnlabelNode { node } => !view.gated_nodes(component).contains(node),
        ConvertStep::CreateDaemonSet => view.daemonset(component).is_some(),
        ConvertStep::GateDaemonSet => view.daemonset(component).is_some_and(|ds| {
            selfhost_core::conversion::is_gated(
                component,
                ds.spec.as_ref().and_then(|s| s.template.spec.as_ref()),
            )
        }),
        ConvertStep::DeleteDaemonSet => view.daemonset(component).is_none(),
        // Gone from the cache, or already taken by a standby (another resourceVersion).
        ConvertStep::HandOverLease(hand_over) => view.leases.state().iter().all(|l| {
            l.metadata.name.as_deref() != Some(hand_over.lease.as_str())
                || l.metadata.resource_version.as_ref() != Some(&hand_over.resource_version)
        }),
        _ => true,
    }
}
