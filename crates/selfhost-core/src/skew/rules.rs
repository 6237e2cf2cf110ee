//! The rules of the policy, one function each, in [`SkewRule::ALL`] order.

use super::findings::{Finding, Severity, SkewReport, SkewRule, VersionChange};
use super::input::{
    ApiServerVersion, KubeletVersion, MAX_APISERVER_MINOR_SKEW, MAX_KUBELET_MINORS_BEHIND,
    MAX_MINOR_DOWNGRADE, MAX_MINOR_UPGRADE, SkewInput,
};
use super::message::{self, NameList, Tail, steps};
use crate::version::{KubeVersion, MinorVersion, PreReleaseKind};

/// Applies the policy to an upgrade.
pub fn check(input: &SkewInput) -> SkewReport {
    let mut report = Report {
        forced: input.flags.force,
        findings: Vec::new(),
    };
    let target = &input.target;
    let oldest = input
        .control_plane
        .iter()
        .min_by(|a, b| a.version.cmp(&b.version));
    let newest = input
        .control_plane
        .iter()
        .max_by(|a, b| a.version.cmp(&b.version));
    match (oldest, newest) {
        (Some(oldest), Some(newest)) => {
            check_mixed(&mut report, input, oldest, newest);
            check_cluster_supported(&mut report, input);
            check_target(&mut report, input);
            check_upgrade(&mut report, input, oldest);
            check_downgrade(&mut report, input, newest);
        }
        _ => {
            report.add(
                SkewRule::NoControlPlaneVersion,
                Severity::Mandatory,
                format!(
                    "no kube-apiserver version is known, so the move to {target} cannot be \
                     checked; make sure the kube-apiserver pods are running and their /version \
                     answers"
                ),
            );
            check_target(&mut report, input);
        }
    }
    check_kubelets(&mut report, input);
    SkewReport {
        change: change_of(input),
        forced: report.forced,
        findings: report.findings,
    }
}

/// Findings under construction; adds the `--force` part of each message.
struct Report {
    forced: bool,
    findings: Vec<Finding>,
}

impl Report {
    /// Adds a finding whose message is `problem_and_fix`, completed with what `--force` does.
    fn add(&mut self, rule: SkewRule, severity: Severity, problem_and_fix: String) {
        let tail = Tail::new(severity, self.forced);
        self.findings.push(Finding {
            rule,
            severity,
            blocking: tail.blocking(),
            message: format!("{problem_and_fix}{tail}"),
        });
    }
}

/// Mandatory for releases, skippable for pre-releases (kubeadm's classification of the
/// minor-skew rules).
fn skew_severity(target: &KubeVersion) -> Severity {
    if target.is_pre_release() {
        Severity::Skippable
    } else {
        Severity::Mandatory
    }
}

/// How many minors `newer` is ahead of `older` (0 when it is not ahead); a higher major is
/// further ahead than any policy allows.
fn minors_ahead(newer: MinorVersion, older: MinorVersion) -> u64 {
    if newer <= older {
        0
    } else {
        newer.minors_ahead_of(older).unwrap_or(u64::MAX)
    }
}

/// The kube-apiservers that run `version` (build metadata aside), for messages.
fn apiservers_at<'a>(input: &'a SkewInput, version: &KubeVersion) -> NameList<'a> {
    NameList::new(
        input
            .control_plane
            .iter()
            .filter(|apiserver| apiserver.version == *version)
            .map(|apiserver| apiserver.name.as_str()),
    )
}

fn check_mixed(
    report: &mut Report,
    input: &SkewInput,
    oldest: &ApiServerVersion,
    newest: &ApiServerVersion,
) {
    let (low, high) = (
        oldest.version.minor_version(),
        newest.version.minor_version(),
    );
    if minors_ahead(high, low) <= MAX_APISERVER_MINOR_SKEW {
        return;
    }
    report.add(
        SkewRule::MixedControlPlane,
        Severity::Skippable,
        format!(
            "the kube-apiservers are more than one minor version apart ({} on {}, {} on {}), \
             which Kubernetes does not support; bring them within one minor version of each \
             other first",
            oldest.version,
            apiservers_at(input, &oldest.version),
            newest.version,
            apiservers_at(input, &newest.version),
        ),
    );
}

fn check_cluster_supported(report: &mut Report, input: &SkewInput) {
    let mut outside: Vec<&ApiServerVersion> = input
        .control_plane
        .iter()
        .filter(|apiserver| !input.supported.contains(&apiserver.version))
        .collect();
    if outside.is_empty() {
        return;
    }
    outside.sort_by(|a, b| a.version.cmp(&b.version).then_with(|| a.name.cmp(&b.name)));
    let listed = NameList::new(
        outside
            .iter()
            .map(|apiserver| format!("{} on {}", apiserver.version, apiserver.name)),
    );
    report.add(
        SkewRule::ClusterUnsupported,
        Severity::Skippable,
        format!(
            "the cluster runs kube-apiserver {listed}, outside the versions this release of \
             selfhost supports ({}); selfhost was not tested with it",
            input.supported
        ),
    );
}

fn check_target(report: &mut Report, input: &SkewInput) {
    let target = &input.target;
    let supported = input.supported;
    if !supported.contains(target) {
        let fix = if target.minor_version() > supported.newest() {
            format!(
                "use a release of selfhost that supports {}",
                target.minor_version()
            )
        } else {
            format!(
                "choose a target from {} to {}",
                supported.oldest(),
                supported.newest()
            )
        };
        report.add(
            SkewRule::TargetUnsupported,
            Severity::Skippable,
            format!(
                "the target {target} is outside the versions this release of selfhost supports \
                 ({supported}); {fix}"
            ),
        );
    }
    let flags = input.flags;
    let message = match target.pre_release_kind() {
        None => return,
        Some(_) if flags.allow_experimental => return,
        Some(PreReleaseKind::Rc) if flags.allow_release_candidate => return,
        Some(PreReleaseKind::Rc) => format!(
            "the target {target} is a release candidate; pass \
             --allow-release-candidate-upgrades (or --allow-experimental-upgrades) to upgrade to it"
        ),
        Some(kind) => {
            let kind = if kind == PreReleaseKind::Alpha {
                "an alpha"
            } else {
                "a beta"
            };
            let rc_only = if flags.allow_release_candidate {
                " (--allow-release-candidate-upgrades allows release candidates only)"
            } else {
                ""
            };
            format!(
                "the target {target} is {kind} pre-release; pass --allow-experimental-upgrades \
                 to upgrade to alpha and beta versions{rc_only}"
            )
        }
    };
    report.add(SkewRule::PreReleaseNotAllowed, Severity::Mandatory, message);
}

fn check_upgrade(report: &mut Report, input: &SkewInput, oldest: &ApiServerVersion) {
    let (from, to) = (&oldest.version, &input.target);
    let jump = minors_ahead(to.minor_version(), from.minor_version());
    if jump <= MAX_MINOR_UPGRADE {
        return;
    }
    let fix = if from.major() == to.major() {
        steps("upgrade", from.minor_version(), to.minor_version())
    } else {
        "selfhost does not move the control plane across major versions".to_string()
    };
    report.add(
        SkewRule::UpgradeSkipsMinor,
        skew_severity(to),
        format!(
            "cannot upgrade kube-apiserver on {} from {from} to {to} in one step: the control \
             plane can move only one minor version at a time; {fix}",
            apiservers_at(input, from)
        ),
    );
}

fn check_downgrade(report: &mut Report, input: &SkewInput, newest: &ApiServerVersion) {
    let (from, to) = (&newest.version, &input.target);
    let drop = minors_ahead(from.minor_version(), to.minor_version());
    if drop <= MAX_MINOR_DOWNGRADE {
        return;
    }
    let fix = if from.major() == to.major() {
        steps("downgrade", from.minor_version(), to.minor_version())
    } else {
        "selfhost does not move the control plane across major versions".to_string()
    };
    report.add(
        SkewRule::DowngradeSkipsMinor,
        skew_severity(to),
        format!(
            "cannot downgrade kube-apiserver on {} from {from} to {to} in one step: the \
             control plane can move only one minor version at a time; {fix}",
            apiservers_at(input, from)
        ),
    );
}

fn check_kubelets(report: &mut Report, input: &SkewInput) {
    let target = &input.target;
    let target_minor = target.minor_version();
    let mut unreadable = Vec::new();
    let mut newer = Vec::new();
    let mut too_old = Vec::new();
    let mut kubelets: Vec<&KubeletVersion> = input.kubelets.iter().collect();
    kubelets.sort_by(|a, b| a.node.cmp(&b.node));
    for kubelet in kubelets {
        match KubeVersion::from_git_version(&kubelet.version) {
            Err(_) => unreadable.push(kubelet),
            Ok(version) if version.minor_version() > target_minor => newer.push((kubelet, version)),
            Ok(version)
                if minors_ahead(target_minor, version.minor_version())
                    > MAX_KUBELET_MINORS_BEHIND =>
            {
                too_old.push((kubelet, version))
            }
            Ok(_) => {}
        }
    }
    if !unreadable.is_empty() {
        let listed = NameList::new(unreadable.iter().map(|kubelet| {
            format!(
                "{} ({:?})",
                kubelet.node,
                message::shorten(&kubelet.version)
            )
        }));
        report.add(
            SkewRule::KubeletVersionUnreadable,
            Severity::Skippable,
            format!(
                "the kubelet version of nodes {listed} is not a Kubernetes version, so their \
                 skew against the target {target} is unknown; check status.nodeInfo.kubeletVersion \
                 of those nodes"
            ),
        );
    }
    if !newer.is_empty() {
        report.add(
            SkewRule::KubeletNewerThanTarget,
            Severity::Skippable,
            format!(
                "the kubelets on nodes {} are newer than the target {target}, and a kubelet must \
                 never be newer than kube-apiserver; downgrade the kubelets on nodes {} to \
                 {target_minor} or older first",
                with_versions(&newer),
                names(&newer),
            ),
        );
    }
    if !too_old.is_empty() {
        // Saturating: a kubelet of an older major is too old even for a target vN.0.
        let oldest_allowed = MinorVersion::new(
            target.major(),
            target.minor().saturating_sub(MAX_KUBELET_MINORS_BEHIND),
        );
        report.add(
            SkewRule::KubeletTooOld,
            Severity::Skippable,
            format!(
                "the kubelets on nodes {} are more than {MAX_KUBELET_MINORS_BEHIND} minor versions \
                 older than the target {target}, more than Kubernetes supports; upgrade the \
                 kubelets on nodes {} to at least {oldest_allowed} first",
                with_versions(&too_old),
                names(&too_old),
            ),
        );
    }
}

/// `a (v1.30.2), b (v1.29.0)`.
fn with_versions(kubelets: &[(&KubeletVersion, KubeVersion)]) -> NameList<'static> {
    NameList::new(
        kubelets
            .iter()
            .map(|(kubelet, version)| format!("{} ({version})", kubelet.node)),
    )
}

/// `a, b`.
fn names<'a>(kubelets: &[(&'a KubeletVersion, KubeVersion)]) -> NameList<'a> {
    NameList::new(kubelets.iter().map(|(kubelet, _)| kubelet.node.as_str()))
}

fn change_of(input: &SkewInput) -> VersionChange {
    let target = &input.target;
    let versions = || {
        input
            .control_plane
            .iter()
            .map(|apiserver| &apiserver.version)
    };
    if input.control_plane.is_empty() {
        VersionChange::Unknown
    } else if versions().all(|version| version == target) {
        VersionChange::Reconfigure
    } else if versions().all(|version| version <= target) {
        VersionChange::Upgrade
    } else if versions().all(|version| version >= target) {
        VersionChange::Downgrade
    } else {
        VersionChange::Mixed
    }
}
