//! What a refused or mistaken run must leave alone, as an operator would check it.
//!
//! Objects without a status that moves by itself (ConfigMaps, Secrets, ServiceAccounts) are
//! compared by resourceVersion. DaemonSets, Pods and Nodes have status fields that
//! controllers and kubelets rewrite on their own, so for them a change of ours is what counts:
//! every DaemonSet's identity, spec generation, labels and annotations; every Pod's identity,
//! deletion state and images; every Node's labels, taints (but those the node lifecycle
//! controller sets) and schedulability.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, ServiceAccount};
use kube::Api;
use kube::api::ListParams;

/// One line per object, keyed by kind and name.
pub type Snapshot = BTreeMap<String, String>;

/// Reads the snapshot through `client`.
pub async fn snapshot(client: &kube::Client) -> Snapshot {
    let mut out = BTreeMap::new();
    let lp = ListParams::default();
    let ns = "kube-system";
    for ds in Api::<DaemonSet>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .expect("list DaemonSets")
    {
        let m = &ds.metadata;
        out.insert(
            format!("ds/{}", m.name.clone().unwrap_or_default()),
            format!(
                "{:?} {:?} {:?} {:?}",
                m.uid, m.generation, m.labels, m.annotations
            ),
        );
    }
    for pod in Api::<Pod>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .expect("list Pods")
    {
        let m = &pod.metadata;
        let images: Vec<_> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter().map(|c| c.image.clone()))
            .collect();
        out.insert(
            format!("pod/{}", m.name.clone().unwrap_or_default()),
            format!("{:?} {:?} {images:?}", m.uid, m.deletion_timestamp),
        );
    }
    for node in Api::<Node>::all(client.clone())
        .list(&lp)
        .await
        .expect("list Nodes")
    {
        let spec = node.spec.unwrap_or_default();
        // The node lifecycle controller taints nodes it finds NotReady or unreachable
        // (node.kubernetes.io/...) on its own; other taints are a person's or a tool's.
        let taints: Vec<_> = spec
            .taints
            .unwrap_or_default()
            .into_iter()
            .filter(|t| !t.key.starts_with("node.kubernetes.io/"))
            .map(|t| format!("{}={:?}:{}", t.key, t.value, t.effect))
            .collect();
        out.insert(
            format!("node/{}", node.metadata.name.unwrap_or_default()),
            format!(
                "{:?} {taints:?} {:?}",
                node.metadata.labels, spec.unschedulable
            ),
        );
    }
    for cm in Api::<ConfigMap>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .expect("list ConfigMaps")
    {
        out.insert(
            format!("cm/{}", cm.metadata.name.unwrap_or_default()),
            cm.metadata.resource_version.unwrap_or_default(),
        );
    }
    for secret in Api::<Secret>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .expect("list Secrets")
    {
        out.insert(
            format!("secret/{}", secret.metadata.name.unwrap_or_default()),
            secret.metadata.resource_version.unwrap_or_default(),
        );
    }
    for sa in Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .list(&lp)
        .await
        .expect("list ServiceAccounts")
    {
        out.insert(
            format!("sa/{}", sa.metadata.name.unwrap_or_default()),
            sa.metadata.resource_version.unwrap_or_default(),
        );
    }
    out
}

/// Fails with the entries that differ, if any.
pub fn assert_unchanged(before: &Snapshot, after: &Snapshot) {
    let keys: BTreeSet<_> = before.keys().chain(after.keys()).collect();
    let changed: Vec<String> = keys
        .into_iter()
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| format!("{k}: {:?} -> {:?}", before.get(k), after.get(k)))
        .collect();
    assert!(
        changed.is_empty(),
        "the run changed the cluster:\n{}",
        changed.join("\n")
    );
}
