//! The node's API front in a kube-apiserver's conversion: up before the static pod leaves,
//! gone once the static pod serves the node's API address again, and back with the
//! DaemonSet pod when going to static fails.

use super::{daemonset, fresh, pod, running, waiting};
use crate::conversion::decide::{Direction, Mode, NodeComponent, NodeFront, next_step};

fn front(manifest_on_disk: bool, running_now: bool) -> NodeFront {
    NodeFront {
        wanted: true,
        manifest_on_disk,
        mirror: manifest_on_disk.then(|| pod("selfhost-front-cp-1", running(), 0)),
        running: if running_now {
            Ok(())
        } else {
            Err("no mirror pod".into())
        },
    }
}

/// The DaemonSet pod serves beside the static pod and is kept: only the front is left.
fn handing_over() -> NodeComponent {
    let mut o = fresh();
    o.daemonset = Some(daemonset(vec![pod("ds-pod", running(), 0)]));
    o.daemonset_gated = true;
    o.gated_nodes = vec!["cp-1".into()];
    o.daemonset_pod_serving = Ok(());
    o.checkpoint_kept = Some(Ok(()));
    o
}

/// The static pod serves beside the DaemonSet pod on the way to static.
fn static_back() -> NodeComponent {
    let mut o = handing_over();
    o.checkpoint_kept = None;
    o.front = Some(front(true, true));
    o
}

fn with(mut o: NodeComponent, f: impl FnOnce(&mut NodeComponent)) -> NodeComponent {
    f(&mut o);
    o
}

#[test]
fn the_front_comes_before_the_static_pod_leaves_and_goes_once_it_serves_again() {
    let restoring = Mode::Restore {
        reason: "it failed".into(),
    };
    let rows: Vec<(&str, Direction, &Mode, NodeComponent, &str)> = vec![
        (
            "the pod listens behind a front that is not there: write it",
            Direction::ToSelfHosted,
            &Mode::Forward,
            with(handing_over(), |o| o.front = Some(front(false, false))),
            "write-front",
        ),
        (
            "written, not running yet: the static pod stays, the only listener on the node's \
             API address",
            Direction::ToSelfHosted,
            &Mode::Forward,
            with(handing_over(), |o| o.front = Some(front(true, false))),
            "wait",
        ),
        (
            "its image cannot be pulled: fail, which undoes the node",
            Direction::ToSelfHosted,
            &Mode::Forward,
            with(handing_over(), |o| {
                let mut f = front(true, false);
                f.mirror = Some(pod("selfhost-front-cp-1", waiting("ImagePullBackOff"), 0));
                o.front = Some(f);
            }),
            "fail",
        ),
        (
            "it runs: the static manifest moves aside",
            Direction::ToSelfHosted,
            &Mode::Forward,
            with(handing_over(), |o| o.front = Some(front(true, true))),
            "move-manifest-aside",
        ),
        (
            "a DaemonSet without a front's layout wants none",
            Direction::ToSelfHosted,
            &Mode::Forward,
            with(handing_over(), |o| {
                o.front = Some(NodeFront {
                    wanted: false,
                    ..front(false, false)
                });
            }),
            "move-manifest-aside",
        ),
        (
            "undoing, the static pod back and the DaemonSet pod gone: the front goes",
            Direction::ToSelfHosted,
            &restoring,
            with(fresh(), |o| o.front = Some(front(true, true))),
            "remove-front",
        ),
        (
            "undoing, the front gone too: restored",
            Direction::ToSelfHosted,
            &restoring,
            with(fresh(), |o| o.front = Some(front(false, false))),
            "rolled-back",
        ),
        (
            "to static, the static pod serves beside the front: the front goes first",
            Direction::ToStatic,
            &Mode::Forward,
            static_back(),
            "remove-front",
        ),
        (
            "to static, the front's manifest gone: the DaemonSet pod retires",
            Direction::ToStatic,
            &Mode::Forward,
            with(static_back(), |o| o.front = Some(front(false, true))),
            "unlabel-node",
        ),
        (
            "to static, no DaemonSet left but a front's manifest: it goes",
            Direction::ToStatic,
            &Mode::Forward,
            with(static_back(), |o| {
                o.daemonset = None;
                o.gated_nodes.clear();
            }),
            "remove-front",
        ),
        (
            "undoing the way to static: the DaemonSet pod serves, its front comes back before \
             the static manifest goes",
            Direction::ToStatic,
            &restoring,
            with(static_back(), |o| o.front = Some(front(false, false))),
            "write-front",
        ),
        (
            "undoing the way to static, the front running: the static manifest goes",
            Direction::ToStatic,
            &restoring,
            static_back(),
            "remove-manifest",
        ),
    ];
    let mut failures = Vec::new();
    for (why, direction, mode, obs, want) in rows {
        let got = next_step(direction, mode, &obs);
        if got.name() != want {
            failures.push(format!("{why}: want {want}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
