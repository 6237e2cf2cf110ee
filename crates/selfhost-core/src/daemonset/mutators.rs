//! Pod-spec mutators that turn a static control-plane pod into one that can run on every
//! control-plane node. Each takes and returns an owned spec and is idempotent.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, PodSpec, Probe, Toleration,
};

use crate::command_line;
use crate::control_plane::{HOST_IP_ENV, SHUTDOWN_SEND_RETRY_AFTER, supports_send_retry_after};
use crate::version::image_version;

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
/// while reporting not ready, and (where its version knows the flag, from its image's tag)
/// answers requests that arrive during its shutdown with 429 and `Retry-After` so clients
/// retry (on another apiserver) instead of failing. An image whose tag is not a version gets
/// no flag it may not know: an unknown flag stops the apiserver at start.
pub fn shut_down_gracefully(mut spec: PodSpec) -> PodSpec {
    if let Some(container) = spec.containers.first_mut() {
        let command = container.command.take().unwrap_or_default();
        let mut command =
            command_line::set_flag(&command, "shutdown-delay-duration", SHUTDOWN_DELAY);
        let knows_retry_after = container
            .image
            .as_deref()
            .and_then(image_version)
            .is_some_and(|v| supports_send_retry_after(&v));
        if knows_retry_after {
            command = command_line::set_flag(&command, SHUTDOWN_SEND_RETRY_AFTER, "true");
        }
        container.command = Some(command);
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

    provide_host_ip(container);
    if let Some(address) = old_address {
        retarget_probes(container, &address);
    }
    spec
}

/// Gives the container `HOST_IP`, its node's IP from the downward API.
fn provide_host_ip(container: &mut Container) {
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
}

/// Makes a component that listens on one node's own address (`--bind-address=<node IP>`, set
/// where several things share a host or the operator limits what listens where) listen on the
/// address of whichever node runs it, from the downward API: a template for every node must
/// not carry one node's address. Probes that targeted that address target the pod's IP (no
/// host), which for a host-network pod is its node's. The loopback and wildcard addresses are
/// the same on every node and stay.
pub fn bind_host_ip(mut spec: PodSpec) -> PodSpec {
    let Some(container) = spec.containers.first_mut() else {
        return spec;
    };
    let Some(address) = container
        .command
        .as_deref()
        .and_then(|cmd| command_line::flag_value(cmd, "bind-address"))
        .map(str::to_string)
    else {
        return spec;
    };
    let node_specific = address.parse::<std::net::IpAddr>().is_ok_and(|ip| {
        !ip.is_unspecified()
            && ip != std::net::IpAddr::from([127, 0, 0, 1])
            && ip != std::net::IpAddr::from(std::net::Ipv6Addr::LOCALHOST)
    });
    if !node_specific {
        return spec;
    }
    let command = container.command.take().unwrap_or_default();
    container.command = Some(command_line::set_flag(
        &command,
        "bind-address",
        &format!("$({HOST_IP_ENV})"),
    ));
    provide_host_ip(container);
    let probes = [
        &mut container.liveness_probe,
        &mut container.readiness_probe,
        &mut container.startup_probe,
    ];
    for probe in probes.into_iter().flatten() {
        if let Some(http) = probe.http_get.as_mut()
            && http.host.as_deref() == Some(address.as_str())
        {
            http.host = None;
        }
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
