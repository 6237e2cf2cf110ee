//! Filling a store with a large cluster's bulk — thousands of worker nodes and a hundred
//! thousand pods outside kube-system — fast enough for a benchmark, and honestly: every object
//! is created through [`Store::create`], the path an HTTP create takes after decoding
//! (defaulting, validation, a resourceVersion, an event in the history that watchers see),
//! only without the JSON round trip over a socket (which would make 100,000 pods a matter of
//! minutes instead of seconds).
//!
//! The nodes look like registered kubelets (Ready, with a kubelet version) but have none
//! running: nothing renews their heartbeats, so a cluster holding them should give its node
//! lifecycle controller grace periods longer than the measurement (see
//! `SimTimings::node_lifecycle`). The pods are bound to those nodes and stay `Pending`, as
//! pods of a node whose kubelet never reports do; nothing else in the cluster touches them.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::bootstrap::{NodeRole, NodeSpec, node_object};
use crate::error::ApiError;
use crate::resources;
use crate::store::{Store, WriteOptions, meta};

/// What to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BulkLoad {
    /// Worker nodes `bulk-node-1`, `bulk-node-2`, …
    pub nodes: usize,
    /// Pods, spread round-robin over the nodes and the namespaces.
    pub pods: usize,
    /// Namespaces `bulk-1`, `bulk-2`, … holding the pods (at least one is made).
    pub namespaces: usize,
    /// The kubelet version the nodes report (the cluster's version keeps skew checks quiet).
    pub kubelet_version: String,
}

/// What was loaded, and how long it took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loaded {
    /// Nodes created.
    pub nodes: usize,
    /// Pods created.
    pub pods: usize,
    /// Namespaces created.
    pub namespaces: usize,
    /// Wall time of the whole load.
    pub took: Duration,
}

/// The name of bulk node `i` (from 1).
pub fn node_name(i: usize) -> String {
    format!("bulk-node-{i}")
}

/// The name of bulk namespace `i` (from 1).
pub fn namespace_name(i: usize) -> String {
    format!("bulk-{i}")
}

/// A small, valid pod bound to `node`: one container, a label, requests (so that its QoS
/// class is Burstable, the common case).
fn pod_object(name: &str, node: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "labels": { "app": "bulk" } },
        "spec": {
            "nodeName": node,
            "containers": [{
                "name": "app",
                "image": "registry.example/bulk/app:1.0",
                "resources": { "requests": { "cpu": "10m", "memory": "16Mi" } },
            }],
        },
    })
}

/// Creates the namespaces, nodes and pods of `load` in `store`, in that order.
///
/// # Errors
/// The first create the store refuses (for instance a name that already exists: load a store
/// once).
pub fn load(store: &Store, load: &BulkLoad) -> Result<Loaded, ApiError> {
    let started = Instant::now();
    let options = WriteOptions::default();
    let namespaces = load.namespaces.max(1);
    for i in 1..=namespaces {
        let ns = json!({ "apiVersion": "v1", "kind": "Namespace",
            "metadata": { "name": namespace_name(i) } });
        store.create(&resources::NAMESPACES, "", ns, &options)?;
    }
    let now = meta::now();
    for i in 1..=load.nodes {
        let spec = NodeSpec {
            name: node_name(i),
            role: NodeRole::Worker,
            ip: format!("10.2.{}.{}", i / 256, i % 256),
        };
        let node = node_object(&spec, &load.kubelet_version, &now);
        store.create(&resources::NODES, "", node, &options)?;
    }
    for i in 0..load.pods {
        let node = if load.nodes == 0 {
            String::new()
        } else {
            node_name(i % load.nodes + 1)
        };
        let namespace = namespace_name(i % namespaces + 1);
        let mut pod = pod_object(&format!("bulk-pod-{i}"), &node);
        if node.is_empty()
            && let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut)
        {
            spec.remove("nodeName");
        }
        store.create(&resources::PODS, &namespace, pod, &options)?;
    }
    Ok(Loaded {
        nodes: load.nodes,
        pods: load.pods,
        namespaces,
        took: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ListOptions, StoreOptions};

    fn count(store: &Store, rt: &crate::resources::ResourceType, namespace: Option<&str>) -> usize {
        let options = ListOptions {
            namespace,
            ..ListOptions::default()
        };
        store.list(rt, &options).expect("lists").items.len()
    }

    #[test]
    fn loads_nodes_and_pods_spread_over_namespaces_and_nodes() {
        let store = Store::new(StoreOptions::default());
        let loaded = load(
            &store,
            &BulkLoad {
                nodes: 7,
                pods: 50,
                namespaces: 3,
                kubelet_version: "v1.33.1".into(),
            },
        )
        .expect("loads");
        assert_eq!((loaded.nodes, loaded.pods, loaded.namespaces), (7, 50, 3));
        assert_eq!(count(&store, &resources::NODES, None), 7);
        assert_eq!(count(&store, &resources::PODS, None), 50);
        assert_eq!(count(&store, &resources::PODS, Some("bulk-1")), 17);
        assert_eq!(count(&store, &resources::PODS, Some("kube-system")), 0);
        let pod = store
            .get(&resources::PODS, "bulk-2", "bulk-pod-1")
            .expect("the second pod");
        assert_eq!(pod["spec"]["nodeName"], "bulk-node-2");
        assert_eq!(pod["status"]["phase"], "Pending");
        let node = store
            .get(&resources::NODES, "", "bulk-node-7")
            .expect("the last node");
        assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "v1.33.1");
        assert!(
            node["metadata"]["labels"]
                .get("node-role.kubernetes.io/control-plane")
                .is_none(),
            "workers, not control-plane nodes"
        );
    }

    #[test]
    fn a_second_load_is_refused_rather_than_doubled() {
        let store = Store::new(StoreOptions::default());
        let spec = BulkLoad {
            nodes: 1,
            pods: 1,
            namespaces: 1,
            kubelet_version: "v1.33.1".into(),
        };
        load(&store, &spec).expect("loads");
        assert!(load(&store, &spec).is_err());
        assert_eq!(count(&store, &resources::PODS, None), 1);
    }
}
