//! Retiring: an active copy goes once the API answers and the DaemonSet pod serves, and never
//! before.

use super::builder::node_at;
use super::{check, row};
use crate::checkpoint::CheckpointPhase::{
    Activated, Keeping, StaticOnNode, Superseded, TakingOver,
};
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};

#[test]
fn a_copy_is_retired_once_the_daemonset_pod_serves() {
    check(vec![
        row(
            "the API answers and the DaemonSet pod serves: retired",
            node_at(300)
                .active(ApiServer, "rev-a", true)
                .kept(ApiServer, "rev-a")
                .serving(ApiServer, "rev-a", 290)
                .local(ApiServer)
                .build(),
            ApiServer,
            TakingOver,
            &["retire", "rev-a"],
        ),
        row(
            "the DaemonSet pod began to serve now: it serves by itself, no soak needed",
            node_at(300)
                .active(Scheduler, "rev-a", true)
                .kept(Scheduler, "rev-a")
                .serving(Scheduler, "rev-a", 300)
                .build(),
            Scheduler,
            TakingOver,
            &["rev-a"],
        ),
        row(
            "the DaemonSet pod runs a newer revision and serves: the old copy goes",
            node_at(300)
                .active(ControllerManager, "rev-a", true)
                .kept(ControllerManager, "rev-a")
                .serving(ControllerManager, "rev-b", 295)
                .build(),
            ControllerManager,
            TakingOver,
            &["rev-a"],
        ),
    ]);
}

#[test]
fn a_copy_stays_while_the_daemonset_pod_does_not_serve() {
    check(vec![
        row(
            "the API answers (through the copy); the DaemonSet pod does not serve",
            node_at(300)
                .active(ApiServer, "rev-a", true)
                .kept(ApiServer, "rev-a")
                .not_serving(ApiServer, "rev-a")
                .local(ApiServer)
                .build(),
            ApiServer,
            Activated,
            &[
                "the API answers",
                "does not serve yet",
                "rev-a serves on this node",
            ],
        ),
        row(
            "the API answers; no DaemonSet pod on the node yet",
            node_at(300)
                .active(ApiServer, "rev-a", true)
                .kept(ApiServer, "rev-a")
                .build(),
            ApiServer,
            Activated,
            &["no DaemonSet pod on this node yet"],
        ),
        row(
            "the API is unreachable, whatever the last DaemonSet pod shown",
            node_at(300)
                .api_down_since(250)
                .active(Scheduler, "rev-a", true)
                .kept(Scheduler, "rev-a")
                .serving(Scheduler, "rev-a", 100)
                .build(),
            Scheduler,
            Activated,
            &["unreachable"],
        ),
        row(
            "a new revision's DaemonSet pod does not serve yet: the old copy stays",
            node_at(300)
                .active(ControllerManager, "rev-a", false)
                .not_serving(ControllerManager, "rev-b")
                .build(),
            ControllerManager,
            Activated,
            &["revision rev-b", "does not serve yet"],
        ),
    ]);
}

#[test]
fn a_component_kubeadms_static_pod_runs_again_is_never_started_from_its_checkpoint() {
    check(vec![
        row(
            "converted back to static pods while its copy ran: the static pod takes its place",
            node_at(300)
                .api_down_since(200)
                .active(ApiServer, "rev-a", true)
                .kept(ApiServer, "rev-a")
                .kubeadm_static(ApiServer)
                .build(),
            ApiServer,
            Superseded,
            &["retire", "rev-a"],
        ),
        row(
            "the API is gone long past the grace, a checkpoint is stored: never activated",
            node_at(300)
                .api_down_since(200)
                .kept(Scheduler, "rev-a")
                .kubeadm_static(Scheduler)
                .build(),
            Scheduler,
            StaticOnNode,
            &["never activated"],
        ),
        row(
            "a conversion under way: the DaemonSet pod serving beside it is kept, for the \
             conversion to move the static manifest aside",
            node_at(300)
                .serving(ControllerManager, "rev-a", 100)
                .kubeadm_static(ControllerManager)
                .build(),
            ControllerManager,
            Keeping,
            &["keep", "rev-a"],
        ),
        row(
            "its DaemonSet pod kept, then the API gone: still never activated",
            node_at(300)
                .api_down_since(100)
                .kept(ControllerManager, "rev-a")
                .kubeadm_static(ControllerManager)
                .kubeadm_static(ApiServer)
                .build(),
            ControllerManager,
            StaticOnNode,
            &["never activated"],
        ),
    ]);
}
