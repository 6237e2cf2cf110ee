//! Health probes of the control-plane containers, with kubeadm's paths, ports and timings.

use k8s_openapi::api::core::v1::{HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::component::Component;
use crate::config::ClusterConfig;

use super::node::{AdvertiseAddress, NodeContext};

/// Seconds between probes (and the initial delay, which skips one period).
const PERIOD_SECONDS: i32 = 10;
/// How long one probe may take.
const TIMEOUT_SECONDS: i32 = 15;

/// One HTTPS GET probe; `host` `None` makes the kubelet use the pod's IP (the node's, with
/// host networking).
fn https_get(
    host: Option<String>,
    path: &str,
    port: u16,
    initial_delay: i32,
    failure_threshold: i32,
    period: i32,
) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            host,
            path: Some(path.to_string()),
            port: IntOrString::Int(i32::from(port)),
            scheme: Some("HTTPS".to_string()),
            ..HTTPGetAction::default()
        }),
        // kubeadm leaves a zero delay out of its manifests; so do we.
        initial_delay_seconds: (initial_delay > 0).then_some(initial_delay),
        timeout_seconds: Some(TIMEOUT_SECONDS),
        failure_threshold: Some(failure_threshold),
        period_seconds: Some(period),
        ..Probe::default()
    }
}

/// kubeadm's probe address for a bind address: the unspecified addresses cannot be probed, so
/// the kubelet's default (the pod IP) is used instead.
fn probe_host(bind_address: &str) -> Option<String> {
    match bind_address {
        "0.0.0.0" | "::" | "" => None,
        address => Some(address.to_string()),
    }
}

/// The probes' target: host, path for liveness and startup, and port.
struct Target {
    host: Option<String>,
    health_path: &'static str,
    port: u16,
}

fn target(component: Component, config: &ClusterConfig, node: &NodeContext) -> Target {
    match component {
        Component::ApiServer => Target {
            // A probe cannot read the downward API, so without a known address it goes to
            // loopback, which the API server also listens on.
            host: match node.advertise_address(config) {
                AdvertiseAddress::Ip(ip) => probe_host(&ip.to_string()),
                AdvertiseAddress::HostIp => Some("127.0.0.1".to_string()),
            },
            health_path: "/livez",
            port: config.local_api_endpoint.bind_port,
        },
        Component::ControllerManager | Component::Scheduler => Target {
            host: config
                .component(component)
                .extra_arg("bind-address")
                .map_or_else(|| Some("127.0.0.1".to_string()), probe_host),
            health_path: "/healthz",
            port: component.default_secure_port(),
        },
    }
}

/// Liveness: restart after 8 failures 10 s apart.
pub(super) fn liveness(component: Component, config: &ClusterConfig, node: &NodeContext) -> Probe {
    let t = target(component, config, node);
    https_get(
        t.host,
        t.health_path,
        t.port,
        PERIOD_SECONDS,
        8,
        PERIOD_SECONDS,
    )
}

/// Readiness (API server only, on `/readyz`): every second, from the start, so clients and
/// load balancers see a ready API server as soon as it is one.
pub(super) fn readiness(
    component: Component,
    config: &ClusterConfig,
    node: &NodeContext,
) -> Option<Probe> {
    (component == Component::ApiServer).then(|| {
        let t = target(component, config, node);
        https_get(t.host, "/readyz", t.port, 0, 3, 1)
    })
}

/// Startup: enough failures to cover the configured health-check timeout (4 minutes by
/// default, i.e. 24 probes 10 s apart) before liveness takes over.
pub(super) fn startup(component: Component, config: &ClusterConfig, node: &NodeContext) -> Probe {
    let t = target(component, config, node);
    let period = PERIOD_SECONDS.unsigned_abs();
    let failures = config
        .health_check_timeout_seconds
        .div_ceil(u64::from(period));
    let failures = i32::try_from(failures).unwrap_or(i32::MAX);
    https_get(
        t.host,
        t.health_path,
        t.port,
        PERIOD_SECONDS,
        failures,
        PERIOD_SECONDS,
    )
}
