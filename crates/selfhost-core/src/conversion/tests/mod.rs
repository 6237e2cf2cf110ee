//! The manifests both ways (tables and the round-trip law), reading a manifest, and the
//! decisions of one node: one file per thing tested, the fixtures they share here.

mod decisions;
mod parse_manifest;
mod round_trip;
mod secret_files;
mod to_daemonset;

use k8s_openapi::api::core::v1::{Pod, PodSpec};

use crate::component::Component;
use crate::config::{ClusterConfig, ExtraArg};
use crate::control_plane::{NodeContext, static_pod};
use crate::version::KubeVersion;

fn kubeadm_pod(component: Component, minor: u32, extra: Vec<ExtraArg>) -> Pod {
    let version = KubeVersion::parse(&format!("v1.{minor}.2")).expect("version");
    let mut config = ClusterConfig::default_for(&version);
    match component {
        Component::ApiServer => config.api_server.extra_args = extra,
        Component::ControllerManager => config.controller_manager.extra_args = extra,
        Component::Scheduler => config.scheduler.extra_args = extra,
    }
    let node = NodeContext::for_node("10.0.0.11".parse().expect("ip"));
    static_pod(component, &config, &node, &version)
}

fn spec(pod: &Pod) -> &PodSpec {
    pod.spec.as_ref().expect("spec")
}
