//! Static pod manifest → self-hosted DaemonSet, through the DaemonSet builders of
//! [`crate::daemonset`], plus port sharing and the node gate.

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetUpdateStrategy};
use k8s_openapi::api::core::v1::{Pod, PodSpec};

use super::error::ConversionError;
use super::gate::{NODE_GATE_VALUE, node_gate_label};
use crate::command_line;
use crate::component::Component;
use crate::control_plane::PERMIT_PORT_SHARING;
use crate::daemonset::{DaemonSetOptions, build_daemonset};

/// Whether the pod's main container passes `--permit-port-sharing=true`: then a second
/// process of the same component can bind its port beside it (SO_REUSEPORT).
pub fn permits_port_sharing(spec: &PodSpec) -> bool {
    spec.containers.first().is_some_and(|c| {
        let args: Vec<String> = c
            .command
            .iter()
            .flatten()
            .chain(c.args.iter().flatten())
            .cloned()
            .collect();
        command_line::flag_value(&args, PERMIT_PORT_SHARING) == Some("true")
    })
}

/// The pod with `--permit-port-sharing=true` on its main container's command line (set, or
/// added), and nothing else changed: what a static manifest is rewritten to before a
/// hand-over, and what every self-hosted DaemonSet runs.
pub fn with_port_sharing(pod: &Pod) -> Pod {
    let mut pod = pod.clone();
    if let Some(container) = pod.spec.as_mut().and_then(|s| s.containers.first_mut()) {
        let command = container.command.take().unwrap_or_default();
        container.command = Some(command_line::set_flag(
            &command,
            PERMIT_PORT_SHARING,
            "true",
        ));
    }
    pod
}

/// The self-hosted DaemonSet of `component` built from its static pod manifest: kubeadm's
/// mutators (through [`build_daemonset`]), `--permit-port-sharing=true` so that a later
/// hand-over can always start a pod beside a running one, and the node gate so that it runs
/// only on converted nodes.
pub fn self_hosted_daemonset(
    component: Component,
    manifest: &Pod,
    options: &DaemonSetOptions,
) -> Result<DaemonSet, ConversionError> {
    let spec = manifest
        .spec
        .as_ref()
        .ok_or(ConversionError::NoContainer { component })?;
    let container = spec
        .containers
        .first()
        .ok_or(ConversionError::NoContainer { component })?;
    if container.name != component.name() {
        return Err(ConversionError::WrongComponent {
            component,
            found: container.name.clone(),
        });
    }
    let ds = build_daemonset(component, &with_port_sharing(manifest), options)?;
    Ok(gate_daemonset(component, ds))
}

/// Whether the DaemonSet's pods require the node gate of `component`.
pub fn is_gated(component: Component, template_spec: Option<&PodSpec>) -> bool {
    template_spec
        .and_then(|s| s.node_selector.as_ref())
        .and_then(|selector| selector.get(&node_gate_label(component)))
        .is_some_and(|value| value == NODE_GATE_VALUE)
}

/// The DaemonSet with the node gate of `component` in its pod template's `nodeSelector`, and
/// the `OnDelete` update strategy when it was not gated before: adding the gate changes the
/// template, and under `RollingUpdate` that change alone would replace the pod of every node
/// at once. Under `OnDelete` the running pods stay where their node carries the gate.
pub fn gate_daemonset(component: Component, mut ds: DaemonSet) -> DaemonSet {
    let Some(spec) = ds.spec.as_mut() else {
        return ds;
    };
    let was_created_here = ds.metadata.resource_version.is_none();
    if is_gated(component, spec.template.spec.as_ref()) {
        return ds;
    }
    spec.template
        .spec
        .get_or_insert_with(PodSpec::default)
        .node_selector
        .get_or_insert_with(Default::default)
        .insert(node_gate_label(component), NODE_GATE_VALUE.to_string());
    if !was_created_here {
        spec.update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("OnDelete".to_string()),
            rolling_update: None,
        });
    }
    ds
}
