//! The version-skew policy of an upgrade: may the control plane move from the versions it runs
//! to a target version, given the kubelets of the cluster and the flags the operator passed?
//!
//! Modelled on kubeadm's `EnforceVersionPolicies` (research/kubeadm-selfhosting.md §4.5) and
//! updated to today's Kubernetes version-skew policy:
//! - the control plane moves one minor version at a time, up or down;
//! - kube-apiservers of one cluster are at most one minor version apart;
//! - a kubelet is never newer than kube-apiserver and at most three minor versions older;
//! - pre-releases only when the operator asks for them;
//! - and this release of selfhost supports [`SUPPORTED_VERSIONS`].
//!
//! Every problem is a [`Finding`] of a [`SkewRule`]. [`Severity::Mandatory`] findings always
//! refuse the upgrade; [`Severity::Skippable`] ones refuse it unless `--force` is given, which
//! turns them into warnings. Re-applying the version the cluster already runs is allowed: that
//! is how a changed configuration is rolled out, as kubeadm allowed it.
//!
//! Minor versions are compared, not patches: within a minor, any patch may follow any other.

mod message;
mod rules;
#[cfg(test)]
mod tests;

pub use rules::check;

use crate::version::{KubeVersion, MinorVersion};
use std::fmt;

/// The Kubernetes minor versions this release of selfhost supports, v1.29 to v1.37: v1.29 is
/// the oldest line still maintained by the major managed distributions when this release was
/// made, and v1.37 the newest line whose flags and manifests it knows. Clusters or targets
/// outside it are refused unless `--force` is given.
pub const SUPPORTED_VERSIONS: SupportedRange =
    SupportedRange::new(MinorVersion::new(1, 29), MinorVersion::new(1, 37));

/// How many minor versions one upgrade may move the control plane up.
pub const MAX_MINOR_UPGRADE: u64 = 1;
/// How many minor versions one upgrade may move the control plane down.
pub const MAX_MINOR_DOWNGRADE: u64 = 1;
/// How many minor versions kube-apiservers of one cluster may be apart.
pub const MAX_APISERVER_MINOR_SKEW: u64 = 1;
/// How many minor versions a kubelet may be older than kube-apiserver.
pub const MAX_KUBELET_MINORS_BEHIND: u64 = 3;

/// An inclusive range of Kubernetes minor versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SupportedRange {
    oldest: MinorVersion,
    newest: MinorVersion,
}

impl SupportedRange {
    /// The minors from `oldest` to `newest`, both included.
    pub const fn new(oldest: MinorVersion, newest: MinorVersion) -> Self {
        SupportedRange { oldest, newest }
    }

    /// The oldest supported minor version.
    pub fn oldest(&self) -> MinorVersion {
        self.oldest
    }

    /// The newest supported minor version.
    pub fn newest(&self) -> MinorVersion {
        self.newest
    }

    /// Whether the version's minor line is in the range (any patch, pre-release or vendor
    /// build of a supported minor is supported).
    pub fn contains(&self, version: &KubeVersion) -> bool {
        (self.oldest..=self.newest).contains(&version.minor_version())
    }
}

impl fmt::Display for SupportedRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} to {}", self.oldest, self.newest)
    }
}

/// The version one kube-apiserver reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiServerVersion {
    /// Where it runs (node or pod name), to name it in messages.
    pub name: String,
    /// Its version, from `/version`.
    pub version: KubeVersion,
}

/// The kubelet version one node reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletVersion {
    /// The node's name.
    pub node: String,
    /// `status.nodeInfo.kubeletVersion` as the node reports it, unparsed: a node reporting
    /// something unreadable is a finding, not a failure of the whole check.
    pub version: String,
}

/// The operator's flags that bear on the policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SkewFlags {
    /// `--allow-experimental-upgrades`: allows any pre-release target (alpha, beta, rc).
    pub allow_experimental: bool,
    /// `--allow-release-candidate-upgrades`: allows release-candidate targets.
    pub allow_release_candidate: bool,
    /// `--force`: turns skippable findings into warnings.
    pub force: bool,
}

/// Everything the policy looks at, as plain data.
#[derive(Debug, Clone)]
pub struct SkewInput {
    /// One entry per kube-apiserver; several in an HA cluster, possibly mid-upgrade.
    pub control_plane: Vec<ApiServerVersion>,
    /// The version to move the control plane to.
    pub target: KubeVersion,
    /// One entry per node that runs a kubelet.
    pub kubelets: Vec<KubeletVersion>,
    /// The versions this release of selfhost supports; [`SUPPORTED_VERSIONS`] outside tests.
    pub supported: SupportedRange,
    /// The operator's flags.
    pub flags: SkewFlags,
}

/// The rules of the policy. Each has a stable kebab-case id, used in JSON output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkewRule {
    /// No kube-apiserver version is known, so nothing can be compared. Mandatory: there is
    /// nothing to force past; the engine must be able to read `/version`.
    NoControlPlaneVersion,
    /// The kube-apiservers are more than [`MAX_APISERVER_MINOR_SKEW`] minor apart, which
    /// Kubernetes does not support. Skippable: it describes the cluster as it already is, and
    /// an upgrade to the minor between them is a way out.
    MixedControlPlane,
    /// A kube-apiserver runs a version outside [`SUPPORTED_VERSIONS`]. Skippable, so that
    /// operators of older clusters can still use selfhost's image-bump path, at their own risk.
    ClusterUnsupported,
    /// The target is outside [`SUPPORTED_VERSIONS`]. Skippable, as for the cluster.
    TargetUnsupported,
    /// The target is a pre-release the flags do not allow. Mandatory, unlike kubeadm (which
    /// let `--force` through): the dedicated flags are the consent to run pre-release code and
    /// cost nothing to pass, so `--force` does not imply them.
    PreReleaseNotAllowed,
    /// The target is more than [`MAX_MINOR_UPGRADE`] minor above the oldest kube-apiserver.
    /// Mandatory for a release target, as in kubeadm: components a minor apart must
    /// interoperate during the rollout, and further apart they are not tested to. Skippable for
    /// a pre-release target, as in kubeadm, because a development build may sit on the
    /// boundary of two minors.
    UpgradeSkipsMinor,
    /// The target is more than [`MAX_MINOR_DOWNGRADE`] minor below the newest kube-apiserver.
    /// Mandatory for a release target, skippable for a pre-release, as for upgrades.
    DowngradeSkipsMinor,
    /// A node's kubelet version cannot be read. Skippable, as kubeadm's unreadable kubelet
    /// versions were: the kubelet rules cannot vouch for those nodes.
    KubeletVersionUnreadable,
    /// A kubelet is a newer minor than the target, which Kubernetes never supports (a kubelet
    /// may use APIs the older kube-apiserver does not serve). Skippable: the control plane
    /// itself still moves correctly, and a kubelet a patch or a minor ahead often works.
    KubeletNewerThanTarget,
    /// A kubelet is more than [`MAX_KUBELET_MINORS_BEHIND`] minors older than the target.
    /// Skippable, as kubeadm's kubelet rule was.
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
