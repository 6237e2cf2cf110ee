//! Control-plane pod specs, as current kubeadm (v1.31–v1.33, `phases/controlplane`) renders
//! its static pods, plus `--permit-port-sharing`.
//!
//! Everything is a pure function of the configuration, the node and the version: no host
//! filesystem probing (what kubeadm looks up on the host comes in through [`NodeContext`]) and
//! no process environment (kubeadm copies its own `*_proxy` variables; use v1beta4
//! `extraEnvs` instead). Flags, volumes and mounts are sorted, so the same inputs always give
//! the same pod.

mod flags;
mod node;
mod probes;
mod volumes;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, Pod, PodSecurityContext, PodSpec,
    ResourceRequirements, SeccompProfile,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::component::{Component, NAMESPACE};
use crate::config::ClusterConfig;
use crate::version::KubeVersion;

pub use flags::{
    CONTROLLER_MANAGER_KUBECONFIG, KUBERNETES_DIR, PERMIT_PORT_SHARING, PORT_SHARING_SINCE_MINOR,
    SCHEDULER_KUBECONFIG, SEND_RETRY_AFTER_SINCE_MINOR, SHUTDOWN_SEND_RETRY_AFTER, command,
    supports_port_sharing, supports_send_retry_after,
};
pub use node::{
    AdvertiseAddress, DEFAULT_CA_TRUST_DIRS, HOST_IP_ENV, KUBEADM_CA_TRUST_DIRS, NodeContext,
};
pub use volumes::{
    CA_CERTS_VOLUME, FLEXVOLUME_VOLUME, K8S_CERTS_VOLUME, KUBECONFIG_VOLUME, volume_name_for_dir,
};

/// Annotation kubeadm puts on the API server pod: the endpoint (`ip:port`) it advertises.
pub const ADVERTISE_ADDRESS_ANNOTATION: &str =
    "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint";
/// Label that names the component on its pods (kubeadm's).
pub const COMPONENT_LABEL: &str = "component";
/// Label that marks control-plane pods, with value [`CONTROL_PLANE_TIER`] (kubeadm's).
pub const TIER_LABEL: &str = "tier";
/// Value of [`TIER_LABEL`].
pub const CONTROL_PLANE_TIER: &str = "control-plane";
/// Priority class of the control-plane pods (kubeadm's).
pub const PRIORITY_CLASS: &str = "system-node-critical";

/// The component's image: `<imageRepository>/<component>:<tag>`, e.g.
/// `registry.k8s.io/kube-apiserver:v1.33.1`.
pub fn image(component: Component, config: &ClusterConfig, version: &KubeVersion) -> String {
    format!(
        "{}/{}:{}",
        config.image_repository,
        component.name(),
        version.image_tag()
    )
}

fn cpu_request(component: Component) -> &'static str {
    match component {
        Component::ApiServer => "250m",
        Component::ControllerManager => "200m",
        Component::Scheduler => "100m",
    }
}

/// The container's environment: `HOST_IP` when the advertise address comes from it, then the
/// user's `extraEnvs`, a later variable replacing an earlier one of the same name in place.
fn env(component: Component, config: &ClusterConfig, node: &NodeContext) -> Vec<EnvVar> {
    let mut env: Vec<EnvVar> = Vec::new();
    if component == Component::ApiServer
        && node.advertise_address(config) == AdvertiseAddress::HostIp
    {
        env.push(EnvVar {
            name: HOST_IP_ENV.to_string(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "status.hostIP".to_string(),
                    ..ObjectFieldSelector::default()
                }),
                ..EnvVarSource::default()
            }),
            ..EnvVar::default()
        });
    }
    for var in &config.component(component).extra_envs {
        match env.iter_mut().find(|e| e.name == var.name) {
            Some(existing) => *existing = var.clone(),
            None => env.push(var.clone()),
        }
    }
    env
}

fn annotations(
    component: Component,
    config: &ClusterConfig,
    node: &NodeContext,
) -> Option<BTreeMap<String, String>> {
    // Only a known address makes a meaningful endpoint; `$(HOST_IP)` is not expanded in
    // annotations.
    match (component, node.advertise_address(config)) {
        (Component::ApiServer, AdvertiseAddress::Ip(ip)) => {
            let endpoint = SocketAddr::new(ip, config.local_api_endpoint.bind_port);
            Some(BTreeMap::from([(
                ADVERTISE_ADDRESS_ANNOTATION.to_string(),
                endpoint.to_string(),
            )]))
        }
        _ => None,
    }
}

/// The static pod kubeadm would write for `component` on the node described by `node`, for
/// Kubernetes `version` (which sets the image tag; the configuration's own
/// `kubernetesVersion` is not used, so plans can render a target version).
pub fn static_pod(
    component: Component,
    config: &ClusterConfig,
    node: &NodeContext,
    version: &KubeVersion,
) -> Pod {
    let (volumes, volume_mounts) = volumes::volumes(component, config, node);
    let env = env(component, config, node);
    let container = Container {
        name: component.name().to_string(),
        image: Some(image(component, config, version)),
        image_pull_policy: Some("IfNotPresent".to_string()),
        command: Some(command(component, config, node, version)),
        env: (!env.is_empty()).then_some(env),
        liveness_probe: Some(probes::liveness(component, config, node)),
        readiness_probe: probes::readiness(component, config, node),
        startup_probe: Some(probes::startup(component, config, node)),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([(
                "cpu".to_string(),
                Quantity(cpu_request(component).to_string()),
            )])),
            ..ResourceRequirements::default()
        }),
        volume_mounts: Some(volume_mounts),
        ..Container::default()
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(component.name().to_string()),
            namespace: Some(NAMESPACE.to_string()),
            labels: Some(BTreeMap::from([
                (COMPONENT_LABEL.to_string(), component.name().to_string()),
                (TIER_LABEL.to_string(), CONTROL_PLANE_TIER.to_string()),
            ])),
            annotations: annotations(component, config, node),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: vec![container],
            host_network: Some(true),
            priority_class_name: Some(PRIORITY_CLASS.to_string()),
            security_context: Some(PodSecurityContext {
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_string(),
                    ..SeccompProfile::default()
                }),
                ..PodSecurityContext::default()
            }),
            volumes: Some(volumes),
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// The static pods of all three components, in kubeadm's (and the upgrade's) order.
pub fn static_pods(
    config: &ClusterConfig,
    node: &NodeContext,
    version: &KubeVersion,
) -> Vec<(Component, Pod)> {
    Component::ALL
        .into_iter()
        .map(|c| (c, static_pod(c, config, node, version)))
        .collect()
}
