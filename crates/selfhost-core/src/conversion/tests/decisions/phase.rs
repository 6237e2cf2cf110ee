//! Which phase a node is in: one row per situation, and the steps each phase may take.

use std::collections::BTreeSet;

use super::{at, daemonset, fresh, pod, running, waiting};
use crate::conversion::decide::{
    ConvertPhase, Direction, Mode, NodeComponent, NodeFront, next_step, phase,
};

/// The steps a phase's decision may give (leadership aside: `leadership.rs`).
fn steps_of(phase: ConvertPhase) -> &'static [&'static str] {
    match phase {
        ConvertPhase::CreatingDaemonSet => &["create-daemonset", "wait", "fail"],
        ConvertPhase::GatingDaemonSet => &["label-node", "gate-daemonset"],
        ConvertPhase::LabellingNode => &["label-node"],
        ConvertPhase::StartingDaemonSetPod => &[
            "wait",
            "fail",
            "add-port-sharing",
            "write-front",
            "move-manifest-aside",
        ],
        ConvertPhase::RetiringStaticPod => &["wait", "fail", "done"],
        ConvertPhase::NoStaticManifest => &["done", "refuse"],
        ConvertPhase::RestoringStatic => &[
            "add-port-sharing",
            "restore-manifest",
            "unlabel-node",
            "delete-daemonset",
            "remove-front",
            "wait",
            "fail",
            "rolled-back",
        ],
        ConvertPhase::NoDaemonSet => &["refuse", "wait", "fail", "remove-front", "done"],
        ConvertPhase::WritingManifest => &["refuse", "write-manifest"],
        ConvertPhase::StartingStaticPod => &["wait", "fail", "remove-front", "unlabel-node"],
        ConvertPhase::RetiringDaemonSetPod => {
            &["wait", "fail", "remove-front", "delete-daemonset", "done"]
        }
        ConvertPhase::RestoringSelfHosted => &[
            "label-node",
            "write-front",
            "remove-manifest",
            "wait",
            "fail",
            "rolled-back",
        ],
    }
}

/// A node that runs the component from the gated DaemonSet alone, labelled.
fn self_hosted() -> NodeComponent {
    let mut o = fresh();
    o.manifest_on_disk = false;
    o.mirror = None;
    o.mirror_serving = Err("no mirror pod".into());
    o.daemonset = Some(daemonset(vec![pod("ds-pod", running(), 0)]));
    o.daemonset_gated = true;
    o.gated_nodes = vec!["cp-1".into()];
    o.daemonset_pod_serving = Ok(());
    o
}

/// None, one wanted and not written, one running, one whose pod cannot start.
fn front(kind: u32) -> Option<NodeFront> {
    let written = |running: Result<(), String>, state| NodeFront {
        wanted: true,
        manifest_on_disk: true,
        mirror: Some(pod("selfhost-front-cp-1", state, 0)),
        running,
    };
    match kind {
        0 => None,
        1 => Some(NodeFront {
            wanted: true,
            manifest_on_disk: false,
            mirror: None,
            running: Err("no mirror pod".into()),
        }),
        2 => Some(written(Ok(()), running())),
        _ => Some(written(
            Err("not Ready".into()),
            waiting("ImagePullBackOff"),
        )),
    }
}

fn edit(mut obs: NodeComponent, f: impl FnOnce(&mut NodeComponent)) -> NodeComponent {
    f(&mut obs);
    obs
}

#[test]
fn each_node_is_in_the_phase_its_decision_handles() {
    use ConvertPhase::*;
    use Direction::{ToSelfHosted, ToStatic};
    let forward = Mode::Forward;
    let restore = Mode::Restore {
        reason: "the DaemonSet pod crash-loops".into(),
    };
    let gated_ds = |o: &mut NodeComponent| {
        o.daemonset = Some(daemonset(vec![]));
        o.daemonset_gated = true;
    };
    let rows: Vec<(&str, Direction, &Mode, NodeComponent, ConvertPhase)> = vec![
        (
            "a static node, nothing done",
            ToSelfHosted,
            &forward,
            fresh(),
            CreatingDaemonSet,
        ),
        (
            "an old DaemonSet is being deleted",
            ToSelfHosted,
            &forward,
            edit(fresh(), |o| {
                let mut ds = daemonset(vec![]);
                ds.deleting_since = Some(at(1));
                o.daemonset = Some(ds);
            }),
            CreatingDaemonSet,
        ),
        (
            "a DaemonSet without the node gate",
            ToSelfHosted,
            &forward,
            edit(fresh(), |o| o.daemonset = Some(daemonset(vec![]))),
            GatingDaemonSet,
        ),
        (
            "the gated DaemonSet, the node not labelled",
            ToSelfHosted,
            &forward,
            edit(fresh(), gated_ds),
            LabellingNode,
        ),
        (
            "the node labelled, the static pod still runs",
            ToSelfHosted,
            &forward,
            edit(fresh(), |o| {
                gated_ds(o);
                o.gated_nodes = vec!["cp-1".into()];
            }),
            StartingDaemonSetPod,
        ),
        (
            "the static manifest moved aside",
            ToSelfHosted,
            &forward,
            edit(self_hosted(), |o| o.manifest_in_backup = true),
            RetiringStaticPod,
        ),
        (
            "self-hosted already, no manifest anywhere",
            ToSelfHosted,
            &forward,
            self_hosted(),
            NoStaticManifest,
        ),
        (
            "a failure on the way to self-hosted",
            ToSelfHosted,
            &restore,
            self_hosted(),
            RestoringStatic,
        ),
        (
            "no DaemonSet: static already",
            ToStatic,
            &forward,
            fresh(),
            NoDaemonSet,
        ),
        (
            "an ungated DaemonSet",
            ToStatic,
            &forward,
            edit(self_hosted(), |o| o.daemonset_gated = false),
            GatingDaemonSet,
        ),
        (
            "self-hosted: the manifest is to be written",
            ToStatic,
            &forward,
            self_hosted(),
            WritingManifest,
        ),
        (
            "the manifest written, the node still labelled",
            ToStatic,
            &forward,
            edit(self_hosted(), |o| o.manifest_on_disk = true),
            StartingStaticPod,
        ),
        (
            "the node unlabelled",
            ToStatic,
            &forward,
            edit(self_hosted(), |o| {
                o.manifest_on_disk = true;
                o.gated_nodes.clear();
            }),
            RetiringDaemonSetPod,
        ),
        (
            "a failure on the way to static",
            ToStatic,
            &restore,
            self_hosted(),
            RestoringSelfHosted,
        ),
    ];
    let mut failures = Vec::new();
    for (case, direction, mode, obs, expected) in &rows {
        let got = phase(*direction, mode, obs);
        let step = next_step(*direction, mode, obs);
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
        rows.iter().map(|row| row.4.name()),
        ConvertPhase::ALL.iter().map(|p| p.name()),
    );
}

/// Every step comes from the decision of the phase the node is in, over every combination of
/// what a node can show (leadership settled, so that only the phase decides).
#[test]
fn every_step_belongs_to_the_phase_it_is_in() {
    let restore = Mode::Restore {
        reason: "it failed".into(),
    };
    let modes = [Mode::Forward, restore];
    let mut checked = 0;
    let mut failures = Vec::new();
    for bits in 0u32..(1 << 10) {
        let flag = |i: u32| bits & (1 << i) != 0;
        for ds_kind in 0..5 {
            for mirror_kind in 0..3 {
                let mut o = fresh();
                o.manifest_on_disk = flag(0);
                o.manifest_in_backup = flag(1);
                o.static_permits_port_sharing = flag(2);
                o.static_port_sharing_added = flag(3);
                o.mirror_permits_port_sharing = flag(4);
                o.daemonset_gated = flag(5);
                o.gated_nodes = match (flag(6), flag(7)) {
                    (false, false) => vec![],
                    (true, false) => vec!["cp-1".into()],
                    (false, true) => vec!["cp-2".into()],
                    (true, true) => vec!["cp-1".into(), "cp-2".into()],
                };
                o.mirror_serving = if flag(8) {
                    Ok(())
                } else {
                    Err("not Ready".into())
                };
                o.daemonset_pod_serving = if flag(9) {
                    Ok(())
                } else {
                    Err("not Ready".into())
                };
                o.daemonset = match ds_kind {
                    0 => None,
                    1 => Some(daemonset(vec![])),
                    2 => Some(daemonset(vec![pod("ds-pod", running(), 0)])),
                    3 => Some(daemonset(vec![pod(
                        "ds-pod",
                        waiting("CrashLoopBackOff"),
                        5,
                    )])),
                    _ => {
                        let mut ds = daemonset(vec![pod("ds-pod", running(), 0)]);
                        ds.deleting_since = Some(at(1));
                        Some(ds)
                    }
                };
                o.mirror = match mirror_kind {
                    0 => None,
                    1 => Some(pod("kube-apiserver-cp-1", running(), 0)),
                    _ => Some(pod("kube-apiserver-cp-1", waiting("ErrImagePull"), 0)),
                };
                for front_kind in 0..4 {
                    o.front = front(front_kind);
                    for timed_out in [false, true] {
                        o.now = if timed_out { at(200) } else { at(0) };
                        for direction in [Direction::ToSelfHosted, Direction::ToStatic] {
                            for mode in &modes {
                                let got = phase(direction, mode, &o);
                                let step = next_step(direction, mode, &o);
                                checked += 1;
                                if !steps_of(got).contains(&step.name()) && failures.len() < 10 {
                                    failures.push(format!(
                                        "{direction:?} {mode:?}: {} is not a step of {}: {o:?}",
                                        step.name(),
                                        got.name()
                                    ));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert!(checked > 100_000);
}

#[test]
fn convert_phase_names_are_stable_kebab_case_and_distinct() {
    let names: BTreeSet<&str> = ConvertPhase::ALL.iter().map(|p| p.name()).collect();
    assert_eq!(names.len(), ConvertPhase::ALL.len(), "distinct names");
    for phase in ConvertPhase::ALL {
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
