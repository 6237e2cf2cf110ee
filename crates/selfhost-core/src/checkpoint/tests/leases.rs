//! What the Leases decide: a kube-apiserver pod serves by its own identity, and a leader Lease
//! whose holder stopped on this node is handed over.

use super::builder::{node_at, t};
use super::{check, row};
use crate::checkpoint::CheckpointPhase::{
    Activated, HolderGone, Keeping, Kept, TakingOver, Unserved,
};
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};
use crate::observation::ContainerState;

fn running_since(secs: i64) -> ContainerState {
    ContainerState::Running {
        started_at: Some(t(secs)),
    }
}

fn stopped() -> ContainerState {
    ContainerState::Terminated {
        reason: Some("Completed".into()),
        exit_code: 0,
        finished_at: Some(t(280)),
    }
}

#[test]
fn a_kube_apiserver_pod_serves_once_its_own_identity_is_renewed() {
    check(vec![
        row(
            "alone on the node, an identity of this node renewed after it started: kept",
            node_at(300)
                .serving(ApiServer, "rev-a", 100)
                .leases()
                .identity("cp-1", "apiserver-1", 295)
                .build(),
            ApiServer,
            Keeping,
            &["keep", "rev-a"],
        ),
        row(
            "the only renewal fell in the second it started: it may be another process's",
            node_at(300)
                .serving(ApiServer, "rev-a", 290)
                .leases()
                .identity("cp-1", "apiserver-1", 290)
                .build(),
            ApiServer,
            Unserved,
            &["does not serve"],
        ),
        row(
            "Ready beside kubeadm's apiserver, one identity between the two: the probe may \
             have been answered by the other process",
            node_at(300)
                .serving(ApiServer, "rev-a", 100)
                .kubeadm_static(ApiServer)
                .other(ApiServer, "kube-apiserver-cp-1", running_since(10))
                .leases()
                .identity("cp-1", "kubeadm-process", 295)
                .build(),
            ApiServer,
            Unserved,
            &["does not serve"],
        ),
        row(
            "beside kubeadm's apiserver, two identities renewed since: both serve",
            node_at(300)
                .serving(ApiServer, "rev-a", 100)
                .kubeadm_static(ApiServer)
                .other(ApiServer, "kube-apiserver-cp-1", running_since(10))
                .leases()
                .identity("cp-1", "kubeadm-process", 295)
                .identity("cp-1", "daemonset-process", 292)
                .build(),
            ApiServer,
            Keeping,
            &["rev-a"],
        ),
        row(
            "identities only on the other node: this node's pod publishes none",
            node_at(300)
                .serving(ApiServer, "rev-a", 100)
                .leases()
                .identity("cp-2", "apiserver-2", 295)
                .build(),
            ApiServer,
            Unserved,
            &["does not serve"],
        ),
        row(
            "hosts sharing one hostname tell no node apart: Ready counts",
            node_at(300)
                .serving(ApiServer, "rev-a", 100)
                .leases()
                .shared_hostname()
                .identity("shared", "apiserver-2", 295)
                .build(),
            ApiServer,
            Keeping,
            &["rev-a"],
        ),
        row(
            "no identity published anywhere (an old version, or the gate off): Ready counts",
            node_at(300)
                .serving(ApiServer, "rev-a", 100)
                .leases()
                .build(),
            ApiServer,
            Keeping,
            &["rev-a"],
        ),
    ]);
}

#[test]
fn a_kube_apiserver_copy_is_retired_only_once_the_daemonset_pod_has_its_own_identity() {
    check(vec![
        row(
            "Ready, but one identity for the copy and the pod: the copy stays",
            node_at(300)
                .active(ApiServer, "rev-a", true)
                .kept(ApiServer, "rev-a")
                .other(ApiServer, "selfhost-copy-cp-1", running_since(200))
                .serving(ApiServer, "rev-a", 260)
                .started(ApiServer, 250)
                .leases()
                .identity("cp-1", "copy-process", 295)
                .build(),
            ApiServer,
            Activated,
            &["does not serve yet"],
        ),
        row(
            "two identities renewed since the pod started: retired",
            node_at(300)
                .active(ApiServer, "rev-a", true)
                .kept(ApiServer, "rev-a")
                .other(ApiServer, "selfhost-copy-cp-1", running_since(200))
                .serving(ApiServer, "rev-a", 260)
                .started(ApiServer, 250)
                .leases()
                .identity("cp-1", "copy-process", 295)
                .identity("cp-1", "daemonset-process", 291)
                .build(),
            ApiServer,
            TakingOver,
            &["retire", "rev-a"],
        ),
    ]);
}

#[test]
fn where_leases_are_read_a_copy_is_retired_only_once_its_mirror_pod_is_shown() {
    check(vec![
        row(
            "the scheduler's DaemonSet pod serves, the copy's mirror pod is not shown yet",
            node_at(300)
                .active(Scheduler, "rev-a", true)
                .kept(Scheduler, "rev-a")
                .without_mirror_pod(Scheduler)
                .serving(Scheduler, "rev-a", 290)
                .leases()
                .build(),
            Scheduler,
            Activated,
            &["does not serve yet"],
        ),
        row(
            "the same with the mirror pod shown: retired",
            node_at(300)
                .active(Scheduler, "rev-a", true)
                .kept(Scheduler, "rev-a")
                .other(Scheduler, "selfhost-copy-cp-1", running_since(200))
                .serving(Scheduler, "rev-a", 290)
                .leases()
                .build(),
            Scheduler,
            TakingOver,
            &["retire"],
        ),
    ]);
}

#[test]
fn a_leader_lease_is_handed_over_once_its_holder_here_has_stopped() {
    check(vec![
        row(
            "held from this node since before every process of it here started: handed over",
            node_at(300)
                .kept(Scheduler, "rev-a")
                .serving(Scheduler, "rev-a", 200)
                .leases()
                .leader(Scheduler, "cp-1", 100)
                .build(),
            Scheduler,
            HolderGone,
            &["hand-over", "kube-scheduler", "cp-1_0f6e", "42"],
        ),
        row(
            "the retired copy's mirror pod shows its process stopped: handed over",
            node_at(300)
                .kept(ControllerManager, "rev-a")
                .serving(ControllerManager, "rev-a", 200)
                .other(ControllerManager, "selfhost-copy-cp-1", stopped())
                .leases()
                .leader(ControllerManager, "cp-1", 100)
                .build(),
            ControllerManager,
            HolderGone,
            &["kube-controller-manager"],
        ),
        row(
            "the DaemonSet pod crash-loops: its process is not running, handed over",
            node_at(300)
                .kept(Scheduler, "rev-a")
                .not_serving(Scheduler, "rev-a")
                .process(
                    Scheduler,
                    ContainerState::Waiting {
                        reason: Some("CrashLoopBackOff".into()),
                        message: None,
                    },
                )
                .leases()
                .leader(Scheduler, "cp-1", 100)
                .build(),
            Scheduler,
            HolderGone,
            &["kube-scheduler"],
        ),
    ]);
}

#[test]
fn a_leader_lease_is_never_handed_over_while_its_holder_may_run() {
    check(vec![
        row(
            "the DaemonSet pod's process started before the acquisition: it may lead",
            node_at(300)
                .kept(Scheduler, "rev-a")
                .serving(Scheduler, "rev-a", 100)
                .leases()
                .leader(Scheduler, "cp-1", 150)
                .build(),
            Scheduler,
            Kept,
            &["is kept"],
        ),
        row(
            "the retired copy's mirror pod still shows it running",
            node_at(300)
                .kept(Scheduler, "rev-a")
                .serving(Scheduler, "rev-a", 200)
                .other(Scheduler, "selfhost-copy-cp-1", running_since(90))
                .leases()
                .leader(Scheduler, "cp-1", 100)
                .build(),
            Scheduler,
            Kept,
            &["is kept"],
        ),
        row(
            "a process whose state its kubelet has not reported",
            node_at(300)
                .kept(Scheduler, "rev-a")
                .serving(Scheduler, "rev-a", 200)
                .other(Scheduler, "backup-pod", ContainerState::Unknown)
                .leases()
                .leader(Scheduler, "cp-1", 100)
                .build(),
            Scheduler,
            Kept,
            &["is kept"],
        ),
        row(
            "held from the other node",
            node_at(300)
                .kept(Scheduler, "rev-a")
                .serving(Scheduler, "rev-a", 200)
                .leases()
                .leader(Scheduler, "cp-2", 100)
                .build(),
            Scheduler,
            Kept,
            &["is kept"],
        ),
        row(
            "held from a hostname every node shares",
            node_at(300)
                .kept(Scheduler, "rev-a")
                .serving(Scheduler, "rev-a", 200)
                .leases()
                .shared_hostname()
                .leader(Scheduler, "shared", 100)
                .build(),
            Scheduler,
            Kept,
            &["is kept"],
        ),
        row(
            "this node is not Ready: its pods' states may be stale",
            node_at(300)
                .kept(Scheduler, "rev-a")
                .serving(Scheduler, "rev-a", 200)
                .leases()
                .node_not_ready()
                .leader(Scheduler, "cp-1", 100)
                .build(),
            Scheduler,
            Kept,
            &["is kept"],
        ),
        row(
            "kubeadm's static pod is back and may be the holder",
            node_at(300)
                .kept(Scheduler, "rev-a")
                .serving(Scheduler, "rev-a", 200)
                .kubeadm_static(Scheduler)
                .leases()
                .leader(Scheduler, "cp-1", 100)
                .build(),
            Scheduler,
            Kept,
            &["is kept"],
        ),
        row(
            "no DaemonSet pod here: the holder may run outside what the API shows",
            node_at(300)
                .kept(Scheduler, "rev-a")
                .leases()
                .leader(Scheduler, "cp-1", 100)
                .build(),
            Scheduler,
            Unserved,
            &["no DaemonSet pod"],
        ),
        row(
            "the kube-apiserver has no leader Lease to hand over",
            node_at(300)
                .kept(ApiServer, "rev-a")
                .serving(ApiServer, "rev-a", 200)
                .leases()
                .leader(ApiServer, "cp-1", 100)
                .build(),
            ApiServer,
            Kept,
            &["is kept"],
        ),
    ]);
}
