//! Towards static pods: the hand-over step by step, the DaemonSet gated first and deleted
//! after the last node.

use super::{daemonset, fresh, pod, running, step};
use crate::conversion::decide::{Direction, NodeComponent};

#[test]
fn to_static_table() {
    let self_hosted = || {
        let mut o = fresh();
        o.manifest_on_disk = false;
        o.mirror = None;
        o.mirror_serving = Err("no mirror pod".into());
        o.daemonset = Some(daemonset(vec![pod("ds-pod", running(), 0)]));
        o.daemonset_gated = true;
        o.gated_nodes = vec!["cp-1".into()];
        o.daemonset_pod_serving = Ok(());
        o
    };
    let with = |f: &dyn Fn(&mut NodeComponent)| {
        let mut obs = self_hosted();
        f(&mut obs);
        obs
    };
    let rows: Vec<(&str, NodeComponent, &str)> = vec![
        (
            "self-hosted: write the manifest",
            self_hosted(),
            "write-manifest",
        ),
        (
            "an ungated DaemonSet: label its nodes first",
            with(&|o| {
                o.daemonset_gated = false;
                o.gated_nodes.clear();
            }),
            "label-node",
        ),
        (
            "an ungated DaemonSet whose nodes are labelled: gate it",
            with(&|o| o.daemonset_gated = false),
            "gate-daemonset",
        ),
        (
            "static pod starting: wait",
            with(&|o| o.manifest_on_disk = true),
            "wait",
        ),
        (
            "static pod serves: retire the DaemonSet pod",
            with(&|o| {
                o.manifest_on_disk = true;
                o.mirror_serving = Ok(());
            }),
            "unlabel-node",
        ),
        (
            "last node, no pod left: delete the DaemonSet",
            with(&|o| {
                o.manifest_on_disk = true;
                o.mirror_serving = Ok(());
                o.gated_nodes.clear();
                o.daemonset = Some(daemonset(vec![]));
            }),
            "delete-daemonset",
        ),
        (
            "other nodes still self-hosted: done here",
            with(&|o| {
                o.manifest_on_disk = true;
                o.mirror_serving = Ok(());
                o.gated_nodes = vec!["cp-2".into()];
                let mut other = pod("ds-pod-2", running(), 0);
                other.node = Some("cp-2".into());
                o.daemonset = Some(daemonset(vec![other]));
            }),
            "done",
        ),
        (
            "no DaemonSet and the static pod serves: done (skipped)",
            with(&|o| {
                o.manifest_on_disk = true;
                o.mirror_serving = Ok(());
                o.daemonset = None;
            }),
            "done",
        ),
    ];
    for (case, obs, expected) in rows {
        assert_eq!(step(Direction::ToStatic, &obs), expected, "{case}");
    }
}
