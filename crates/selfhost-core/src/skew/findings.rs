//! What the policy finds: its rules, the problems each finds, and the outcome of one check.

use std::fmt;

/// The rules of the policy. Each has a stable kebab-case id, used in JSON output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkewRule {
    /// No kube-apiserver version is known, so nothing can be compared. Mandatory: there is
    /// nothing to force past; the engine must be able to read `/version`.
    NoControlPlaneVersion,
    /// The kube-apiservers are more than
    /// [`MAX_APISERVER_MINOR_SKEW`](super::MAX_APISERVER_MINOR_SKEW) minor apart, which Kubernetes
    /// does not support. Skippable: it describes the cluster as it already is, and an upgrade to
    /// the minor between them is a way out.
    MixedControlPlane,
    /// A kube-apiserver runs a version outside [`SUPPORTED_VERSIONS`](super::SUPPORTED_VERSIONS).
    /// Skippable, so that operators of older clusters can still use selfhost's image-bump path, at
    /// their own risk.
    ClusterUnsupported,
    /// The target is outside [`SUPPORTED_VERSIONS`](super::SUPPORTED_VERSIONS). Skippable, as for
    /// the cluster.
    TargetUnsupported,
    /// The target is a pre-release the flags do not allow. Mandatory, unlike kubeadm (which
    /// let `--force` through): the dedicated flags are the consent to run pre-release code and
    /// cost nothing to pass, so `--force` does not imply them.
    PreReleaseNotAllowed,
    /// The target is more than [`MAX_MINOR_UPGRADE`](super::MAX_MINOR_UPGRADE) minor above the
    /// oldest kube-apiserver. Mandatory for a release target, as in kubeadm: components a minor
    /// apart must interoperate during the rollout, and further apart they are not tested to.
    /// Skippable for a pre-release target, as in kubeadm, because a development build may sit on
    /// the boundary of two minors.
    UpgradeSkipsMinor,
    /// The target is more than [`MAX_MINOR_DOWNGRADE`](super::MAX_MINOR_DOWNGRADE) minor below the
    /// newest kube-apiserver. Mandatory for a release target, skippable for a pre-release, as for
    /// upgrades.
    DowngradeSkipsMinor,
    /// A node's kubelet version cannot be read. Skippable, as kubeadm's unreadable kubelet
    /// versions were: the kubelet rules cannot vouch for those nodes.
    KubeletVersionUnreadable,
    /// A kubelet is a newer minor than the target, which Kubernetes never supports (a kubelet
    /// may use APIs the older kube-apiserver does not serve). Skippable: the control plane
    /// itself still moves correctly, and a kubelet a patch or a minor ahead often works.
    KubeletNewerThanTarget,
    /// A kubelet is more than [`MAX_KUBELET_MINORS_BEHIND`](super::MAX_KUBELET_MINORS_BEHIND)
    /// minors older than the target. Skippable, as kubeadm's kubelet rule was.
    KubeletTooOld,
}

impl SkewRule {
    /// All rules, in the order the policy checks them.
    pub const ALL: [SkewRule; 10] = [
        SkewRule::NoControlPlaneVersion,
        SkewRule::MixedControlPlane,
        SkewRule::ClusterUnsupported,
        SkewRule::TargetUnsupported,
        SkewRule::PreReleaseNotAllowed,
        SkewRule::UpgradeSkipsMinor,
        SkewRule::DowngradeSkipsMinor,
        SkewRule::KubeletVersionUnreadable,
        SkewRule::KubeletNewerThanTarget,
        SkewRule::KubeletTooOld,
    ];

    /// The stable kebab-case id, e.g. `upgrade-skips-minor`.
    pub fn id(self) -> &'static str {
        match self {
            SkewRule::NoControlPlaneVersion => "no-control-plane-version",
            SkewRule::MixedControlPlane => "mixed-control-plane",
            SkewRule::ClusterUnsupported => "cluster-unsupported",
            SkewRule::TargetUnsupported => "target-unsupported",
            SkewRule::PreReleaseNotAllowed => "pre-release-not-allowed",
            SkewRule::UpgradeSkipsMinor => "upgrade-skips-minor",
            SkewRule::DowngradeSkipsMinor => "downgrade-skips-minor",
            SkewRule::KubeletVersionUnreadable => "kubelet-version-unreadable",
            SkewRule::KubeletNewerThanTarget => "kubelet-newer-than-target",
            SkewRule::KubeletTooOld => "kubelet-too-old",
        }
    }
}

impl fmt::Display for SkewRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// Whether `--force` bypasses a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// Never bypassed.
    Mandatory,
    /// Bypassed by `--force`, and then reported as a warning.
    Skippable,
}

/// One problem the policy found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// The rule that found it.
    pub rule: SkewRule,
    /// Whether `--force` bypasses it.
    pub severity: Severity,
    /// Whether it refuses this upgrade: mandatory, or skippable without `--force`.
    pub blocking: bool,
    /// What is wrong, naming the versions involved, and how to fix it.
    pub message: String,
}

/// In which direction the control plane moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VersionChange {
    /// Every kube-apiserver is older than the target or at it.
    Upgrade,
    /// Every kube-apiserver is newer than the target or at it.
    Downgrade,
    /// Every kube-apiserver already runs the target (build metadata aside): a reconfiguration.
    Reconfigure,
    /// Some kube-apiservers are older and some newer than the target.
    Mixed,
    /// No kube-apiserver version is known.
    Unknown,
}

/// The outcome of the policy for one upgrade.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SkewReport {
    /// In which direction the control plane moves.
    pub change: VersionChange,
    /// Whether `--force` was given.
    pub forced: bool,
    /// Every problem found, in [`SkewRule::ALL`] order.
    pub findings: Vec<Finding>,
}

impl SkewReport {
    /// The findings that refuse the upgrade: mandatory ones, and skippable ones without `--force`.
    pub fn blocking(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|finding| finding.blocking)
    }

    /// The findings `--force` bypassed; show them loudly.
    pub fn warnings(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|finding| !finding.blocking)
    }

    /// Whether the upgrade may go ahead.
    pub fn allows_upgrade(&self) -> bool {
        self.blocking().next().is_none()
    }
}
