//! What a preflight check says: its id, its verdict, what it found and the fix, and the
//! report of them all.

use serde::Serialize;

use crate::component::Component;

/// The checks, each with a stable kebab-case id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckId {
    /// `/readyz` answers ok and `/version` is known; on a resume, a kube-apiserver that
    /// serves by its identity Lease is enough (see `preflight/resumed_api.rs`).
    ApiHealthy,
    /// The three real DaemonSets exist.
    DaemonSetsExist,
    /// Each has converged, with at least one pod.
    DaemonSetsConverged,
    /// Every control-plane node is Ready.
    NodesReady,
    /// No backup DaemonSet that `apply` cannot continue.
    NoForeignBackup,
    /// The version-skew policy.
    VersionSkew,
    /// What the hand-over will cost, and whether it needs `--accept-downtime`.
    ExpectedDisruption,
    /// Each DaemonSet still has the shape selfhost works with: its component's container,
    /// kubeadm's selector, no containers the target would drop, no other manager.
    DaemonSetShape,
    /// Every control-plane node can pull and run the target images (`--prepull`; see
    /// [`crate::prepull`]).
    ImagesPullable,
    /// Every control-plane node runs the checkpointer (a warning only; see
    /// `preflight/checkpointers.rs`).
    Checkpointers,
    /// Where the kube-apiserver listens behind the nodes' API fronts, every control-plane node
    /// runs its front (see `preflight/api_fronts.rs`).
    ApiFronts,
    /// No target template carries a flag or feature gate the target release removed or
    /// locked (see `preflight/flags.rs`).
    FlagsAndGates,
    /// No client requests, and no object is kept in, an API version the target stops serving
    /// (see `preflight/removed_apis.rs`).
    RemovedApis,
    /// Every certificate the templates read is valid, and not about to expire (see
    /// `preflight/certificates.rs`).
    Certificates,
    /// The etcd the kube-apiserver uses is healthy and its version suits the target (see
    /// `preflight/etcd.rs`).
    Etcd,
}

impl CheckId {
    /// The stable id, e.g. `nodes-ready`.
    pub fn id(self) -> &'static str {
        match self {
            CheckId::ApiHealthy => "api-healthy",
            CheckId::DaemonSetsExist => "daemonsets-exist",
            CheckId::DaemonSetsConverged => "daemonsets-converged",
            CheckId::NodesReady => "nodes-ready",
            CheckId::NoForeignBackup => "no-foreign-backup",
            CheckId::VersionSkew => "version-skew",
            CheckId::ExpectedDisruption => "expected-disruption",
            CheckId::DaemonSetShape => "daemonset-shape",
            CheckId::ImagesPullable => "images-pullable",
            CheckId::Checkpointers => "checkpointers",
            CheckId::ApiFronts => "api-fronts",
            CheckId::FlagsAndGates => "flags-and-gates",
            CheckId::RemovedApis => "removed-apis",
            CheckId::Certificates => "certificates",
            CheckId::Etcd => "etcd",
        }
    }
}

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Fine.
    Pass,
    /// Fine, but the operator should know.
    Warn,
    /// Refuses the upgrade.
    Fail,
    /// Not run (it is optional, or others failed first); the message says how to run it.
    NotRun,
}

/// One result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Which check.
    pub id: CheckId,
    /// The component it concerns, if one.
    pub component: Option<Component>,
    /// Its verdict.
    pub verdict: Verdict,
    /// What was found.
    pub message: String,
    /// What to do about a failure or warning.
    pub fix: Option<String>,
}

/// All results.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreflightReport {
    /// In check order, components in upgrade order.
    pub checks: Vec<Check>,
}

impl PreflightReport {
    /// The failed checks.
    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.verdict == Verdict::Fail)
    }

    /// Whether `apply` may start.
    pub fn allows(&self) -> bool {
        self.failures().next().is_none()
    }
}

pub(super) struct Report(pub(super) Vec<Check>);

impl Report {
    pub(super) fn add(
        &mut self,
        id: CheckId,
        component: Option<Component>,
        verdict: Verdict,
        message: String,
        fix: Option<String>,
    ) {
        self.0.push(Check {
            id,
            component,
            verdict,
            message,
            fix,
        });
    }
}
