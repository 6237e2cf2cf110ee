//! What the policy looks at: the versions the cluster runs, the target, the operator's flags,
//! and the limits it holds them to.

use std::fmt;

use crate::version::{KubeVersion, MinorVersion};

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
