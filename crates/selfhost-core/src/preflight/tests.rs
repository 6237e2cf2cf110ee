//! Preflight: every refusal with its message.

use super::*;
use crate::observation::ContainerState;
use crate::observation::builder::{NEW, OLD, Pod, World, template, version};
use crate::skew::SUPPORTED_VERSIONS;

/// A healthy three-component cluster on [`OLD`]; `change` edits each component's world.
pub(super) fn cluster(
    nodes: usize,
    change: impl Fn(Component, World) -> World,
) -> ClusterObservation {
    ClusterObservation {
        components: Component::ALL
            .into_iter()
            .map(|c| change(c, World::steady(c, nodes)).build())
            .collect(),
        apiserver_versions: (1..=nodes)
            .map(|i| ApiServerVersion {
                name: format!("cp-{i}"),
                version: version(OLD),
            })
            .collect(),
        kubelets: (1..=nodes)
            .map(|i| KubeletVersion {
                node: format!("cp-{i}"),
                version: OLD.to_string(),
            })
            .collect(),
        api_usage: None,
        certificates: None,
        etcd: None,
    }
}

pub(super) fn target_to(v: &str) -> PreflightTarget {
    PreflightTarget {
        version: version(v),
        templates: Component::ALL
            .into_iter()
            .map(|c| (c, template(c, v, true)))
            .collect(),
        templates_edited_in: None,
        flags: SkewFlags::default(),
        accept_downtime: false,
        supported: SUPPORTED_VERSIONS,
        certificate_warning: crate::preflight::DEFAULT_CERTIFICATE_WARNING,
    }
}

fn failures(report: &PreflightReport) -> Vec<(CheckId, Option<Component>, String)> {
    report
        .failures()
        .map(|c| {
            (
                c.id,
                c.component,
                format!("{} | {}", c.message, c.fix.clone().unwrap_or_default()),
            )
        })
        .collect()
}

#[test]
fn a_healthy_cluster_passes_every_check() {
    let report = preflight(&cluster(3, |_, w| w), &target_to(NEW));
    assert!(report.allows(), "{:?}", failures(&report));
    let ids: Vec<&str> = report.checks.iter().map(|c| c.id.id()).collect();
    for id in [
        "api-healthy",
        "daemonsets-exist",
        "daemonsets-converged",
        "nodes-ready",
        "version-skew",
        "expected-disruption",
        "flags-and-gates",
    ] {
        assert!(ids.contains(&id), "{id} missing from {ids:?}");
    }
    // Three nodes behind a load balancer: nothing to warn about.
    assert!(
        report.checks.iter().all(|c| c.verdict == Verdict::Pass),
        "{:?}",
        report.checks
    );
}

/// A change to each component's world.
type Change = fn(Component, World) -> World;
/// Case, nodes, change, target version, the failing check, its component, a phrase of it.
type Refusal = (
    &'static str,
    usize,
    Change,
    &'static str,
    CheckId,
    Option<Component>,
    &'static str,
);

#[test]
fn each_refusal_says_what_is_wrong_and_what_to_do() {
    use Component::{ApiServer, ControllerManager, Scheduler};
    let rows: Vec<Refusal> = vec![
        (
            "API unhealthy",
            1,
            |_, w| w.api(OLD, false),
            NEW,
            CheckId::ApiHealthy,
            None,
            "[-]etcd failed",
        ),
        (
            "a NotReady node",
            3,
            |_, w| w.node_not_ready("cp-2"),
            NEW,
            CheckId::NodesReady,
            None,
            "cp-2 is NotReady (KubeletNotReady) | bring the node(s) back",
        ),
        (
            "a missing DaemonSet",
            1,
            |c, mut w| {
                if c == Scheduler {
                    w.obs.real = None;
                }
                w
            },
            NEW,
            CheckId::DaemonSetsExist,
            Some(Scheduler),
            "self-hosted-kube-scheduler does not exist",
        ),
        (
            "zero pods",
            1,
            |c, w| {
                if c == ControllerManager {
                    w.real_pods_gone("cp-1")
                } else {
                    w
                }
            },
            NEW,
            CheckId::DaemonSetsConverged,
            Some(ControllerManager),
            "has no pods",
        ),
        (
            "not converged",
            3,
            |c, w| {
                if c == ApiServer {
                    w.new_pod("cp-3", Pod::Starting { started: -5 })
                } else {
                    w
                }
            },
            NEW,
            CheckId::DaemonSetsConverged,
            Some(ApiServer),
            "cp-3: pod",
        ),
        (
            "a backup of another upgrade",
            1,
            |c, w| {
                if c == ApiServer {
                    w.backup_for("v1.33.0")
                } else {
                    w
                }
            },
            NEW,
            CheckId::NoForeignBackup,
            Some(ApiServer),
            "upgrade to v1.33.0 | finish it with `selfhost apply v1.33.0`",
        ),
        (
            "an unreadable backup",
            1,
            |c, w| {
                if c == Scheduler {
                    w.backup_corrupt()
                } else {
                    w
                }
            },
            NEW,
            CheckId::NoForeignBackup,
            Some(Scheduler),
            "--force",
        ),
        (
            "a skipped minor",
            1,
            |_, w| w,
            "v1.34.0",
            CheckId::VersionSkew,
            None,
            "upgrade-skips-minor",
        ),
        (
            "one node without port sharing",
            1,
            |_, w| w.live_without_port_sharing(),
            NEW,
            CheckId::ExpectedDisruption,
            Some(ApiServer),
            "--accept-downtime",
        ),
        (
            "one node without port sharing: the fix is the option, not an edit of the template",
            1,
            |_, w| w.live_without_port_sharing(),
            NEW,
            CheckId::ExpectedDisruption,
            Some(ControllerManager),
            "| re-run with --accept-downtime to accept it this once",
        ),
        (
            "three nodes without port sharing and a rollout wider than one node: the fix names \
             the DaemonSet and the command",
            3,
            |_, mut w| {
                w = w.live_without_port_sharing();
                if let Some(strategy) = w.real_mut().update_strategy.as_mut()
                    && let Some(rolling) = strategy.rolling_update.as_mut()
                {
                    rolling.max_unavailable =
                        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(2));
                }
                w
            },
            NEW,
            CheckId::ExpectedDisruption,
            Some(Scheduler),
            "| set maxUnavailable of DaemonSet kube-system/self-hosted-kube-scheduler to 1",
        ),
    ];
    for (case, nodes, change, to, id, component, text) in rows {
        let report = preflight(&cluster(nodes, change), &target_to(to));
        assert!(!report.allows(), "{case}: allowed");
        let found = failures(&report);
        assert!(
            found
                .iter()
                .any(|(i, c, message)| *i == id && *c == component && message.contains(text)),
            "{case}: no {id:?} failure mentioning {text:?} in {found:#?}"
        );
    }
}

#[test]
fn an_upgrade_in_progress_is_resumable_not_refused() {
    // The apiserver is mid-rollout: not converged, but our backup for this target exists.
    let report = preflight(
        &cluster(1, |c, w| {
            if c == Component::ApiServer {
                w.backup()
                    .backup_serving()
                    .updated()
                    .new_pod("cp-1", Pod::Starting { started: 40 })
            } else {
                w
            }
        }),
        &target_to(NEW),
    );
    assert!(report.allows(), "{:?}", failures(&report));
    let resumed: Vec<&Check> = report
        .checks
        .iter()
        .filter(|c| c.component == Some(Component::ApiServer) && c.message.contains("resumes"))
        .collect();
    assert_eq!(resumed.len(), 2, "{:?}", report.checks);
}

#[test]
fn force_and_accept_downtime_turn_refusals_into_warnings() {
    let foreign = cluster(1, |c, w| {
        if c == Component::ApiServer {
            w.backup_for("v1.33.0")
        } else {
            w
        }
    });
    let mut forced = target_to(NEW);
    forced.flags.force = true;
    let report = preflight(&foreign, &forced);
    assert!(report.allows(), "{:?}", failures(&report));
    assert!(
        report
            .checks
            .iter()
            .any(|c| c.id == CheckId::NoForeignBackup && c.verdict == Verdict::Warn)
    );

    let no_sharing = cluster(1, |_, w| w.live_without_port_sharing());
    let mut accepted = target_to(NEW);
    accepted.accept_downtime = true;
    let report = preflight(&no_sharing, &accepted);
    assert!(report.allows(), "{:?}", failures(&report));
    let warned = report
        .checks
        .iter()
        .find(|c| c.id == CheckId::ExpectedDisruption && c.component == Some(Component::ApiServer))
        .expect("disruption check");
    assert_eq!(warned.verdict, Verdict::Warn);
    assert!(
        warned.message.contains("the API is down"),
        "{}",
        warned.message
    );
}

#[test]
fn a_kubeadm_backup_is_a_warning_and_adopted() {
    let report = preflight(
        &cluster(1, |c, w| {
            if c == Component::ControllerManager {
                w.backup_by_kubeadm()
            } else {
                w
            }
        }),
        &target_to(NEW),
    );
    assert!(report.allows(), "{:?}", failures(&report));
    let check = report
        .checks
        .iter()
        .find(|c| c.id == CheckId::NoForeignBackup)
        .expect("backup check");
    assert_eq!(check.verdict, Verdict::Warn);
    assert!(
        check.message.contains("left by kubeadm"),
        "{}",
        check.message
    );
}

/// A run killed in the middle of the apiserver's pivot is re-run, and its
/// `/readyz` lands on an apiserver the pivot itself is stopping (500 on purpose during its
/// shutdown delay) or starting. A resume judges the API by a serving apiserver's identity
/// instead; a fresh run stays strict.
#[test]
fn on_a_resume_an_apiserver_serving_by_identity_outweighs_one_failed_readyz() {
    type Edit = fn(Component, World) -> World;
    let mid_pivot: Edit = |c, w| {
        if c == Component::ApiServer {
            w.backup()
                .backup_serving()
                .updated()
                .new_pod("cp-1", Pod::Starting { started: 40 })
                .at(45)
        } else {
            w.at(45)
        }
    };
    let shutting_down = |w: World| {
        let mut w = w.api(OLD, false);
        w.obs.api.readyz_detail = Some("HTTP 500: failing checks shutdown".into());
        w.obs.api.git_version = None;
        w
    };
    /// A change to each component's world, capturing the helpers above.
    type Boxed = Box<dyn Fn(Component, World) -> World>;
    // (case, the world, the verdict, a phrase of the message)
    let rows: Vec<(&str, Boxed, Verdict, &str)> = vec![
        (
            "a fresh run: one failed /readyz refuses",
            Box::new(move |_, w| shutting_down(w)),
            Verdict::Fail,
            "/readyz is not ok: HTTP 500: failing checks shutdown",
        ),
        (
            "a resume with apiservers renewing their identity: resumes, saying why",
            Box::new(move |c, w| shutting_down(mid_pivot(c, w))),
            Verdict::Warn,
            "failing checks shutdown; but an upgrade is in progress and the API answers reads, \
             and 1 kube-apiserver process(es) renewed their identity Lease",
        ),
        (
            "a resume on a cluster without identity Leases, apiservers Ready and running for long",
            Box::new(move |c, w| shutting_down(mid_pivot(c, w.without_identity_leases()))),
            Verdict::Warn,
            "running for over 15 s (this cluster publishes no identity Leases)",
        ),
        (
            "a resume without identity Leases where no apiserver process has run for long",
            Box::new(move |c, w| {
                let mut w = shutting_down(mid_pivot(c, w.without_identity_leases()));
                let now = w.obs.now;
                for ds in w
                    .obs
                    .real
                    .iter_mut()
                    .chain(w.obs.backup.iter_mut().map(|b| &mut b.daemonset))
                {
                    for container in ds.pods.iter_mut().flat_map(|p| &mut p.containers) {
                        if let ContainerState::Running { started_at } = &mut container.state {
                            *started_at = Some(now);
                        }
                    }
                }
                w
            }),
            Verdict::Fail,
            "/readyz is not ok",
        ),
        (
            "a backup of another upgrade is not a resume",
            Box::new(move |c, w| {
                let w = shutting_down(w.at(45));
                if c == Component::ApiServer {
                    w.backup_for("v1.33.0").backup_serving()
                } else {
                    w
                }
            }),
            Verdict::Fail,
            "/readyz is not ok",
        ),
    ];
    for (case, change, verdict, text) in rows {
        let report = preflight(&cluster(1, change), &target_to(NEW));
        let check = report
            .checks
            .iter()
            .find(|c| c.id == CheckId::ApiHealthy)
            .expect("the API check");
        assert_eq!(check.verdict, verdict, "{case}: {}", check.message);
        assert!(
            check.message.contains(text),
            "{case}: {:?} does not mention {text:?}",
            check.message
        );
        if verdict == Verdict::Warn {
            assert!(report.allows(), "{case}: {:?}", failures(&report));
        }
    }
}

/// A run stopped after the backup's removal, while a controller pod stopped for the Lease
/// hand-over is recreated: the DaemonSet is on this target by our own update and not
/// converged. The re-run finishes it; another target, or a DaemonSet nobody updated, is
/// still refused.
#[test]
fn the_tail_of_our_own_update_is_finished_not_refused() {
    let tail = |c: Component, w: World| {
        if c == Component::Scheduler {
            w.updated()
                .all_new(40)
                .new_pod("cp-2", Pod::Starting { started: 60 })
        } else {
            w
        }
    };
    let report = preflight(&cluster(3, tail), &target_to(NEW));
    assert!(report.allows(), "{:?}", failures(&report));
    assert!(
        report
            .checks
            .iter()
            .any(|c| c.component == Some(Component::Scheduler)
                && c.id == CheckId::DaemonSetsConverged
                && c.message.contains("is finishing")),
        "{:?}",
        report.checks
    );

    // The same DaemonSet without our update's record: somebody else's rollout.
    let foreign = |c: Component, w: World| {
        if c == Component::Scheduler {
            let mut w = tail(c, w);
            w.real_mut()
                .annotations
                .remove(crate::pivot::UPDATE_STARTED_AT);
            w
        } else {
            w
        }
    };
    let report = preflight(&cluster(3, foreign), &target_to(NEW));
    assert!(
        failures(&report)
            .iter()
            .any(|(id, c, _)| *id == CheckId::DaemonSetsConverged
                && *c == Some(Component::Scheduler)),
        "{:?}",
        report.checks
    );

    // Our update to NEW, but the next run asks for another version: refused as before.
    let report = preflight(&cluster(3, tail), &target_to("v1.35.0"));
    assert!(
        failures(&report)
            .iter()
            .any(|(id, c, _)| *id == CheckId::DaemonSetsConverged
                && *c == Some(Component::Scheduler)),
        "{:?}",
        report.checks
    );
}

/// A run whose kube-apiserver is upgraded (this run's update) while a controller-manager pod
/// restarts, as one does when its node's kube-apiserver is replaced: the re-run is allowed and
/// its pivot waits for the pod; a pod that keeps exiting, or no run under way, still refuses.
#[test]
fn a_restarting_pod_of_a_later_component_is_waited_for_in_a_run_under_way() {
    let restarting = |state: fn() -> Pod| {
        move |c: Component, w: World| match c {
            Component::ApiServer => w.updated().all_new(40),
            Component::ControllerManager => w.new_pod("cp-3", state()),
            Component::Scheduler => w,
        }
    };
    let converged = |report: &PreflightReport| {
        report
            .checks
            .iter()
            .find(|c| {
                c.id == CheckId::DaemonSetsConverged
                    && c.component == Some(Component::ControllerManager)
            })
            .map(|c| (c.verdict, c.message.clone()))
            .expect("the check")
    };

    let report = preflight(
        &cluster(3, restarting(|| Pod::Starting { started: 60 })),
        &target_to(NEW),
    );
    assert!(report.allows(), "{:?}", failures(&report));
    let (verdict, message) = converged(&report);
    assert_eq!(verdict, Verdict::Warn, "{message}");
    assert!(message.contains("its pivot waits for it"), "{message}");

    let report = preflight(
        &cluster(3, restarting(|| Pod::CrashLoop { restarts: 6 })),
        &target_to(NEW),
    );
    let (verdict, message) = converged(&report);
    assert_eq!(verdict, Verdict::Fail, "{message}");

    let no_run = |c: Component, w: World| match c {
        Component::ControllerManager => w.new_pod("cp-3", Pod::Starting { started: 60 }),
        _ => w,
    };
    let (verdict, _) = converged(&preflight(&cluster(3, no_run), &target_to(NEW)));
    assert_eq!(verdict, Verdict::Fail);
}

/// `target` with `args` added to `component`'s container.
fn with_args(mut target: PreflightTarget, component: Component, args: &[&str]) -> PreflightTarget {
    let template = target
        .templates
        .get_mut(&component)
        .expect("every component");
    let spec = template.spec.as_mut().expect("a pod spec");
    let container = spec.containers.first_mut().expect("a container");
    container
        .command
        .get_or_insert_with(Vec::new)
        .extend(args.iter().map(|a| a.to_string()));
    target
}

#[test]
fn a_target_template_the_target_release_would_not_start_is_refused_by_name() {
    let target = with_args(target_to(NEW), Component::ApiServer, &["--insecure-port=0"]);
    let target = with_args(
        target,
        Component::Scheduler,
        &["--feature-gates=ServerSideApply=true,SidecarContainers=true"],
    );
    let report = preflight(&cluster(3, |_, w| w), &target);
    assert!(!report.allows());
    let found: Vec<(Verdict, Option<Component>, String)> = report
        .checks
        .iter()
        .filter(|c| c.id == CheckId::FlagsAndGates)
        .map(|c| {
            (
                c.verdict,
                c.component,
                format!("{} | {}", c.message, c.fix.clone().unwrap_or_default()),
            )
        })
        .collect();
    assert_eq!(found.len(), 3, "{found:#?}");
    let (verdict, component, text) = &found[0];
    assert_eq!(
        (*verdict, *component),
        (Verdict::Fail, Some(Component::ApiServer))
    );
    for phrase in [
        "--insecure-port was removed in v1.24",
        "; instead: nothing, the insecure port is gone",
        "edit the DaemonSet kube-system/self-hosted-kube-apiserver: drop --insecure-port",
        "source: kubernetes/kubernetes#",
    ] {
        assert!(text.contains(phrase), "{phrase:?} not in {text}");
    }
    assert_eq!(
        (found[1].0, found[1].1),
        (Verdict::Fail, Some(Component::Scheduler))
    );
    assert!(
        found[1]
            .2
            .contains("feature gate ServerSideApply was removed in v1.32"),
        "{}",
        found[1].2
    );
    assert_eq!(
        (found[2].0, found[2].1),
        (Verdict::Warn, Some(Component::Scheduler))
    );
    assert!(
        found[2].2.contains("SidecarContainers is locked to true"),
        "{}",
        found[2].2
    );
}

#[test]
fn a_target_newer_than_the_tables_of_removals_is_warned_about() {
    let beyond = crate::removals::NEWEST_KNOWN.next();
    let check = flags_and_gates_clean(beyond, 3);
    assert_eq!(check.verdict, Verdict::Warn);
    assert!(
        check.message.contains("known up to v1.35 only"),
        "{}",
        check.message
    );
    let check = flags_and_gates_clean(crate::version::MinorVersion::new(1, 34), 3);
    assert_eq!(check.verdict, Verdict::Pass);
}

#[test]
fn a_removed_flag_only_the_live_template_carries_is_a_warning_that_the_upgrade_drops_it() {
    let cluster = cluster(3, |c, mut w| {
        if c == Component::ApiServer {
            let template = &mut w.real_mut().template;
            let spec = template.spec.as_mut().expect("a pod spec");
            spec.containers[0]
                .command
                .get_or_insert_with(Vec::new)
                .push("--insecure-port=0".into());
        }
        w
    });
    let report = preflight(&cluster, &target_to(NEW));
    assert!(report.allows(), "{:?}", failures(&report));
    let warned: Vec<&Check> = report
        .checks
        .iter()
        .filter(|c| c.id == CheckId::FlagsAndGates)
        .collect();
    let [warning] = warned.as_slice() else {
        panic!("{warned:#?}")
    };
    assert_eq!(
        (warning.verdict, warning.component),
        (Verdict::Warn, Some(Component::ApiServer))
    );
    assert!(
        warning
            .message
            .starts_with("the live template's --insecure-port is not in the target template, so the upgrade drops it"),
        "{}",
        warning.message
    );
}
