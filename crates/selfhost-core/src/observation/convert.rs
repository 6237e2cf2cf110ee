//! From API objects to observations. Pure: the engine fetches, these functions read.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ContainerStatus, Node, Pod};
use k8s_openapi::jiff::Timestamp;

use super::cluster::{NodeObservation, NodeReadiness};
use super::daemonsets::{BackupObservation, DaemonSetCounters, DaemonSetObservation};
use super::leases::{IdentitySighting, LeaderLease};
use super::pods::{ContainerObservation, ContainerState, PodObservation};
use crate::backup::read_backup;
use crate::component::Component;

/// Label of kube-apiserver identity Leases.
pub const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// Value of [`IDENTITY_LABEL`] on kube-apiserver identity Leases.
pub const IDENTITY_LABEL_VALUE: &str = "kube-apiserver";
/// Label carrying a node's (and an identity Lease's) host name.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

const TEMPLATE_GENERATION_ANNOTATION: &str = "deprecated.daemonset.template.generation";
const POD_TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";
const REVISION_HASH_LABEL: &str = "controller-revision-hash";

impl DaemonSetObservation {
    /// Reads a DaemonSet and the pods its selector matches.
    ///
    /// `current_revision_hash` is left empty: set it from the DaemonSet's newest
    /// ControllerRevision if the engine reads revisions.
    pub fn from_daemonset(ds: &DaemonSet, pods: &[Pod]) -> Self {
        let meta = &ds.metadata;
        let spec = ds.spec.clone().unwrap_or_default();
        let status = ds.status.clone().unwrap_or_default();
        let annotations = meta.annotations.clone().unwrap_or_default();
        DaemonSetObservation {
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            generation: meta.generation,
            template_generation: annotations
                .get(TEMPLATE_GENERATION_ANNOTATION)
                .and_then(|g| g.trim().parse().ok()),
            current_revision_hash: None,
            annotations,
            labels: meta.labels.clone().unwrap_or_default(),
            selector: spec.selector.match_labels.clone().unwrap_or_default(),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            deleting_since: meta.deletion_timestamp.as_ref().map(|t| t.0),
            template: spec.template,
            update_strategy: spec.update_strategy,
            min_ready_seconds: spec.min_ready_seconds,
            revision_history_limit: spec.revision_history_limit,
            status: DaemonSetCounters {
                observed_generation: status.observed_generation,
                desired: status.desired_number_scheduled,
                current: status.current_number_scheduled,
                updated: status.updated_number_scheduled.unwrap_or(0),
                ready: status.number_ready,
                available: status.number_available.unwrap_or(0),
                unavailable: status.number_unavailable.unwrap_or(0),
                misscheduled: status.number_misscheduled,
            },
            pods: pods.iter().map(PodObservation::from_pod).collect(),
        }
    }
}

impl BackupObservation {
    /// Reads the backup DaemonSet of `component`, its pods, and what it records.
    pub fn from_daemonset(ds: &DaemonSet, pods: &[Pod], component: Component) -> Self {
        BackupObservation {
            daemonset: DaemonSetObservation::from_daemonset(ds, pods),
            record: read_backup(ds, component),
        }
    }
}

impl PodObservation {
    /// Reads a pod.
    pub fn from_pod(pod: &Pod) -> Self {
        let meta = &pod.metadata;
        let labels = meta.labels.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        let status = pod.status.clone().unwrap_or_default();
        let ready_condition = status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready");
        let statuses = status.container_statuses.unwrap_or_default();
        let containers = spec
            .containers
            .iter()
            .map(|container| {
                let status = statuses.iter().find(|s| s.name == container.name);
                container_observation(&container.name, container.image.as_deref(), status)
            })
            .collect();
        PodObservation {
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            node: spec.node_name.clone().filter(|n| !n.is_empty()),
            template_generation: labels
                .get(POD_TEMPLATE_GENERATION_LABEL)
                .and_then(|g| g.trim().parse().ok()),
            revision_hash: labels.get(REVISION_HASH_LABEL).cloned(),
            phase: status.phase,
            ready: ready_condition.is_some_and(|c| c.status == "True"),
            ready_since: ready_condition
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            start_time: status.start_time.map(|t| t.0),
            deleting_since: meta.deletion_timestamp.as_ref().map(|t| t.0),
            deletion_grace_seconds: meta.deletion_grace_period_seconds,
            termination_grace_seconds: spec.termination_grace_period_seconds,
            containers,
        }
    }
}

fn container_observation(
    name: &str,
    image: Option<&str>,
    status: Option<&ContainerStatus>,
) -> ContainerObservation {
    let state = status
        .and_then(|s| s.state.as_ref())
        .map_or(ContainerState::Unknown, |state| {
            if let Some(running) = &state.running {
                ContainerState::Running {
                    started_at: running.started_at.as_ref().map(|t| t.0),
                }
            } else if let Some(terminated) = &state.terminated {
                ContainerState::Terminated {
                    reason: terminated.reason.clone(),
                    exit_code: terminated.exit_code,
                    finished_at: terminated.finished_at.as_ref().map(|t| t.0),
                }
            } else if let Some(waiting) = &state.waiting {
                ContainerState::Waiting {
                    reason: waiting.reason.clone(),
                    message: waiting.message.clone(),
                }
            } else {
                ContainerState::Unknown
            }
        });
    ContainerObservation {
        name: name.to_string(),
        image: image.unwrap_or_default().to_string(),
        ready: status.is_some_and(|s| s.ready),
        restart_count: status.map_or(0, |s| s.restart_count),
        last_termination: status
            .and_then(|s| s.last_state.as_ref())
            .and_then(|s| s.terminated.as_ref())
            .and_then(|t| t.reason.clone()),
        last_exit_at: match &state {
            ContainerState::Terminated { finished_at, .. } if finished_at.is_some() => *finished_at,
            _ => status
                .and_then(|s| s.last_state.as_ref())
                .and_then(|s| s.terminated.as_ref())
                .and_then(|t| t.finished_at.as_ref())
                .map(|t| t.0),
        },
        state,
    }
}

impl NodeObservation {
    /// Reads a node.
    pub fn from_node(node: &Node) -> Self {
        let ready = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|conditions| conditions.iter().find(|c| c.type_ == "Ready"));
        NodeObservation {
            name: node.metadata.name.clone().unwrap_or_default(),
            hostname: node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(HOSTNAME_LABEL))
                .cloned(),
            ready: match ready.map(|c| c.status.as_str()) {
                Some("True") => NodeReadiness::Ready,
                Some("False") => NodeReadiness::NotReady {
                    reason: ready.and_then(|c| c.reason.clone()),
                },
                _ => NodeReadiness::Unknown,
            },
            ready_since: ready
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0),
            unschedulable: node
                .spec
                .as_ref()
                .and_then(|s| s.unschedulable)
                .unwrap_or(false),
            labels: node.metadata.labels.clone().unwrap_or_default(),
            taints: node
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default(),
        }
    }
}

impl IdentitySighting {
    /// Reads a kube-apiserver identity Lease as one sighting of its current holder; `None` for
    /// a Lease without the identity label or without a holder.
    ///
    /// `holder_since` is the Lease's creation time when the Lease is named after its holder
    /// (that process created it); otherwise `None`, and the engine sets it when it sees the
    /// holder take the Lease over (see [`IdentitySighting::holder_since`]).
    pub fn from_lease(lease: &Lease) -> Option<Self> {
        let meta = &lease.metadata;
        let labels = meta.labels.as_ref()?;
        if labels.get(IDENTITY_LABEL).map(String::as_str) != Some(IDENTITY_LABEL_VALUE) {
            return None;
        }
        let spec = lease.spec.as_ref()?;
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty())?;
        let name = meta.name.clone().unwrap_or_default();
        let created: Option<Timestamp> = meta.creation_timestamp.as_ref().map(|t| t.0);
        Some(IdentitySighting {
            holder_since: if holder == name { created } else { None },
            lease: name,
            hostname: labels.get(HOSTNAME_LABEL).cloned(),
            holder,
            last_renewed: spec.renew_time.as_ref().map(|t| t.0),
            first_seen: None,
        })
    }
}

impl LeaderLease {
    /// Reads a leader-election Lease.
    pub fn from_lease(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        LeaderLease {
            name: lease.metadata.name.clone().unwrap_or_default(),
            uid: lease.metadata.uid.clone(),
            resource_version: lease.metadata.resource_version.clone(),
            holder: spec.holder_identity,
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            lease_duration_seconds: spec.lease_duration_seconds,
            transitions: spec.lease_transitions,
        }
    }
}
