//! The simulator builds its clusters from its own small templates (it must not depend on the
//! product it tests). These checks keep those templates equal to what the product renders, so
//! that a "self-hosted" sim cluster is what `selfhost` itself would have made.

use selfhost_core::config::ClusterConfig;
use selfhost_core::control_plane::{NodeContext, static_pod};
use selfhost_core::daemonset::{DaemonSetOptions, build_daemonset};
use selfhost_core::{Component, KubeVersion};
use selfhost_sim::bootstrap;

const VERSION: &str = "v1.33.1";

fn rendered(component: Component, node: &NodeContext) -> k8s_openapi::api::core::v1::Pod {
    let version = KubeVersion::parse(VERSION).expect("version");
    static_pod(
        component,
        &ClusterConfig::default_for(&version),
        node,
        &version,
    )
}

#[test]
fn sim_static_pods_are_kubeadms() {
    let node = NodeContext::for_node("10.0.0.11".parse().expect("ip"));
    for component in Component::ALL {
        let ours = serde_json::to_value(rendered(component, &node)).expect("json");
        let sims = bootstrap::static_pod(component.name(), VERSION, "10.0.0.11", true);
        assert_eq!(sims, ours, "{component}");
    }
}

#[test]
fn sim_daemonsets_are_what_selfhost_renders() {
    for component in Component::ALL {
        let pod = rendered(component, &NodeContext::default());
        let ds = build_daemonset(component, &pod, &DaemonSetOptions::default()).expect("builds");
        let ours = serde_json::to_value(ds).expect("json");
        let sims = bootstrap::daemonset(component.name(), VERSION, true);
        assert_eq!(sims, ours, "{component}");
    }
}
