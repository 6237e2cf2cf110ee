//! Pod-spec mutators that turn a static control-plane pod into one that can run on every
//! control-plane node. Each takes and returns an owned spec and is idempotent.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec, Probe, Toleration,
};

use crate::command_line;
use crate::control_plane::HOST_IP_ENV;

/// Node label and taint key of control-plane nodes (Kubernetes ≥ 1.20).
pub const CONTROL_PLANE_NODE_LABEL: &str = "node-role.kubernetes.io/control-plane";
/// The pre-1.20 name of the same role; clusters upgraded from old releases may still taint it.
pub const LEGACY_MASTER_LABEL: &str = "node-role.kubernetes.io/master";

/// Runs the pod only on control-plane nodes.
pub fn select_control_plane_nodes(mut spec: PodSpec) -> PodSpec {
    spec.node_selector
        .get_or_insert_with(Default::default)
        .insert(CONTROL_PLANE_NODE_LABEL.to_string(), String::new());
    spec
}

/// Tolerates the `NoSchedule` taint of control-plane nodes under its current and its legacy
/// name. Tolerations already present are not added twice.
pub fn tolerate_control_plane_taints(mut spec: PodSpec) -> PodSpec {
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for key in [CONTROL_PLANE_NODE_LABEL, LEGACY_MASTER_LABEL] {
        let wanted = Toleration {
            key: Some(key.to_string()),
            operator: Some("Exists".to_string()),
            effect: Some("NoSchedule".to_string()),
            ..Toleration::default()
        };
        if !tolerations.contains(&wanted) {
            tolerations.push(wanted);
        }
    }
    spec
}

/// Host-network pods need `ClusterFirstWithHostNet` to resolve cluster DNS names.
pub fn use_host_network_dns(mut spec: PodSpec) -> PodSpec {
    spec.dns_policy = Some("ClusterFirstWithHostNet".to_string());
    spec
}

/// How long a stopping kube-apiserver keeps serving after SIGTERM, with `/readyz` failing, so
/// that a load balancer (or the kubelet's readiness probe) takes it out of rotation before it
/// stops listening. Five seconds covers the usual health-check interval of a load balancer in
/// front of several control-plane nodes (kubeadm's HA guide checks every 2–3 s).
pub const SHUTDOWN_DELAY: &str = "5s";
/// Grace period of kube-apiserver pods: the shutdown delay, then time for in-flight requests
/// to finish (kube-apiserver's own default request timeout is 60 s, but watches are cut at
/// shutdown and unary requests finish in well under a second), with room to spare.
pub const APISERVER_GRACE_SECONDS: i64 = 30;

/// Lets a stopping kube-apiserver leave gracefully: it keeps serving for [`SHUTDOWN_DELAY`]
/// while reporting not ready, and answers requests that arrive during its shutdown with 429
/// and `Retry-After` so clients retry (on another apiserver) instead of failing.
pub fn shut_down_gracefully(mut spec: PodSpec) -> PodSpec {
    if let Some(container) = spec.containers.first_mut() {
        let command = container.command.take().unwrap_or_default();
        let command = command_line::set_flag(&command, "shutdown-delay-duration", SHUTDOWN_DELAY);
        container.command = Some(command_line::set_flag(
            &command,
            "shutdown-send-retry-after",
            "true",
        ));
    }
    spec.termination_grace_period_seconds = Some(APISERVER_GRACE_SECONDS);
    spec
}

/// Makes each apiserver advertise its own node's IP (from the downward API) instead of the
/// address of the node the manifest was rendered for — kubeadm v1.9's multi-master bug.
/// Probes that targeted that fixed address target the loopback address instead, as the probes
/// of a manifest rendered without a known address do, so that both paths give one template.
pub fn advertise_host_ip(mut spec: PodSpec) -> PodSpec {
    let Some(container) = spec.containers.first_mut() else {
        return spec;
    };
    let old_address = container
        .command
        .as_deref()
        .and_then(|cmd| command_line::flag_value(cmd, "advertise-address"))
        .map(str::to_string);
    let command = container.command.take().unwrap_or_default();
    container.command = Some(command_line::set_flag(
        &command,
        "advertise-address",
        &format!("$({HOST_IP_ENV})"),
    ));

    let env = container.env.get_or_insert_with(Vec::new);
    env.retain(|var| var.name != HOST_IP_ENV);
    // The variable must precede any use in the command; putting it first keeps that true.
    env.insert(
        0,
        EnvVar {
            name: HOST_IP_ENV.to_string(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "status.hostIP".to_string(),
                    api_version: Some("v1".to_string()),
                }),
                ..EnvVarSource::default()
            }),
            value: None,
        },
    );
    if let Some(address) = old_address {
        retarget_probes(container, &address);
    }
    spec
}

fn retarget_probes(container: &mut Container, address: &str) {
    let probes = [
        &mut container.liveness_probe,
        &mut container.readiness_probe,
        &mut container.startup_probe,
    ];
    for probe in probes.into_iter().flatten() {
        retarget_probe(probe, address);
    }
}

fn retarget_probe(probe: &mut Probe, address: &str) {
    if let Some(http) = probe.http_get.as_mut()
        && http.host.as_deref() == Some(address)
    {
        let loopback = if address.contains(':') {
            "::1"
        } else {
            "127.0.0.1"
        };
        http.host = Some(loopback.to_string());
    }
}
