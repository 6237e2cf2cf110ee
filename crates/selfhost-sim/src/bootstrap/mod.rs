//! The objects a simulated cluster starts with: its nodes, a kubeadm-like control plane as
//! static pod manifests, the `kubeadm-config` ConfigMap, and — in self-hosted mode — the
//! control-plane DaemonSets (behind node-local API fronts, when asked).
//!
//! The control-plane templates repeat, in small, what the product renders
//! (`selfhost manifests`), because the simulator must not depend on the product it tests;
//! a test in the CLI crate checks the two stay alike.

mod control_plane;
mod front;

use serde_json::{Value, json};

pub use control_plane::{
    COMPONENTS, daemonset, kubeadm_config_map, mirror_name, secure_port, static_pod,
};
pub use front::{FRONT_ANNOTATION, FrontLayout};

/// How the control plane of a simulated cluster runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootstrapMode {
    /// kubeadm's layout: static pods from each control-plane node's manifests directory.
    Static,
    /// Converted: `self-hosted-<component>` DaemonSets in kube-system.
    SelfHosted,
}

impl std::str::FromStr for BootstrapMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "static" => Ok(BootstrapMode::Static),
            "self-hosted" => Ok(BootstrapMode::SelfHosted),
            other => Err(format!(
                "unknown mode {other:?}: expected static or self-hosted"
            )),
        }
    }
}

/// What a node is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeRole {
    /// Runs the control plane (labelled and tainted `node-role.kubernetes.io/control-plane`).
    ControlPlane,
    /// Runs workloads.
    Worker,
}

/// A node of the simulated cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Node name, e.g. `cp-1`.
    pub name: String,
    /// Control plane or worker.
    pub role: NodeRole,
    /// Its InternalIP (only data: no traffic ever goes there).
    pub ip: String,
}

/// The nodes of a cluster with `control_planes` control-plane nodes `cp-1..` and `workers`
/// workers `worker-1..`. Control-plane nodes get addresses in 10.0.0.0/16 from 10.0.0.11,
/// workers in 10.1.0.0/16 from 10.1.0.11 (room for thousands of each).
pub fn node_specs(control_planes: usize, workers: usize) -> Vec<NodeSpec> {
    let ip = |network: u32, i: usize| {
        let host = u32::try_from(i).unwrap_or(u32::MAX).saturating_add(10);
        format!("10.{network}.{}.{}", host / 256, host % 256)
    };
    let cps = (1..=control_planes).map(|i| NodeSpec {
        name: format!("cp-{i}"),
        role: NodeRole::ControlPlane,
        ip: ip(0, i),
    });
    let ws = (1..=workers).map(|i| NodeSpec {
        name: format!("worker-{i}"),
        role: NodeRole::Worker,
        ip: ip(1, i),
    });
    cps.chain(ws).collect()
}

/// The Node object of `spec`, Ready, with a kubelet of `kubelet_version`.
pub fn node_object(spec: &NodeSpec, kubelet_version: &str, now: &str) -> Value {
    let mut labels = json!({
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    });
    let mut taints = json!([]);
    if spec.role == NodeRole::ControlPlane {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
        taints =
            json!([{ "key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule" }]);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": { "name": spec.name, "labels": labels },
        "spec": { "taints": taints },
        "status": {
            "addresses": [
                { "type": "InternalIP", "address": spec.ip },
                { "type": "Hostname", "address": spec.name },
            ],
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }],
            "nodeInfo": {
                "kubeletVersion": kubelet_version,
                "kubeProxyVersion": kubelet_version,
                "containerRuntimeVersion": "containerd://2.0.0",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "Simulated Linux",
                "kernelVersion": "6.1.0-sim",
            },
            "capacity": { "cpu": "4", "memory": "16Gi", "pods": "110" },
            "allocatable": { "cpu": "4", "memory": "16Gi", "pods": "110" },
        },
    })
}

#[cfg(test)]
mod tests;
