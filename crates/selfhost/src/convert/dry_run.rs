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
use tokio_util::sync::CancellationToken;

use super::action::{Context, perform};
use super::conversion_view::ConversionView;
use super::{ConvertError, ConvertReport, ConvertRequest};
use crate::client::Clients;
use crate::driver::{Acted, Change, Decision, DriveMode, StepName, drive};
use crate::events::Events;
use crate::node_files::NodeFiles;
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
    cancel: &CancellationToken,
    mut report: ConvertReport,
) -> Result<ConvertReport, ConvertError> {
    report.checkpointer = super::checkpointer::prepare(clients, request, true).await?;
    for component in Component::ALL {
        // Nothing is waited for, so no wait can run out of time.
        let far = Timestamp::now() + request.deadline;
        let predicted = view.observe(component, request, files, far)?;
        let mut walk = PredictedConversion {
            ctx: Context {
                clients,
                request,
                files,
                component,
            },
            view: &mut *view,
            predicted,
            writes: 0,
            settled_without_a_step: false,
            decisions: 0,
        };
        let outcome = drive(&mut walk, DriveMode::DryRunPredicted, events, cancel).await?;
        let went_on = matches!(outcome, ComponentOutcome::DryRun { .. });
        report.components.push((component, outcome));
        if !went_on {
            return Ok(report);
        }
    }
    if let Some(removal) = super::checkpointer::finish(clients, request, true).await? {
        report.checkpointer = Some(removal);
    }
    Ok(report)
}

/// One component's conversion decided on a prediction of the node and the cluster: each
/// action is sent as a dry run (or only named) and then assumed to have taken effect, and
/// each wait is assumed to have ended as it waits to.
struct PredictedConversion<'a> {
    ctx: Context<'a>,
    view: &'a mut ConversionView,
    predicted: NodeComponent,
    /// Writes the API server accepted as dry runs.
    writes: usize,
    /// The last decision was a wait and no step was taken since: a second wait means the
    /// prediction cannot tell how it would end.
    settled_without_a_step: bool,
    decisions: usize,
}

impl PredictedConversion<'_> {
    fn no_end(&self) -> ComponentOutcome {
        ComponentOutcome::Refused {
            reason: format!(
                "the dry run of {} did not come to an end",
                self.ctx.component
            ),
            fix: "run without --dry-run to see; nothing was changed".into(),
        }
    }
}

impl Change for PredictedConversion<'_> {
    type Action = ConvertStep;
    type Error = ConvertError;

    fn component(&self) -> Component {
        self.ctx.component
    }

    async fn decide(&mut self) -> Result<(StepName, Decision<ConvertStep>), ConvertError> {
        let step = next_step(self.ctx.request.direction, &Mode::Forward, &self.predicted);
        let name = StepName {
            name: step.name().to_string(),
            description: step.to_string(),
            subject: None,
        };
        self.decisions += 1;
        if self.decisions > MAX_DECISIONS {
            return Ok((name, Decision::End(self.no_end())));
        }
        let decision = match step {
            ConvertStep::Done { summary } => Decision::End(ComponentOutcome::DryRun {
                summary,
                writes: self.writes,
            }),
            ConvertStep::Refuse { reason, fix } => {
                Decision::End(ComponentOutcome::Refused { reason, fix })
            }
            ConvertStep::Fail { reason } | ConvertStep::RolledBack { reason } => {
                Decision::End(ComponentOutcome::Refused {
                    reason: format!("a run would fail: {reason}"),
                    fix: "fix this first; nothing was changed".into(),
                })
            }
            ConvertStep::Wait { condition, pending } if self.settled_without_a_step => {
                Decision::End(ComponentOutcome::Refused {
                    reason: format!(
                        "the dry run cannot tell how waiting for {condition} would end ({})",
                        pending.join("; ")
                    ),
                    fix: "run without --dry-run to see; nothing was changed".into(),
                })
            }
            ConvertStep::Wait { condition, .. } => Decision::Wait {
                condition,
                pending: Vec::new(),
                wake: Instant::now(),
            },
            action => Decision::Act(action),
        };
        Ok((name, decision))
    }

    async fn act(&mut self, action: &ConvertStep) -> Result<Acted, ConvertError> {
        self.settled_without_a_step = false;
        let detail = if honours_dry_run(action) {
            match perform(&self.ctx, self.view, action).await {
                Ok(detail) if is_api_write(action) => {
                    self.writes += 1;
                    format!("accepted by the API server's dry run: {detail}")
                }
                Ok(detail) => detail,
                // What the API server (or the node) would refuse is what a dry run is for.
                Err(e) => {
                    return Ok(Acted::Ended(ComponentOutcome::Refused {
                        reason: format!("{} would fail: {e}", action.name()),
                        fix: "nothing was changed".into(),
                    }));
                }
            }
        } else {
            // A step this walk does not know to make safely as a dry run is only named.
            format!("would {action} (dry run: not done)")
        };
        self.predicted = assume(
            self.predicted.clone(),
            action,
            self.ctx.files,
            self.ctx.request,
        )?;
        Ok(Acted::Written { detail })
    }

    async fn read_own_write(&mut self, _: &ConvertStep, _: Instant) {
        // Nothing was written: the prediction took the action's effect in `act`.
    }

    async fn next_change(&mut self, _: Instant) {
        self.predicted = settle(self.predicted.clone());
        self.settled_without_a_step = true;
    }

    fn without_effect(&mut self, _: &StepName) -> Result<Option<ComponentOutcome>, ConvertError> {
        Ok(Some(self.no_end()))
    }
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
                | ConvertStep::WriteFront
                | ConvertStep::RemoveFront
        )
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
                let mut ds = self_hosted_daemonset(obs.component, &pod, &options)?;
                super::front::behind_front(request, obs.component, &mut ds);
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
        ConvertStep::WriteFront | ConvertStep::RemoveFront => {
            if let Some(front) = obs.front.as_mut() {
                front.manifest_on_disk = matches!(step, ConvertStep::WriteFront);
            }
        }
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
    // The checkpointer keeps a pod that serves, after its soak.
    if obs.checkpoint_kept.is_some() {
        obs.checkpoint_kept = Some(obs.daemonset_pod_serving.clone());
    }
    // The kubelet runs the front whose manifest is there, and stops one whose is not.
    if let Some(front) = obs.front.as_mut() {
        front.mirror = front
            .manifest_on_disk
            .then(|| predicted_pod(&format!("selfhost-front-{node}"), &node));
        front.running = if front.manifest_on_disk {
            Ok(())
        } else {
            Err(format!("{node}: no front"))
        };
    }
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
            checkpoint_kept: None,
            lease_hand_over: None,
            leader: Ok(()),
            leader_here_acquired: None,
            front: None,
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
