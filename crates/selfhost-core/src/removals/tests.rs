use proptest::prelude::*;

use super::flags::REMOVED_FLAGS;
use super::gates::{LOCKED_GATES, REMOVED_GATES};
use super::*;
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};

fn line(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

fn subjects(component: Component, args: &[&str], target: u64) -> Vec<String> {
    findings(component, &line(args), m(target))
        .iter()
        .map(|f| {
            format!(
                "{}{}",
                if f.refuses_start() { "FAIL " } else { "WARN " },
                f.subject()
            )
        })
        .collect()
}

#[test]
fn flags_and_gates_are_judged_by_the_target_release() {
    let cases: &[(Component, &[&str], u64, &[&str])] = &[
        // Removed in v1.24: refused from then on, not before.
        (
            ApiServer,
            &["kube-apiserver", "--insecure-port=0"],
            24,
            &["FAIL --insecure-port"],
        ),
        (ApiServer, &["kube-apiserver", "--insecure-port=0"], 23, &[]),
        (
            ApiServer,
            &["kube-apiserver", "--insecure-port=0"],
            34,
            &["FAIL --insecure-port"],
        ),
        // The bare form and the space-separated form are the same flag.
        (
            ApiServer,
            &["kube-apiserver", "--insecure-port", "0"],
            34,
            &["FAIL --insecure-port"],
        ),
        // A flag is removed from one component only.
        (
            ControllerManager,
            &["kube-controller-manager", "--cloud-provider=external"],
            34,
            &[],
        ),
        (
            ApiServer,
            &["kube-apiserver", "--cloud-provider=external"],
            33,
            &["FAIL --cloud-provider"],
        ),
        (
            ApiServer,
            &["kube-apiserver", "--cloud-provider=external"],
            32,
            &[],
        ),
        (
            Scheduler,
            &["kube-scheduler", "--policy-config-file=/p", "--port=0"],
            34,
            &["FAIL --policy-config-file", "FAIL --port"],
        ),
        // A flag repeated is one finding.
        (
            ControllerManager,
            &["--port=0", "--port=0"],
            30,
            &["FAIL --port"],
        ),
        // Gates: removed, locked against, locked to its value, unknown to the tables.
        (
            ApiServer,
            &["--feature-gates=ServerSideApply=true"],
            32,
            &["FAIL feature gate ServerSideApply"],
        ),
        (
            ApiServer,
            &["--feature-gates=ServerSideApply=true"],
            31,
            &[],
        ),
        (
            Scheduler,
            &["--feature-gates=SidecarContainers=false"],
            33,
            &["FAIL feature gate SidecarContainers=false"],
        ),
        (
            Scheduler,
            &["--feature-gates=SidecarContainers=true"],
            33,
            &["WARN feature gate SidecarContainers=true"],
        ),
        (
            Scheduler,
            &["--feature-gates=SidecarContainers=false"],
            32,
            &[],
        ),
        (ApiServer, &["--feature-gates=SomeNewGate=true"], 34, &[]),
        // A gate locked, then removed: the removal is what the target sees.
        (
            ApiServer,
            &["--feature-gates=AllowServiceLBStatusOnNonLB=false"],
            34,
            &["WARN feature gate AllowServiceLBStatusOnNonLB=false"],
        ),
        (
            ApiServer,
            &["--feature-gates=AllowServiceLBStatusOnNonLB=false"],
            35,
            &["FAIL feature gate AllowServiceLBStatusOnNonLB"],
        ),
        // Every occurrence and every entry of a list counts; Go's booleans parse.
        (
            ControllerManager,
            &[
                "--feature-gates=KMSv2=True,APIListChunking=1",
                "--feature-gates=SidecarContainers=F",
            ],
            33,
            &[
                "FAIL feature gate KMSv2",
                "FAIL feature gate APIListChunking",
                "FAIL feature gate SidecarContainers=false",
            ],
        ),
        // Not a boolean: left to the binary.
        (ApiServer, &["--feature-gates=KMSv2=maybe"], 33, &[]),
        (ApiServer, &["--feature-gates="], 33, &[]),
    ];
    for (component, args, target, expected) in cases {
        assert_eq!(
            subjects(*component, args, *target),
            expected.to_vec(),
            "{component} {args:?} at v1.{target}"
        );
    }
}

#[test]
fn a_finding_says_what_the_binary_does_and_what_to_do() {
    let found = findings(ApiServer, &line(&["--insecure-port=0"]), m(34));
    let [finding] = found.as_slice() else {
        panic!("{found:?}")
    };
    assert_eq!(
        finding.to_string(),
        "--insecure-port was removed in v1.24: the binary exits with `unknown flag`"
    );
    assert!(
        finding.fix().starts_with("drop --insecure-port; instead: "),
        "{}",
        finding.fix()
    );
    assert!(
        finding.source().contains("kubernetes/kubernetes#"),
        "{}",
        finding.source()
    );

    let found = findings(
        ApiServer,
        &line(&["--feature-gates=SidecarContainers=false"]),
        m(34),
    );
    let [finding] = found.as_slice() else {
        panic!("{found:?}")
    };
    assert_eq!(
        finding.to_string(),
        "feature gate SidecarContainers is locked to true since v1.33: setting it to false stops \
         the binary at start"
    );
}

#[test]
fn the_tables_are_consistent() {
    for row in REMOVED_FLAGS {
        assert!(
            !row.flag.starts_with('-') && !row.flag.is_empty(),
            "{row:?}"
        );
        assert!(row.removed_in <= NEWEST_KNOWN, "{row:?}");
        assert!(!row.instead.is_empty() && !row.source.is_empty(), "{row:?}");
        let same = REMOVED_FLAGS
            .iter()
            .filter(|r| r.component == row.component && r.flag == row.flag)
            .count();
        assert_eq!(same, 1, "{row:?} appears twice");
    }
    for row in REMOVED_GATES {
        assert!(
            row.removed_in <= NEWEST_KNOWN && !row.source.is_empty(),
            "{row:?}"
        );
        assert_eq!(
            REMOVED_GATES.iter().filter(|r| r.gate == row.gate).count(),
            1,
            "{row:?}"
        );
    }
    for row in LOCKED_GATES {
        assert!(
            row.locked_in <= NEWEST_KNOWN && !row.source.is_empty(),
            "{row:?}"
        );
        assert_eq!(
            LOCKED_GATES.iter().filter(|r| r.gate == row.gate).count(),
            1,
            "{row:?}"
        );
        if let Some(removed) = REMOVED_GATES.iter().find(|r| r.gate == row.gate) {
            assert!(
                row.locked_in < removed.removed_in,
                "{row:?} locked after its removal"
            );
        }
    }
}

#[test]
fn a_target_past_the_tables_is_said_to_be() {
    assert_eq!(coverage(NEWEST_KNOWN), Coverage::Known);
    assert_eq!(coverage(NEWEST_KNOWN.next()), Coverage::Beyond);
    assert_eq!(coverage(m(29)), Coverage::Known);
}

/// Any flag or gate of the tables, set either way, on any component.
fn any_setting() -> impl Strategy<Value = (Component, String)> {
    let flag =
        prop::sample::select(REMOVED_FLAGS).prop_map(|r| (r.component, format!("--{}=0", r.flag)));
    let gates: Vec<&str> = REMOVED_GATES
        .iter()
        .map(|r| r.gate)
        .chain(LOCKED_GATES.iter().map(|r| r.gate))
        .collect();
    let gate = (
        prop::sample::select(gates),
        any::<bool>(),
        prop::sample::select(Component::ALL.to_vec()),
    )
        .prop_map(|(g, v, c)| (c, format!("--feature-gates={g}={v}")));
    prop_oneof![flag, gate]
}

proptest! {
    /// A release that refuses a setting refuses it in every later release too: nothing comes
    /// back once removed or locked.
    #[test]
    fn what_a_release_refuses_every_later_one_refuses(
        settings in prop::collection::vec(any_setting(), 1..6),
        minor in 20u64..36,
        later in 0u64..5,
    ) {
        for (component, arg) in &settings {
            let args = vec![arg.clone()];
            let refused = |t: u64| findings(*component, &args, m(t)).iter().any(Finding::refuses_start);
            if refused(minor) {
                prop_assert!(refused(minor + later), "{component} {arg}: v1.{minor} refuses, v1.{} not", minor + later);
            }
        }
    }

    /// Before the oldest row of the tables nothing is found.
    #[test]
    fn a_release_before_every_row_finds_nothing((component, arg) in any_setting()) {
        prop_assert!(findings(component, &[arg], m(21)).is_empty());
    }
}

mod apis {
    use crate::removals::apis::{
        REMOVED_APIS, RequestedApi, removed_between, requested_deprecated_apis,
    };
    use crate::removals::{NEWEST_KNOWN, m};

    #[test]
    fn each_removed_version_is_listed_once_with_a_source_a_replacement_and_a_known_release() {
        for (i, api) in REMOVED_APIS.iter().enumerate() {
            assert!(!api.source.is_empty() && !api.instead.is_empty() && !api.resources.is_empty());
            assert!(api.removed_in <= NEWEST_KNOWN, "{}", api.group_version());
            assert!(
                REMOVED_APIS[i + 1..]
                    .iter()
                    .all(|other| other.group_version() != api.group_version()),
                "{} twice",
                api.group_version()
            );
        }
    }

    #[test]
    fn an_upgrade_removes_what_the_releases_after_the_current_one_up_to_the_target_stop_serving() {
        let names = |current: u64, target: u64| -> Vec<String> {
            removed_between(m(current), m(target))
                .map(|api| api.group_version())
                .collect()
        };
        assert_eq!(names(31, 32), ["flowcontrol.apiserver.k8s.io/v1beta3"]);
        assert_eq!(
            names(28, 32),
            [
                "flowcontrol.apiserver.k8s.io/v1beta2",
                "flowcontrol.apiserver.k8s.io/v1beta3"
            ]
        );
        assert!(
            names(32, 35).is_empty(),
            "what 1.32 removed is gone already"
        );
        assert!(names(33, 33).is_empty());
    }

    #[test]
    fn requested_deprecated_apis_are_read_from_the_metrics_exposition() {
        let metrics = r#"
# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have been requested, broken out by API group, version, resource, subresource, and removed_release.
# TYPE apiserver_requested_deprecated_apis gauge
apiserver_requested_deprecated_apis{group="flowcontrol.apiserver.k8s.io",removed_release="1.32",resource="flowschemas",subresource="",version="v1beta3"} 1
apiserver_requested_deprecated_apis{group="flowcontrol.apiserver.k8s.io",removed_release="1.32",resource="flowschemas",subresource="",version="v1beta3"} 1
apiserver_requested_deprecated_apis{group="example.com",removed_release="",resource="widgets",subresource="status",version="v1alpha1"} 1
apiserver_requested_deprecated_apis{group="old.example.com",removed_release="1.40",resource="gadgets",subresource="",version="v1"} 0
apiserver_requested_deprecated_apis{group="broken",resource="x" 1
apiserver_request_total{code="200",group="",resource="pods",verb="LIST",version="v1"} 12
"#;
        let requested = requested_deprecated_apis(metrics);
        assert_eq!(
            requested,
            vec![
                RequestedApi {
                    group: "example.com".into(),
                    version: "v1alpha1".into(),
                    resource: "widgets".into(),
                    subresource: Some("status".into()),
                    removed_in: None,
                },
                RequestedApi {
                    group: "flowcontrol.apiserver.k8s.io".into(),
                    version: "v1beta3".into(),
                    resource: "flowschemas".into(),
                    subresource: None,
                    removed_in: Some(m(32)),
                },
            ]
        );
        assert_eq!(
            requested[1].qualified(),
            "flowschemas.v1beta3.flowcontrol.apiserver.k8s.io"
        );
        assert_eq!(
            requested[0].qualified(),
            "widgets/status.v1alpha1.example.com"
        );
    }

    #[test]
    fn escaped_label_values_are_read_whole() {
        let metrics = r#"apiserver_requested_deprecated_apis{group="a\"b",removed_release="v1.32",resource="r\\s",subresource="",version="v1"} 1"#;
        let requested = requested_deprecated_apis(metrics);
        assert_eq!(requested.len(), 1);
        assert_eq!(
            (requested[0].group.as_str(), requested[0].resource.as_str()),
            ("a\"b", "r\\s")
        );
        assert_eq!(requested[0].removed_in, Some(m(32)));
    }
}
