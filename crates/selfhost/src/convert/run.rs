//! The executor of a conversion: observe, decide, act or wait, and again — per component, in
//! kubeadm's order. Its only memory is the run's direction and mode (converting, or restoring
//! after a failure) and, for the report, when it restarted a static pod to add port sharing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use selfhost_core::Component;
use selfhost_core::component::NAMESPACE;
use selfhost_core::conversion::decide::{ConvertStep, Mode, NodeComponent, next_step};
use selfhost_core::conversion::{NODE_GATE_VALUE, gate_daemonset, node_gate_label};
use selfhost_core::observation::ApiHealth;
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::files::NodeFiles;
use super::observe::ConversionView;
use super::preflight::plan;
use super::{
    ComponentOutcome, ConvertError, ConvertReport, ConvertRequest, to_self_hosted, to_static,
};
use crate::client::Clients;
use crate::error::FailureKind;
use crate::events::{Event, Events};
use crate::execute::FIELD_MANAGER;
use crate::health;
use crate::measure::Recorder;
use crate::retry::with_retries;

/// The longest a wait goes without deciding again, even if no watch reported a change: time
/// itself matters (deadlines, identity Lease freshness).
const RECHECK: Duration = Duration::from_millis(500);
/// How long to wait for the watches to show an API write of ours.
const READ_OWN_WRITE: Duration = Duration::from_secs(5);
/// The same action asked for this many times in a row means the cluster does not take it.
const MAX_REPEATS: u32 = 10;
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
        return super::dry_run::walk(clients, view, request, &files, events, report).await;
    }
    for component in Component::ALL {
        let outcome =
            run_component(clients, view, request, &files, component, events, cancel).await?;
        let done = matches!(outcome, ComponentOutcome::Done { .. });
        report.components.push((component, outcome));
        if !done {
            break;
        }
    }
    Ok(report)
}

pub(super) struct Context<'a> {
    pub(super) clients: &'a Clients,
    pub(super) request: &'a ConvertRequest,
    pub(super) files: &'a NodeFiles,
    pub(super) component: Component,
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
    let started = Instant::now();
    let sampler = HealthSampler::start(clients.probe.clone(), Arc::clone(view.recorder()));
    events.emit(Event::ComponentStarted { component });
    let ctx = Context {
        clients,
        request,
        files,
        component,
    };
    let mut mode = Mode::Forward;
    let mut deadline = Timestamp::now() + request.deadline;
    // The static pod restarted for port sharing at the first instant, and something served
    // again at the second: the hand-over's only gap on this node.
    let mut gap: (Option<Instant>, Option<Instant>) = (None, None);
    let mut last_step: Option<String> = None;
    let mut last_pending: Option<Vec<String>> = None;
    let mut repeats = 0;
    let outcome = loop {
        let obs = view.observe(component, &request.node, files, deadline)?;
        if let (Some(_), None) = gap
            && ((obs.mirror_permits_port_sharing && obs.mirror_serving.is_ok())
                || obs.daemonset_pod_serving.is_ok())
        {
            gap.1 = Some(Instant::now());
        }
        let step = next_step(request.direction, &mode, &obs);
        let description = step.to_string();
        let same_as_before = last_step.as_ref() == Some(&description);
        if !same_as_before {
            events.emit(Event::Step {
                component,
                step: step.name().to_string(),
                description: description.clone(),
            });
            last_pending = None;
        }
        last_step = Some(description.clone());
        match step {
            ConvertStep::Done { summary } => {
                if let Err(reason) = api_ready(clients, deadline).await {
                    mode = fail(mode, reason.clone());
                    if let Mode::Restore { .. } = &mode {
                        continue;
                    }
                }
                let measured = match view.recorder().lock() {
                    Ok(recorder) => recorder.measure(started, Instant::now()),
                    // Never poisoned (nothing panics while it is held); an empty record then.
                    Err(_) => Recorder::default().measure(started, Instant::now()),
                };
                break ComponentOutcome::Done {
                    summary,
                    handover_gap_seconds: gap
                        .0
                        .map(|from| gap.1.unwrap_or_else(Instant::now).duration_since(from))
                        .map(|gap| gap.as_secs_f64()),
                    measured,
                };
            }
            ConvertStep::Refuse { reason, fix } => break ComponentOutcome::Refused { reason, fix },
            ConvertStep::RolledBack { reason } => break ComponentOutcome::RolledBack { reason },
            ConvertStep::Fail { reason } => match &mode {
                Mode::Forward => {
                    events.emit(Event::Step {
                        component,
                        step: "restore".into(),
                        description: format!("putting {} back as it was: {reason}", request.node),
                    });
                    mode = Mode::Restore { reason };
                    deadline = Timestamp::now() + request.deadline;
                }
                Mode::Restore { reason: first } => {
                    break ComponentOutcome::Failed {
                        reason: format!("{first}; restoring failed too: {reason}"),
                        state: describe(&obs, files),
                    };
                }
            },
            ConvertStep::Wait { condition, pending } => {
                repeats = 0;
                if last_pending.as_ref() != Some(&pending) {
                    events.emit(Event::Waiting {
                        component,
                        step: "wait".into(),
                        condition,
                        pending: pending.clone(),
                    });
                    last_pending = Some(pending);
                }
                if cancel.is_cancelled() {
                    break ComponentOutcome::Interrupted {
                        step: "wait".into(),
                    };
                }
                tokio::select! {
                    () = view.next_change(Instant::now() + RECHECK) => {}
                    () = cancel.cancelled() => {}
                }
            }
            action => {
                if cancel.is_cancelled() {
                    break ComponentOutcome::Interrupted {
                        step: action.name().to_string(),
                    };
                }
                repeats = if same_as_before { repeats + 1 } else { 1 };
                if repeats > MAX_REPEATS {
                    let reason = format!(
                        "{description} was done {MAX_REPEATS} times without the cluster showing it"
                    );
                    mode = fail(mode, reason.clone());
                    if let Mode::Forward = mode {
                        break ComponentOutcome::Failed {
                            reason,
                            state: describe(&obs, files),
                        };
                    }
                    continue;
                }
                match perform(&ctx, view, &action).await {
                    Ok(detail) => {
                        if action == ConvertStep::AddPortSharing
                            && mode == Mode::Forward
                            && gap.0.is_none()
                        {
                            gap.0 = Some(Instant::now());
                        }
                        events.emit(Event::Action {
                            component,
                            step: action.name().to_string(),
                            detail,
                            dry_run: false,
                        });
                        let until = Instant::now() + READ_OWN_WRITE;
                        while !reflected(view, component, &action) && Instant::now() < until {
                            view.next_change(until).await;
                        }
                    }
                    Err(e) => match &mode {
                        Mode::Forward => {
                            let reason = format!("{}: {e}", action.name());
                            events.emit(Event::Step {
                                component,
                                step: "restore".into(),
                                description: format!(
                                    "putting {} back as it was: {reason}",
                                    request.node
                                ),
                            });
                            mode = Mode::Restore { reason };
                            deadline = Timestamp::now() + request.deadline;
                        }
                        Mode::Restore { reason } => {
                            break ComponentOutcome::Failed {
                                reason: format!("{reason}; restoring failed too: {e}"),
                                state: describe(&obs, files),
                            };
                        }
                    },
                }
            }
        }
    };
    drop(sampler);
    events.emit(Event::ComponentFinished {
        component,
        outcome: outcome.name().to_string(),
        message: outcome.message(),
        elapsed_seconds: started.elapsed().as_secs_f64(),
    });
    Ok(outcome)
}

/// The mode after a failure: restoring, unless it was restoring already (then it stays, and
/// the caller reports it failed).
fn fail(mode: Mode, reason: String) -> Mode {
    match mode {
        Mode::Forward => Mode::Restore { reason },
        restoring @ Mode::Restore { .. } => restoring,
    }
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

/// Carries out an action; returns what it did, in words. With `--dry-run` its API writes are
/// server-side dry runs and its file changes are only described.
pub(super) async fn perform(
    ctx: &Context<'_>,
    view: &ConversionView,
    step: &ConvertStep,
) -> Result<String, ConvertError> {
    let Context {
        clients,
        request,
        files,
        component,
    } = ctx;
    let component = *component;
    let client = &clients.api;
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let name = component.daemonset_name();
    let superseded = |e: &crate::error::ApiCallError| {
        matches!(
            e.kind,
            FailureKind::Conflict | FailureKind::NotFound | FailureKind::AlreadyExists
        )
    };
    Ok(match step {
        ConvertStep::CreateDaemonSet => {
            to_self_hosted::create_daemonset(client, request, files, component).await?;
            format!(
                "created DaemonSet kube-system/{name} from {}",
                files.manifest_path(component).display()
            )
        }
        ConvertStep::GateDaemonSet => {
            let Some(live) = view.daemonset(component) else {
                return Ok("the DaemonSet is gone; deciding again".into());
            };
            let gated = gate_daemonset(component, (*live).clone());
            let params = PostParams {
                dry_run: request.dry_run,
                field_manager: Some(FIELD_MANAGER.into()),
            };
            match with_retries(
                &format!("update DaemonSet kube-system/{name}"),
                &request.retry,
                || daemonsets.replace(&name, &params, &gated),
            )
            .await
            {
                Ok(_) => {}
                Err(e) if superseded(&e) => {}
                Err(e) => return Err(e.into()),
            }
            format!(
                "DaemonSet kube-system/{name} now requires the node label {}={NODE_GATE_VALUE} \
                 (update strategy OnDelete)",
                node_gate_label(component)
            )
        }
        ConvertStep::LabelNode { node } | ConvertStep::UnlabelNode { node } => {
            let on = matches!(step, ConvertStep::LabelNode { .. });
            let key = node_gate_label(component);
            let value = if on {
                json!(NODE_GATE_VALUE)
            } else {
                json!(null)
            };
            let patch = json!({ "metadata": { "labels": { key.clone(): value } } });
            let patch = Patch::Merge(&patch);
            let nodes: Api<Node> = Api::all(client.clone());
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                dry_run: request.dry_run,
                ..PatchParams::default()
            };
            with_retries(&format!("label node {node}"), &request.retry, || {
                nodes.patch(node, &params, &patch)
            })
            .await?;
            if on {
                format!("labelled node {node} {key}={NODE_GATE_VALUE}")
            } else {
                format!("removed label {key} from node {node}")
            }
        }
        ConvertStep::MoveManifestAside
        | ConvertStep::AddPortSharing
        | ConvertStep::RestoreManifest
        | ConvertStep::RemoveManifest
            if request.dry_run =>
        {
            return Ok(super::dry_run::describe_file_step(files, component, step));
        }
        ConvertStep::MoveManifestAside => {
            let to = files.move_aside(component)?;
            format!(
                "moved {} to {} (kept, never deleted)",
                files.manifest_path(component).display(),
                to.display()
            )
        }
        ConvertStep::AddPortSharing => {
            let backup = files.add_port_sharing(component)?;
            format!(
                "wrote {} with --permit-port-sharing=true (the original kept as {}): the kubelet \
                 restarts the static pod",
                files.manifest_path(component).display(),
                backup.display()
            )
        }
        ConvertStep::RestoreManifest => {
            files.restore(component)?;
            format!(
                "copied {} back to {}",
                files.backup_path(component).display(),
                files.manifest_path(component).display()
            )
        }
        ConvertStep::WriteManifest => {
            let Some(live) = view.daemonset(component) else {
                return Ok("the DaemonSet is gone; deciding again".into());
            };
            if !request.dry_run {
                // Before the write: the static pod it makes starts after this moment.
                view.record_manifest_write(component, &request.node);
            }
            let written =
                to_static::write_manifest(client, request, files, component, &live).await?;
            let extra = if written.is_empty() {
                String::new()
            } else {
                format!(" and, from Secrets, {}", written.join(", "))
            };
            let wrote = if request.dry_run {
                "would write (dry run: not written)"
            } else {
                "wrote"
            };
            format!(
                "{wrote} {}{extra}",
                files.manifest_path(component).display()
            )
        }
        ConvertStep::RemoveManifest => {
            files.remove_manifest(component)?;
            format!("removed {}", files.manifest_path(component).display())
        }
        ConvertStep::DeleteDaemonSet => {
            let uid = view
                .daemonset(component)
                .and_then(|d| d.metadata.uid.clone());
            let params = DeleteParams {
                dry_run: request.dry_run,
                propagation_policy: Some(PropagationPolicy::Orphan),
                preconditions: Some(Preconditions {
                    uid,
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match with_retries(
                &format!("delete DaemonSet kube-system/{name}"),
                &request.retry,
                || daemonsets.delete(&name, &params),
            )
            .await
            {
                Ok(_) => {}
                Err(e) if superseded(&e) => {}
                Err(e) => return Err(e.into()),
            }
            format!("deleted DaemonSet kube-system/{name} (orphan policy)")
        }
        ConvertStep::HandOverLease(hand_over) => {
            // The upgrade's own hand-over: a delete with the Lease's uid and resourceVersion
            // as preconditions, so a standby that took it meanwhile keeps it.
            let step = hand_over.to_step();
            if let Some(result) =
                crate::execute::perform(client, &step, |_| None, &request.retry, false).await
            {
                result?;
            }
            format!(
                "deleted Lease kube-system/{} held by {}, whose process is gone ({}): a \
                 standby takes it on its next retry",
                hand_over.lease, hand_over.holder, hand_over.why
            )
        }
        other => format!("nothing to do for {}", other.name()),
    })
}
