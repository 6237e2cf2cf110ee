//! The node as its kubelet presents it: the Node it registers (labels, addresses, capacity,
//! versions), the conditions it posts every 10 s, and its Lease in `kube-node-lease`. The API
//! may be down at any moment (this kubelet runs the apiservers it talks to), so each step is
//! tried again on the next tick.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::watch;

use super::api::{Outage, call};
use super::clock::time;
use super::config::timing;
use super::error::KubeletError;
use super::static_pods::stable_hex;

/// The namespace of node Leases.
pub(crate) const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// Who the node is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeIdentity {
    pub name: String,
    pub ip: String,
    pub kubelet_version: String,
}

/// The labels a kubelet of this bed puts on its Node. The control-plane role labels are not
/// among them: the NodeRestriction admission plugin forbids a kubelet to set
/// `node-role.kubernetes.io/*`, and kubeadm's `mark-control-plane` phase sets them with the
/// admin's credentials (the bed does the same).
pub(crate) fn node_labels(name: &str) -> BTreeMap<String, String> {
    [
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", "amd64"),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", "amd64"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// The node's conditions at `now`: Ready, no pressure. Transition times are kept from
/// `previous` while a status does not change.
pub(crate) fn node_conditions(previous: &[NodeCondition], now: Timestamp) -> Vec<NodeCondition> {
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
        (
            "Ready",
            "True",
            "KubeletReady",
            "kubelet is posting ready status",
        ),
    ];
    wanted
        .iter()
        .map(|(type_, status, reason, message)| {
            let since = previous
                .iter()
                .find(|c| c.type_ == *type_ && c.status == *status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| time(now));
            NodeCondition {
                type_: (*type_).into(),
                status: (*status).into(),
                reason: Some((*reason).into()),
                message: Some((*message).into()),
                last_heartbeat_time: Some(time(now)),
                last_transition_time: Some(since),
            }
        })
        .collect()
}

/// The node's status at `now` (conditions from [`node_conditions`]).
pub(crate) fn node_status(node: &NodeIdentity, conditions: Vec<NodeCondition>) -> NodeStatus {
    let capacity: BTreeMap<String, Quantity> = [("cpu", "16"), ("memory", "64Gi"), ("pods", "110")]
        .iter()
        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
        .collect();
    let id = |what: &str| stable_hex(format!("{what}/{}", node.name).as_bytes());
    let uuid = |hex: String| {
        format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..32]
        )
    };
    NodeStatus {
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: node.ip.clone(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: node.name.clone(),
            },
        ]),
        allocatable: Some(capacity.clone()),
        capacity: Some(capacity),
        conditions: Some(conditions),
        node_info: Some(NodeSystemInfo {
            architecture: "amd64".into(),
            boot_id: uuid(id("boot")),
            container_runtime_version: "process://0.1.0".into(),
            kernel_version: "selfhost-e2e".into(),
            kube_proxy_version: node.kubelet_version.clone(),
            kubelet_version: node.kubelet_version.clone(),
            machine_id: id("machine"),
            operating_system: "linux".into(),
            os_image: "selfhost-e2e process node".into(),
            system_uuid: uuid(id("system")),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    }
}

/// The Node a kubelet registers: labelled, untainted, with its status.
pub(crate) fn registration(node: &NodeIdentity, now: Timestamp) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(node.name.clone()),
            labels: Some(node_labels(&node.name)),
            annotations: Some(BTreeMap::from([(
                "node.alpha.kubernetes.io/ttl".to_string(),
                "0".to_string(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec::default()),
        status: Some(node_status(node, node_conditions(&[], now))),
    }
}

/// The node's Lease, renewed at `now`, owned by the Node (so it goes with it).
pub(crate) fn node_lease(name: &str, node_uid: &str, now: Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NODE_LEASE_NAMESPACE.into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: name.to_string(),
                uid: node_uid.to_string(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name.to_string()),
            lease_duration_seconds: Some(timing::LEASE_DURATION_SECONDS),
            renew_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
    }
}

/// Creates the Node, or updates the one that exists (its labels, others' labels kept);
/// returns its uid.
async fn register(client: &Client, node: &NodeIdentity) -> Result<String, KubeletError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let wanted = registration(node, Timestamp::now());
    match call(
        "register the node",
        nodes.create(&PostParams::default(), &wanted),
    )
    .await
    {
        Ok(created) => {
            tracing::info!(node = %node.name, "registered the node");
            return Ok(created.metadata.uid.unwrap_or_default());
        }
        Err(e) if e.api_status() == Some(409) => {}
        Err(e) => return Err(e),
    }
    let patch = json!({"metadata": {"labels": node_labels(&node.name)}});
    let updated = call(
        "label the node",
        nodes.patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await?;
    tracing::info!(node = %node.name, "the node was registered before; updated it");
    Ok(updated.metadata.uid.unwrap_or_default())
}

async fn post_status(
    client: &Client,
    node: &NodeIdentity,
    conditions: &[NodeCondition],
) -> Result<(), KubeletError> {
    let nodes: Api<Node> = Api::all(client.clone());
    let patch = json!({"status": node_status(node, conditions.to_vec())});
    call(
        "post the node status",
        nodes.patch_status(&node.name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
    .map(|_| ())
}

async fn renew_lease(
    client: &Client,
    node: &NodeIdentity,
    node_uid: &str,
) -> Result<(), KubeletError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASE_NAMESPACE);
    let lease = node_lease(&node.name, node_uid, Timestamp::now());
    let patch = json!({"spec": lease.spec});
    match call(
        "renew the node lease",
        leases.patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.api_status() == Some(404) => call(
            "create the node lease",
            leases.create(&PostParams::default(), &lease),
        )
        .await
        .map(|_| ()),
        Err(e) => Err(e),
    }
}

/// Registers the node, then posts its status and renews its Lease every 10 s, forever. The
/// Node's uid goes to `node_uid` (mirror pods are owned by it).
pub(crate) async fn run_heartbeat(
    client: Client,
    node: NodeIdentity,
    node_uid: watch::Sender<Option<String>>,
) {
    let mut conditions: Vec<NodeCondition> = Vec::new();
    let mut outage = Outage::default();
    let mut registered: Option<String> = None;
    loop {
        let now = Timestamp::now();
        let mut failed = false;
        if registered.is_none() {
            match register(&client, &node).await {
                Ok(uid) => {
                    outage.succeeded("register the node");
                    node_uid.send_replace(Some(uid.clone()));
                    registered = Some(uid);
                    conditions = node_conditions(&conditions, now);
                }
                Err(error) => {
                    outage.failed(&error);
                    failed = true;
                }
            }
        }
        if let Some(uid) = registered.clone() {
            conditions = node_conditions(&conditions, now);
            match post_status(&client, &node, &conditions).await {
                Ok(()) => outage.succeeded("post the node status"),
                // The Node was deleted: register it again on the next tick.
                Err(e) if e.api_status() == Some(404) => {
                    tracing::warn!(node = %node.name, "the Node is gone; registering it again");
                    registered = None;
                }
                Err(error) => {
                    outage.failed(&error);
                    failed = true;
                }
            }
            if registered.is_some() {
                match renew_lease(&client, &node, &uid).await {
                    Ok(()) => outage.succeeded("renew the node lease"),
                    Err(error) => {
                        outage.failed(&error);
                        failed = true;
                    }
                }
            }
        }
        // After a failure (the API down, or still creating its namespaces) try again soon.
        let pause = if registered.is_some() && !failed {
            timing::NODE_STATUS_INTERVAL.min(timing::LEASE_RENEW_INTERVAL)
        } else {
            timing::REGISTRATION_RETRY
        };
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::clock::t;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn identity() -> NodeIdentity {
        NodeIdentity {
            name: "n1".into(),
            ip: "127.0.1.1".into(),
            kubelet_version: "v1.20.2".into(),
        }
    }

    #[test]
    fn the_node_registers_as_a_ready_untainted_control_plane_node() {
        let node = registration(&identity(), t(0));
        let labels = node.metadata.labels.clone().unwrap();
        for (key, value) in [
            ("kubernetes.io/hostname", "n1"),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
        ] {
            assert_eq!(labels.get(key).map(String::as_str), Some(value), "{key}");
        }
        assert!(
            !labels
                .keys()
                .any(|k| k.starts_with("node-role.kubernetes.io/")),
            "NodeRestriction forbids a kubelet to set role labels"
        );
        assert!(node.spec.unwrap().taints.is_none());
        let status = node.status.unwrap();
        let addresses: Vec<(String, String)> = status
            .addresses
            .unwrap()
            .into_iter()
            .map(|a| (a.type_, a.address))
            .collect();
        assert_eq!(
            addresses,
            [
                ("InternalIP".to_string(), "127.0.1.1".to_string()),
                ("Hostname".to_string(), "n1".to_string())
            ]
        );
        assert_eq!(status.capacity.unwrap()["memory"], Quantity("64Gi".into()));
        assert_eq!(status.allocatable.unwrap()["cpu"], Quantity("16".into()));
        let info = status.node_info.unwrap();
        assert_eq!(info.kubelet_version, "v1.20.2");
        assert_eq!(info.system_uuid.len(), 36);
        let ready = status
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_deref()),
            ("True", Some("KubeletReady"))
        );
    }

    #[test]
    fn heartbeats_move_but_transition_times_stay() {
        let first = node_conditions(&[], t(0));
        let later = node_conditions(&first, t(10));
        assert_eq!(later.len(), 4);
        for c in &later {
            assert_eq!(c.last_transition_time, Some(Time(t(0))), "{}", c.type_);
            assert_eq!(c.last_heartbeat_time, Some(Time(t(10))), "{}", c.type_);
        }
        let pressure: Vec<&str> = later
            .iter()
            .filter(|c| c.type_ != "Ready")
            .map(|c| c.status.as_str())
            .collect();
        assert_eq!(pressure, ["False", "False", "False"]);
    }

    #[test]
    fn the_lease_is_held_by_the_node_for_forty_seconds() {
        let lease = node_lease("n1", "node-uid", t(5));
        assert_eq!(
            lease.metadata.namespace.as_deref(),
            Some(NODE_LEASE_NAMESPACE)
        );
        assert_eq!(lease.metadata.owner_references.unwrap()[0].uid, "node-uid");
        let spec = lease.spec.unwrap();
        assert_eq!(
            (
                spec.holder_identity.as_deref(),
                spec.lease_duration_seconds,
                spec.renew_time
            ),
            (Some("n1"), Some(40), Some(MicroTime(t(5))))
        );
    }
}
