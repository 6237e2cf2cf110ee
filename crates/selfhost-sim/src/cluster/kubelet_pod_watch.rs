//! The kubelets' pod watch: one watch of all pods, routed to each node's kubelet by
//! `spec.nodeName` (what a kubelet's `fieldSelector=spec.nodeName=<node>` watch delivers).
//! While the API is down nothing is delivered; when it answers again the watch resumes
//! where it stopped. A watch too far behind (410) starts over from a fresh list, which each
//! kubelet gets whole, as a relisting reflector would.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::api::{ClusterApi, RETRY_WHEN_DOWN};
use super::node_agent::NodeInput;
use crate::resources::PODS;
use crate::store::{EventType, WatchFilter, WatchStart, meta};

/// Waits until the API answers; `false` on shutdown.
pub(crate) async fn until_api_up(
    api: &ClusterApi,
    api_up: &mut watch::Receiver<bool>,
    shutdown: &CancellationToken,
) -> bool {
    loop {
        if api.is_up() {
            return true;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return false,
            _ = api_up.changed() => {}
            _ = tokio::time::sleep(RETRY_WHEN_DOWN) => {}
        }
    }
}

fn node_of(pod: &Value) -> &str {
    pod.get("spec")
        .and_then(|s| s.get("nodeName"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Routes pod events to the kubelets until shutdown.
pub(crate) async fn run(
    api: ClusterApi,
    kubelets: HashMap<String, mpsc::UnboundedSender<NodeInput>>,
    mut api_up: watch::Receiver<bool>,
    shutdown: CancellationToken,
) {
    let send = |node: &str, input: NodeInput| {
        if let Some(tx) = kubelets.get(node) {
            // A kubelet that stopped (shutdown) no longer listens; nothing to do.
            let _ = tx.send(input);
        }
    };
    let store = api.store().clone();
    let started = store.watch(&PODS, WatchFilter::default(), WatchStart::Now);
    for event in started.initial {
        let node = node_of(&event.object).to_string();
        send(&node, NodeInput::Pod(event.object));
    }
    let mut cursor = started.cursor;
    let resync = |store: &crate::store::Store| {
        let fresh = store.watch(&PODS, WatchFilter::default(), WatchStart::Now);
        let mut by_node: HashMap<String, Vec<Arc<Value>>> =
            kubelets.keys().map(|n| (n.clone(), Vec::new())).collect();
        for event in fresh.initial {
            if let Some(pods) = by_node.get_mut(node_of(&event.object)) {
                pods.push(event.object);
            }
        }
        for (node, pods) in by_node {
            send(&node, NodeInput::Resync(pods));
        }
        fresh.cursor
    };
    loop {
        if !until_api_up(&api, &mut api_up, &shutdown).await {
            return;
        }
        let events = tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = api_up.changed() => continue,
            events = cursor.next() => events,
        };
        match events {
            Ok(events) => {
                for event in events {
                    let node = node_of(&event.object).to_string();
                    let node = node.as_str();
                    if node.is_empty() {
                        continue;
                    }
                    match event.event_type {
                        EventType::Deleted => send(
                            node,
                            NodeInput::Removed(meta::uid(&event.object).to_string()),
                        ),
                        EventType::Added | EventType::Modified => {
                            send(node, NodeInput::Pod(event.object));
                        }
                    }
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "the kubelets' pod watch fell behind; relisting");
                cursor = resync(&store);
            }
        }
    }
}
