//! The expected disruption behind each node's API front, the shape it is read from, and the
//! word the plan shows for each hand-over.

use super::*;
use crate::front::{FRONT_ANNOTATION, FrontLayout};
use crate::observation::builder::{NEW, World, on_front, template};

fn front_target() -> PodTemplateSpec {
    on_front(
        template(Component::ApiServer, NEW, true),
        FrontLayout::default().backend,
    )
}

fn shape(world: World, target: &PodTemplateSpec) -> ClusterShape {
    ClusterShape::observe(&world.build(), target)
}

#[test]
fn behind_a_front_the_apiserver_hands_over_without_a_failed_request_or_port_sharing() {
    use Component::ApiServer;
    let cases = [
        ("one node", World::steady(ApiServer, 1).behind_front()),
        ("three nodes", World::steady(ApiServer, 3).behind_front()),
        (
            "one node, no port sharing on the live template",
            World::steady(ApiServer, 1)
                .behind_front()
                .live_without_port_sharing(),
        ),
        (
            "one node, moved behind the front from every address with port sharing",
            World::steady(ApiServer, 1).marked_behind_front(),
        ),
        (
            "three nodes, moved behind the front from every address with port sharing",
            World::steady(ApiServer, 3).marked_behind_front(),
        ),
        (
            "one node, no identity Leases",
            World::steady(ApiServer, 1)
                .behind_front()
                .without_identity_leases(),
        ),
    ];
    for (case, world) in cases {
        let nodes = world.nodes().len();
        let shape = shape(world, &front_target());
        assert_eq!(shape.behind_front(), Some(FrontLayout::default()), "{case}");
        assert!(!shape.backup_waits_for_the_port(), "{case}");
        let expected = expected_disruption(ApiServer, &shape);
        assert_eq!(expected.blocked, None, "{case}");
        assert_eq!(expected.api, ApiImpact::None, "{case}");
        assert_eq!(expected.hand_over, HandOver::Front, "{case}");
        assert!(!expected.requires_accept_downtime, "{case}");
        assert_eq!(
            expected.explanation.first().map(String::as_str),
            Some(
                "none: the node's API front moves new connections to the backup at \
                 127.0.0.2:6443 while the kube-apiserver restarts"
            ),
            "{case}"
        );
        let said = expected.explanation.join("; ");
        assert!(
            said.contains("no soak, no identity Lease"),
            "{case}: {said}"
        );
        assert_eq!(
            said.contains("keep their place behind the load balancer"),
            nodes > 1,
            "{case}: {said}"
        );
        assert!(!said.contains("leaves the load balancer"), "{case}: {said}");
    }
}

#[test]
fn a_front_the_pivot_cannot_follow_blocks_it_with_a_fix() {
    use Component::ApiServer;
    let annotated = |value: &str| {
        let mut world = World::steady(ApiServer, 1);
        world
            .real_mut()
            .annotations
            .insert(FRONT_ANNOTATION.into(), value.into());
        world
    };
    let plain = template(ApiServer, NEW, true);
    // case, world, target, reason, fix
    let rows: [(&str, World, &PodTemplateSpec, &str, &str); 4] = [
        (
            "unreadable",
            annotated("127.0.0.1 127.0.0.2"),
            &front_target(),
            "is not two IP addresses",
            "annotate --overwrite daemonset self-hosted-kube-apiserver \
             selfhost.dev/api-front=127.0.0.1,127.0.0.2",
        ),
        (
            "the same address twice",
            annotated("127.0.0.1,127.0.0.1"),
            &front_target(),
            "cannot both listen on 127.0.0.1",
            "selfhost.dev/api-front-",
        ),
        (
            "the live pods hold every address alone (no port sharing)",
            annotated("127.0.0.1,127.0.0.2").live_without_port_sharing(),
            &front_target(),
            "but its template listens on every address (no --bind-address)",
            "finish moving the kube-apiserver behind the front",
        ),
        (
            "the target listens on every address",
            World::steady(ApiServer, 1).behind_front(),
            &plain,
            "would take the kube-apiserver off the front",
            "--bind-address=127.0.0.1",
        ),
    ];
    for (case, world, target, reason, fix) in rows {
        let shape = shape(world, target);
        assert_eq!(shape.behind_front(), None, "{case}");
        let expected = expected_disruption(ApiServer, &shape);
        assert_eq!(expected.hand_over, HandOver::Refused, "{case}");
        let blocked = expected.blocked.unwrap_or_default();
        assert!(blocked.contains(reason), "{case}: {blocked}");
        let said_fix = expected.fix.unwrap_or_default();
        assert!(said_fix.contains(fix), "{case}: {said_fix}");
    }
}

#[test]
fn only_the_kube_apiserver_is_behind_a_front() {
    let mut world = World::steady(Component::Scheduler, 1);
    world
        .real_mut()
        .annotations
        .insert(FRONT_ANNOTATION.into(), "nonsense".into());
    let shape = shape(world, &template(Component::Scheduler, NEW, true));
    assert_eq!(shape.front, FrontShape::Absent);
    assert_eq!(
        expected_disruption(Component::Scheduler, &shape).hand_over,
        HandOver::Lease
    );
}

#[test]
fn each_shape_names_its_hand_over_in_a_word() {
    use Component::{ApiServer, ControllerManager};
    let plain = template(ApiServer, NEW, true);
    let rows = [
        (
            ApiServer,
            shape(World::steady(ApiServer, 1), &plain),
            "shared port",
        ),
        (
            ApiServer,
            shape(World::steady(ApiServer, 3), &plain),
            "balancer",
        ),
        (
            ApiServer,
            shape(
                World::steady(ApiServer, 1).live_without_port_sharing(),
                &plain,
            ),
            "restart",
        ),
        (
            ApiServer,
            shape(
                World::steady(ApiServer, 1),
                &template(ApiServer, NEW, false),
            ),
            "refused",
        ),
        (
            ApiServer,
            shape(World::steady(ApiServer, 1).behind_front(), &front_target()),
            "front",
        ),
        (
            ControllerManager,
            shape(
                World::steady(ControllerManager, 3),
                &template(ControllerManager, NEW, true),
            ),
            "lease",
        ),
    ];
    for (component, shape, word) in rows {
        let expected = expected_disruption(component, &shape);
        assert_eq!(expected.hand_over.word(), word, "{component} on {shape:?}");
        let json = serde_json::to_value(&expected).expect("serialises");
        assert_eq!(
            json["hand_over"],
            serde_json::Value::String(word.replace(' ', "-")),
            "{component}"
        );
    }
}
