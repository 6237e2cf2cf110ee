//! The kube-apiserver's pivot behind each node's API front (`front.rs`): the backup on its own
//! address, Ready as the proof of serving, the old pod deleted with its shutdown delay plus the
//! shortened grace, no node vacated, the backup deleted at once; and the refusals of a front
//! the pivot cannot read or whose templates disagree with it.

use std::net::IpAddr;

use super::builder::{Pod, UPDATE_AT, World, front_target, target};
use super::{check, decide, row};
use crate::backup::ORIGINAL_TEMPLATE_ANNOTATION;
use crate::component::Component::ApiServer;
use crate::front::{FRONT_ANNOTATION, bound_address, readiness_probed_at};
use crate::observation::Observation;
use crate::pivot::{
    BACKUP_DRAINED_NODES, HELD_UPDATE_STRATEGY, Serving, Step, Target, phase, pod_serves,
};

fn ip(text: &str) -> IpAddr {
    text.parse().expect("address")
}

/// `nodes` nodes behind fronts, the backup Ready on every node (no identity of its own).
fn backed_up(nodes: usize) -> World {
    let mut world = World::steady(ApiServer, nodes).behind_front().backup();
    for node in world.nodes() {
        world = world.backup_pod(&node, Pod::ReadyNoIdentity { started: 5 });
    }
    world
}

/// [`backed_up`], the real DaemonSet updated and held at [`UPDATE_AT`].
fn held(nodes: usize) -> World {
    backed_up(nodes).updated().held()
}

#[test]
fn behind_a_front_the_backup_listens_on_its_own_address_on_every_node() {
    let cases = [
        ("one node", World::steady(ApiServer, 1).behind_front()),
        ("three nodes", World::steady(ApiServer, 3).behind_front()),
        (
            "no port sharing on the live template",
            World::steady(ApiServer, 1)
                .behind_front()
                .live_without_port_sharing(),
        ),
    ];
    for (case, world) in cases {
        let obs = world.at(1).build();
        let step = decide(&obs, &front_target(ApiServer));
        let Step::CreateBackup { daemonset } = &step else {
            panic!("{case}: expected create-backup, got {}", step.description());
        };
        let spec = daemonset
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("a pod spec");
        assert_eq!(bound_address(spec), Some(ip("127.0.0.2")), "{case}");
        assert_eq!(readiness_probed_at(spec), Some(ip("127.0.0.2")), "{case}");
        let annotations = daemonset.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.get(FRONT_ANNOTATION).map(String::as_str),
            Some("127.0.0.1,127.0.0.2"),
            "{case}: the backup says where its pods listen"
        );
        assert!(
            !annotations.contains_key(BACKUP_DRAINED_NODES),
            "{case}: a backup pod on every node, never a record only: {annotations:?}"
        );
        // What a rollback restores is the live template, on the DaemonSet's own address.
        let original: k8s_openapi::api::core::v1::PodTemplateSpec = serde_json::from_str(
            annotations
                .get(ORIGINAL_TEMPLATE_ANNOTATION)
                .expect("the record"),
        )
        .expect("a template");
        let original = original.spec.expect("a pod spec");
        assert_eq!(bound_address(&original), Some(ip("127.0.0.1")), "{case}");
    }
}

#[test]
fn a_front_the_pivot_cannot_follow_is_refused_with_its_fix() {
    let annotated = |value: &str| {
        let mut world = World::steady(ApiServer, 1);
        world
            .real_mut()
            .annotations
            .insert(FRONT_ANNOTATION.into(), value.into());
        world
    };
    let mut backing_up = backed_up(1);
    backing_up
        .real_mut()
        .annotations
        .insert(FRONT_ANNOTATION.into(), "127.0.0.1;127.0.0.2".into());
    check(vec![
        row(
            "an unreadable annotation",
            annotated("127.0.0.1").at(1).build(),
            front_target(ApiServer),
            "refuse",
            &[
                "is not two IP addresses",
                "annotate --overwrite daemonset self-hosted-kube-apiserver \
                 selfhost.dev/api-front=127.0.0.1,127.0.0.2",
                "selfhost.dev/api-front-",
            ],
        ),
        row(
            "an annotation that names the wildcard",
            annotated("0.0.0.0,127.0.0.2").at(1).build(),
            front_target(ApiServer),
            "refuse",
            &["wildcard"],
        ),
        row(
            "the annotation made unreadable while the backup exists",
            backing_up.at(10).build(),
            front_target(ApiServer),
            "refuse",
            &["is not two IP addresses"],
        ),
        row(
            "annotated, but the live pods hold every address alone (no port sharing)",
            annotated("127.0.0.1,127.0.0.2")
                .live_without_port_sharing()
                .at(1)
                .build(),
            front_target(ApiServer),
            "refuse",
            &[
                "but its template listens on every address",
                "--bind-address=127.0.0.1",
            ],
        ),
        row(
            "a target that would leave the front",
            World::steady(ApiServer, 1).behind_front().at(1).build(),
            target(ApiServer),
            "refuse",
            &["would take the kube-apiserver off the front"],
        ),
    ]);
}

/// One row of the front's path: the observation, the phase it is in, and the step.
struct PhaseRow {
    case: &'static str,
    obs: Observation,
    phase: &'static str,
    step: &'static str,
    mentions: &'static [&'static str],
}

fn phase_row(
    case: &'static str,
    world: World,
    phase: &'static str,
    step: &'static str,
    mentions: &'static [&'static str],
) -> PhaseRow {
    PhaseRow {
        case,
        obs: world.build(),
        phase,
        step,
        mentions,
    }
}

fn check_phases(rows: Vec<PhaseRow>, target: &Target) {
    let mut failures = Vec::new();
    for row in rows {
        let found = phase(&row.obs, target).name();
        let step = decide(&row.obs, target);
        if found != row.phase || step.name() != row.step {
            failures.push(format!(
                "{}: expected {} / {}, got {found} / {}: {}",
                row.case,
                row.phase,
                row.step,
                step.name(),
                step.description()
            ));
            continue;
        }
        let text = serde_json::to_string(&step).expect("steps serialise");
        failures.extend(crate::test_support::missing_mentions(
            row.case,
            step.name(),
            &text,
            row.mentions,
        ));
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// On one node: backup (own address) Ready → update real → delete the old real pod → new real
/// pod Ready → restore the strategy → remove the backup → verify. Ready is the proof of
/// serving throughout: no pod below has an identity Lease of its own.
#[test]
fn on_one_node_behind_a_front_each_phase_decides_on_ready_alone() {
    check_phases(
        vec![
            phase_row(
                "nothing yet",
                World::steady(ApiServer, 1).behind_front().at(1),
                "starting",
                "create-backup",
                &["127.0.0.2"],
            ),
            phase_row(
                "marked behind the front, the live pods on every address with port sharing: \
                 the pivot moves them",
                World::steady(ApiServer, 1).marked_behind_front().at(1),
                "starting",
                "create-backup",
                &["127.0.0.2"],
            ),
            phase_row(
                "the backup is not Ready yet",
                World::steady(ApiServer, 1)
                    .behind_front()
                    .backup()
                    .backup_pod("cp-1", Pod::Starting { started: 5 })
                    .at(6),
                "backing-up",
                "wait-for-backup",
                &["is not Ready"],
            ),
            phase_row(
                "the backup is Ready: its own answer, so the update follows",
                backed_up(1).at(6),
                "backing-up",
                "update-real",
                &[
                    "\"update_strategy\":{\"type\":\"OnDelete\"}",
                    HELD_UPDATE_STRATEGY,
                ],
            ),
            phase_row(
                "a cluster without identity Leases: no soak either",
                backed_up(1).without_identity_leases().at(6),
                "backing-up",
                "update-real",
                &["OnDelete"],
            ),
            phase_row(
                "the old pod goes with its shutdown delay plus the shortened grace",
                held(1).at(UPDATE_AT + 1),
                "rolling-out",
                "delete-old-pod",
                &[
                    "old-cp-1",
                    "\"grace_period_seconds\":10",
                    "the node's API front moves new connections",
                ],
            ),
            phase_row(
                "the old pod is in its shutdown delay",
                held(1).old_terminating("cp-1", 10).at(UPDATE_AT + 2),
                "rolling-out",
                "wait-for-rollout",
                &["cp-1: pod old-cp-1 is terminating"],
            ),
            phase_row(
                "an old pod deleted with its full grace lingers past its delay: shortened",
                held(1).old_terminating("cp-1", 30).at(UPDATE_AT + 7),
                "rolling-out",
                "delete-old-pod",
                &["old-cp-1", "\"grace_period_seconds\":5", "is Terminating"],
            ),
            phase_row(
                "the new pod is not Ready yet",
                held(1)
                    .new_pod("cp-1", Pod::Starting { started: 40 })
                    .at(41),
                "rolling-out",
                "wait-for-rollout",
                &["is not Ready"],
            ),
            phase_row(
                "the new pod is Ready: its own answer",
                held(1)
                    .new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 })
                    .at(41),
                "rolling-out",
                "restore-update-strategy",
                &["every node runs a new pod that serves"],
            ),
            phase_row(
                "the strategy is back: the backup goes",
                held(1)
                    .new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 })
                    .hold_released()
                    .at(42),
                "rolling-out",
                "remove-backup",
                &["temp-upgrade-self-hosted-kube-apiserver"],
            ),
            phase_row(
                "a backup process lingers past its delay: shortened, the new pod serves",
                held(1)
                    .new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 })
                    .hold_released()
                    .backup_deleting(UPDATE_AT + 60)
                    .backup_pod_terminating("cp-1", 30)
                    .at(UPDATE_AT + 66),
                "deleting-backup",
                "delete-old-pod",
                &[
                    "temp-upgrade-self-hosted-kube-apiserver-cp-1",
                    "\"grace_period_seconds\":5",
                ],
            ),
            phase_row(
                "the backup is gone",
                held(1)
                    .new_pod("cp-1", Pod::ReadyNoIdentity { started: 40 })
                    .hold_released()
                    .backup_gone()
                    .api(super::builder::NEW, true)
                    .at(UPDATE_AT + 70),
                "verifying",
                "done",
                &[],
            ),
            phase_row(
                "the new pod crash-loops: rolled back onto the Ready backup",
                held(1)
                    .new_pod("cp-1", Pod::CrashLoop { restarts: 4 })
                    .at(UPDATE_AT + 30),
                "rolling-out",
                "roll-back",
                &["crash"],
            ),
        ],
        &front_target(ApiServer),
    );
}

/// On several nodes the front hands over within each node: no node is vacated, the backup runs
/// everywhere, each old pod goes once the new ones so far are Ready, and the backup goes at
/// once.
#[test]
fn on_three_nodes_behind_fronts_no_node_leaves_the_load_balancer() {
    let new = |world: World, nodes: &[&str]| {
        nodes.iter().fold(world, |w, node| {
            w.new_pod(node, Pod::ReadyNoIdentity { started: 40 })
        })
    };
    check_phases(
        vec![
            phase_row(
                "the backup Ready on every node",
                backed_up(3).at(6),
                "backing-up",
                "update-real",
                &["OnDelete"],
            ),
            phase_row(
                "the first node's old pod, the backup serving beside it",
                held(3).at(UPDATE_AT + 1),
                "rolling-out",
                "delete-old-pod",
                &["old-cp-1", "\"grace_period_seconds\":10"],
            ),
            phase_row(
                "the first new pod is not Ready: the second node waits",
                held(3)
                    .new_pod("cp-1", Pod::Starting { started: 40 })
                    .at(41),
                "rolling-out",
                "wait-for-rollout",
                &["is not Ready"],
            ),
            phase_row(
                "the first new pod is Ready: the second node's turn",
                new(held(3), &["cp-1"]).at(41),
                "rolling-out",
                "delete-old-pod",
                &["old-cp-2"],
            ),
            phase_row(
                "every new pod Ready",
                new(held(3), &["cp-1", "cp-2", "cp-3"]).at(60),
                "rolling-out",
                "restore-update-strategy",
                &[],
            ),
            phase_row(
                "the backup goes at once, not node by node",
                new(held(3), &["cp-1", "cp-2", "cp-3"])
                    .hold_released()
                    .at(61),
                "rolling-out",
                "remove-backup",
                &[],
            ),
        ],
        &front_target(ApiServer),
    );
}

/// The same observations without a front: Ready may be another process's answer, so the
/// pivot waits for an identity of the pod's own.
#[test]
fn without_the_front_the_same_ready_pods_prove_nothing() {
    let plain = World::steady(ApiServer, 1)
        .backup()
        .backup_pod("cp-1", Pod::ReadyNoIdentity { started: 5 })
        .at(6)
        .build();
    check(vec![row(
        "the backup Ready without an identity",
        plain,
        target(ApiServer),
        "wait-for-backup",
        &["no identity Lease of its own"],
    )]);
}

/// Which pods answer their own probes: a specific address, probed there, that no other process
/// of the node may listen at.
#[test]
fn ready_is_the_proof_only_on_an_address_no_other_process_shares() {
    let backup_pod = |world: World| {
        let obs = world.at(6).build();
        let pod = obs.backup.as_ref().expect("backup").daemonset.pods[0].clone();
        (obs, pod)
    };
    let (obs, pod) = backup_pod(backed_up(1));
    assert_eq!(
        pod_serves(&obs, &front_target(ApiServer), &pod),
        Ok(Serving::OwnAddress {
            address: ip("127.0.0.2")
        })
    );

    let mut same = backed_up(1);
    let real = same.obs.real.as_ref().expect("real").template.clone();
    same.backup_mut().daemonset.template.spec = real.spec;
    let mut unprobed = backed_up(1);
    if let Some(probe) = unprobed.backup_mut().daemonset.template.spec.as_mut()
        && let Some(get) = probe.containers[0]
            .readiness_probe
            .as_mut()
            .and_then(|p| p.http_get.as_mut())
    {
        get.host = None;
    }
    let cases = [
        ("the backup listens on the real pod's address", same),
        ("the backup's probe asks the pod IP", unprobed),
        (
            "the old pod's template is unknown (the backup's record unreadable)",
            backed_up(1).updated().backup_corrupt_keeping_pods(),
        ),
    ];
    for (case, world) in cases {
        let (obs, pod) = backup_pod(world);
        let verdict = pod_serves(&obs, &front_target(ApiServer), &pod);
        assert!(
            !matches!(verdict, Ok(Serving::OwnAddress { .. })),
            "{case}: {verdict:?}"
        );
    }
}

impl World {
    /// The backup's record cannot be read, its pods kept.
    fn backup_corrupt_keeping_pods(mut self) -> Self {
        let name = self.obs.component.backup_name();
        self.backup_mut().record = Err(crate::backup::BackupError::CorruptAnnotation {
            name,
            annotation: ORIGINAL_TEMPLATE_ANNOTATION,
            reason: "expected value at line 1 column 1".into(),
        });
        self
    }
}
