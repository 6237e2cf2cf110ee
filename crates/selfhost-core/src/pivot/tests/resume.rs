//! Every state an interrupted run leaves behind maps to the step that continues it.

use super::builder::{OLD, Pod, World, target, template};
use super::{check, decide, row, with};
use crate::backup::{ORIGINAL_TEMPLATE_ANNOTATION, TARGET_VERSION_ANNOTATION};
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};
use crate::pivot::{APPLIED_OVER_GENERATION, Step};

#[test]
fn a_backup_for_the_same_target_is_continued() {
    check(vec![
        row(
            "stopped after creating the backup",
            World::steady(ApiServer, 1).backup().at(3).build(),
            target(ApiServer),
            "wait-for-backup",
            &[],
        ),
        row(
            "stopped while the backup came up",
            World::steady(ApiServer, 1)
                .backup()
                .backup_serving()
                .at(10)
                .build(),
            target(ApiServer),
            "update-real",
            &[],
        ),
        row(
            "stopped after the update",
            World::steady(ControllerManager, 3)
                .backup()
                .backup_serving()
                .updated()
                .at(40)
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &[],
        ),
        row(
            "stopped before removing the backup",
            World::steady(Scheduler, 1)
                .backup()
                .backup_serving()
                .updated()
                .all_new(40)
                .at(60)
                .build(),
            target(Scheduler),
            "remove-backup",
            &[],
        ),
        row(
            "stopped while the backup was going",
            World::steady(ApiServer, 1)
                .backup()
                .backup_serving()
                .updated()
                .all_new(40)
                .backup_deleting(60)
                .remove_backup_pods()
                .at(70)
                .build(),
            target(ApiServer),
            "wait-for-backup-gone",
            &[],
        ),
        row(
            "stopped during a rollback",
            World::steady(ApiServer, 1)
                .backup()
                .backup_serving()
                .updated()
                .new_pod("cp-1", Pod::ImagePull)
                .rolled_back(130)
                .at(500)
                .build(),
            resumed_at(450),
            "wait-for-rollback",
            &[],
        ),
    ]);
}

/// The target of a run started at `t(seconds)`.
fn resumed_at(seconds: i64) -> crate::pivot::Target {
    let mut target = target(ApiServer);
    target.run_started_at = super::builder::t(seconds);
    target
}

#[test]
fn a_backup_for_another_target_is_refused_unless_forced() {
    let other = || {
        World::steady(ApiServer, 1)
            .backup_for("v1.33.0")
            .backup_serving()
            .build()
    };
    check(vec![
        row(
            "another target",
            other(),
            target(ApiServer),
            "refuse",
            &[
                "to v1.33.0 is in progress",
                "selfhost apply v1.33.0",
                "selfhost apply v1.33.1 --force",
            ],
        ),
        row(
            "another target, --force",
            other(),
            with(target(ApiServer), |o| o.force = true),
            "adopt-backup",
            &[
                TARGET_VERSION_ANNOTATION,
                "\"v1.33.1\"",
                "taken over for v1.33.1 with --force",
            ],
        ),
        row(
            "an unreadable backup",
            World::steady(ApiServer, 1).backup_corrupt().build(),
            target(ApiServer),
            "refuse",
            &["unreadable", "--force"],
        ),
        row(
            "an unreadable backup, --force",
            World::steady(ApiServer, 1).backup_corrupt().build(),
            with(target(ApiServer), |o| o.force = true),
            "adopt-backup",
            &["taken over with --force"],
        ),
    ]);
}

#[test]
fn a_backup_left_by_kubeadm_is_adopted_as_a_backup_of_the_template_it_copied() {
    let obs = World::steady(ApiServer, 1)
        .backup_by_kubeadm()
        .backup_serving()
        .build();
    let step = decide(&obs, &target(ApiServer));
    let Step::AdoptBackup {
        annotations,
        resource_version,
        why,
        ..
    } = &step
    else {
        panic!("expected adoption, got {}", step.description());
    };
    assert!(why.contains("left by kubeadm"), "{why}");
    assert_eq!(resource_version.as_deref(), Some("200"));
    let saved: k8s_openapi::api::core::v1::PodTemplateSpec =
        serde_json::from_str(&annotations[ORIGINAL_TEMPLATE_ANNOTATION]).expect("template");
    assert_eq!(saved, template(ApiServer, OLD, true));
    assert_eq!(annotations[TARGET_VERSION_ANNOTATION], "v1.33.1");
}

/// An API server default the normalisation does not know must not make the pivot update for
/// ever: our record of having applied the target counts, unless someone changed the template
/// after us.
#[test]
fn an_unknown_server_default_costs_no_endless_updates() {
    let defaulted = |generation_after: i64| {
        let mut world = World::steady(ApiServer, 1)
            .backup()
            .backup_serving()
            .updated()
            .all_new(40)
            .at(60);
        let real = world.real_mut();
        real.template.spec.as_mut().expect("spec").containers[0].stdin = Some(false);
        real.template_generation = Some(generation_after);
        world.build()
    };
    check(vec![
        row(
            "our update is the last template change",
            defaulted(2),
            target(ApiServer),
            "remove-backup",
            &[],
        ),
        row(
            "someone changed the template after us",
            defaulted(3),
            target(ApiServer),
            "update-real",
            &[APPLIED_OVER_GENERATION, "\"3\""],
        ),
    ]);
}
