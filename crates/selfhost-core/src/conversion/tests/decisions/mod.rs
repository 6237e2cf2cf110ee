//! The decisions of one node, table-driven: one file per direction (each with its undoing),
//! leadership, and telling a node at its end from one on its way; the fixtures they share
//! here.

mod awaits_only_the_cluster;
mod front;
mod leadership;
mod phase;
mod to_self_hosted;
mod to_static;

use k8s_openapi::jiff::Timestamp;

use crate::component::Component;
use crate::conversion::decide::{Direction, Mode, NodeComponent, next_step};
use crate::observation::{
    ContainerObservation, ContainerState, DaemonSetCounters, DaemonSetObservation, PodObservation,
};

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + s).expect("ts")
}

fn pod(name: &str, state: ContainerState, restarts: i32) -> PodObservation {
    PodObservation {
        name: name.into(),
        uid: None,
        node: Some("cp-1".into()),
        template_generation: None,
        revision_hash: None,
        phase: None,
        ready: false,
        ready_since: None,
        created: None,
        start_time: None,
        deleting_since: None,
        deletion_grace_seconds: None,
        termination_grace_seconds: None,
        containers: vec![ContainerObservation {
            name: "kube-apiserver".into(),
            image: "registry.k8s.io/kube-apiserver:v1.33.1".into(),
            ready: false,
            restart_count: restarts,
            state,
            last_termination: None,
            last_exit_at: None,
        }],
    }
}

fn waiting(reason: &str) -> ContainerState {
    ContainerState::Waiting {
        reason: Some(reason.into()),
        message: None,
    }
}

fn daemonset(pods: Vec<PodObservation>) -> DaemonSetObservation {
    DaemonSetObservation {
        name: "self-hosted-kube-apiserver".into(),
        uid: Some("u".into()),
        resource_version: Some("1".into()),
        generation: Some(1),
        template_generation: Some(1),
        current_revision_hash: None,
        annotations: Default::default(),
        labels: Default::default(),
        selector: Default::default(),
        created: None,
        deleting_since: None,
        template: Default::default(),
        update_strategy: None,
        min_ready_seconds: None,
        revision_history_limit: None,
        status: DaemonSetCounters::default(),
        pods,
    }
}

/// A static node with port sharing, nothing done yet.
fn fresh() -> NodeComponent {
    NodeComponent {
        component: Component::ApiServer,
        node: "cp-1".into(),
        now: at(0),
        deadline: at(100),
        manifest_on_disk: true,
        manifest_in_backup: false,
        static_permits_port_sharing: true,
        static_port_sharing_added: false,
        mirror_permits_port_sharing: true,
        daemonset: None,
        daemonset_gated: false,
        gated_nodes: vec![],
        mirror: Some(pod(
            "kube-apiserver-cp-1",
            ContainerState::Running { started_at: None },
            0,
        )),
        mirror_serving: Ok(()),
        daemonset_pod_serving: Err("no pod".into()),
        checkpoint_kept: None,
        lease_hand_over: None,
        leader: Ok(()),
        leader_here_acquired: None,
        front: None,
    }
}

fn running() -> ContainerState {
    ContainerState::Running {
        started_at: Some(at(1)),
    }
}

fn step(direction: Direction, obs: &NodeComponent) -> String {
    next_step(direction, &Mode::Forward, obs).name().to_string()
}
