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
        first_seen: None,
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
        first_seen: None,
    }];
    check(vec![row(
        "restarted old process or backup: nobody is proven to serve",
        world.build(),
        target(ApiServer),
        "wait-for-backup",
        &["no identity Lease of its own"],
    )]);
}

/// The host's one identity Lease, held by `holder` since `since`, renewed at `renewed`.
fn host_lease(holder: &str, since: Option<i64>, renewed: i64) -> IdentitySighting {
    IdentitySighting {
        lease: "apiserver-cp1hash".into(),
        hostname: Some("cp-1".into()),
        holder: format!("apiserver-cp1hash_{holder}"),
        holder_since: since.map(t),
        last_renewed: Some(t(renewed)),
        first_seen: None,
    }
}

/// One node, backup serving by its own holder of the host's Lease since `t(4)`, real
/// DaemonSet updated; the new pod's probe was answered by the backup's process (a lie), so it
/// is Ready since `t(60)` without a holder of its own. Observed at `t(at)`.
fn lying_new_pod(at: i64) -> World {
    let mut world = World::steady(ApiServer, 1)
        .backup()
        .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
        .updated()
        .new_pod("cp-1", Pod::ReadyNoIdentity { started: 60 })
        .at(at);
    world.obs.identity_leases = vec![host_lease("backup", Some(4), at - 1)];
    world
}

#[test]
fn a_probe_answered_by_another_process_on_the_shared_port_is_never_enough() {
    let mut backing_up = World::steady(ApiServer, 1)
        .backup()
        .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
        .at(30);
    // Only the old process keeps renewing the host's Lease: the backup's Ready was the old
    // process answering its probe.
    backing_up.obs.identity_leases = vec![host_lease("old", None, 29)];
    let mut with_own_holder = lying_new_pod(90);
    with_own_holder
        .obs
        .identity_leases
        .push(host_lease("new", Some(62), 89));
    let mut terminating = lying_new_pod(90);
    terminating.backup_mut().daemonset.pods[0].deleting_since = Some(t(85));
    terminating.backup_mut().daemonset.pods[0].deletion_grace_seconds = Some(30);
    check(vec![
        row(
            "the backup Ready by the old process's answer: no update",
            backing_up.build(),
            target(ApiServer),
            "wait-for-backup",
            &["no identity Lease of its own"],
        ),
        row(
            "the new pod Ready by the backup's answer: the backup stays",
            lying_new_pod(90).build(),
            target(ApiServer),
            "wait-for-rollout",
            &["no identity Lease of its own"],
        ),
        row(
            "a lying successor never shortens a Terminating apiserver's grace",
            terminating.build(),
            target(ApiServer),
            "wait-for-rollout",
            &[],
        ),
        row(
            "its own holder took the host's Lease after it started: now it serves",
            with_own_holder.build(),
            target(ApiServer),
            "remove-backup",
            &[],
        ),
    ]);
}
