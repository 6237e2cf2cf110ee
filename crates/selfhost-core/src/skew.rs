//! The version-skew policy of an upgrade: may the control plane move from the versions it runs
//! to a target version, given the kubelets of the cluster and the flags the operator passed?
//!
//! Modelled on kubeadm's `EnforceVersionPolicies` and updated to today's Kubernetes
//! version-skew policy:
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

mod findings;
mod input;
mod message;
mod rules;
#[cfg(test)]
mod tests;

pub use findings::{Finding, Severity, SkewReport, SkewRule, VersionChange};
pub use input::{
    ApiServerVersion, KubeletVersion, MAX_APISERVER_MINOR_SKEW, MAX_KUBELET_MINORS_BEHIND,
    MAX_MINOR_DOWNGRADE, MAX_MINOR_UPGRADE, SUPPORTED_VERSIONS, SkewFlags, SkewInput,
    SupportedRange,
};
pub use rules::check;
