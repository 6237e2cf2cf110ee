//! The checkpointer's decision, in one place: which phase each component is in on the node,
//! and which step that phase gives.
//!
//! [`locate`] reads the observation in the order of the table in `mod.rs` — first whether a
//! copy is active, then whether the API answers — and finds the phase with what its step
//! reads. [`phase`] names it; [`next_step`] gives its step with one `match` arm per phase.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::leases::{gone_leader, serving_since};
use super::observation::{
    ActiveCopy, Api, Checkpoint, ComponentOnNode, NodeCheckpoints, RunningPod,
};
use super::phase::CheckpointPhase;
use super::policy::CheckpointPolicy;
use super::step::CheckpointStep;
use crate::component::Component;
use crate::observation::{LeaderLease, time};

/// The step of every component on the node, in [`Component::ALL`]'s order.
pub fn decide(
    obs: &NodeCheckpoints,
    policy: &CheckpointPolicy,
) -> Vec<(Component, CheckpointStep)> {
    Component::ALL
        .into_iter()
        .map(|component| (component, next_step(obs, component, policy)))
        .collect()
}

/// The phase `component` is in on the node: what [`next_step`] decides by.
pub fn phase(
    obs: &NodeCheckpoints,
    component: Component,
    policy: &CheckpointPolicy,
) -> CheckpointPhase {
    locate(obs, component, policy).phase()
}

/// The one thing the checkpointer does next for `component` on the node: its phase's step.
pub fn next_step(
    obs: &NodeCheckpoints,
    component: Component,
    policy: &CheckpointPolicy,
) -> CheckpointStep {
    match locate(obs, component, policy) {
        Located::Superseded { copy } | Located::TakingOver { copy } => CheckpointStep::Retire {
            revision: copy.revision.clone(),
        },
        Located::Activated { copy, pod } => wait(activated(obs, copy, pod), None),
        Located::HolderGone { lease } => CheckpointStep::HandOver {
            lease: lease.name.clone(),
            holder: lease.holder().unwrap_or_default().to_string(),
            resource_version: lease.resource_version.clone().unwrap_or_default(),
        },
        Located::Unserved { pod: None } => wait(
            "no DaemonSet pod of it on this node: nothing to keep".to_string(),
            None,
        ),
        Located::Unserved { pod: Some(pod) } => wait(
            format!(
                "the DaemonSet pod (revision {}) does not serve: nothing to keep",
                pod.revision
            ),
            None,
        ),
        Located::Soaking { since } => wait(
            format!(
                "the DaemonSet pod has served for {} of {}",
                whole_seconds(time::age(obs.now, since)),
                seconds(policy.soak)
            ),
            Some(time::after(since, policy.soak)),
        ),
        Located::Keeping { pod } => CheckpointStep::Keep {
            pod_uid: pod.uid.clone(),
            revision: pod.revision.clone(),
            image: pod.image.clone(),
        },
        Located::Kept { pod } => CheckpointStep::Nothing {
            summary: format!(
                "the DaemonSet pod serves and its revision {} is kept",
                pod.revision
            ),
        },
        Located::StaticOnNode => CheckpointStep::Nothing {
            summary: "kubeadm's static pod runs it on this node: its checkpoint is never activated"
                .to_string(),
        },
        Located::ServedLocally => wait(
            "the API is unreachable, but the component serves on this node: nothing to activate"
                .to_string(),
            None,
        ),
        Located::Unkept => wait(
            "the API is unreachable and no checkpoint is stored: nothing to activate".to_string(),
            None,
        ),
        Located::InGrace { since } => wait(
            format!(
                "the API has been unreachable for {} of {}",
                whole_seconds(time::age(obs.now, since)),
                seconds(policy.api_grace)
            ),
            Some(time::after(since, policy.api_grace)),
        ),
        // The kube-apiserver's activation, decided beside this one, is the change that ends
        // the wait.
        Located::AwaitingApiServer { kept } => wait(
            format!(
                "the API is gone; the checkpoint of revision {} waits for a kube-apiserver on \
                 this node (its copy active, or one serving)",
                kept.revision
            ),
            None,
        ),
        Located::Orphaned { kept } => CheckpointStep::Activate {
            revision: kept.revision.clone(),
            image: kept.image.clone(),
        },
    }
}

/// A [`CheckpointPhase`], with what its step reads.
enum Located<'a> {
    Superseded {
        copy: &'a ActiveCopy,
    },
    TakingOver {
        copy: &'a ActiveCopy,
    },
    Activated {
        copy: &'a ActiveCopy,
        /// This node's DaemonSet pod, which does not serve (or the API is unreachable).
        pod: Option<&'a RunningPod>,
    },
    HolderGone {
        lease: &'a LeaderLease,
    },
    Unserved {
        pod: Option<&'a RunningPod>,
    },
    Soaking {
        /// Since when the DaemonSet pod has served.
        since: Timestamp,
    },
    Keeping {
        pod: &'a RunningPod,
    },
    Kept {
        pod: &'a RunningPod,
    },
    StaticOnNode,
    ServedLocally,
    Unkept,
    InGrace {
        /// Since when the API has been unreachable.
        since: Timestamp,
    },
    AwaitingApiServer {
        kept: &'a Checkpoint,
    },
    Orphaned {
        kept: &'a Checkpoint,
    },
}

impl Located<'_> {
    fn phase(&self) -> CheckpointPhase {
        match self {
            Located::Superseded { .. } => CheckpointPhase::Superseded,
            Located::TakingOver { .. } => CheckpointPhase::TakingOver,
            Located::Activated { .. } => CheckpointPhase::Activated,
            Located::HolderGone { .. } => CheckpointPhase::HolderGone,
            Located::Unserved { .. } => CheckpointPhase::Unserved,
            Located::Soaking { .. } => CheckpointPhase::Soaking,
            Located::Keeping { .. } => CheckpointPhase::Keeping,
            Located::Kept { .. } => CheckpointPhase::Kept,
            Located::StaticOnNode => CheckpointPhase::StaticOnNode,
            Located::ServedLocally => CheckpointPhase::ServedLocally,
            Located::Unkept => CheckpointPhase::Unkept,
            Located::InGrace { .. } => CheckpointPhase::InGrace,
            Located::AwaitingApiServer { .. } => CheckpointPhase::AwaitingApiServer,
            Located::Orphaned { .. } => CheckpointPhase::Orphaned,
        }
    }
}

/// Where `component` stands: first whether a copy is active, then whether the API answers,
/// then, when it does not, whether kubeadm's static pod runs it.
fn locate<'a>(
    obs: &'a NodeCheckpoints,
    component: Component,
    policy: &CheckpointPolicy,
) -> Located<'a> {
    let on = obs.component(component);
    let pod = on.daemonset_pod.as_ref();
    if let Some(copy) = &on.active {
        if on.static_manifest {
            return Located::Superseded { copy };
        }
        // Only a DaemonSet pod serving by itself, seen through the API, proves the copy is no
        // longer needed; the API alone may be the copy answering. Where a leader Lease may
        // be handed over after, the copy's mirror pod must be seen first: its going is what
        // proves the copy's process stopped.
        let leaves_proof = obs.leases.is_none() || copy.mirror_pod;
        return if obs.api == Api::Answers && leaves_proof && serving_since(obs, component).is_some()
        {
            Located::TakingOver { copy }
        } else {
            Located::Activated { copy, pod }
        };
    }
    match obs.api {
        Api::Answers => {
            if let Some(lease) = gone_leader(obs, component) {
                return Located::HolderGone { lease };
            }
            // A DaemonSet pod serving beside kubeadm's static pod is kept all the same: a
            // conversion moves the static manifest aside only once it is, so that the node
            // is never without a way back to a control plane.
            api_answers(obs, component, policy)
        }
        Api::Unreachable { .. } if on.static_manifest => Located::StaticOnNode,
        Api::Unreachable { since } => api_unreachable(obs, component, on, since, policy),
    }
}

/// No copy active and the API answers: whether this node's DaemonSet pod is worth keeping.
fn api_answers<'a>(
    obs: &'a NodeCheckpoints,
    component: Component,
    policy: &CheckpointPolicy,
) -> Located<'a> {
    let on = obs.component(component);
    let pod = on.daemonset_pod.as_ref();
    let Some((pod, since)) = pod.and_then(|p| Some((p, serving_since(obs, component)?))) else {
        return Located::Unserved { pod };
    };
    if time::age(obs.now, since) < policy.soak {
        return Located::Soaking { since };
    }
    match &on.checkpoint {
        Some(kept) if kept.revision == pod.revision => Located::Kept { pod },
        _ => Located::Keeping { pod },
    }
}

/// No copy active and the API unreachable: whether the checkpoint is to be activated.
fn api_unreachable<'a>(
    obs: &NodeCheckpoints,
    component: Component,
    on: &'a ComponentOnNode,
    since: Timestamp,
    policy: &CheckpointPolicy,
) -> Located<'a> {
    if on.local_process_serving {
        return Located::ServedLocally;
    }
    let Some(kept) = &on.checkpoint else {
        return Located::Unkept;
    };
    if time::age(obs.now, since) < policy.api_grace {
        return Located::InGrace { since };
    }
    if component != Component::ApiServer && !obs.apiserver_on_node() {
        return Located::AwaitingApiServer { kept };
    }
    Located::Orphaned { kept }
}

/// Why an active copy stays.
fn activated(obs: &NodeCheckpoints, copy: &ActiveCopy, pod: Option<&RunningPod>) -> String {
    let revision = &copy.revision;
    let copy_state = if copy.serving {
        format!("the copy of revision {revision} serves on this node")
    } else {
        // When, not for how long: the agent says a wait again only when its words change.
        format!(
            "the copy of revision {revision}, active since {}, does not serve yet",
            copy.since
        )
    };
    match (obs.api, pod) {
        (Api::Unreachable { .. }, _) => format!("the API is unreachable; {copy_state}"),
        (Api::Answers, None) => {
            format!("the API answers, with no DaemonSet pod on this node yet; {copy_state}")
        }
        (Api::Answers, Some(pod)) => format!(
            "the API answers; the DaemonSet pod (revision {}) does not serve yet; {copy_state}",
            pod.revision
        ),
    }
}

fn wait(reason: String, recheck_at: Option<Timestamp>) -> CheckpointStep {
    CheckpointStep::Wait { reason, recheck_at }
}

/// A duration in whole seconds, rounded down: how long something has lasted so far.
fn whole_seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs())
}

/// A configured duration, with its tenths when it has any.
fn seconds(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}
