//! Keeping: a DaemonSet pod is kept once it has served for the soak, and only then.

use super::builder::{node_at, node_at_ms, t};
use super::{check, row};
use crate::checkpoint::CheckpointPhase::{Keeping, Kept, Soaking, Unserved};
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};

#[test]
fn a_pod_is_kept_once_it_has_served_for_the_soak() {
    check(vec![
        row(
            "served exactly the soak, nothing stored: kept",
            node_at(110).serving(ApiServer, "rev-a", 100).build(),
            ApiServer,
            Keeping,
            &["rev-a", "uid-rev-a", "image-of-rev-a"],
        ),
        row(
            "served just over the soak: kept",
            node_at_ms(110_001).serving(ApiServer, "rev-a", 100).build(),
            ApiServer,
            Keeping,
            &["rev-a"],
        ),
        row(
            "served just under the soak: soaking until it ends",
            node_at_ms(109_999).serving(ApiServer, "rev-a", 100).build(),
            ApiServer,
            Soaking,
            &["the DaemonSet pod has served for 9 s of 10 s"],
        )
        .recheck_at(t(110)),
        row(
            "began to serve now: soaking for the whole soak",
            node_at(100).serving(Scheduler, "rev-a", 100).build(),
            Scheduler,
            Soaking,
            &["0 s of 10 s"],
        )
        .recheck_at(t(110)),
        row(
            "served since a time ahead of the agent's clock: soaking, never negative",
            node_at(100).serving(Scheduler, "rev-a", 105).build(),
            Scheduler,
            Soaking,
            &["0 s of 10 s"],
        )
        .recheck_at(t(115)),
        row(
            "the controller-manager is kept like the others",
            node_at(200)
                .serving(ControllerManager, "rev-a", 100)
                .build(),
            ControllerManager,
            Keeping,
            &["rev-a"],
        ),
    ]);
}

#[test]
fn a_checkpoint_of_another_revision_is_replaced_and_one_of_this_revision_kept() {
    check(vec![
        row(
            "an older revision is stored: the serving pod replaces it",
            node_at(200)
                .serving(ApiServer, "rev-b", 100)
                .kept(ApiServer, "rev-a")
                .build(),
            ApiServer,
            Keeping,
            &["rev-b"],
        ),
        row(
            "the new revision has not soaked: the old checkpoint stays meanwhile",
            node_at(103)
                .serving(ApiServer, "rev-b", 100)
                .kept(ApiServer, "rev-a")
                .build(),
            ApiServer,
            Soaking,
            &["3 s of 10 s"],
        )
        .recheck_at(t(110)),
        row(
            "this revision is stored: nothing to do",
            node_at(200)
                .serving(ApiServer, "rev-a", 100)
                .kept(ApiServer, "rev-a")
                .build(),
            ApiServer,
            Kept,
            &["rev-a is kept"],
        ),
    ]);
}

#[test]
fn a_pod_that_does_not_serve_is_never_kept() {
    check(vec![
        row(
            "not serving, nothing stored: nothing to keep",
            node_at(200).not_serving(ApiServer, "rev-a").build(),
            ApiServer,
            Unserved,
            &["revision rev-a", "does not serve"],
        ),
        row(
            "mid-upgrade: the new revision does not serve; the old checkpoint stays",
            node_at(200)
                .not_serving(ApiServer, "rev-b")
                .kept(ApiServer, "rev-a")
                .build(),
            ApiServer,
            Unserved,
            &["revision rev-b", "does not serve"],
        ),
        row(
            "not serving, though a process of the component answers locally",
            node_at(200)
                .not_serving(ControllerManager, "rev-a")
                .local(ControllerManager)
                .build(),
            ControllerManager,
            Unserved,
            &["does not serve"],
        ),
        row(
            "no DaemonSet pod on the node",
            node_at(200).kept(Scheduler, "rev-a").build(),
            Scheduler,
            Unserved,
            &["no DaemonSet pod"],
        ),
        row(
            "a component the observation does not mention: nothing at all",
            node_at(200).serving(ApiServer, "rev-a", 100).build(),
            Scheduler,
            Unserved,
            &["no DaemonSet pod"],
        ),
    ]);
}
