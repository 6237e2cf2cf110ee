//! Preflight: may `apply` start on this cluster? Pure checks over one observation of every
//! component, each with a stable id, a verdict, and a message that says what to do.
//!
//! `plan` lists them all; `apply` refuses (exit 3) when any fails. A component whose upgrade
//! to the same target is already under way (our backup exists) is not required to have
//! converged: `apply` resumes it.

mod api_fronts;
mod certificates;
mod check;
mod checkpointers;
mod etcd;
mod flags;
mod removed_apis;
mod resumed_api;
mod shape;
#[cfg(test)]
mod tests;

pub use api_fronts::api_fronts_check;
pub use certificates::{DEFAULT_CERTIFICATE_WARNING, certificate_checks};
use check::Report;
pub use check::{Check, CheckId, PreflightReport, Verdict};
pub use checkpointers::checkpointers_check;
pub use etcd::{ApiserverEtcd, EtcdMember, EtcdObservation, EtcdPod};
pub use flags::{flags_and_gates, flags_and_gates_clean};
pub use removed_apis::{ApiUsage, ServedObjects};

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::backup::BackupOrigin;
use crate::component::Component;
use crate::disruption::{ApiImpact, ClusterShape, expected_disruption};
use crate::observation::{DaemonSetObservation, NodeReadiness, Observation};
use crate::pivot::{UPDATE_STARTED_AT, template_applied};
use crate::rollout::{CRASH_LOOP_REASONS, rollout_progress, stuck};
use crate::skew::{self, ApiServerVersion, KubeletVersion, SkewFlags, SkewInput, SupportedRange};
use crate::version::{KubeVersion, MinorVersion};

/// Everything preflight looks at.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterObservation {
    /// One observation per component; a component missing here was not observed.
    pub components: Vec<Observation>,
    /// The version each kube-apiserver reports.
    pub apiserver_versions: Vec<ApiServerVersion>,
    /// The kubelet version of each node.
    pub kubelets: Vec<KubeletVersion>,
    /// Which API versions are in use, for the `removed-apis` check (`None`: not read).
    pub api_usage: Option<ApiUsage>,
    /// The certificates the templates read, for the `certificates` check (`None`: not read).
    pub certificates: Option<crate::certificates::CertificatesObserved>,
    /// What was seen of etcd, for the `etcd` check (`None`: not looked at).
    pub etcd: Option<EtcdObservation>,
}

impl ClusterObservation {
    /// The release line of the oldest kube-apiserver, or `otherwise` when none reported one:
    /// what an upgrade starts from.
    pub fn oldest_apiserver_minor(&self, otherwise: MinorVersion) -> MinorVersion {
        self.apiserver_versions
            .iter()
            .map(|a| a.version.minor_version())
            .min()
            .unwrap_or(otherwise)
    }

    fn component(&self, component: Component) -> Option<&Observation> {
        self.components.iter().find(|o| o.component == component)
    }
}

/// What the upgrade would be.
#[derive(Debug, Clone, PartialEq)]
pub struct PreflightTarget {
    /// The target version.
    pub version: KubeVersion,
    /// The rendered target template per component.
    pub templates: BTreeMap<Component, PodTemplateSpec>,
    /// Where an operator changes what the target templates carry, when they are rendered from
    /// a kubeadm configuration (e.g. its `extraArgs`); `None`: in each live DaemonSet.
    pub templates_edited_in: Option<String>,
    /// The skew flags; `force` also lets a foreign backup be taken over.
    pub flags: SkewFlags,
    /// `--accept-downtime`.
    pub accept_downtime: bool,
    /// The supported versions ([`skew::SUPPORTED_VERSIONS`] outside tests).
    pub supported: SupportedRange,
    /// A certificate expiring within this warns ([`DEFAULT_CERTIFICATE_WARNING`] unless
    /// `--certificate-warning-days`).
    pub certificate_warning: std::time::Duration,
}

/// Runs every check.
pub fn preflight(cluster: &ClusterObservation, target: &PreflightTarget) -> PreflightReport {
    let mut report = Report(Vec::new());
    api_healthy(&mut report, cluster, target);
    for component in Component::ALL {
        daemonset(&mut report, cluster, target, component);
        if let Some(obs) = cluster.component(component) {
            shape::check(&mut report, obs, target);
        }
    }
    nodes_ready(&mut report, cluster);
    for component in Component::ALL {
        backup(&mut report, cluster, target, component);
    }
    version_skew(&mut report, cluster, target);
    flags::check(&mut report, cluster, target);
    removed_apis::check(&mut report, cluster, target);
    certificates::check(&mut report, cluster, target);
    etcd::check(&mut report, cluster, target);
    for component in Component::ALL {
        disruption(&mut report, cluster, target, component);
    }
    PreflightReport { checks: report.0 }
}

fn api_healthy(report: &mut Report, cluster: &ClusterObservation, target: &PreflightTarget) {
    let api = cluster
        .component(Component::ApiServer)
        .or(cluster.components.first())
        .map(|o| &o.api);
    let (verdict, message) = match api {
        None => (Verdict::Fail, "the API server was not observed".to_string()),
        Some(api) if !api.readyz_ok => {
            let not_ok = format!(
                "/readyz is not ok{}",
                api.readyz_detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            );
            match resumed_api::serves_despite_readyz(cluster, &target.version) {
                Some(evidence) => (
                    Verdict::Warn,
                    format!(
                        "{not_ok}; but an upgrade is in progress and {evidence}: on a resume \
                         /readyz can be answered by a kube-apiserver the pivot is stopping (500 \
                         on purpose during its shutdown delay) or starting; apply resumes"
                    ),
                ),
                None => (Verdict::Fail, not_ok),
            }
        }
        Some(api) => match &api.git_version {
            None => (Verdict::Fail, "/version did not answer".to_string()),
            Some(version) => (Verdict::Pass, format!("/readyz ok, /version {version}")),
        },
    };
    let fix = (verdict == Verdict::Fail).then(|| {
        "make the API server healthy first: `kubectl get --raw '/readyz?verbose'`".to_string()
    });
    report.add(CheckId::ApiHealthy, None, verdict, message, fix);
}

fn daemonset(
    report: &mut Report,
    cluster: &ClusterObservation,
    target: &PreflightTarget,
    component: Component,
) {
    let name = component.daemonset_name();
    let Some(real) = cluster
        .component(component)
        .and_then(|o| o.real.as_ref().map(|r| (o, r)))
    else {
        report.add(
            CheckId::DaemonSetsExist,
            Some(component),
            Verdict::Fail,
            format!("DaemonSet kube-system/{name} does not exist"),
            Some("convert the control plane first: `selfhost convert to-self-hosted`".into()),
        );
        return;
    };
    let (obs, real) = real;
    report.add(
        CheckId::DaemonSetsExist,
        Some(component),
        Verdict::Pass,
        format!("{name} exists"),
        None,
    );
    if resuming(obs, &target.version) {
        report.add(
            CheckId::DaemonSetsConverged,
            Some(component),
            Verdict::Pass,
            format!(
                "an upgrade of {component} to {} is in progress; apply resumes it",
                target.version
            ),
            None,
        );
        return;
    }
    if finishing_our_update(obs, real, target.templates.get(&component)) {
        report.add(
            CheckId::DaemonSetsConverged,
            Some(component),
            Verdict::Pass,
            format!(
                "selfhost's update of {component} to {} is finishing (its backup is gone, a pod \
                 or the leader is still being replaced); apply finishes it",
                target.version
            ),
            None,
        );
        return;
    }
    if real.pods.is_empty() {
        report.add(
            CheckId::DaemonSetsConverged,
            Some(component),
            Verdict::Fail,
            format!("{name} has no pods: {component} runs on no node"),
            Some(format!(
                "check its node selector, tolerations and events: `kubectl -n kube-system describe ds {name}`"
            )),
        );
        return;
    }
    let progress = rollout_progress(obs, real);
    if progress.is_complete() {
        report.add(
            CheckId::DaemonSetsConverged,
            Some(component),
            Verdict::Pass,
            format!("{name}: {} pods, all current and Ready", real.pods.len()),
            None,
        );
    } else if run_under_way(cluster, target) && real.pods.iter().find_map(failing_pod).is_none() {
        // In a run under way, pods that restart on their own converge by waiting, and the
        // pivot waits for them: a controller whose node's kube-apiserver this run replaced
        // exits and is restarted.
        report.add(
            CheckId::DaemonSetsConverged,
            Some(component),
            Verdict::Warn,
            format!(
                "{name} has not converged yet: {}; its pivot waits for it (up to the \
                 component's timeout) before it starts",
                progress.pending.join("; ")
            ),
            None,
        );
    } else {
        report.add(
            CheckId::DaemonSetsConverged,
            Some(component),
            Verdict::Fail,
            format!("{name} has not converged: {}", progress.pending.join("; ")),
            Some(format!(
                "wait for it or repair the failing pods (`kubectl -n kube-system rollout status ds/{name}`)"
            )),
        );
    }
}

/// Whether a selfhost run to the target is under way: some component's backup for it exists,
/// or some component runs the target's template by selfhost's own update (its record) while
/// another does not run it yet.
fn run_under_way(cluster: &ClusterObservation, target: &PreflightTarget) -> bool {
    let resumed = Component::ALL.iter().any(|c| {
        cluster
            .component(*c)
            .is_some_and(|obs| resuming(obs, &target.version))
    });
    // (applied, applied by selfhost's update) per component.
    let applied: Vec<(bool, bool)> = Component::ALL
        .iter()
        .map(|c| {
            let real = cluster.component(*c).and_then(|o| o.real.as_ref());
            real.zip(target.templates.get(c))
                .map_or((false, false), |(real, wanted)| {
                    let applied = template_applied(real, wanted);
                    (
                        applied,
                        applied && real.annotation(UPDATE_STARTED_AT).is_some(),
                    )
                })
        })
        .collect();
    resumed
        || (applied.iter().any(|(_, ours)| *ours) && applied.iter().any(|(applied, _)| !applied))
}

/// Why a pod will not converge by waiting: it cannot start, or it keeps exiting.
fn failing_pod(pod: &crate::observation::PodObservation) -> Option<String> {
    stuck(pod).or_else(|| {
        pod.containers.iter().find_map(|c| {
            let reason = c.state.waiting_reason()?;
            CRASH_LOOP_REASONS.contains(&reason).then(|| {
                let node = pod.node.as_deref().unwrap_or("(unscheduled)");
                format!("{node}: pod {} keeps exiting: {reason}", pod.name)
            })
        })
    })
}

/// Whether our backup for this very target exists: the upgrade is under way.
pub(crate) fn resuming(obs: &Observation, version: &KubeVersion) -> bool {
    obs.backup.as_ref().is_some_and(|b| {
        matches!(&b.record, Ok(r) if matches!(&r.origin, BackupOrigin::Selfhost { target } if target == version))
    })
}

/// Whether the real DaemonSet is on this very target template by selfhost's own update and
/// not converged, with no backup beside it: the tail of a pivot (a run stopped after the
/// backup's removal, while a controller pod stopped for the Lease hand-over is recreated and
/// its leader elected). Refusing that would leave the component without the hand-over that
/// only `apply` performs; the pivot itself waits for the rollout and verifies the leader.
fn finishing_our_update(
    obs: &Observation,
    real: &DaemonSetObservation,
    template: Option<&PodTemplateSpec>,
) -> bool {
    obs.backup.is_none()
        && real.annotation(UPDATE_STARTED_AT).is_some()
        && template.is_some_and(|t| template_applied(real, t))
        && !rollout_progress(obs, real).is_complete()
}

fn nodes_ready(report: &mut Report, cluster: &ClusterObservation) {
    let nodes = cluster
        .components
        .first()
        .map(|o| o.nodes.as_slice())
        .unwrap_or_default();
    if nodes.is_empty() {
        report.add(
            CheckId::NodesReady,
            None,
            Verdict::Fail,
            "no control-plane node was found".into(),
            Some("label the control-plane nodes node-role.kubernetes.io/control-plane".into()),
        );
        return;
    }
    let not_ready: Vec<String> = nodes
        .iter()
        .filter(|n| n.ready != NodeReadiness::Ready)
        .map(|n| match &n.ready {
            NodeReadiness::NotReady {
                reason: Some(reason),
            } => format!("{} is NotReady ({reason})", n.name),
            NodeReadiness::NotReady { reason: None } => format!("{} is NotReady", n.name),
            _ => format!("{} is not reporting (Ready unknown)", n.name),
        })
        .collect();
    if not_ready.is_empty() {
        report.add(
            CheckId::NodesReady,
            None,
            Verdict::Pass,
            format!("{} control-plane node(s), all Ready", nodes.len()),
            None,
        );
    } else {
        report.add(
            CheckId::NodesReady,
            None,
            Verdict::Fail,
            not_ready.join("; "),
            Some(
                "bring the node(s) back (check the kubelet) or remove them from the cluster".into(),
            ),
        );
    }
}

fn backup(
    report: &mut Report,
    cluster: &ClusterObservation,
    target: &PreflightTarget,
    component: Component,
) {
    let Some(backup) = cluster.component(component).and_then(|o| o.backup.as_ref()) else {
        return;
    };
    let name = &backup.daemonset.name;
    let force = target.flags.force;
    let (verdict, message, fix) = match &backup.record {
        Err(error) => (
            if force { Verdict::Warn } else { Verdict::Fail },
            format!(
                "{error}{}",
                if force {
                    "; --force takes it over as a backup of its own template"
                } else {
                    ""
                }
            ),
            Some(format!(
                "delete it if no upgrade is running (`kubectl -n kube-system delete ds {name}`), or pass --force"
            )),
        ),
        Ok(record) => match &record.origin {
            BackupOrigin::Kubeadm => (
                Verdict::Warn,
                format!(
                    "{name} was left by kubeadm; apply adopts it as a backup of the template it copied"
                ),
                None,
            ),
            BackupOrigin::Selfhost { target: other } if other != &target.version => (
                if force { Verdict::Warn } else { Verdict::Fail },
                format!(
                    "{name} belongs to an upgrade to {other}{}",
                    if force { "; --force takes it over" } else { "" }
                ),
                Some(format!(
                    "finish it with `selfhost apply {other}`, or pass --force to take it over"
                )),
            ),
            BackupOrigin::Selfhost { .. } => (
                Verdict::Pass,
                format!("{name} belongs to this upgrade; apply resumes it"),
                None,
            ),
        },
    };
    report.add(
        CheckId::NoForeignBackup,
        Some(component),
        verdict,
        message,
        fix,
    );
}

fn version_skew(report: &mut Report, cluster: &ClusterObservation, target: &PreflightTarget) {
    let skew = skew::check(&SkewInput {
        control_plane: cluster.apiserver_versions.clone(),
        target: target.version.clone(),
        kubelets: cluster.kubelets.clone(),
        supported: target.supported,
        flags: target.flags,
    });
    if skew.findings.is_empty() {
        report.add(
            CheckId::VersionSkew,
            None,
            Verdict::Pass,
            format!(
                "moving to {} is within the version-skew policy",
                target.version
            ),
            None,
        );
    }
    for finding in &skew.findings {
        report.add(
            CheckId::VersionSkew,
            None,
            if finding.blocking {
                Verdict::Fail
            } else {
                Verdict::Warn
            },
            format!("{}: {}", finding.rule, finding.message),
            None,
        );
    }
}

fn disruption(
    report: &mut Report,
    cluster: &ClusterObservation,
    target: &PreflightTarget,
    component: Component,
) {
    let (Some(obs), Some(template)) = (
        cluster.component(component),
        target.templates.get(&component),
    ) else {
        return;
    };
    if obs.real.is_none() {
        return;
    }
    let expected = expected_disruption(component, &ClusterShape::observe(obs, template));
    let text = expected.explanation.join("; ");
    let (verdict, message, fix) = if let Some(blocked) = expected.blocked {
        (Verdict::Fail, blocked, expected.fix)
    } else if expected.requires_accept_downtime && !target.accept_downtime {
        (Verdict::Fail, text, expected.fix)
    } else if expected.api != ApiImpact::None || expected.requires_accept_downtime {
        (Verdict::Warn, text, None)
    } else {
        (Verdict::Pass, text, None)
    };
    report.add(
        CheckId::ExpectedDisruption,
        Some(component),
        verdict,
        message,
        fix,
    );
}
