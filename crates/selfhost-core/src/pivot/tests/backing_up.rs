//! Waiting for the backup to serve, and the update of the real DaemonSet.

use super::builder::{Pod, World, t, target};
use super::{check, decide, row, with};
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};
use crate::observation::{ContainerState, IdentitySighting, Observation};
use crate::pivot::{Step, UPDATE_STARTED_AT};

fn one_node() -> World {
    World::steady(ApiServer, 1).backup()
}

/// The backup pod on cp-1 is reported Ready since `t(2)`, and an identity with this history
/// is the only one seen on cp-1 (the old process's identity is not seen).
fn backup_with_identity(since: Option<i64>, renewed: i64) -> Observation {
    let mut world = one_node()
        .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
        .at(10);
    world.obs.identity_leases.clear();
    world.obs.identity_leases.push(IdentitySighting {
        lease: "apiserver-cp-1".into(),
        hostname: Some("cp-1".into()),
        holder: "apiserver-cp-1_new".into(),
        holder_since: since.map(t),
        last_renewed: Some(t(renewed)),
        first_seen: None,
    });
    world.build()
}

#[test]
fn the_backup_must_serve_by_its_own_identity_before_anything_changes() {
    check(vec![
        row(
            "no backup pod yet",
            one_node().build(),
            target(ApiServer),
            "wait-for-backup",
            &[
                "cp-1: no backup pod yet",
                "apiserver.kubernetes.io/identity=kube-apiserver",
            ],
        ),
        row(
            "backup pod being created",
            one_node().backup_pod("cp-1", Pod::Creating).build(),
            target(ApiServer),
            "wait-for-backup",
            &["has no running kube-apiserver process"],
        ),
        row(
            "lying readiness: Ready but no identity of its own",
            one_node()
                .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
                .at(60)
                .build(),
            target(ApiServer),
            "wait-for-backup",
            &["no identity Lease of its own"],
        ),
        row(
            "an identity that predates the backup's process",
            backup_with_identity(Some(1), 9),
            target(ApiServer),
            "wait-for-backup",
            &["no identity Lease of its own"],
        ),
        row(
            "an identity already held when the engine started watching",
            backup_with_identity(None, 9),
            target(ApiServer),
            "wait-for-backup",
            &[],
        ),
        row(
            "its own identity, but no longer renewed",
            backup_with_identity(Some(4), -25),
            target(ApiServer),
            "wait-for-backup",
            &[],
        ),
        row(
            "its own identity, renewed",
            backup_with_identity(Some(4), 9),
            target(ApiServer),
            "update-real",
            &[
                UPDATE_STARTED_AT,
                "\"resource_version\":\"100\"",
                "kube-apiserver:v1.33.1",
            ],
        ),
        row(
            "serving on two of three nodes",
            World::steady(ApiServer, 3)
                .backup()
                .backup_pod("cp-1", Pod::Serving { started: 2 })
                .backup_pod("cp-2", Pod::Serving { started: 2 })
                .backup_pod("cp-3", Pod::ReadyNoIdentity { started: 2 })
                .build(),
            target(ApiServer),
            "wait-for-backup",
            &["cp-3: pod"],
        ),
        row(
            "serving on every node of three",
            World::steady(ApiServer, 3)
                .backup()
                .backup_serving()
                .build(),
            target(ApiServer),
            "update-real",
            &[],
        ),
        row(
            "a node goes NotReady mid-run",
            World::steady(ApiServer, 3)
                .backup()
                .backup_serving()
                .node_not_ready("cp-2")
                .build(),
            target(ApiServer),
            "wait-for-backup",
            &["cp-2: node is not Ready; waiting for it"],
        ),
    ]);
}

#[test]
fn a_probe_answered_by_another_process_never_lets_the_pivot_proceed() {
    // The backup's process is Ready by its probe, a second apiserver process on the node
    // (the old one, restarted) started after it, and a new holder appeared after both: the
    // holder may be the restarted process's, so it vouches for nobody.
    let mut world = one_node()
        .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
        .at(20);
    for pod in &mut world.real_mut().pods {
        pod.containers[0].state = ContainerState::Running {
            started_at: Some(t(5)),
        };
    }
    // The old process died when it restarted; its identity was last renewed before that.
    for sighting in &mut world.obs.identity_leases {
        sighting.last_renewed = Some(t(4));
    }
    world.obs.identity_leases.push(IdentitySighting {
        lease: "apiserver-cp-1".into(),
        hostname: Some("cp-1".into()),
        holder: "apiserver-cp-1_who".into(),
        holder_since: Some(t(8)),
        last_renewed: Some(t(18)),
        first_seen: None,
    });
    let step = decide(&world.build(), &target(ApiServer));
    assert_eq!(step.name(), "wait-for-backup", "{}", step.description());
}

#[test]
fn without_identity_leases_a_soak_replaces_them() {
    let soaking = |at| {
        World::steady(ApiServer, 1)
            .without_identity_leases()
            .backup()
            .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
            .at(at)
            .build()
    };
    check(vec![
        row(
            "running for 8 s of the 15 s soak",
            soaking(10),
            target(ApiServer),
            "wait-for-backup",
            &["soaking until", "publishes no apiserver identity Leases"],
        ),
        row(
            "running for 18 s",
            soaking(20),
            target(ApiServer),
            "update-real",
            &[],
        ),
        row(
            "the soak runs from the process's start, not from Ready (a Ready on a shared \
             port may be another process's answer)",
            {
                let mut world = World::steady(ApiServer, 1)
                    .without_identity_leases()
                    .backup()
                    .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
                    .at(18);
                world.backup_mut().daemonset.pods[0].ready_since = Some(t(12));
                world.build()
            },
            target(ApiServer),
            "update-real",
            &[],
        ),
        row(
            "a shorter soak",
            soaking(10),
            with(target(ApiServer), |o| {
                o.identity_fallback_soak = std::time::Duration::from_secs(5)
            }),
            "update-real",
            &[],
        ),
    ]);
    // The wait wakes up when the soak ends, not only at the deadline.
    let step = decide(&soaking(10), &target(ApiServer));
    assert_eq!(step.wait().and_then(|w| w.recheck_at), Some(t(17)));
}

#[test]
fn controller_manager_and_scheduler_backups_serve_as_standbys() {
    check(vec![
        row(
            "controller-manager standby Ready",
            World::steady(ControllerManager, 1)
                .backup()
                .backup_serving()
                .build(),
            target(ControllerManager),
            "update-real",
            &[],
        ),
        row(
            "scheduler standby starting",
            World::steady(Scheduler, 1)
                .backup()
                .backup_pod("cp-1", Pod::Starting { started: 2 })
                .build(),
            target(Scheduler),
            "wait-for-backup",
            &["is not Ready"],
        ),
    ]);
}

#[test]
fn a_backup_that_cannot_serve_ends_the_run_as_before() {
    check(vec![
        row(
            "backup image cannot be pulled",
            one_node().backup_pod("cp-1", Pod::ImagePull).build(),
            target(ApiServer),
            "roll-back",
            &["ImagePullBackOff", "selfhost.dev/rollback-started-at"],
        ),
        row(
            "backup crash-looping",
            one_node()
                .backup_pod("cp-1", Pod::CrashLoop { restarts: 4 })
                .build(),
            target(ApiServer),
            "roll-back",
            &["crash-looping (4 restarts"],
        ),
        row(
            "backup not serving by the deadline",
            one_node().backup_pod("cp-1", Pod::Creating).at(302).build(),
            target(ApiServer),
            "roll-back",
            &["not serving by"],
        ),
        row(
            "--no-rollback leaves the backup",
            one_node().backup_pod("cp-1", Pod::ImagePull).build(),
            with(target(ApiServer), |o| o.no_rollback = true),
            "failed",
            &["is unchanged", "selfhost apply v1.33.1"],
        ),
    ]);
    // The "rollback" of a real DaemonSet that was never changed writes its own template back:
    // no pod is touched.
    let obs = one_node().backup_pod("cp-1", Pod::ImagePull).build();
    let Step::RollBack { update, .. } = decide(&obs, &target(ApiServer)) else {
        panic!("expected a rollback");
    };
    let real = obs.real.as_ref().expect("real");
    assert!(crate::rollout::templates_equal(
        &update.template,
        &real.template
    ));
}

#[test]
fn without_port_sharing_the_backup_only_has_to_exist() {
    let exclusive = |nodes| {
        World::steady(ApiServer, nodes)
            .live_without_port_sharing()
            .backup()
    };
    let accept = || with(target(ApiServer), |o| o.accept_downtime = true);
    check(vec![
        row(
            "one node, backup crash-looping on the port",
            exclusive(1)
                .backup_pod("cp-1", Pod::CrashLoop { restarts: 3 })
                .build(),
            accept(),
            "update-real",
            &[],
        ),
        row(
            "one node, backup not started",
            exclusive(1).backup_pod("cp-1", Pod::Creating).build(),
            accept(),
            "wait-for-backup",
            &["has not started yet", "crash-loop until the old pods stop"],
        ),
        row(
            "one node, resumed without --accept-downtime",
            exclusive(1)
                .backup_pod("cp-1", Pod::CrashLoop { restarts: 3 })
                .build(),
            target(ApiServer),
            "refuse",
            &["--accept-downtime"],
        ),
        row(
            "three nodes, one at a time",
            {
                let mut w = exclusive(3);
                for node in ["cp-1", "cp-2", "cp-3"] {
                    w = w.backup_pod(node, Pod::CrashLoop { restarts: 2 });
                }
                w.build()
            },
            target(ApiServer),
            "update-real",
            &[],
        ),
        row(
            "a backup image that cannot be pulled still fails",
            exclusive(1).backup_pod("cp-1", Pod::ImagePull).build(),
            accept(),
            "roll-back",
            &["ImagePullBackOff"],
        ),
    ]);
}

#[test]
fn the_backup_carries_port_sharing_when_the_live_template_lacks_it() {
    let obs = World::steady(ApiServer, 3)
        .live_without_port_sharing()
        .build();
    let Step::CreateBackup { daemonset } = decide(&obs, &target(ApiServer)) else {
        panic!("expected a backup");
    };
    let spec = daemonset.spec.as_ref().expect("spec");
    let command = spec.template.spec.as_ref().expect("pod").containers[0]
        .command
        .clone()
        .unwrap_or_default();
    assert!(
        command.contains(&"--permit-port-sharing=true".to_string()),
        "{command:?}"
    );
    // The template recorded for a rollback is still the live one.
    let record = crate::backup::read_backup(&daemonset, ApiServer).expect("record");
    let real = obs.real.as_ref().expect("real");
    assert_eq!(record.original_template, real.template);
}

/// All processes of a host may share one identity Lease and take it over from each other on
/// every renewal, and a resumed engine saw both holders from its first read: then nothing
/// says which holder is whose, but two live holders for two processes means both serve.
#[test]
fn two_live_identities_for_two_processes_on_a_host_is_enough() {
    let shared = |holders: &[(&str, i64)]| {
        let mut world = one_node()
            .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 2 })
            .at(30);
        world.obs.identity_leases = holders
            .iter()
            .map(|(holder, renewed)| IdentitySighting {
                lease: "apiserver-cp-1".into(),
                hostname: Some("cp-1".into()),
                holder: (*holder).into(),
                holder_since: None,
                last_renewed: Some(t(*renewed)),
                first_seen: None,
            })
            .collect();
        world.build()
    };
    check(vec![
        row(
            "both holders renewed since the backup started",
            shared(&[("apiserver-cp-1_a", 25), ("apiserver-cp-1_b", 28)]),
            target(ApiServer),
            "update-real",
            &[],
        ),
        row(
            "one holder for two processes",
            shared(&[("apiserver-cp-1_a", 28)]),
            target(ApiServer),
            "wait-for-backup",
            &["no identity Lease of its own"],
        ),
        row(
            "the second holder last renewed before the backup started",
            shared(&[("apiserver-cp-1_a", 28), ("apiserver-cp-1_b", 2)]),
            target(ApiServer),
            "wait-for-backup",
            &[],
        ),
    ]);
}
