//! A conversion's actions: each [`ConvertStep`] that changes something, carried out on the
//! cluster (API writes, with `--dry-run` as server-side dry runs) and on the node's files
//! (with `--dry-run`, only described).

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use selfhost_core::Component;
use selfhost_core::component::NAMESPACE;
use selfhost_core::conversion::decide::ConvertStep;
use selfhost_core::conversion::{NODE_GATE_VALUE, gate_daemonset, node_gate_label};
use serde_json::json;

use super::conversion_view::ConversionView;
use super::{ConvertError, ConvertRequest, to_self_hosted, to_static};
use crate::api_call::FailureKind;
use crate::api_write::FIELD_MANAGER;
use crate::client::Clients;
use crate::node_files::NodeFiles;
use crate::retry::with_retries;

/// What every action of one component's conversion needs.
pub(super) struct Context<'a> {
    pub(super) clients: &'a Clients,
    pub(super) request: &'a ConvertRequest,
    pub(super) files: &'a NodeFiles,
    pub(super) component: Component,
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
    let superseded = |e: &crate::api_call::ApiCallError| {
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
        | ConvertStep::RemoveFront
            if request.dry_run =>
        {
            return Ok(describe_file_step(files, component, step));
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
        ConvertStep::WriteFront => {
            let live = view.daemonset(component);
            let node_ip = view.node_ip(&request.node);
            let pod = super::front::front_pod(request, live.as_deref(), node_ip, files)?;
            let args = pod
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.args.as_ref())
                .map(|a| a.join(" "))
                .unwrap_or_default();
            if request.dry_run {
                format!(
                    "would write {} running `selfhost {args}` (dry run: not written)",
                    files.front_path().display()
                )
            } else {
                let path = files.write_front(&pod)?;
                format!("wrote {}: `selfhost {args}`", path.display())
            }
        }
        ConvertStep::RemoveFront => {
            files.remove_front()?;
            format!(
                "removed {}: the front drains its open connections and stops",
                files.front_path().display()
            )
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
                crate::api_write::perform(client, &step, |_| None, &request.retry, false).await
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

/// What a file step would do, in words (with `--dry-run`, instead of doing it).
pub(super) fn describe_file_step(
    files: &NodeFiles,
    component: Component,
    step: &ConvertStep,
) -> String {
    let manifest = files.manifest_path(component);
    let backup = files.backup_path(component);
    match step {
        ConvertStep::MoveManifestAside => format!(
            "would move {} to {} (dry run: not moved)",
            manifest.display(),
            backup.display()
        ),
        ConvertStep::RestoreManifest => format!(
            "would copy {} back to {} (dry run: not copied)",
            backup.display(),
            manifest.display()
        ),
        ConvertStep::RemoveManifest => {
            format!("would remove {} (dry run: not removed)", manifest.display())
        }
        ConvertStep::RemoveFront => format!(
            "would remove {} (dry run: not removed)",
            files.front_path().display()
        ),
        ConvertStep::AddPortSharing => format!(
            "would add --permit-port-sharing=true to {} and keep the original as {}, restarting \
             the static pod (dry run: not written)",
            manifest.display(),
            backup.display()
        ),
        other => format!("would {other} (dry run)"),
    }
}
