//! The backup DaemonSet the pivot creates.

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

use super::annotations::BACKUP_CREATED_AT;
use crate::backup::{BackupError, derive_backup};
use crate::command_line;
use crate::component::{Component, NAMESPACE};
use crate::control_plane::PERMIT_PORT_SHARING;
use crate::daemonset::{elect_promptly, self_hosted_labels};
use crate::disruption::{knows_port_sharing, permits_port_sharing};
use crate::front::{FrontLayout, listening_on};
use crate::observation::DaemonSetObservation;
use crate::version::KubeVersion;

/// The backup of the live real DaemonSet, as [`derive_backup`] makes it, stamped with
/// [`BACKUP_CREATED_AT`] (`now`, the engine's clock).
///
/// Two deliberate differences from the live template. For the controller-manager and the
/// scheduler, the backup's container elects on the clock selfhost's templates set (a retry
/// period of 500 ms), so that the hand-over from the old leader is as prompt as the later
/// one. And when the live component does not pass
/// `--permit-port-sharing=true` but its version knows the flag, the backup's container gets
/// it. The backup still cannot bind next to the old pod (sharing needs both sockets to ask
/// for it), but once the old pod is gone it can serve next to the new pods, which the target
/// template makes share: without this the new pods would crash-loop on the backup's port and
/// the rollout could never complete. The original template recorded on the backup stays the
/// live one, so a rollback restores exactly what ran before.
///
/// Behind the node's API front (`front`, the layout the real DaemonSet's annotation names) the
/// backup's kube-apiserver listens on the layout's backup address, with its probes aimed there
/// ([`listening_on`]): it never shares a socket with the real one, answers its own probes, and
/// the front passes it connections only while its `/readyz` passes. The backup keeps the
/// annotation, so that it says by itself where its pods listen.
pub fn backup_daemonset(
    real: &DaemonSetObservation,
    component: Component,
    target: &KubeVersion,
    now: Timestamp,
    front: Option<FrontLayout>,
) -> Result<DaemonSet, BackupError> {
    let live = DaemonSet {
        metadata: ObjectMeta {
            name: Some(real.name.clone()),
            namespace: Some(NAMESPACE.to_string()),
            annotations: Some(real.annotations.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(DaemonSetSpec {
            selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector {
                match_labels: Some(self_hosted_labels(component)),
                match_expressions: None,
            },
            template: real.template.clone(),
            update_strategy: real.update_strategy.clone(),
            min_ready_seconds: real.min_ready_seconds,
            revision_history_limit: real.revision_history_limit,
        }),
        status: None,
    };
    let mut backup = derive_backup(&live, component, target)?;
    backup
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(
            BACKUP_CREATED_AT.to_string(),
            crate::observation::time::format(now),
        );
    if let Some(spec) = backup.spec.as_mut()
        && !permits_port_sharing(&real.template, component)
        && knows_port_sharing(&real.template, component)
    {
        spec.template = with_port_sharing(spec.template.clone(), component);
    }
    if let Some(layout) = front
        && component == Component::ApiServer
        && let Some(spec) = backup.spec.as_mut()
        && let Some(pod) = spec.template.spec.take()
    {
        spec.template.spec = Some(listening_on(pod, layout.backup));
        layout.annotate(&mut backup);
    }
    // The backup's controller-manager or scheduler is the standby the first hand-over goes
    // to: it tries as promptly as the target template's will (see `elect_promptly`).
    if let Some(spec) = backup.spec.as_mut()
        && component != Component::ApiServer
        && let Some(pod) = spec.template.spec.take()
    {
        spec.template.spec = Some(elect_promptly(pod));
    }
    Ok(backup)
}

/// Adds `--permit-port-sharing=true` to the component's container: to its command when the
/// command carries the flags (kubeadm's style), else to its args.
pub fn with_port_sharing(mut template: PodTemplateSpec, component: Component) -> PodTemplateSpec {
    let Some(spec) = template.spec.as_mut() else {
        return template;
    };
    let index = spec
        .containers
        .iter()
        .position(|c| c.name == component.name())
        .unwrap_or(0);
    let Some(container) = spec.containers.get_mut(index) else {
        return template;
    };
    let uses_args = container.args.as_ref().is_some_and(|a| !a.is_empty())
        || container.command.as_ref().is_none_or(|c| c.len() <= 1);
    if uses_args {
        let args = container.args.take().unwrap_or_default();
        container.args = Some(command_line::set_flag(&args, PERMIT_PORT_SHARING, "true"));
    } else {
        let command = container.command.take().unwrap_or_default();
        container.command = Some(command_line::set_flag(
            &command,
            PERMIT_PORT_SHARING,
            "true",
        ));
    }
    template
}
