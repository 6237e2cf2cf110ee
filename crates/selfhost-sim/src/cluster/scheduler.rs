//! The kube-scheduler as a task: while some process holds the role and the API answers, it
//! binds every pending pod it is responsible for to the node the pure
//! [`scheduler`](crate::controllers::scheduler) picks, oldest first, or marks it
//! `PodScheduled=False` with the scheduler's explanation and a `FailedScheduling` event.
//! Pending pods are tried again whenever pods or nodes change.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::api::{CallError, ClusterApi, uid_mismatch};
use super::events::{self, Involved, Source};
use super::informer::{Cache, Cursor};
use super::leader_gated_loop::{LeaderState, run_while_leading};
use super::model::Leadership;
use super::process_table::ModelDecisions;
use crate::controllers::objects::{self, condition};
use crate::controllers::scheduler::{self, FitError, SCHEDULER_NAME};
use crate::resources::{NODES, PODS};
use crate::store::{Subresource, meta};

const SOURCE: Source<'static> = Source {
    component: SCHEDULER_NAME,
    host: None,
};

struct Process {
    leader: Leadership,
    cursor: Cursor,
    pods: Cache<Pod>,
    nodes: Cache<Node>,
    /// The last pass stopped half-way: go over the pending pods again.
    unfinished: bool,
}

impl LeaderState for Process {
    fn leadership(&self) -> &Leadership {
        &self.leader
    }
}

/// The scheduler task.
pub(crate) struct Scheduler {
    pub api: ClusterApi,
    pub decisions: ModelDecisions,
}

impl Scheduler {
    /// Runs until shutdown.
    pub(crate) async fn run(self, shutdown: CancellationToken) {
        let leadership = self.decisions.scheduler.clone();
        let api_up = self.decisions.api_up.clone();
        let start = |leader| Process {
            leader,
            cursor: Cursor::default(),
            pods: Cache::new(PODS, None),
            nodes: Cache::new(NODES, None),
            unfinished: false,
        };
        run_while_leading(&self.api, leadership, api_up, shutdown, start, |p| {
            self.pass(p).map(|()| None)
        })
        .await;
    }

    fn pass(&self, p: &mut Process) -> Result<(), CallError> {
        let changed = p.cursor.sync(&self.api, &mut [&mut p.pods, &mut p.nodes])?;
        if changed.is_empty() && !p.unfinished {
            return Ok(());
        }
        if !p.pods.values().any(scheduler::wants_scheduling) {
            p.unfinished = false;
            return Ok(());
        }
        p.unfinished = true;
        let nodes = p.nodes.as_slice();
        let mut assigned = Assigned::default();
        for pod in p.pods.values().filter(|pod| is_bound(pod)) {
            assigned.add(pod.clone());
        }
        let mut pending: Vec<&Pod> = p
            .pods
            .values()
            .filter(|pod| scheduler::wants_scheduling(pod))
            .collect();
        pending.sort_by(|a, b| {
            objects::created_at(&a.metadata)
                .cmp(&objects::created_at(&b.metadata))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        for pod in pending {
            match schedule(pod, nodes, &assigned) {
                Ok(node) => {
                    self.bind(pod, &node)?;
                    let mut bound = pod.clone();
                    bound.spec.get_or_insert_default().node_name = Some(node);
                    assigned.add(bound);
                }
                Err(fit) => self.unschedulable(pod, &fit)?,
            }
        }
        p.unfinished = false;
        Ok(())
    }

    fn bind(&self, pod: &Pod, node: &str) -> Result<(), CallError> {
        let r = involved(pod);
        match self.api.bind(&r.namespace, &r.name, &r.uid, node) {
            Ok(_) => {
                let message = format!("Successfully assigned {}/{} to {node}", r.namespace, r.name);
                events::record(&self.api, SOURCE, &r, false, "Scheduled", &message);
                Ok(())
            }
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Records why nothing fits, once per distinct explanation.
    fn unschedulable(&self, pod: &Pod, fit: &FitError) -> Result<(), CallError> {
        let message = fit.to_string();
        let known = objects::pod_condition(pod, condition::POD_SCHEDULED)
            .is_some_and(|c| c.status == "False" && c.message.as_deref() == Some(&message));
        if known {
            return Ok(());
        }
        let r = involved(pod);
        let mut wanted = scheduler::unschedulable_condition(fit, Timestamp::now());
        let written = self.api.modify(
            &PODS,
            &r.namespace,
            &r.name,
            Subresource::Status,
            SCHEDULER_NAME,
            |cur| {
                if meta::uid(cur) != r.uid {
                    return Err(uid_mismatch(&PODS, &r.name, &r.uid, meta::uid(cur)));
                }
                let mut new = cur.clone();
                let mut status: k8s_openapi::api::core::v1::PodStatus =
                    serde_json::from_value(cur["status"].clone()).unwrap_or_default();
                let conditions = status.conditions.get_or_insert_default();
                if let Some(old) = conditions
                    .iter()
                    .find(|c| c.type_ == condition::POD_SCHEDULED)
                    && old.status == "False"
                {
                    wanted
                        .last_transition_time
                        .clone_from(&old.last_transition_time);
                }
                conditions.retain(|c| c.type_ != condition::POD_SCHEDULED);
                conditions.push(wanted);
                new["status"] = serde_json::to_value(status).unwrap_or(Value::Null);
                Ok(new)
            },
        );
        match written {
            Ok(_) => {
                events::record(&self.api, SOURCE, &r, true, "FailedScheduling", &message);
                Ok(())
            }
            Err(e) if e.is_not_found() || e.is_conflict() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The pods bound to nodes, by node.
#[derive(Default)]
struct Assigned {
    by_node: HashMap<String, Vec<Pod>>,
}

impl Assigned {
    fn add(&mut self, pod: Pod) {
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        self.by_node.entry(node).or_default().push(pod);
    }

    fn on(&self, nodes: &[Node]) -> Vec<Pod> {
        nodes
            .iter()
            .filter_map(|n| self.by_node.get(n.metadata.name.as_deref()?))
            .flatten()
            .cloned()
            .collect()
    }
}

/// The scheduler's decision; a pod that names its nodes (a DaemonSet pod) is decided among
/// those nodes alone, which chooses the same node without scanning the cluster. Only a pod
/// that fits nowhere is explained over every node, as the real scheduler counts them.
fn schedule(pod: &Pod, nodes: &[Node], assigned: &Assigned) -> Result<String, FitError> {
    let name = |n: &Node| n.metadata.name.clone().unwrap_or_default();
    let named = pod.spec.as_ref().and_then(scheduler::affinity_node_names);
    if let Some(names) = named {
        let candidates: Vec<Node> = nodes
            .iter()
            .filter(|n| n.metadata.name.as_ref().is_some_and(|n| names.contains(n)))
            .cloned()
            .collect();
        if let Ok(node) = scheduler::schedule(pod, &candidates, &assigned.on(&candidates)) {
            return Ok(name(node));
        }
    }
    scheduler::schedule(pod, nodes, &assigned.on(nodes)).map(name)
}

fn is_bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

fn involved(pod: &Pod) -> Involved {
    Involved {
        api_version: "v1",
        kind: "Pod",
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
    }
}
