//! Which phase an observation is in: one row per situation, and the steps each phase may take.

use std::collections::BTreeSet;

use super::builder::{NEW, OLD, Pod, UPDATE_AT, World, target};
use super::with;
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};
use crate::observation::{Observation, time};
use crate::pivot::{BACKUP_DRAIN_STEP_AT, Phase, Target, phase};

/// The steps a phase's decision may give: its own, and those that only speed a wait up (a
/// gone leader's Lease handed over, a lingering or an `OnDelete` pod deleted).
pub(super) fn steps_of(phase: Phase) -> &'static [&'static str] {
    match phase {
        Phase::Missing | Phase::NoPods | Phase::BlockedByBackup => &["refuse"],
        Phase::ReleasingHold => &["restore-update-strategy"],
        Phase::FinishingRollback => &[
            "hand-over-lease",
            "stop-possible-lease-holder",
            "wait-for-rollback",
            "failed",
            "rolled-back",
        ],
        Phase::Verifying => &[
            "hand-over-lease",
            "stop-possible-lease-holder",
            "wait-for-rollout",
            "verify",
            "record-leader",
            "failed",
            "done",
        ],
        Phase::Starting => &["wait-for-rollout", "refuse", "create-backup"],
        Phase::DeletingBackup => &[
            "hand-over-lease",
            "stop-possible-lease-holder",
            "delete-old-pod",
            "wait-for-backup-gone",
            "failed",
        ],
        Phase::DrainingBackup => &[
            "hand-over-lease",
            "stop-possible-lease-holder",
            "delete-old-pod",
            "drain-backup-node",
            "wait-for-backup-gone",
            "remove-backup",
            "failed",
        ],
        Phase::AdoptingBackup => &["adopt-backup"],
        Phase::RollingBack => &[
            "hand-over-lease",
            "stop-possible-lease-holder",
            "delete-old-pod",
            "drain-backup-node",
            "wait-for-rollback",
            "wait-for-backup-gone",
            "remove-backup",
            "failed",
        ],
        Phase::RollingOut => &[
            "hand-over-lease",
            "stop-possible-lease-holder",
            "delete-old-pod",
            "drain-backup-node",
            "wait-for-rollout",
            "restore-update-strategy",
            "wait-for-backup-gone",
            "remove-backup",
            "roll-back",
            "failed",
        ],
        Phase::BackingUp => &[
            "wait-for-backup",
            "refuse",
            "update-real",
            "roll-back",
            "failed",
        ],
    }
}

/// The observation without its real DaemonSet.
fn without_real(world: World) -> Observation {
    let mut obs = world.build();
    obs.real = None;
    obs
}

/// The backup's removal node by node has begun.
fn drain_begun(mut world: World) -> World {
    world.backup_mut().daemonset.annotations.insert(
        BACKUP_DRAIN_STEP_AT.into(),
        time::format(super::builder::t(70)),
    );
    world
}

#[test]
fn each_situation_is_in_the_phase_its_decision_handles() {
    let api = target(ApiServer);
    let force = |t: Target| with(t, |o| o.force = true);
    let rows: Vec<(&str, Observation, Target, Phase)> = vec![
        (
            "no real DaemonSet",
            without_real(World::steady(ApiServer, 1)),
            api.clone(),
            Phase::Missing,
        ),
        (
            "only the backup is left",
            without_real(World::steady(ApiServer, 1).backup()),
            api.clone(),
            Phase::Missing,
        ),
        (
            "the rollout is held and the backup was removed by hand",
            World::steady(ApiServer, 3)
                .backup()
                .backup_serving()
                .updated()
                .held()
                .backup_gone()
                .at(UPDATE_AT + 5)
                .build(),
            api.clone(),
            Phase::ReleasingHold,
        ),
        (
            "this run rolled back and the backup is gone",
            World::steady(ApiServer, 1)
                .backup()
                .updated()
                .rolled_back(100)
                .backup_gone()
                .at(150)
                .build(),
            api.clone(),
            Phase::FinishingRollback,
        ),
        (
            "a rollback of an earlier run, the backup gone: the upgrade starts again",
            World::steady(ApiServer, 1)
                .updated()
                .rolled_back(-100)
                .build(),
            api.clone(),
            Phase::Starting,
        ),
        (
            "the real DaemonSet runs on no node",
            World::steady(Scheduler, 1).real_pods_gone("cp-1").build(),
            target(Scheduler),
            Phase::NoPods,
        ),
        (
            "on the target without a backup",
            World::steady(ControllerManager, 3)
                .updated()
                .all_new(40)
                .at(60)
                .build(),
            target(ControllerManager),
            Phase::Verifying,
        ),
        (
            "on the target from the start, never pivoted",
            {
                let mut world = World::steady(ApiServer, 1);
                world.real_mut().template = super::builder::template(ApiServer, NEW, true);
                world.build()
            },
            api.clone(),
            Phase::Verifying,
        ),
        (
            "a steady cluster on the old version",
            World::steady(ApiServer, 3).build(),
            api.clone(),
            Phase::Starting,
        ),
        (
            "our backup, the real DaemonSet not updated yet",
            World::steady(ApiServer, 1).backup().at(5).build(),
            api.clone(),
            Phase::BackingUp,
        ),
        (
            "a rollback older than our backup belongs to an earlier pivot",
            World::steady(ApiServer, 1)
                .rollback_recorded(-10)
                .backup()
                .at(5)
                .build(),
            api.clone(),
            Phase::BackingUp,
        ),
        (
            "the real DaemonSet updated to the target",
            World::steady(ApiServer, 3)
                .backup()
                .backup_serving()
                .updated()
                .at(UPDATE_AT + 1)
                .build(),
            api.clone(),
            Phase::RollingOut,
        ),
        (
            "the real DaemonSet rolled back, the backup still there",
            World::steady(ApiServer, 3)
                .backup()
                .backup_serving()
                .updated()
                .new_pod("cp-1", Pod::CrashLoop { restarts: 3 })
                .rolled_back(100)
                .at(110)
                .build(),
            api.clone(),
            Phase::RollingBack,
        ),
        (
            "a rollback recorded without a change: the backup never served",
            World::steady(ApiServer, 1)
                .backup()
                .rollback_recorded(50)
                .at(55)
                .build(),
            api.clone(),
            Phase::RollingBack,
        ),
        (
            "the backup is being deleted",
            World::steady(Scheduler, 2)
                .backup()
                .backup_serving()
                .updated()
                .all_new(40)
                .backup_deleting(60)
                .at(61)
                .build(),
            target(Scheduler),
            Phase::DeletingBackup,
        ),
        (
            "a backup being deleted whose record cannot be read is still waited for",
            World::steady(ApiServer, 1)
                .backup_corrupt()
                .backup_deleting(5)
                .at(6)
                .build(),
            api.clone(),
            Phase::DeletingBackup,
        ),
        (
            "the backup's removal node by node has begun",
            drain_begun(
                World::steady(ApiServer, 3)
                    .backup()
                    .backup_serving()
                    .updated()
                    .all_new(40),
            )
            .at(71)
            .build(),
            api.clone(),
            Phase::DrainingBackup,
        ),
        (
            "a backup left by kubeadm",
            World::steady(ApiServer, 1).backup_by_kubeadm().build(),
            api.clone(),
            Phase::AdoptingBackup,
        ),
        (
            "a backup whose record cannot be read",
            World::steady(ApiServer, 1).backup_corrupt().build(),
            api.clone(),
            Phase::BlockedByBackup,
        ),
        (
            "a backup whose record cannot be read, with --force",
            World::steady(ApiServer, 1).backup_corrupt().build(),
            force(api.clone()),
            Phase::AdoptingBackup,
        ),
        (
            "a backup made for another version",
            World::steady(ApiServer, 1).backup_for(OLD).build(),
            api.clone(),
            Phase::BlockedByBackup,
        ),
        (
            "a backup made for another version, with --force",
            World::steady(ApiServer, 1).backup_for(OLD).build(),
            force(api.clone()),
            Phase::AdoptingBackup,
        ),
    ];
    let mut failures = Vec::new();
    for (case, obs, target, expected) in &rows {
        let got = phase(obs, target);
        let step = crate::pivot::next_step(obs, target);
        failures.extend(crate::test_support::phase_row_failures(
            case,
            expected.name(),
            got.name(),
            step.name(),
            steps_of(got),
        ));
    }
    crate::test_support::assert_phase_table(
        &failures,
        rows.iter().map(|row| row.3.name()),
        Phase::ALL.iter().map(|p| p.name()),
    );
}

#[test]
fn phase_names_are_stable_kebab_case_and_distinct() {
    let names: BTreeSet<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
    assert_eq!(names.len(), Phase::ALL.len(), "distinct names");
    for phase in Phase::ALL {
        let name = phase.name();
        assert!(
            !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
            "{name}"
        );
        assert_eq!(
            serde_json::to_value(phase).expect("serialises"),
            serde_json::json!(name),
            "the serialised name is the name"
        );
        assert!(!phase.describe().is_empty(), "{name}");
    }
}
