//! The kube-controller-manager as a task: while some process holds the role (see
//! [`Leadership`]) and the API answers, it keeps informer caches and runs the DaemonSet
//! controller (on DaemonSet, pod, ControllerRevision and Node changes, and when a sync asks
//! to be requeued), the node lifecycle controller (every monitor period) and the pod garbage
//! collector (bound pods whose node is gone). A new acting process starts from scratch: fresh
//! caches, fresh failed-pod back-off, as a restarted controller-manager does.

use std::collections::HashMap;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::api::{CallError, ClusterApi, uid_mismatch};
use super::daemonset_sync::{self, MANAGER};
use super::events::{self, Involved, Source};
use super::informer::{Cache, Cursor};
use super::leader_gated_loop::{LeaderState, run_while_leading};
use super::model::Leadership;
use super::process_table::ModelDecisions;
use super::timings::SimTimings;
use crate::controllers::daemonset::{self, DaemonSetView, FailedPodBackoff};
use crate::controllers::kubelet::NODE_LEASE_NAMESPACE;
use crate::controllers::{node_lifecycle, taints};
use crate::resources::{CONTROLLERREVISIONS, DAEMONSETS, LEASES, NODES, PODS};
use crate::store::{DeleteOptions, Subresource, meta};

/// The memory of one controller-manager process.
struct Process {
    leader: Leadership,
    cursor: Cursor,
    daemon_sets: Cache<DaemonSet>,
    pods: Cache<Pod>,
    nodes: Cache<Node>,
    revisions: Cache<ControllerRevision>,
    leases: Cache<Lease>,
    backoff: FailedPodBackoff,
    requeue_at: Option<Instant>,
    monitor_at: Instant,
    resync: bool,
}

impl Process {
    fn new(leader: Leadership) -> Self {
        Process {
            leader,
            cursor: Cursor::default(),
            daemon_sets: Cache::new(DAEMONSETS, None),
            pods: Cache::new(PODS, None),
            nodes: Cache::new(NODES, None),
            revisions: Cache::new(CONTROLLERREVISIONS, None),
            leases: Cache::new(LEASES, Some(NODE_LEASE_NAMESPACE)),
            backoff: daemonset::failed_pod_backoff(),
            requeue_at: None,
            monitor_at: Instant::now(),
            resync: true,
        }
    }
}

impl LeaderState for Process {
    fn leadership(&self) -> &Leadership {
        &self.leader
    }
}

/// The controller-manager task.
pub(crate) struct ControllerManager {
    pub api: ClusterApi,
    pub decisions: ModelDecisions,
    pub timings: SimTimings,
}

impl ControllerManager {
    /// Runs until shutdown.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let leadership = self.decisions.controller_manager.clone();
        let api_up = self.decisions.api_up.clone();
        run_while_leading(&self.api, leadership, api_up, shutdown, Process::new, |p| {
            self.pass(p)
        })
        .await;
    }

    /// One round over the caches; when to come back even if nothing changes.
    fn pass(&self, p: &mut Process) -> Result<Option<Instant>, CallError> {
        let changed = p.cursor.sync(
            &self.api,
            &mut [
                &mut p.daemon_sets,
                &mut p.pods,
                &mut p.nodes,
                &mut p.revisions,
                &mut p.leases,
            ],
        )?;
        let now = Instant::now();
        let relevant = [DAEMONSETS, PODS, NODES, CONTROLLERREVISIONS]
            .iter()
            .any(|rt| changed.contains(rt));
        if relevant || p.resync || p.requeue_at.is_some_and(|at| at <= now) {
            p.resync = false;
            p.requeue_at = None;
            self.sync_daemon_sets(p)?;
        }
        if p.monitor_at <= now {
            self.monitor_nodes(p)?;
            p.monitor_at = now + self.timings.node_monitor_period;
        }
        if changed.contains(&PODS) || changed.contains(&NODES) {
            self.collect_orphan_pods(p)?;
        }
        Ok(Some(match p.requeue_at {
            Some(at) => at.min(p.monitor_at),
            None => p.monitor_at,
        }))
    }

    fn sync_daemon_sets(&self, p: &mut Process) -> Result<(), CallError> {
        let now = Timestamp::now();
        for ds in p.daemon_sets.as_slice() {
            let view = DaemonSetView {
                daemon_set: ds,
                nodes: p.nodes.as_slice(),
                pods: p.pods.as_slice(),
                revisions: p.revisions.as_slice(),
            };
            let decision = match daemonset::reconcile(&view, now, &mut p.backoff) {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(daemonset = ?ds.metadata.name, error = %e, "DaemonSet not synced");
                    continue;
                }
            };
            let requeue = decision.requeue_after.map(|after| Instant::now() + after);
            let applied = daemonset_sync::apply(&self.api, ds, &p.pods, decision)?;
            let requeue = if applied.stale {
                Some(Instant::now())
            } else {
                requeue
            };
            p.requeue_at = match (p.requeue_at, requeue) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(())
    }

    fn monitor_nodes(&self, p: &mut Process) -> Result<(), CallError> {
        let now = Timestamp::now();
        let config = self.timings.node_lifecycle;
        // Grouped only once a node needs its pods (a NoExecute taint, or lost): at rest no
        // node does, and the pass costs a look at each node, not at each of the cluster's pods.
        let mut by_node: Option<HashMap<&str, Vec<&Pod>>> = None;
        for node in p.nodes.values() {
            let name = node.metadata.name.clone().unwrap_or_default();
            let lease = p.leases.get(NODE_LEASE_NAMESPACE, &name);
            let decision = node_lifecycle::monitor(node, lease, now, &config);
            if let Some(conditions) = decision.conditions {
                let conditions = serde_json::to_value(conditions).unwrap_or(Value::Null);
                write_node(&self.api, &name, Subresource::Status, |n| {
                    n["status"]["conditions"] = conditions;
                })?;
            }
            if let Some(taints) = decision.taints {
                let taints = serde_json::to_value(taints).unwrap_or(Value::Null);
                write_node(&self.api, &name, Subresource::Main, |n| {
                    n["spec"]["taints"] = taints;
                })?;
            }
            // Only a NoExecute taint evicts; a control-plane node's NoSchedule does not.
            let evicting = node
                .spec
                .as_ref()
                .and_then(|s| s.taints.as_ref())
                .is_some_and(|t| t.iter().any(taints::evicts));
            if !evicting && !decision.mark_pods_not_ready {
                continue;
            }
            let on_node = by_node
                .get_or_insert_with(|| pods_by_node(p.pods.values()))
                .get(name.as_str())
                .map(Vec::as_slice)
                .unwrap_or_default();
            if decision.mark_pods_not_ready {
                for pod in on_node {
                    if let Some(status) = node_lifecycle::mark_pod_not_ready(pod, now) {
                        write_pod_status(&self.api, pod, &status)?;
                    }
                }
            }
            let (evict, _) = node_lifecycle::pods_to_evict(node, on_node, now);
            for pod in evict {
                delete_pod(&self.api, pod, None)?;
                let involved = pod_involved(pod);
                let message = format!(
                    "Marking for deletion Pod {}/{}",
                    involved.namespace, involved.name
                );
                let source = Source {
                    component: "taint-eviction-controller",
                    host: None,
                };
                events::record(
                    &self.api,
                    source,
                    &involved,
                    false,
                    "TaintManagerEviction",
                    &message,
                );
            }
        }
        Ok(())
    }

    /// Upstream's pod garbage collector, in small: a bound pod whose node is gone is deleted
    /// at once (no kubelet will ever finish it).
    fn collect_orphan_pods(&self, p: &mut Process) -> Result<(), CallError> {
        let orphans: Vec<Pod> = p
            .pods
            .values()
            .filter(|pod| {
                let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
                node.is_some_and(|n| !n.is_empty() && p.nodes.get("", n).is_none())
            })
            .cloned()
            .collect();
        for pod in &orphans {
            delete_pod(&self.api, pod, Some(0))?;
        }
        Ok(())
    }
}

fn pod_involved(pod: &Pod) -> Involved {
    Involved {
        api_version: "v1",
        kind: "Pod",
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}

/// A write that found the object gone or changed is not an error: the next pass decides again.
fn tolerate_gone<T>(result: Result<T, CallError>) -> Result<(), CallError> {
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
        Err(CallError::Unreachable) => Err(CallError::Unreachable),
        Err(e) => {
            tracing::warn!(error = %e, "controller-manager write refused");
            Ok(())
        }
    }
}

fn write_node(
    api: &ClusterApi,
    name: &str,
    subresource: Subresource,
    edit: impl FnOnce(&mut Value),
) -> Result<(), CallError> {
    tolerate_gone(api.modify(&NODES, "", name, subresource, MANAGER, |cur| {
        let mut new = cur.clone();
        edit(&mut new);
        Ok(new)
    }))
}

fn write_pod_status(
    api: &ClusterApi,
    pod: &Pod,
    status: &k8s_openapi::api::core::v1::PodStatus,
) -> Result<(), CallError> {
    let r = pod_involved(pod);
    let status = serde_json::to_value(status).unwrap_or(Value::Null);
    tolerate_gone(api.modify(
        &PODS,
        &r.namespace,
        &r.name,
        Subresource::Status,
        MANAGER,
        |cur| {
            if meta::uid(cur) != r.uid {
                return Err(uid_mismatch(&PODS, &r.name, &r.uid, meta::uid(cur)));
            }
            let mut new = cur.clone();
            new["status"] = status;
            Ok(new)
        },
    ))
}

fn delete_pod(api: &ClusterApi, pod: &Pod, grace: Option<i64>) -> Result<(), CallError> {
    let r = pod_involved(pod);
    let options = DeleteOptions {
        grace_period_seconds: grace,
        precondition_uid: Some(r.uid.clone()),
        ..DeleteOptions::default()
    };
    tolerate_gone(api.delete(&PODS, &r.namespace, &r.name, &options))
}

/// The pods bound to each node, by node name.
fn pods_by_node<'a>(pods: impl Iterator<Item = &'a Pod>) -> HashMap<&'a str, Vec<&'a Pod>> {
    let mut by_node: HashMap<&str, Vec<&Pod>> = HashMap::new();
    for pod in pods {
        if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) {
            by_node.entry(node).or_default().push(pod);
        }
    }
    by_node
}
