//! A rollback must not remove the backup on two nodes just because neither backup pod
//! *counts* as serving (cp-2 NotReady, cp-1's identity not dated): the restored pods' Ready
//! may be a probe the backup answered on the shared port, and once the backup went nothing
//! would serve. A backup pod that may serve needs a real pod on its node that is known to
//! serve before it goes.

use std::time::Duration;

use super::builder::{Pod, World, t, target};
use super::{check, row};
use crate::component::Component;
use crate::component::Component::{ApiServer, Scheduler};
use crate::observation::{IdentitySighting, time};
use crate::pivot::ROLLBACK_STARTED_AT;

/// Two nodes: the new pods crash-looped and selfhost rolled back at `t(70)`; the restored
/// pods are reported Ready since `t(75)`, with no identity of their own yet; the backup pods
/// are in `backup` states.
fn rolled_back(component: Component, backup: [Pod; 2], restored: [Pod; 2]) -> World {
    let mut world = World::steady(component, 2)
        .backup()
        .updated()
        .new_pod("cp-1", Pod::CrashLoop { restarts: 3 })
        .new_pod("cp-2", Pod::CrashLoop { restarts: 3 })
        .rolled_back(70);
    for (i, (b, r)) in backup.into_iter().zip(restored).enumerate() {
        let node = format!("cp-{}", i + 1);
        world = world.backup_pod(&node, b).new_pod(&node, r);
    }
    world
}

const BACKUP_SERVES: Pod = Pod::Serving { started: 2 };
const BACKUP_UNDATED: Pod = Pod::ReadyNoIdentity { started: 2 };
const LYING: Pod = Pod::ReadyNoIdentity { started: 75 };
const RESTORED: Pod = Pod::Serving { started: 75 };

#[test]
fn the_backup_goes_only_where_a_real_pod_is_known_to_serve() {
    check(vec![
        row(
            "K: neither backup pod counts as serving, the restored pods' Ready proves nothing",
            rolled_back(ApiServer, [BACKUP_UNDATED, BACKUP_SERVES], [LYING, LYING])
                .node_not_ready("cp-2")
                .at(80)
                .build(),
            target(ApiServer),
            "wait-for-rollback",
            &[
                "cp-1: the real pod does not serve yet",
                "no identity Lease of its own",
                "cp-2: node is not Ready",
            ],
        ),
        row(
            "a backup pod whose identity is not dated may serve",
            rolled_back(
                ApiServer,
                [BACKUP_UNDATED, BACKUP_UNDATED],
                [LYING, RESTORED],
            )
            .at(80)
            .build(),
            target(ApiServer),
            "wait-for-rollback",
            &["cp-1: the real pod does not serve yet"],
        ),
        row(
            "a backup pod on a NotReady node may serve, whatever the restored pod there says",
            rolled_back(
                ApiServer,
                [BACKUP_SERVES, BACKUP_SERVES],
                [RESTORED, RESTORED],
            )
            .node_not_ready("cp-2")
            .at(80)
            .build(),
            target(ApiServer),
            "wait-for-rollback",
            &["cp-2: node is not Ready"],
        ),
        row(
            "the node is back and the restored pods serve by their own identities",
            rolled_back(
                ApiServer,
                [BACKUP_UNDATED, BACKUP_SERVES],
                [RESTORED, RESTORED],
            )
            .at(80)
            .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-1\""],
        ),
        row(
            "a backup pod reported not Ready may serve: on a shared port its probe reaches \
             whichever process the kernel picks",
            rolled_back(
                ApiServer,
                [Pod::Starting { started: 2 }, BACKUP_SERVES],
                [LYING, RESTORED],
            )
            .at(80)
            .build(),
            target(ApiServer),
            "wait-for-rollback",
            &["cp-1: the real pod does not serve yet"],
        ),
        row(
            "a backup pod without a running process holds nothing back",
            rolled_back(
                ApiServer,
                [Pod::CrashLoop { restarts: 4 }, Pod::ImagePull],
                [LYING, LYING],
            )
            .at(80)
            .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-1\""],
        ),
        row(
            "a terminating backup pod has left the port already",
            rolled_back(
                ApiServer,
                [BACKUP_UNDATED, BACKUP_UNDATED],
                [RESTORED, LYING],
            )
            .backup_pod_terminating("cp-2", 5)
            .at(80)
            .build(),
            target(ApiServer),
            // It has left the rollback's reckoning, not the shared port: the next node's
            // backup pod goes once it has stopped (`drain.rs`).
            "wait-for-backup-gone",
            &["cp-2: backup pod", "is stopping"],
        ),
        row(
            "standbys: the backup scheduler on a NotReady node waits for the node",
            rolled_back(
                Scheduler,
                [BACKUP_SERVES, BACKUP_SERVES],
                [RESTORED, RESTORED],
            )
            .node_not_ready("cp-2")
            .at(80)
            .leader("cp-1", 76)
            .build(),
            target(Scheduler),
            "wait-for-rollback",
            &["cp-2: node is not Ready"],
        ),
    ]);
}

#[test]
fn an_untouched_original_pod_succeeds_a_backup_whose_identity_is_not_dated() {
    // The backup never served by its own identity, so the rollback only recorded itself and
    // the original pods, running since long before the backup, were never replaced: they
    // served when the run began. Two processes on one host Lease cannot be told apart, but
    // removing the backup takes nothing the cluster had before the run away.
    let aborted = World::steady(ApiServer, 2)
        .backup()
        .backup_pod("cp-1", BACKUP_UNDATED)
        .backup_pod("cp-2", BACKUP_UNDATED)
        .rollback_recorded(20);
    check(vec![
        row(
            "remove the backup, one node at a time",
            aborted.clone().at(21).build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-1\""],
        ),
        row(
            "but not while a node is NotReady",
            aborted.node_not_ready("cp-2").at(21).build(),
            target(ApiServer),
            "wait-for-rollback",
            &["cp-2: node is not Ready"],
        ),
    ]);
}

#[test]
fn a_holder_seen_before_our_rollback_is_not_the_restored_pods() {
    // One node. The backup's process took its host's identity Lease back at 70.2 s, first
    // seen by the engine then; the rollback was written at 70.5 s, so the restored pod's
    // process, reported started in second 70, started after it: the holder is the backup's.
    // Attributed by the whole second, it vouched for the restored pod (which never finished
    // starting) and the backup went.
    let mut world = World::steady(ApiServer, 1)
        .backup()
        .updated()
        .new_pod("cp-1", Pod::CrashLoop { restarts: 3 })
        .rolled_back(70)
        .backup_pod("cp-1", BACKUP_UNDATED)
        .new_pod("cp-1", Pod::ReadyNoIdentity { started: 70 })
        .at(75);
    let after = |ms| time::after(t(70), Duration::from_millis(ms));
    world
        .real_mut()
        .annotations
        .insert(ROLLBACK_STARTED_AT.into(), time::format(after(500)));
    world.obs.identity_leases.push(IdentitySighting {
        lease: "apiserver-cp-1".into(),
        hostname: Some("cp-1".into()),
        holder: "apiserver-cp-1_backup".into(),
        holder_since: Some(after(200)),
        last_renewed: Some(t(75)),
        first_seen: Some(after(200)),
    });
    check(vec![row(
        "the backup's holder is not the restored pod's",
        world.build(),
        target(ApiServer),
        "wait-for-rollback",
        &["cp-1: the real pod does not serve yet"],
    )]);
}
