//! Expected disruption per cluster shape.

use super::*;
use crate::pivot::tests::builder::{NEW, World, template};

fn shape(nodes: usize, live: bool, target: bool, identities: IdentityLeases) -> ClusterShape {
    ClusterShape {
        nodes,
        live_shares_port: live,
        backup_shares_port: true,
        target_shares_port: target,
        max_unavailable: Some(1),
        identity_leases: identities,
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

#[test]
fn shapes_the_pivot_cannot_complete_are_blocked_with_the_reason() {
    let mut no_target = shape(3, true, false, IdentityLeases::Published);
    let blocked = expected_disruption(Component::ApiServer, &no_target)
        .blocked
        .expect("blocked");
    assert!(
        blocked.contains("target template of kube-apiserver lacks --permit-port-sharing=true"),
        "{blocked}"
    );

    no_target.target_shares_port = true;
    no_target.live_shares_port = false;
    no_target.backup_shares_port = false;
    let blocked = expected_disruption(Component::ApiServer, &no_target)
        .blocked
        .expect("blocked");
    assert!(blocked.contains("older than 1.19"), "{blocked}");

    let mut wide = shape(3, false, true, IdentityLeases::Published);
    wide.max_unavailable = Some(2);
    let blocked = expected_disruption(Component::ApiServer, &wide)
        .blocked
        .expect("blocked");
    assert!(blocked.contains("maxUnavailable is not 1"), "{blocked}");
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
