//! Telling a node where a direction leads, waiting only for the cluster, from one still on
//! its way ([`crate::conversion::decide::awaits_only_the_cluster`]).

use super::{daemonset, fresh, pod, running, waiting};
use crate::conversion::decide::{Direction, NodeComponent};

/// A node where a direction leads, waiting only for the cluster, is told apart from one
/// still on its way (whose waits need this tool's next steps).
#[test]
fn a_node_at_the_end_awaits_only_the_cluster() {
    fn self_hosted(o: &mut NodeComponent) {
        o.manifest_on_disk = false;
        o.manifest_in_backup = true;
        o.daemonset = Some(daemonset(vec![pod("ds-pod", running(), 0)]));
        o.daemonset_gated = true;
        o.gated_nodes = vec!["cp-1".into()];
    }
    /// A case: its name, the direction, what differs from [`fresh`], and the answer.
    type Row = (&'static str, Direction, fn(&mut NodeComponent), bool);
    let rows: Vec<Row> = vec![
        (
            "static, no DaemonSet: to static is there",
            Direction::ToStatic,
            |_| {},
            true,
        ),
        (
            "static, leader not elected yet: still there",
            Direction::ToStatic,
            |o| o.leader = Err("no leader".into()),
            true,
        ),
        (
            "static pod that cannot start: not there",
            Direction::ToStatic,
            |o| {
                o.mirror = Some(pod("kube-apiserver-cp-1", waiting("ErrImagePull"), 0));
            },
            false,
        ),
        (
            "static: to self-hosted is not there",
            Direction::ToSelfHosted,
            |_| {},
            false,
        ),
        (
            "self-hosted, mirror pod still going: to self-hosted is there",
            Direction::ToSelfHosted,
            |o| self_hosted(o),
            true,
        ),
        (
            "self-hosted: to static is not there",
            Direction::ToStatic,
            |o| self_hosted(o),
            false,
        ),
        (
            "manifest moved aside but the node unlabelled: not there",
            Direction::ToSelfHosted,
            |o| {
                self_hosted(o);
                o.gated_nodes.clear();
            },
            false,
        ),
    ];
    for (case, direction, change, expected) in rows {
        let mut obs = fresh();
        change(&mut obs);
        assert_eq!(
            crate::conversion::decide::awaits_only_the_cluster(direction, &obs),
            expected,
            "{case}"
        );
    }
}
