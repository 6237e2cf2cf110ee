//! Which process an identity holder belongs to, when every apiserver process of a host takes
//! the host's one Lease (`apiserver-<hash of hostname>`) over with its own holder identity and
//! the kubelet reports process starts in whole seconds.

use std::time::Duration;

use super::builder::{Pod, World, t, target};
use super::{check, row};
use crate::component::Component::ApiServer;
use crate::observation::{IdentitySighting, Observation, time};
use crate::pivot::UPDATE_STARTED_AT;

/// `t(seconds) + millis`.
fn t_ms(seconds: i64, millis: u64) -> k8s_openapi::jiff::Timestamp {
    time::after(t(seconds), Duration::from_millis(millis))
}

/// One node with fast pod latencies: the backup's process started in second 2 and its holder
/// first took the host's Lease at 2.2 s; selfhost updated the real DaemonSet at
/// `2 s + update_ms`; the target pod's process started in second 2 too (the kubelet says
/// `t(2)`) and never becomes Ready. Observed `at` seconds.
fn one_second_pivot(update_ms: u64, at: i64) -> Observation {
    let mut world = World::steady(ApiServer, 1)
        .backup()
        .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
        .updated()
        .new_pod("cp-1", Pod::Starting { started: 2 })
        .at(at);
    world
        .real_mut()
        .annotations
        .insert(UPDATE_STARTED_AT.into(), time::format(t_ms(2, update_ms)));
    world.obs.identity_leases = vec![IdentitySighting {
        lease: "apiserver-cp1hash".into(),
        hostname: Some("cp-1".into()),
        holder: "apiserver-cp1hash_backup-uuid".into(),
        holder_since: Some(t_ms(2, 200)),
        last_renewed: Some(t(at)),
    }];
    world.build()
}

#[test]
fn a_holder_seen_before_our_update_is_not_the_pod_the_update_created() {
    check(vec![
        row(
            "the target pod, created by our update at 2.36 s, cannot be the holder of 2.2 s",
            one_second_pivot(360, 303),
            target(ApiServer),
            "roll-back",
            &["not complete 300s after", "is not Ready"],
        ),
        row(
            "the same before the deadline: wait, the backup still serves",
            one_second_pivot(360, 100),
            target(ApiServer),
            "wait-for-rollout",
            &["is not Ready"],
        ),
        row(
            "an update recorded before the holder appeared proves nothing: not safe",
            one_second_pivot(100, 303),
            target(ApiServer),
            "failed",
            &["rolling back is not safe", "no identity Lease of its own"],
        ),
    ]);
}

#[test]
fn a_process_started_before_the_holder_appeared_keeps_it_ambiguous() {
    // The old real pod restarted in second 2 (not created by our update): it may have taken
    // the Lease at 2.2 s as well as the backup's process.
    let mut world = World::steady(ApiServer, 1)
        .backup()
        .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
        .at(5);
    for pod in &mut world.real_mut().pods {
        pod.containers[0].state = crate::observation::ContainerState::Running {
            started_at: Some(t(2)),
        };
    }
    world.obs.identity_leases = vec![IdentitySighting {
        lease: "apiserver-cp1hash".into(),
        hostname: Some("cp-1".into()),
        holder: "apiserver-cp1hash_who".into(),
        holder_since: Some(t_ms(2, 200)),
        last_renewed: Some(t(5)),
    }];
    check(vec![row(
        "restarted old process or backup: nobody is proven to serve",
        world.build(),
        target(ApiServer),
        "wait-for-backup",
        &["no identity Lease of its own"],
    )]);
}
