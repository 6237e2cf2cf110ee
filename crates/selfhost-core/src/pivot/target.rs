//! What the operator asks of one component: the target and the options.

use std::time::Duration;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;

use crate::rollout::AvailabilityBudget;
use crate::version::KubeVersion;

/// Default per-component deadline: the rollout must complete this long after the update.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// Default soak of a new kube-apiserver when the cluster publishes no identity Leases, counted
/// from its process's start (and Ready as well): well above the 3.5–4 s a real kube-apiserver
/// takes from start to serving, so that a Ready reported early by a probe on a shared port
/// has long become true.
pub const DEFAULT_IDENTITY_FALLBACK_SOAK: Duration = Duration::from_secs(15);
/// Default restarts from which a new pod counts as crash-looping.
pub const DEFAULT_CRASH_LOOP_RESTARTS: i32 = 3;
/// Default grace period for an old kube-apiserver pod selfhost deletes itself once the pod
/// replacing it serves: long enough for in-flight requests, short of the 30 s that open
/// watches would otherwise hold it Terminating.
pub const DEFAULT_SHORTENED_GRACE: Duration = Duration::from_secs(5);

/// What the operator asked for, beyond the target itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PivotOptions {
    /// `--force`: take over a backup left by an upgrade to another version, or one whose
    /// annotations cannot be read.
    pub force: bool,
    /// `--no-rollback`: on failure leave the backup serving and stop (exit 4).
    pub no_rollback: bool,
    /// `--accept-downtime`: proceed where the hand-over must interrupt the API (one node
    /// without port sharing).
    pub accept_downtime: bool,
    /// `--timeout`: how long the backup may take to serve, and the rollout to complete.
    pub deadline: Duration,
    /// The soak that replaces identity Leases on clusters that publish none.
    pub identity_fallback_soak: Duration,
    /// Restarts from which a new pod counts as crash-looping.
    pub crash_loop_restarts: i32,
    /// Grace period for old kube-apiserver pods selfhost deletes itself.
    pub shortened_grace: Duration,
    /// How much unavailability of the API the kube-apiserver's rollout may cost, as the
    /// engine's own probes see it, before it is rolled back.
    pub budget: AvailabilityBudget,
}

impl Default for PivotOptions {
    fn default() -> Self {
        PivotOptions {
            force: false,
            no_rollback: false,
            accept_downtime: false,
            deadline: DEFAULT_DEADLINE,
            identity_fallback_soak: DEFAULT_IDENTITY_FALLBACK_SOAK,
            crash_loop_restarts: DEFAULT_CRASH_LOOP_RESTARTS,
            shortened_grace: DEFAULT_SHORTENED_GRACE,
            budget: AvailabilityBudget::default(),
        }
    }
}

/// Where one component should end up.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// The version the control plane moves to.
    pub version: KubeVersion,
    /// The real DaemonSet's pod template at that version, rendered by the caller.
    pub template: PodTemplateSpec,
    /// When this run of `apply` started (engine clock). A rollback recorded after it was
    /// made by this run, so the run ends [`Step::RolledBack`](super::Step::RolledBack); an
    /// older one was a previous run's, and re-running `apply` tries the upgrade again.
    /// Deadlines never start before it, so a resumed run gives a rollout its full time again.
    pub run_started_at: Timestamp,
    /// The operator's options.
    pub options: PivotOptions,
}
