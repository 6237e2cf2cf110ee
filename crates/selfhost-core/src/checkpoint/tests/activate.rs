//! Activating: a checkpoint becomes a static pod only when the API has been gone for the
//! grace, nothing of the component serves on the node, and — for the controllers — a
//! kube-apiserver is there for them.

use super::builder::{node_at, node_at_ms, t};
use super::{check, row};
use crate::checkpoint::CheckpointPhase::{
    Activated, AwaitingApiServer, InGrace, Orphaned, ServedLocally, Unkept,
};
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};

#[test]
fn a_checkpoint_is_activated_once_the_api_has_been_gone_for_the_grace() {
    check(vec![
        row(
            "unreachable exactly the grace: activated",
            node_at(110)
                .api_down_since(100)
                .kept(ApiServer, "rev-a")
                .build(),
            ApiServer,
            Orphaned,
            &["activate", "rev-a", "image-of-rev-a"],
        ),
        row(
            "unreachable just over the grace: activated",
            node_at_ms(110_001)
                .api_down_since(100)
                .kept(ApiServer, "rev-a")
                .build(),
            ApiServer,
            Orphaned,
            &["rev-a"],
        ),
        row(
            "unreachable just under the grace: it may be one restart",
            node_at_ms(109_999)
                .api_down_since(100)
                .kept(ApiServer, "rev-a")
                .build(),
            ApiServer,
            InGrace,
            &["the API has been unreachable for 9 s of 10 s"],
        )
        .recheck_at(t(110)),
        row(
            "unreachable for 3 s: the grace goes on",
            node_at(103)
                .api_down_since(100)
                .kept(ApiServer, "rev-a")
                .build(),
            ApiServer,
            InGrace,
            &["3 s of 10 s"],
        )
        .recheck_at(t(110)),
        row(
            "the last DaemonSet pod the API showed does not matter once it is gone",
            node_at(200)
                .api_down_since(100)
                .serving(ApiServer, "rev-b", 50)
                .kept(ApiServer, "rev-a")
                .build(),
            ApiServer,
            Orphaned,
            &["rev-a"],
        ),
    ]);
}

#[test]
fn nothing_is_activated_beside_a_serving_process_or_without_a_checkpoint() {
    check(vec![
        row(
            "the kube-apiserver answers locally (the cluster's address does not)",
            node_at(200)
                .api_down_since(100)
                .kept(ApiServer, "rev-a")
                .local(ApiServer)
                .build(),
            ApiServer,
            ServedLocally,
            &["serves on this node"],
        ),
        row(
            "a local process within the grace: it serves, whatever the grace",
            node_at(101)
                .api_down_since(100)
                .kept(Scheduler, "rev-a")
                .local(Scheduler)
                .build(),
            Scheduler,
            ServedLocally,
            &["nothing to activate"],
        ),
        row(
            "nothing stored",
            node_at(200).api_down_since(100).build(),
            ApiServer,
            Unkept,
            &["no checkpoint is stored"],
        ),
        row(
            "already active: it stays",
            node_at(200)
                .api_down_since(100)
                .kept(ApiServer, "rev-a")
                .active(ApiServer, "rev-a", false)
                .build(),
            ApiServer,
            Activated,
            &["unreachable", "revision rev-a", "does not serve yet"],
        ),
        row(
            "already active and serving",
            node_at(200)
                .api_down_since(100)
                .kept(ApiServer, "rev-a")
                .active(ApiServer, "rev-a", true)
                .local(ApiServer)
                .build(),
            ApiServer,
            Activated,
            &["the copy of revision rev-a serves on this node"],
        ),
    ]);
}

#[test]
fn the_controllers_wait_for_a_kube_apiserver_on_the_node() {
    check(vec![
        row(
            "controller-manager: no kube-apiserver copy, none serving",
            node_at(200)
                .api_down_since(100)
                .kept(ApiServer, "api-a")
                .kept(ControllerManager, "cm-a")
                .build(),
            ControllerManager,
            AwaitingApiServer,
            &["cm-a", "waits for a kube-apiserver"],
        ),
        row(
            "scheduler: no kube-apiserver copy, none serving",
            node_at(200)
                .api_down_since(100)
                .kept(Scheduler, "sched-a")
                .build(),
            Scheduler,
            AwaitingApiServer,
            &["sched-a"],
        ),
        row(
            "controller-manager: the kube-apiserver's copy is active, not serving yet",
            node_at(200)
                .api_down_since(100)
                .kept(ApiServer, "api-a")
                .active(ApiServer, "api-a", false)
                .kept(ControllerManager, "cm-a")
                .build(),
            ControllerManager,
            Orphaned,
            &["cm-a"],
        ),
        row(
            "scheduler: a kube-apiserver serves locally without a copy",
            node_at(200)
                .api_down_since(100)
                .local(ApiServer)
                .kept(Scheduler, "sched-a")
                .build(),
            Scheduler,
            Orphaned,
            &["sched-a"],
        ),
        row(
            "controller-manager within the grace: the grace comes first",
            node_at(105)
                .api_down_since(100)
                .kept(ControllerManager, "cm-a")
                .build(),
            ControllerManager,
            InGrace,
            &["5 s of 10 s"],
        )
        .recheck_at(t(110)),
    ]);
}
