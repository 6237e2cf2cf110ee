//! Starting a run, refusing to start, and the end of a run without a backup.

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::builder::{NEW, OLD, Pod, UPDATE_AT, World, target, template};
use super::{check, decide, row, with};
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};
use crate::pivot::{APPLIED_OVER_GENERATION, APPLIED_TEMPLATE_HASH, BACKUP_CREATED_AT, Step};

#[test]
fn a_component_whose_pods_restart_on_their_own_is_waited_for_before_its_backup() {
    // A controller whose node's kube-apiserver was just replaced exits and is restarted: the
    // next component's pivot waits for it rather than failing a run already under way.
    check(vec![
        row(
            "a controller-manager pod restarting after its kube-apiserver's replacement",
            World::steady(ControllerManager, 3)
                .new_pod("cp-3", Pod::Starting { started: -2 })
                .build(),
            target(ControllerManager),
            "wait-for-rollout",
            &["converged before its pivot starts", "cp-3"],
        ),
        row(
            "the DaemonSet controller has not observed the spec yet",
            World::steady(Scheduler, 1).controller_lagging().build(),
            target(Scheduler),
            "wait-for-rollout",
            &["observe generation 1"],
        ),
        row(
            "a pod not Ready yet on one node",
            World::steady(ApiServer, 3)
                .new_pod("cp-2", Pod::Starting { started: -10 })
                .build(),
            target(ApiServer),
            "wait-for-rollout",
            &["converged before its pivot starts"],
        ),
    ]);
}

#[test]
fn a_converged_component_is_backed_up_first() {
    check(vec![
        row(
            "one-node apiserver",
            World::steady(ApiServer, 1).build(),
            target(ApiServer),
            "create-backup",
            &[
                "temp-upgrade-self-hosted-kube-apiserver",
                "selfhost.dev/target-version",
                NEW,
                BACKUP_CREATED_AT,
            ],
        ),
        row(
            "three-node controller-manager",
            World::steady(ControllerManager, 3).build(),
            target(ControllerManager),
            "create-backup",
            &["temp-upgrade-component"],
        ),
        row(
            "five-node scheduler",
            World::steady(Scheduler, 5).build(),
            target(Scheduler),
            "create-backup",
            &[],
        ),
        row(
            "no port sharing, three nodes: one node at a time is safe",
            World::steady(ApiServer, 3)
                .live_without_port_sharing()
                .build(),
            target(ApiServer),
            "create-backup",
            &[],
        ),
        row(
            "no port sharing, one node, downtime accepted",
            World::steady(ApiServer, 1)
                .live_without_port_sharing()
                .build(),
            with(target(ApiServer), |o| o.accept_downtime = true),
            "create-backup",
            &[],
        ),
        row(
            "a previous run's rollback does not stop a new run",
            World::steady(ApiServer, 1)
                .rolled_back(-100)
                .all_new(-50)
                .build(),
            target(ApiServer),
            "create-backup",
            &[],
        ),
    ]);
}

#[test]
fn a_run_refuses_to_start_on_a_cluster_it_cannot_hand_over_safely() {
    check(vec![
        row(
            "zero pods is a clear error",
            World::steady(ApiServer, 1).real_pods_gone("cp-1").build(),
            target(ApiServer),
            "refuse",
            &[
                "has no pods",
                "kubectl -n kube-system describe ds self-hosted-kube-apiserver",
            ],
        ),
        row(
            "a NotReady control-plane node",
            World::steady(ApiServer, 3).node_not_ready("cp-2").build(),
            target(ApiServer),
            "refuse",
            &["cp-2 (KubeletNotReady)", "bring the node(s) back"],
        ),
        row(
            "a pod not Ready past the deadline",
            World::steady(ApiServer, 3)
                .new_pod("cp-2", Pod::Starting { started: -10 })
                .at(100_000)
                .build(),
            target(ApiServer),
            "refuse",
            &["has not converged", "cp-2: pod", "rollout status"],
        ),
        row(
            "a pod that cannot pull its image",
            World::steady(ControllerManager, 3)
                .new_pod("cp-2", Pod::ImagePull)
                .build(),
            target(ControllerManager),
            "refuse",
            &["has not converged", "cp-2: pod", "rollout status"],
        ),
        row(
            "the controller has not observed the spec by the deadline",
            World::steady(Scheduler, 1)
                .controller_lagging()
                .at(100_000)
                .build(),
            target(Scheduler),
            "refuse",
            &["observe generation 1"],
        ),
        row(
            "no port sharing on one node without --accept-downtime",
            World::steady(ApiServer, 1)
                .live_without_port_sharing()
                .build(),
            target(ApiServer),
            "refuse",
            &["--accept-downtime", "crash-loop back-off"],
        ),
        row(
            "no port sharing on one node, controller-manager",
            World::steady(ControllerManager, 1)
                .live_without_port_sharing()
                .build(),
            target(ControllerManager),
            "refuse",
            &[
                "--accept-downtime",
                "no leader",
                "re-run with --accept-downtime to accept it this once",
            ],
        ),
        row(
            "a target without port sharing could never bind next to the backup",
            World::steady(ApiServer, 3).build(),
            target_without_sharing(),
            "refuse",
            &[
                "lacks --permit-port-sharing=true",
                "upgrade to Kubernetes 1.19 or later",
            ],
        ),
        row(
            "not self-hosted",
            {
                let mut w = World::steady(ApiServer, 1);
                w.obs.real = None;
                w.build()
            },
            target(ApiServer),
            "refuse",
            &["selfhost convert to-self-hosted"],
        ),
        row(
            "a backup without its real DaemonSet",
            {
                let mut w = World::steady(ApiServer, 1).backup();
                w.obs.real = None;
                w.build()
            },
            target(ApiServer),
            "refuse",
            &["is gone", "selfhost.dev/original-template"],
        ),
    ]);
}

fn target_without_sharing() -> crate::pivot::Target {
    let mut target = target(ApiServer);
    target.template = template(ApiServer, NEW, false);
    target
}

#[test]
fn a_real_daemonset_on_the_target_without_backup_is_verified_then_done() {
    let updated = |c| World::steady(c, 1).updated().all_new(UPDATE_AT + 10);
    check(vec![
        row(
            "apiserver verified",
            updated(ApiServer).api(NEW, true).build(),
            target(ApiServer),
            "done",
            &["/version v1.33.1"],
        ),
        row(
            "/version still old",
            updated(ApiServer).api(OLD, true).build(),
            target(ApiServer),
            "verify",
            &["/version reports v1.32.4, not v1.33.1"],
        ),
        row(
            "/readyz failing",
            updated(ApiServer).api(NEW, false).build(),
            target(ApiServer),
            "verify",
            &["[-]etcd failed"],
        ),
        row(
            "verification never passes",
            updated(ApiServer)
                .api(OLD, true)
                .at(UPDATE_AT + 601)
                .build(),
            target(ApiServer),
            "failed",
            &["verification did not pass"],
        ),
        row(
            "the controller-manager led by a new process",
            updated(ControllerManager)
                .leader("cp-1", UPDATE_AT + 12)
                .build(),
            target(ControllerManager),
            "done",
            &["led by a new process"],
        ),
        row(
            "the old leader is gone but still holds the Lease",
            updated(ControllerManager).leader("cp-1", -3000).build(),
            target(ControllerManager),
            "hand-over-lease",
            &["cp-1_uuid--3000"],
        ),
        row(
            "no leader yet",
            {
                let mut w = updated(Scheduler);
                w.obs.leader_lease = None;
                w.build()
            },
            target(Scheduler),
            "verify",
            &["waiting for a leader"],
        ),
        row(
            "a new pod failing without a backup cannot be rolled back",
            updated(ApiServer).new_pod("cp-1", Pod::ImagePull).build(),
            target(ApiServer),
            "failed",
            &["ImagePullBackOff", "nothing to roll back to"],
        ),
        row(
            "a rollback made by this run ends it",
            World::steady(ApiServer, 1)
                .rolled_back(50)
                .all_new(60)
                .build(),
            target(ApiServer),
            "rolled-back",
            &["pod crash-looping"],
        ),
    ]);
}

/// The API server stores the template with its defaults filled in; that is still the target.
#[test]
fn a_server_defaulted_template_is_the_target() {
    let mut world = World::steady(ApiServer, 1)
        .updated()
        .all_new(UPDATE_AT + 10)
        .api(NEW, true);
    let real = world.real_mut();
    real.template = server_defaulted(template(ApiServer, NEW, true));
    real.annotations.remove(APPLIED_TEMPLATE_HASH);
    real.annotations.remove(APPLIED_OVER_GENERATION);
    assert_eq!(decide(&world.build(), &target(ApiServer)).name(), "done");

    // The same defaulted template with a real change (another image) is not the target.
    let real = world.real_mut();
    let spec = real.template.spec.as_mut().expect("spec");
    spec.containers[0].image = Some("registry.k8s.io/kube-apiserver:v1.33.0".into());
    let step = decide(&world.build(), &target(ApiServer));
    assert!(
        matches!(step, Step::CreateBackup { .. }),
        "{}",
        step.description()
    );
}

/// What an API server returns for `template`: every default spelled out.
pub(crate) fn server_defaulted(mut template: PodTemplateSpec) -> PodTemplateSpec {
    let spec = template.spec.as_mut().expect("spec");
    spec.restart_policy = Some("Always".into());
    spec.scheduler_name = Some("default-scheduler".into());
    spec.termination_grace_period_seconds = Some(30);
    spec.security_context = Some(Default::default());
    for container in &mut spec.containers {
        container.image_pull_policy = Some("IfNotPresent".into());
        container.termination_message_path = Some("/dev/termination-log".into());
        container.termination_message_policy = Some("File".into());
        container.resources = Some(Default::default());
    }
    template
}
