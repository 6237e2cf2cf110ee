//! What a kubelet says about its node: the Node it registers, its conditions with heartbeat
//! times, and its Lease in `kube-node-lease` (renewed every 10 s by default).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;

use super::config::KubeletConfig;
use crate::controllers::clock;

/// The namespace of node Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// What the kubelet reports about its own health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeHealth {
    /// Everything works.
    Ready,
    /// The kubelet runs but cannot run pods (its container runtime is down).
    NotReady,
}

/// The node's conditions as the kubelet posts them at `now`; transition times are kept from
/// `previous` when a status did not change.
pub fn node_conditions(
    previous: &[NodeCondition],
    health: NodeHealth,
    now: Timestamp,
) -> Vec<NodeCondition> {
    let (ready, ready_reason, ready_message) = match health {
        NodeHealth::Ready => ("True", "KubeletReady", "kubelet is posting ready status"),
        NodeHealth::NotReady => ("False", "KubeletNotReady", "container runtime is down"),
    };
    let wanted = [
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        (
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure",
        ),
        (
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        ("Ready", ready, ready_reason, ready_message),
    ];
    wanted
        .iter()
        .map(|(type_, status, reason, message)| {
            let since = previous
                .iter()
                .find(|c| c.type_ == *type_ && c.status == *status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| clock::time(now));
            NodeCondition {
                type_: (*type_).into(),
                status: (*status).into(),
                reason: Some((*reason).into()),
                message: Some((*message).into()),
                last_heartbeat_time: Some(clock::time(now)),
                last_transition_time: Some(since),
            }
        })
        .collect()
}

/// The node's Lease, renewed at `renewed_at`, owned by the Node (so it goes with it).
pub fn node_lease(node: &Node, renewed_at: Timestamp, duration: Duration) -> Lease {
    let name = node.metadata.name.clone().unwrap_or_default();
    Lease {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(NODE_LEASE_NAMESPACE.into()),
            owner_references: node.metadata.uid.clone().map(|uid| {
                vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: name.clone(),
                    uid,
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name),
            lease_duration_seconds: Some(
                i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            renew_time: Some(MicroTime(renewed_at)),
            ..LeaseSpec::default()
        }),
    }
}

/// The Node object a kubelet registers.
pub fn registration(
    config: &KubeletConfig,
    labels: &BTreeMap<String, String>,
    now: Timestamp,
) -> Node {
    let mut all_labels: BTreeMap<String, String> = [
        ("kubernetes.io/hostname", config.node_name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    all_labels.extend(labels.clone());
    let [a, b, c] = config.pod_subnet;
    let capacity: BTreeMap<String, Quantity> = [
        ("cpu", "4"),
        ("memory", "8Gi"),
        ("pods", "110"),
        ("ephemeral-storage", "100Gi"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
    .collect();
    Node {
        metadata: ObjectMeta {
            name: Some(config.node_name.clone()),
            labels: Some(all_labels),
            annotations: Some(BTreeMap::from([(
                "node.alpha.kubernetes.io/ttl".to_string(),
                "0".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            pod_cidr: Some(format!("{a}.{b}.{c}.0/24")),
            pod_cidrs: Some(vec![format!("{a}.{b}.{c}.0/24")]),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: config.node_ip.clone(),
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: config.node_name.clone(),
                },
            ]),
            allocatable: Some(capacity.clone()),
            capacity: Some(capacity),
            conditions: Some(node_conditions(&[], NodeHealth::Ready, now)),
            node_info: Some(NodeSystemInfo {
                architecture: "amd64".into(),
                boot_id: super::stable_id::stable_uuid(&format!("boot/{}", config.node_name)),
                container_runtime_version: "containerd://2.0.5".into(),
                kernel_version: "6.8.0-sim".into(),
                kube_proxy_version: String::new(),
                kubelet_version: config.kubelet_version.clone(),
                machine_id: super::stable_id::stable_hex(
                    &format!("machine/{}", config.node_name),
                    32,
                ),
                operating_system: "linux".into(),
                os_image: "selfhost simulated node".into(),
                system_uuid: super::stable_id::stable_uuid(&format!("system/{}", config.node_name)),
                ..NodeSystemInfo::default()
            }),
            ..NodeStatus::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::t;

    #[test]
    fn conditions_keep_transition_times_and_refresh_heartbeats() {
        let first = node_conditions(&[], NodeHealth::Ready, t(0));
        let ready = |c: &[NodeCondition]| c.iter().find(|c| c.type_ == "Ready").cloned().unwrap();
        assert_eq!(ready(&first).status, "True");
        let later = node_conditions(&first, NodeHealth::Ready, t(10));
        assert_eq!(ready(&later).last_transition_time, Some(clock::time(t(0))));
        assert_eq!(ready(&later).last_heartbeat_time, Some(clock::time(t(10))));
        let sick = node_conditions(&later, NodeHealth::NotReady, t(20));
        assert_eq!(
            (
                ready(&sick).status.as_str(),
                ready(&sick).last_transition_time
            ),
            ("False", Some(clock::time(t(20))))
        );
        assert_eq!(sick.len(), 4);
    }

    #[test]
    fn registration_and_lease_describe_the_node() {
        let config = KubeletConfig::new("cp-1", "10.0.0.11", 1);
        let mut node = registration(
            &config,
            &BTreeMap::from([(
                "node-role.kubernetes.io/control-plane".into(),
                String::new(),
            )]),
            t(0),
        );
        let labels = node.metadata.labels.clone().unwrap();
        assert_eq!(labels["kubernetes.io/hostname"], "cp-1");
        assert!(labels.contains_key("node-role.kubernetes.io/control-plane"));
        assert_eq!(
            node.spec.as_ref().unwrap().pod_cidr.as_deref(),
            Some("10.244.1.0/24")
        );
        let addresses = node.status.as_ref().unwrap().addresses.clone().unwrap();
        assert_eq!(addresses[0].address, "10.0.0.11");
        node.metadata.uid = Some("node-uid".into());
        let lease = node_lease(&node, t(5), Duration::from_secs(40));
        assert_eq!(
            lease.metadata.namespace.as_deref(),
            Some(NODE_LEASE_NAMESPACE)
        );
        let spec = lease.spec.unwrap();
        assert_eq!(
            (spec.holder_identity.as_deref(), spec.lease_duration_seconds),
            (Some("cp-1"), Some(40))
        );
        assert_eq!(spec.renew_time, Some(MicroTime(t(5))));
        assert_eq!(lease.metadata.owner_references.unwrap()[0].uid, "node-uid");
    }
}
