use super::*;
use crate::Component;
use crate::Component::{ApiServer, ControllerManager, Scheduler};

fn state(phase: &str, ready: bool, terminating: bool) -> Option<PodState> {
    Some(PodState {
        phase: phase.into(),
        ready,
        terminating,
    })
}

fn change(
    at: f64,
    node: &str,
    component: Component,
    pod: &str,
    kind: TemplateKind,
    state: Option<PodState>,
) -> PodChange {
    PodChange {
        at,
        node: node.into(),
        component,
        pod: pod.into(),
        kind,
        state,
    }
}

/// A pod's bar as (track, [(from, to, ready, terminating)]).
type Drawn = (usize, Vec<(f64, f64, bool, bool)>);

fn drawn(lanes: &[Lane], node: &str, component: Component, pod: &str) -> Option<Drawn> {
    let lane = lanes
        .iter()
        .find(|l| l.node == node && l.component == component)?;
    let bar = lane.pods.iter().find(|p| p.pod == pod)?;
    Some((
        bar.track,
        bar.segments
            .iter()
            .map(|s| (s.from, s.to, s.state.ready, s.state.terminating))
            .collect(),
    ))
}

#[test]
fn a_pivot_on_one_node_draws_old_backup_and_new_on_separate_tracks() {
    use TemplateKind::{Backup, New, Old};
    let mut timeline = TimelineBuilder::new();
    for c in [
        change(
            0.0,
            "cp-1",
            ApiServer,
            "old",
            Old,
            state("Running", true, false),
        ),
        // Bound later: the node is learnt from a later change.
        change(
            1.0,
            "",
            ApiServer,
            "backup",
            Backup,
            state("Pending", false, false),
        ),
        change(
            1.5,
            "cp-1",
            ApiServer,
            "backup",
            Backup,
            state("Running", false, false),
        ),
        change(
            2.0,
            "cp-1",
            ApiServer,
            "backup",
            Backup,
            state("Running", true, false),
        ),
        // The same state again changes nothing.
        change(
            2.5,
            "cp-1",
            ApiServer,
            "backup",
            Backup,
            state("Running", true, false),
        ),
        change(
            3.0,
            "cp-1",
            ApiServer,
            "old",
            Old,
            state("Running", true, true),
        ),
        change(4.0, "cp-1", ApiServer, "old", Old, None),
        change(
            4.0,
            "cp-1",
            ApiServer,
            "new",
            New,
            state("Running", false, false),
        ),
        change(
            5.0,
            "cp-1",
            ApiServer,
            "new",
            New,
            state("Running", true, false),
        ),
        change(6.0, "cp-1", ApiServer, "backup", Backup, None),
        // Gone before ever seen: nothing to draw.
        change(6.5, "cp-1", ApiServer, "ghost", Old, None),
    ] {
        timeline.observe(c);
    }
    let lanes = timeline.finish(8.0);
    assert_eq!(lanes.len(), 1, "one node, one component: {lanes:#?}");
    assert_eq!(lanes[0].tracks, 2);
    let cases: [(&str, Option<Drawn>); 4] = [
        (
            "old",
            Some((0, vec![(0.0, 3.0, true, false), (3.0, 4.0, true, true)])),
        ),
        (
            "backup",
            Some((
                1,
                vec![
                    (1.0, 1.5, false, false),
                    (1.5, 2.0, false, false),
                    (2.0, 6.0, true, false),
                ],
            )),
        ),
        // Starts after the old pod ended: back on the first track; open until the end.
        (
            "new",
            Some((0, vec![(4.0, 5.0, false, false), (5.0, 8.0, true, false)])),
        ),
        ("ghost", None),
    ];
    for (pod, want) in cases {
        assert_eq!(drawn(&lanes, "cp-1", ApiServer, pod), want, "{pod}");
    }
}

#[test]
fn lanes_come_in_upgrade_order_then_by_node() {
    let mut timeline = TimelineBuilder::new();
    let running = || state("Running", true, false);
    for (node, component, pod) in [
        ("cp-2", Scheduler, "s2"),
        ("cp-1", ApiServer, "a1"),
        ("cp-2", ApiServer, "a2"),
        ("cp-1", ControllerManager, "c1"),
    ] {
        timeline.observe(change(
            0.0,
            node,
            component,
            pod,
            TemplateKind::Old,
            running(),
        ));
    }
    let order: Vec<_> = timeline
        .finish(1.0)
        .iter()
        .map(|l| (l.component, l.node.clone()))
        .collect();
    assert_eq!(
        order,
        vec![
            (ApiServer, "cp-1".to_string()),
            (ApiServer, "cp-2".to_string()),
            (ControllerManager, "cp-1".to_string()),
            (Scheduler, "cp-2".to_string()),
        ]
    );
}

fn marker(at: f64, component: Component, step: &str, finish: bool) -> Marker {
    Marker {
        at,
        component,
        step: step.into(),
        detail: format!("{step} of {}", component.name()),
        finish,
    }
}

#[test]
fn a_step_lasts_until_the_components_next_marker() {
    let markers = [
        marker(0.0, ApiServer, "create-backup", false),
        marker(0.5, ApiServer, "wait-for-backup", false),
        marker(2.0, ApiServer, "update", false),
        marker(2.25, ApiServer, "wait-for-backup", false),
        marker(3.0, ApiServer, "done", true),
        marker(3.0, Scheduler, "create-backup", false),
    ];
    let got: Vec<_> = step_timings(&markers, 5.0)
        .into_iter()
        .map(|t| (t.component, t.step, t.seconds))
        .collect();
    assert_eq!(
        got,
        vec![
            (ApiServer, "create-backup".to_string(), 0.5),
            // Both stretches of a step that came back.
            (ApiServer, "wait-for-backup".to_string(), 1.5 + 0.75),
            (ApiServer, "update".to_string(), 0.25),
            // Cut short: lasts until the end of the recording.
            (Scheduler, "create-backup".to_string(), 2.0),
        ]
    );
}

#[test]
fn everything_that_comes_from_outside_is_escaped() {
    for (raw, want) in [
        ("plain", "plain"),
        ("<script>", "&lt;script&gt;"),
        ("a & b", "a &amp; b"),
        ("\"quoted\" 'single'", "&quot;quoted&quot; &#39;single&#39;"),
        ("bell\u{7}", "bell "),
    ] {
        assert_eq!(escape(raw), want);
    }
    let hostile = "<img src=x onerror=alert(1)>";
    let report = UpgradeReport {
        title: hostile.into(),
        subtitle: hostile.into(),
        verdict: hostile.into(),
        duration: 1.0,
        lanes: {
            let mut t = TimelineBuilder::new();
            t.observe(change(
                0.0,
                hostile,
                ApiServer,
                hostile,
                TemplateKind::Old,
                state(hostile, true, false),
            ));
            t.finish(1.0)
        },
        availability: vec![Availability {
            source: AvailabilitySource::EngineHealth { every_ms: 250 },
            attempts: 1,
            failures: vec![ProbeFailure {
                at: 0.5,
                kind: ProbeKind::Health,
                error: hostile.into(),
            }],
            outages: vec![],
        }],
        markers: vec![Marker {
            at: 0.1,
            component: ApiServer,
            step: hostile.into(),
            detail: hostile.into(),
            finish: false,
        }],
        tables: vec![Table {
            title: hostile.into(),
            headers: vec![hostile.into()],
            rows: vec![vec![hostile.into()]],
        }],
        notes: vec![hostile.into()],
        success: false,
    };
    let html = render_html(&report);
    assert!(!html.contains("<img"), "{html}");
    assert!(
        html.contains("&lt;img src=x onerror=alert(1)&gt;"),
        "shown as text"
    );
}

/// A small but complete report: one component on two nodes through a pivot, a probe
/// failure, an outage and the engine's markers.
fn sample_report() -> UpgradeReport {
    use TemplateKind::{Backup, New, Old};
    let mut t = TimelineBuilder::new();
    for node in ["cp-1", "cp-2"] {
        let pod = |k: &str| format!("{k}-{node}");
        for c in [
            change(
                0.0,
                node,
                ApiServer,
                &pod("old"),
                Old,
                state("Running", true, false),
            ),
            change(
                0.4,
                node,
                ApiServer,
                &pod("bak"),
                Backup,
                state("Running", false, false),
            ),
            change(
                1.0,
                node,
                ApiServer,
                &pod("bak"),
                Backup,
                state("Running", true, false),
            ),
            change(
                1.5,
                node,
                ApiServer,
                &pod("old"),
                Old,
                state("Running", true, true),
            ),
            change(2.0, node, ApiServer, &pod("old"), Old, None),
            change(
                2.0,
                node,
                ApiServer,
                &pod("new"),
                New,
                state("Pending", false, false),
            ),
            change(
                2.6,
                node,
                ApiServer,
                &pod("new"),
                New,
                state("Running", true, false),
            ),
            change(3.2, node, ApiServer, &pod("bak"), Backup, None),
        ] {
            t.observe(c);
        }
    }
    let markers = vec![
        marker(0.3, ApiServer, "create-backup", false),
        marker(0.4, ApiServer, "wait-for-backup", false),
        marker(1.4, ApiServer, "update-daemonset", false),
        marker(3.5, ApiServer, "done", true),
    ];
    UpgradeReport {
        title: "Upgrade to v1.34.0".into(),
        subtitle: "2 control-plane nodes".into(),
        verdict: "Upgraded; the API never went down.".into(),
        success: true,
        duration: 4.0,
        lanes: t.finish(4.0),
        availability: vec![Availability {
            source: AvailabilitySource::Prober {
                read_every_ms: 10,
                write_every_ms: 50,
                connections: ClientConnections::NewPerRequest,
            },
            attempts: 480,
            failures: vec![ProbeFailure {
                at: 1.52,
                kind: ProbeKind::Read,
                error: "connection closed".into(),
            }],
            outages: vec![(1.5, 1.55)],
        }],
        tables: vec![Table {
            title: "Summary".into(),
            headers: vec!["what".into(), "value".into()],
            rows: vec![vec!["probe reads".into(), "399 ok, 1 failed".into()]],
        }],
        markers,
        notes: vec!["A note.".into()],
    }
}

#[test]
fn the_page_is_self_contained_and_names_every_lane_and_marker() {
    let html = render_html(&sample_report());
    for lane in [
        "data-node=\"cp-1\" data-component=\"kube-apiserver\"",
        "data-node=\"cp-2\" data-component=\"kube-apiserver\"",
        "id=\"lane-api-new-connections\"",
        "id=\"lane-steps\"",
    ] {
        assert!(html.contains(lane), "missing {lane}");
    }
    for step in [
        "create-backup",
        "wait-for-backup",
        "update-daemonset",
        "done",
    ] {
        assert!(
            html.contains(&format!("data-step=\"{step}\"")),
            "missing {step}"
        );
    }
    for external in [
        "http:", "https:", "src=", "href=", "url(", "@import", "<script",
    ] {
        assert!(!html.contains(external), "{external} in the page");
    }
}

#[test]
fn the_page_renders_as_before() {
    insta::assert_snapshot!(render_html(&sample_report()));
}

/// Labels, and the owner and template they mean.
type Classified = (
    &'static [(&'static str, &'static str)],
    Option<(PodOwner, TemplateKind)>,
);

#[test]
fn control_plane_pods_are_told_apart_by_their_labels() {
    use std::collections::{BTreeMap, BTreeSet};
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let original = BTreeSet::from(["aaa".to_string()]);
    let cases: [Classified; 7] = [
        (
            &[
                ("k8s-app", "self-hosted-kube-apiserver"),
                (REVISION_HASH_LABEL, "aaa"),
            ],
            Some((PodOwner::Real(ApiServer), TemplateKind::Old)),
        ),
        (
            &[
                ("k8s-app", "self-hosted-kube-scheduler"),
                (REVISION_HASH_LABEL, "bbb"),
            ],
            Some((PodOwner::Real(Scheduler), TemplateKind::New)),
        ),
        (
            &[("k8s-app", "self-hosted-kube-controller-manager")],
            Some((PodOwner::Real(ControllerManager), TemplateKind::Old)),
        ),
        (
            &[
                ("temp-upgrade-component", "kube-apiserver"),
                (REVISION_HASH_LABEL, "ccc"),
            ],
            Some((PodOwner::Backup(ApiServer), TemplateKind::Backup)),
        ),
        (&[("k8s-app", "upgrade-prepull-kube-apiserver")], None),
        (&[("k8s-app", "kube-dns")], None),
        (&[("temp-upgrade-component", "etcd")], None),
    ];
    for (pairs, want) in cases {
        let labels = labels(pairs);
        let got = PodOwner::of(&labels).map(|o| (o, o.template(&labels, &original)));
        assert_eq!(got, want, "{pairs:?}");
    }
}
