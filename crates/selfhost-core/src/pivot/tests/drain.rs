//! Removing the backup one node at a time (`drain.rs`), from every state a run can be stopped
//! in.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec,
    PodTemplateSpec,
};

use super::builder::{Pod, World, t, target};
use super::{check, row, with};
use crate::component::Component::{ApiServer, ControllerManager};
use crate::observation::time;
use crate::pivot::{BACKUP_DRAIN_STEP_AT, BACKUP_DRAINED_NODES, exclude_nodes};

/// Three nodes whose new kube-apiservers all serve since `t(60)`: the backup may go.
fn finished(nodes: usize) -> World {
    World::steady(ApiServer, nodes)
        .backup()
        .backup_serving()
        .updated()
        .all_new(60)
}

/// The record of a removal that has excluded `nodes`, the last at `t(at)`.
fn excluded(mut world: World, nodes: &[&str], at: i64) -> World {
    let set: BTreeSet<String> = nodes.iter().map(|n| n.to_string()).collect();
    let ds = &mut world.backup_mut().daemonset;
    ds.template = exclude_nodes(&ds.template, &set);
    ds.annotations
        .insert(BACKUP_DRAINED_NODES.into(), nodes.join(","));
    ds.annotations
        .insert(BACKUP_DRAIN_STEP_AT.into(), time::format(t(at)));
    world
}

/// The backup pod of `node` is gone (its process exited, the kubelet confirmed).
fn gone(world: World, node: &str) -> World {
    world.backup_pod_gone(node)
}

#[test]
fn the_backup_goes_one_node_at_a_time_from_every_interrupted_state() {
    check(vec![
        row(
            "every new pod serves: the first node's backup pod goes, not the DaemonSet",
            finished(3).at(71).build(),
            target(ApiServer),
            "drain-backup-node",
            &[
                "\"node\":\"cp-1\"",
                BACKUP_DRAINED_NODES,
                "\"cp-1\"",
                "NotIn",
                "OnDelete",
            ],
        ),
        row(
            "killed after the first exclusion, before the controller deleted the pod",
            excluded(finished(3), &["cp-1"], 72).at(73).build(),
            target(ApiServer),
            "wait-for-backup-gone",
            &[
                "cp-1: backup pod",
                "not yet deleted by the DaemonSet controller",
            ],
        ),
        row(
            "the first node's backup process is stopping: nothing else goes",
            excluded(finished(3), &["cp-1"], 72)
                .backup_pod_terminating("cp-1", 5)
                .at(75)
                .build(),
            target(ApiServer),
            "wait-for-backup-gone",
            &["cp-1: backup pod", "is stopping"],
        ),
        row(
            "the first node's backup pod is gone: the second goes",
            gone(excluded(finished(3), &["cp-1"], 72), "cp-1")
                .at(80)
                .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-2\"", "cp-1,cp-2"],
        ),
        row(
            "the second is stopping: the third waits",
            gone(excluded(finished(3), &["cp-1", "cp-2"], 81), "cp-1")
                .backup_pod_terminating("cp-2", 5)
                .at(83)
                .build(),
            target(ApiServer),
            "wait-for-backup-gone",
            &["cp-2: backup pod", "is stopping"],
        ),
        row(
            "one backup pod left: the DaemonSet goes with it",
            gone(
                gone(excluded(finished(3), &["cp-1", "cp-2"], 81), "cp-1"),
                "cp-2",
            )
            .at(90)
            .build(),
            target(ApiServer),
            "remove-backup",
            &[],
        ),
        row(
            "the DaemonSet's deletion has begun",
            gone(
                gone(excluded(finished(3), &["cp-1", "cp-2"], 81), "cp-1"),
                "cp-2",
            )
            .backup_deleting(91)
            .at(92)
            .build(),
            target(ApiServer),
            "wait-for-backup-gone",
            &["cp-3: backup pod"],
        ),
        row(
            "a node's backup pod still stopping a whole deadline after its exclusion",
            excluded(finished(3), &["cp-1"], 72)
                .backup_pod_terminating("cp-1", 5)
                .at(72 + 300)
                .build(),
            target(ApiServer),
            "failed",
            &["was not removed from its node", "cp-1: backup pod"],
        ),
        row(
            "a whole deadline per node: the second node has its own",
            gone(excluded(finished(3), &["cp-1", "cp-2"], 300), "cp-1")
                .backup_pod_terminating("cp-2", 5)
                .at(400)
                .build(),
            target(ApiServer),
            "wait-for-backup-gone",
            &["cp-2: backup pod"],
        ),
        row(
            "a controller-manager's backup goes at once: no load balancer checks it",
            World::steady(ControllerManager, 3)
                .backup()
                .backup_serving()
                .leader("cp-1", 5)
                .updated()
                .all_new(60)
                .at(90)
                .build(),
            target(ControllerManager),
            "remove-backup",
            &[],
        ),
        row(
            "on one node the DaemonSet goes at once",
            finished(1).at(71).build(),
            target(ApiServer),
            "remove-backup",
            &[],
        ),
        row(
            "on five nodes, after two: the third",
            gone(
                gone(excluded(finished(5), &["cp-1", "cp-2"], 81), "cp-1"),
                "cp-2",
            )
            .at(85)
            .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-3\"", "cp-1,cp-2,cp-3"],
        ),
    ]);
}

#[test]
fn a_removal_under_way_is_finished_whatever_the_real_daemonset_shows() {
    // Once a node has lost its backup pod the backup is no rollback's safety net any more:
    // like a backup whose deletion has begun, it is removed to the end.
    check(vec![
        row(
            "a new pod crash-loops after the removal began",
            gone(excluded(finished(3), &["cp-1"], 72), "cp-1")
                .new_pod("cp-2", Pod::CrashLoop { restarts: 5 })
                .at(80)
                .build(),
            target(ApiServer),
            "drain-backup-node",
            &["\"node\":\"cp-2\""],
        ),
        row(
            "a rollback's removal, resumed by a run for the same target",
            gone(
                excluded(
                    World::steady(ApiServer, 3)
                        .backup()
                        .backup_serving()
                        .rollback_recorded(20),
                    &["cp-1"],
                    72,
                ),
                "cp-1",
            )
            .at(80)
            .build(),
            with(target(ApiServer), |o| o.no_rollback = true),
            "drain-backup-node",
            &["\"node\":\"cp-2\""],
        ),
    ]);
}

fn node_name(op: &str, node: &str) -> NodeSelectorRequirement {
    NodeSelectorRequirement {
        key: "metadata.name".into(),
        operator: op.into(),
        values: Some(vec![node.into()]),
    }
}

fn terms(template: &PodTemplateSpec) -> Vec<NodeSelectorTerm> {
    template
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default()
}

#[test]
fn excluding_nodes_keeps_every_term_and_is_idempotent() {
    let nodes: BTreeSet<String> = ["cp-1".to_string(), "cp-2".to_string()].into();
    let zone = NodeSelectorRequirement {
        key: "zone".into(),
        operator: "In".into(),
        values: Some(vec!["a".into()]),
    };
    let with_terms = PodTemplateSpec {
        spec: Some(PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![
                            NodeSelectorTerm {
                                match_expressions: Some(vec![zone.clone()]),
                                match_fields: None,
                            },
                            NodeSelectorTerm {
                                match_expressions: None,
                                match_fields: Some(vec![node_name("In", "cp-9")]),
                            },
                        ],
                    }),
                    ..NodeAffinity::default()
                }),
                ..Affinity::default()
            }),
            ..PodSpec::default()
        }),
        ..PodTemplateSpec::default()
    };
    let excluded = exclude_nodes(&with_terms, &nodes);
    let got = terms(&excluded);
    assert_eq!(got.len(), 2, "the alternatives stay alternatives");
    assert_eq!(got[0].match_expressions, Some(vec![zone]));
    assert_eq!(
        got[0].match_fields,
        Some(vec![node_name("NotIn", "cp-1"), node_name("NotIn", "cp-2")]),
        "one value per field requirement, as the API requires"
    );
    assert_eq!(
        got[1].match_fields,
        Some(vec![
            node_name("In", "cp-9"),
            node_name("NotIn", "cp-1"),
            node_name("NotIn", "cp-2")
        ])
    );
    assert_eq!(exclude_nodes(&excluded, &nodes), excluded, "idempotent");

    let bare = exclude_nodes(&PodTemplateSpec::default(), &nodes);
    assert_eq!(
        terms(&bare),
        vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![node_name("NotIn", "cp-1"), node_name("NotIn", "cp-2")]),
        }],
        "no affinity: one term with only the exclusions (an empty term would match nothing)"
    );
}
