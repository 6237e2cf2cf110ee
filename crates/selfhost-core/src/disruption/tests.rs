//! Expected disruption per cluster shape.

use super::*;
use crate::observation::builder::{NEW, World, template};

fn shape(nodes: usize, live: bool, target: bool, identities: IdentityLeases) -> ClusterShape {
    ClusterShape {
        nodes,
        live_shares_port: live,
        backup_shares_port: true,
        target_shares_port: target,
        max_unavailable: Some(1),
        identity_leases: identities,
        front: FrontShape::Absent,
    }
}

/// Component, shape, API impact, leaderless gap bound, needs `--accept-downtime`, a phrase
/// of the explanation.
type Row = (
    Component,
    ClusterShape,
    ApiImpact,
    Option<u64>,
    bool,
    &'static str,
);

#[test]
fn the_cost_follows_from_nodes_port_sharing_and_identity_leases() {
    use Component::{ApiServer, ControllerManager, Scheduler};
    use IdentityLeases::{NotPublished, Published};
    let listen = ApiImpact::ListenBeforeServe {
        windows: 2,
        window_ms: 1700,
    };
    let outage = ApiImpact::Outage { up_to_seconds: 300 };
    // component, shape, API impact, leaderless gap bound, needs --accept-downtime, explanation
    let rows: Vec<Row> = vec![
        (
            ApiServer,
            shape(1, true, true, Published),
            listen.clone(),
            None,
            false,
            "two short windows",
        ),
        (
            ApiServer,
            shape(1, true, true, NotPublished),
            listen,
            None,
            false,
            "Ready plus a soak",
        ),
        (
            ApiServer,
            shape(3, true, true, Published),
            ApiImpact::None,
            None,
            false,
            "no failed requests expected",
        ),
        (
            ApiServer,
            shape(1, false, true, Published),
            outage,
            None,
            true,
            "needs --accept-downtime",
        ),
        (
            ApiServer,
            shape(3, false, true, Published),
            ApiImpact::None,
            None,
            false,
            "one node at a time",
        ),
        (
            ApiServer,
            shape(3, true, true, Published),
            ApiImpact::None,
            None,
            false,
            "serve by its own identity before the next old pod is replaced",
        ),
        (
            ApiServer,
            shape(3, true, true, Published),
            ApiImpact::None,
            None,
            false,
            "the backup DaemonSet is a record only, with no pods",
        ),
        (
            ApiServer,
            shape(5, true, true, Published),
            ApiImpact::None,
            None,
            false,
            "each node leaves the load balancer while its old kube-apiserver is replaced",
        ),
        (
            ControllerManager,
            shape(1, true, true, Published),
            ApiImpact::None,
            Some(3),
            false,
            "at most 3 s",
        ),
        (
            Scheduler,
            shape(5, false, true, Published),
            ApiImpact::None,
            Some(3),
            false,
            "--leader-elect-retry-period=500ms",
        ),
        (
            Scheduler,
            shape(1, false, true, Published),
            ApiImpact::None,
            Some(315),
            true,
            "no leader",
        ),
    ];
    for (component, shape, api, gap, accept, text) in rows {
        let expected = expected_disruption(component, &shape);
        let case = format!("{component} on {shape:?}");
        assert_eq!(expected.blocked, None, "{case}");
        assert_eq!(expected.api, api, "{case}");
        assert_eq!(expected.leaderless_gap_seconds, gap, "{case}");
        assert_eq!(expected.requires_accept_downtime, accept, "{case}");
        let explanation = expected.explanation.join(" ");
        assert!(explanation.contains(text), "{case}: {explanation}");
    }
}

/// Each shape the pivot cannot complete, or completes only with `--accept-downtime`, says
/// why and what the operator can do: a change that names the DaemonSet, or an option — never
/// a change of the target template, which an operator without a kubeadm configuration cannot
/// make, nor an edit of the live template, which rolls a self-hosted component out without a
/// backup.
#[test]
fn shapes_the_pivot_cannot_complete_name_the_reason_and_an_actionable_fix() {
    use Component::{ApiServer, ControllerManager, Scheduler};
    let no_target = shape(3, true, false, IdentityLeases::Published);
    let old_live = ClusterShape {
        live_shares_port: false,
        backup_shares_port: false,
        ..shape(3, true, true, IdentityLeases::Published)
    };
    let wide = ClusterShape {
        max_unavailable: Some(2),
        ..shape(3, false, true, IdentityLeases::Published)
    };
    let one_node = shape(1, false, true, IdentityLeases::Published);
    // component, shape, blocked (or only needs --accept-downtime), reason, fix
    let rows: [(Component, &ClusterShape, bool, &str, &[&str]); 5] = [
        (
            ApiServer,
            &no_target,
            true,
            "target template of kube-apiserver lacks --permit-port-sharing=true",
            &["Kubernetes 1.19 or later"],
        ),
        (
            ApiServer,
            &old_live,
            true,
            "older than 1.19",
            &[
                "kube-system/self-hosted-kube-apiserver",
                "selfhost convert to-static",
            ],
        ),
        (
            Scheduler,
            &wide,
            true,
            "maxUnavailable is not 1",
            &[
                "kubectl -n kube-system patch daemonset self-hosted-kube-scheduler --type merge \
                 -p '{\"spec\":{\"updateStrategy\":{\"type\":\"RollingUpdate\",\
                 \"rollingUpdate\":{\"maxUnavailable\":1}}}}'",
            ],
        ),
        (
            ControllerManager,
            &one_node,
            false,
            "needs --accept-downtime",
            &[
                "re-run with --accept-downtime",
                "Do not add the flag to kube-system/self-hosted-kube-controller-manager by hand",
            ],
        ),
        (
            ApiServer,
            &one_node,
            false,
            "needs --accept-downtime",
            &["re-run with --accept-downtime"],
        ),
    ];
    for (component, shape, blocked, reason, fix) in rows {
        let expected = expected_disruption(component, shape);
        let case = format!("{component} on {shape:?}");
        let said = if blocked {
            expected.blocked.clone().expect("blocked")
        } else {
            assert!(expected.requires_accept_downtime, "{case}");
            expected.explanation.join("; ")
        };
        assert!(said.contains(reason), "{case}: {said}");
        let fix_text = expected.fix.clone().unwrap_or_default();
        for phrase in fix {
            assert!(fix_text.contains(phrase), "{case}: {fix_text}");
        }
        assert!(
            !fix_text.contains("render the target"),
            "{case}: {fix_text}"
        );
    }
}

#[test]
fn a_target_that_adds_port_sharing_says_so() {
    let expected = expected_disruption(
        Component::ControllerManager,
        &shape(3, false, true, IdentityLeases::Published),
    );
    assert_eq!(expected.blocked, None);
    assert_eq!(expected.fix, None);
    let explanation = expected.explanation.join(" ");
    assert!(
        explanation.contains("selfhost adds it where the live template lacks it"),
        "{explanation}"
    );
}

#[test]
fn the_shape_is_read_from_an_observation() {
    let obs = World::steady(Component::ApiServer, 3)
        .live_without_port_sharing()
        .build();
    let shape = ClusterShape::observe(&obs, &template(Component::ApiServer, NEW, true));
    assert_eq!(shape.nodes, 3);
    assert!(!shape.live_shares_port);
    assert!(
        shape.backup_shares_port,
        "v1.32 knows the flag, so the backup gets it"
    );
    assert!(shape.target_shares_port);
    assert_eq!(shape.max_unavailable, Some(1));
    assert_eq!(shape.identity_leases, IdentityLeases::Published);

    let without = World::steady(Component::ApiServer, 1)
        .without_identity_leases()
        .build();
    let shape = ClusterShape::observe(&without, &template(Component::ApiServer, NEW, false));
    assert_eq!(shape.identity_leases, IdentityLeases::NotPublished);
    assert!(!shape.target_shares_port);
}

#[test]
fn port_sharing_is_read_from_command_or_args_and_versions_from_image_tags() {
    let mut t = template(Component::Scheduler, NEW, false);
    assert!(!permits_port_sharing(&t, Component::Scheduler));
    let container = &mut t.spec.as_mut().expect("spec").containers[0];
    container.args = Some(vec!["--permit-port-sharing".into()]);
    assert!(
        permits_port_sharing(&t, Component::Scheduler),
        "a bare boolean flag means true"
    );
    assert!(knows_port_sharing(&t, Component::Scheduler));

    assert_eq!(
        image_version("registry.k8s.io/kube-apiserver:v1.33.1").map(|v| v.to_string()),
        Some("v1.33.1".into())
    );
    assert_eq!(
        image_version("localhost:5000/kube-apiserver:v1.18.0").map(|v| v.minor()),
        Some(18)
    );
    assert_eq!(image_version("kube-apiserver@sha256:0123"), None);
    assert_eq!(image_version("localhost:5000/kube-apiserver"), None);
}

/// The bound on a leaderless gap holds with the retry period selfhost's templates set.
#[test]
fn the_handed_over_gap_covers_the_longest_jittered_retry() {
    let retry = crate::daemonset::LEADER_ELECT_RETRY_PERIOD
        .strip_suffix("ms")
        .and_then(|ms| ms.parse::<f64>().ok())
        .map(|ms| ms / 1000.0)
        .expect("a retry period in milliseconds");
    assert!(
        HANDED_OVER_GAP.as_secs_f64() - 2.2 * retry >= 1.5,
        "the longest jittered wait leaves 1.5 s of the bound to confirm the holder gone"
    );
}
