//! `--dry-run`: the decisions of a real run, taken on a prediction of the cluster instead of
//! on the cluster after each change. Every API write the run would make is sent with
//! `dryRun=All` (so the API server validates, admits and authorises it, and stores nothing),
//! every file it would move or write is named, and every wait is described; nothing changes,
//! on the node or in the cluster.
//!
//! The prediction starts from what is observed now and applies each step's intended effect
//! ([`assume`]) and, for a wait, the state the wait waits for ([`settle`]): the DaemonSet pod
//! serving on a labelled node, none on an unlabelled one, the static pod serving exactly when
//! its manifest is in the manifests directory, a leader holding the component's Lease. A step
//! this walk cannot make as a dry run (the leader Lease hand-over) is named, not made.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use selfhost_core::Component;
use selfhost_core::conversion::decide::{ConvertStep, Mode, NodeComponent, next_step};
use selfhost_core::conversion::self_hosted_daemonset;
use selfhost_core::daemonset::DaemonSetOptions;
use selfhost_core::observation::{DaemonSetObservation, PodObservation};
use tokio::time::Instant;

use super::action::{Context, perform};
use super::files::NodeFiles;
use super::observe::ConversionView;
use super::{ConvertError, ConvertReport, ConvertRequest};
use crate::client::Clients;
use crate::events::{Event, Events};
use crate::outcome::ComponentOutcome;

/// A conversion of one component takes about ten decisions; more means the prediction does
/// not lead where the decisions go, and the dry run says so instead of looping.
const MAX_DECISIONS: usize = 40;

/// Walks every component as a run would, with nothing changed.
pub(super) async fn walk(
    clients: &Clients,
    view: &mut ConversionView,
    request: &ConvertRequest,
    files: &NodeFiles,
    events: &Events,
    mut report: ConvertReport,
) -> Result<ConvertReport, ConvertError> {
    for component in Component::ALL {
        let outcome = walk_component(clients, view, request, files, component, events).await?;
        let predicted = matches!(outcome, ComponentOutcome::DryRun { .. });
        report.components.push((component, outcome));
        if !predicted {
            break;
        }
    }
    Ok(report)
}

fn is_api_write(step: &ConvertStep) -> bool {
    matches!(
        step,
        ConvertStep::CreateDaemonSet
            | ConvertStep::GateDaemonSet
            | ConvertStep::LabelNode { .. }
            | ConvertStep::UnlabelNode { .. }
            | ConvertStep::DeleteDaemonSet
    )
}

/// Whether [`perform`] makes `step` as a server-side dry run or only describes it: every API
/// write and file change it makes looks at `request.dry_run`.
fn honours_dry_run(step: &ConvertStep) -> bool {
    is_api_write(step)
        || matches!(
            step,
            ConvertStep::MoveManifestAside
                | ConvertStep::AddPortSharing
                | ConvertStep::RestoreManifest
                | ConvertStep::WriteManifest
                | ConvertStep::RemoveManifest
        )
}

async fn walk_component(
    clients: &Clients,
    view: &mut ConversionView,
    request: &ConvertRequest,
    files: &NodeFiles,
    component: Component,
    events: &Events,
) -> Result<ComponentOutcome, ConvertError> {
    let started = Instant::now();
    events.emit(Event::ComponentStarted { component });
    // Nothing is waited for, so no wait can run out of time.
    let far = Timestamp::now() + request.deadline;
    let mut obs = view.observe(component, &request.node, files, far)?;
    let ctx = Context {
        clients,
        request,
        files,
        component,
    };
    let mut writes = 0;
    let mut settled_without_a_step = false;
    let mut outcome = None;
    for _ in 0..MAX_DECISIONS {
        let step = next_step(request.direction, &Mode::Forward, &obs);
        if !matches!(step, ConvertStep::Wait { .. }) {
            events.emit(Event::Step {
                component,
                step: step.name().to_string(),
                description: step.to_string(),
            });
        }
        match step {
            ConvertStep::Done { summary } => {
                outcome = Some(ComponentOutcome::DryRun { summary, writes });
                break;
            }
            ConvertStep::Refuse { reason, fix } => {
                outcome = Some(ComponentOutcome::Refused { reason, fix });
                break;
            }
            ConvertStep::Fail { reason } | ConvertStep::RolledBack { reason } => {
                outcome = Some(ComponentOutcome::Refused {
                    reason: format!("a run would fail: {reason}"),
                    fix: "fix this first; nothing was changed".into(),
                });
                break;
            }
            ConvertStep::Wait { condition, pending } => {
                if settled_without_a_step {
                    outcome = Some(ComponentOutcome::Refused {
                        reason: format!(
                            "the dry run cannot tell how waiting for {condition} would end \
                             ({})",
                            pending.join("; ")
                        ),
                        fix: "run without --dry-run to see; nothing was changed".into(),
                    });
                    break;
                }
                events.emit(Event::Waiting {
                    component,
                    step: "wait".into(),
                    condition,
                    pending: Vec::new(),
                });
                obs = settle(obs);
                settled_without_a_step = true;
            }
            action if !honours_dry_run(&action) => {
                // A step this walk does not know to make safely as a dry run is only named.
                settled_without_a_step = false;
                events.emit(Event::Action {
                    component,
                    step: action.name().to_string(),
                    detail: format!("would {action} (dry run: not done)"),
                    dry_run: true,
                });
                obs = assume(obs, &action, files, request)?;
            }
            action => {
                settled_without_a_step = false;
                let detail = match perform(&ctx, view, &action).await {
                    Ok(detail) => detail,
                    // What the API server (or the node) would refuse is what a dry run is for.
                    Err(e) => {
                        outcome = Some(ComponentOutcome::Refused {
                            reason: format!("{} would fail: {e}", action.name()),
                            fix: "nothing was changed".into(),
                        });
                        break;
                    }
                };
                let detail = if is_api_write(&action) {
                    writes += 1;
                    format!("accepted by the API server's dry run: {detail}")
                } else {
                    detail
                };
                events.emit(Event::Action {
                    component,
                    step: action.name().to_string(),
                    detail,
                    dry_run: true,
                });
                obs = assume(obs, &action, files, request)?;
            }
        }
    }
    let outcome = outcome.unwrap_or_else(|| ComponentOutcome::Refused {
        reason: format!("the dry run of {component} did not come to an end"),
        fix: "run without --dry-run to see; nothing was changed".into(),
    });
    events.component_finished(component, &outcome, started);
    Ok(outcome)
}

/// The observation after `step` took effect.
fn assume(
    mut obs: NodeComponent,
    step: &ConvertStep,
    files: &NodeFiles,
    request: &ConvertRequest,
) -> Result<NodeComponent, ConvertError> {
    match step {
        ConvertStep::CreateDaemonSet => {
            if let Some(pod) = files.manifest(obs.component)? {
                let options = DaemonSetOptions {
                    certs_in_secrets: request.certs_in_secrets,
                };
                let ds = self_hosted_daemonset(obs.component, &pod, &options)?;
                obs.daemonset = Some(DaemonSetObservation::from_daemonset(&ds, &[]));
                obs.daemonset_gated = true;
            }
        }
        ConvertStep::GateDaemonSet => obs.daemonset_gated = true,
        ConvertStep::LabelNode { node } if !obs.gated_nodes.contains(node) => {
            obs.gated_nodes.push(node.clone());
            obs.gated_nodes.sort();
        }
        ConvertStep::UnlabelNode { node } => obs.gated_nodes.retain(|n| n != node),
        ConvertStep::MoveManifestAside => {
            obs.manifest_on_disk = false;
            obs.manifest_in_backup = true;
        }
        ConvertStep::AddPortSharing => {
            obs.manifest_on_disk = true;
            obs.manifest_in_backup = true;
            obs.static_permits_port_sharing = true;
            obs.static_port_sharing_added = true;
        }
        ConvertStep::RestoreManifest => {
            obs.manifest_on_disk = true;
            obs.static_port_sharing_added = false;
        }
        ConvertStep::WriteManifest => obs.manifest_on_disk = true,
        ConvertStep::RemoveManifest => obs.manifest_on_disk = false,
        ConvertStep::DeleteDaemonSet => {
            obs.daemonset = None;
            obs.daemonset_gated = false;
        }
        ConvertStep::HandOverLease(_) => obs.lease_hand_over = None,
        _ => {}
    }
    Ok(obs)
}

/// A pod predicted to run and serve on `node`.
fn predicted_pod(name: &str, node: &str) -> PodObservation {
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": { "nodeName": node, "containers": [{ "name": name }] },
        "status": {
            "phase": "Running",
            "conditions": [{ "type": "Ready", "status": "True" }],
            "containerStatuses": [{
                "name": name, "ready": true, "restartCount": 0, "image": "", "imageID": "",
                "state": { "running": {} },
            }],
        },
    }))
    // A constant that is a valid Pod; were it not, an empty pod would predict "not serving"
    // and the dry run would say it cannot tell how the wait ends.
    .unwrap_or_default();
    PodObservation::from_pod(&pod)
}

/// The observation once the cluster and the kubelet have done what the labels and the
/// manifests directory ask: what every wait of a conversion waits for.
fn settle(mut obs: NodeComponent) -> NodeComponent {
    let node = obs.node.clone();
    let component = obs.component;
    let gated_here = obs.gated_nodes.contains(&node);
    // A standby takes the Lease the stopped process held, and a leader that acquired it in
    // the current second has held it into the next one by then.
    obs.lease_hand_over = None;
    obs.leader = Ok(());
    obs.leader_here_acquired = None;
    if obs
        .daemonset
        .as_ref()
        .is_some_and(|ds| ds.deleting_since.is_some())
    {
        obs.daemonset = None;
    }
    let mut serving_here = false;
    if let Some(ds) = obs.daemonset.as_mut() {
        let runs_here = !obs.daemonset_gated || gated_here;
        // The node's pods are replaced by the one the controller keeps there (if any), started
        // and serving; a pod stuck now made the decision before the wait fail already.
        ds.pods.retain(|p| p.node.as_deref() != Some(node.as_str()));
        if runs_here {
            ds.pods
                .push(predicted_pod(&format!("{}-{node}", ds.name), &node));
            serving_here = true;
        }
    }
    obs.daemonset_pod_serving = if serving_here {
        Ok(())
    } else {
        Err(format!("{node}: no DaemonSet pod"))
    };
    if obs.manifest_on_disk {
        if obs.mirror.is_none() {
            obs.mirror = Some(predicted_pod(&format!("{component}-{node}"), &node));
        }
        obs.mirror_serving = Ok(());
        obs.mirror_permits_port_sharing = obs.static_permits_port_sharing;
    } else {
        obs.mirror = None;
        obs.mirror_serving = Err(format!("{node}: no static pod"));
    }
    obs
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use selfhost_core::conversion::decide::Direction;

    use super::*;

    /// The decisions a dry run takes from `obs`, with its predictions in between (no API).
    fn predicted(
        direction: Direction,
        mut obs: NodeComponent,
        files: &NodeFiles,
        request: &ConvertRequest,
    ) -> (Vec<&'static str>, NodeComponent) {
        let mut steps = Vec::new();
        for _ in 0..MAX_DECISIONS {
            let step = next_step(direction, &Mode::Forward, &obs);
            steps.push(step.name());
            match step {
                ConvertStep::Wait { .. } => obs = settle(obs),
                ConvertStep::Done { .. }
                | ConvertStep::Refuse { .. }
                | ConvertStep::Fail { .. }
                | ConvertStep::RolledBack { .. } => break,
                action => obs = assume(obs, &action, files, request).expect("predicts"),
            }
        }
        (steps, obs)
    }

    /// A node running kubeadm's static scheduler, and its manifests directory.
    fn static_node(port_sharing: bool) -> (tempfile::TempDir, NodeFiles, NodeComponent) {
        let root = tempfile::tempdir().expect("scratch");
        let manifests = root.path().join("manifests");
        std::fs::create_dir(&manifests).expect("dir");
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../selfhost-core/tests/fixtures/kube-scheduler.yaml");
        std::fs::copy(fixture, manifests.join("kube-scheduler.yaml")).expect("copy");
        let files = NodeFiles::open(&manifests).expect("open");
        let now = Timestamp::now();
        let obs = NodeComponent {
            component: Component::Scheduler,
            node: "cp-1".into(),
            now,
            deadline: now + std::time::Duration::from_secs(60),
            manifest_on_disk: true,
            manifest_in_backup: false,
            static_permits_port_sharing: port_sharing,
            static_port_sharing_added: false,
            mirror_permits_port_sharing: port_sharing,
            daemonset: None,
            daemonset_gated: false,
            gated_nodes: Vec::new(),
            mirror: Some(predicted_pod("kube-scheduler-cp-1", "cp-1")),
            mirror_serving: Ok(()),
            daemonset_pod_serving: Err("cp-1: no DaemonSet pod".into()),
            lease_hand_over: None,
            leader: Ok(()),
            leader_here_acquired: None,
        };
        (root, files, obs)
    }

    #[test]
    fn the_prediction_leads_both_ways_to_the_end_with_and_without_port_sharing() {
        for port_sharing in [true, false] {
            let (_root, files, obs) = static_node(port_sharing);
            let request =
                ConvertRequest::new(Direction::ToSelfHosted, "cp-1", &files.manifests_dir);
            let (steps, converted) = predicted(Direction::ToSelfHosted, obs, &files, &request);
            let mut expected = vec![
                "create-daemonset",
                "label-node",
                "wait",
                "move-manifest-aside",
                "wait",
                "done",
            ];
            if !port_sharing {
                // The static pod restarts with port sharing once the DaemonSet pod has its image.
                expected.insert(3, "add-port-sharing");
            }
            assert_eq!(
                steps, expected,
                "to self-hosted, port sharing {port_sharing}"
            );
            let request = ConvertRequest::new(Direction::ToStatic, "cp-1", &files.manifests_dir);
            let (steps, _) = predicted(Direction::ToStatic, converted, &files, &request);
            assert_eq!(
                steps,
                [
                    "write-manifest",
                    "wait",
                    "unlabel-node",
                    "wait",
                    "delete-daemonset",
                    "done"
                ],
                "back to static, port sharing {port_sharing}"
            );
        }
    }

    #[test]
    fn a_pod_stuck_now_is_found_before_any_prediction() {
        let (_root, files, mut obs) = static_node(true);
        let request = ConvertRequest::new(Direction::ToStatic, "cp-1", &files.manifests_dir);
        let mut stuck = predicted_pod("kube-scheduler-cp-1", "cp-1");
        stuck.containers[0].state = selfhost_core::observation::ContainerState::Waiting {
            reason: Some("ErrImagePull".into()),
            message: None,
        };
        obs.mirror = Some(stuck);
        // To static with the DaemonSet serving and the static pod failing to pull.
        let ds = self_hosted_daemonset(
            Component::Scheduler,
            &files
                .manifest(Component::Scheduler)
                .expect("read")
                .expect("manifest"),
            &DaemonSetOptions::default(),
        )
        .expect("DaemonSet");
        obs.daemonset = Some(DaemonSetObservation::from_daemonset(&ds, &[]));
        obs.daemonset_gated = true;
        obs.gated_nodes = vec!["cp-1".into()];
        let (steps, _) = predicted(Direction::ToStatic, obs, &files, &request);
        assert_eq!(steps, ["fail"]);
    }

    #[test]
    fn a_lease_to_hand_over_is_named_first_and_then_taken_as_handed_over() {
        use selfhost_core::conversion::decide::LeaseHandOver;

        let (_root, files, mut obs) = static_node(true);
        obs.lease_hand_over = Some(LeaseHandOver {
            lease: "kube-scheduler".into(),
            uid: None,
            resource_version: "7".into(),
            holder: "cp-1_old".into(),
            why: "its pod is gone".into(),
        });
        obs.leader = Err("the Lease is held by a process that is gone".into());
        assert!(!honours_dry_run(&next_step(
            Direction::ToSelfHosted,
            &Mode::Forward,
            &obs
        )));
        let request = ConvertRequest::new(Direction::ToSelfHosted, "cp-1", &files.manifests_dir);
        let (steps, _) = predicted(Direction::ToSelfHosted, obs, &files, &request);
        assert_eq!(steps.first(), Some(&"hand-over-lease"), "{steps:?}");
        assert_eq!(steps.last(), Some(&"done"), "{steps:?}");
    }
}
