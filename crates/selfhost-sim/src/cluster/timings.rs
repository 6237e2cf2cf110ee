//! How fast a simulated cluster lives: pod latencies and back-offs (the kubelets'), node
//! heartbeats and how soon the controller-manager notices a silent node, how often the
//! kubelets look at their manifest directories, and the Lease clocks of leader election and
//! apiserver identity.

use std::time::Duration;

use super::handover::HandoverTimings;
use super::identity::IdentityLeaseTimings;
use super::leader_election::LeaderElectionTimings;
use crate::controllers::kubelet::Timings;

/// The Lease clocks run at most this many times faster than real ones: a leader renewing
/// every 20 ms already writes the store fifty times a second.
const LEASE_SPEEDUP_LIMIT: u32 = 100;
use crate::controllers::node_lifecycle::NodeLifecycleConfig;

/// The clock of a whole simulated cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimTimings {
    /// Pod latencies, back-offs and heartbeat intervals of every kubelet.
    pub kubelet: Timings,
    /// When the node lifecycle controller gives up on a silent node.
    pub node_lifecycle: NodeLifecycleConfig,
    /// How often the node lifecycle controller looks at the nodes (`--node-monitor-period`).
    pub node_monitor_period: Duration,
    /// How often a kubelet reads its manifest directory.
    pub manifest_scan_interval: Duration,
    /// Leader election of every kube-controller-manager and kube-scheduler process.
    pub leader_election: LeaderElectionTimings,
    /// The identity Leases of kube-apiserver processes.
    pub apiserver_identity: IdentityLeaseTimings,
    /// How kube-apiservers join and leave a port under the hand-over model.
    pub handover: HandoverTimings,
}

impl SimTimings {
    /// Real latencies and real defaults: what `selfhost sim` shows a human.
    pub fn realistic() -> Self {
        SimTimings {
            kubelet: Timings::realistic(),
            node_lifecycle: NodeLifecycleConfig::default(),
            node_monitor_period: Duration::from_secs(5),
            manifest_scan_interval: Duration::from_secs(1),
            leader_election: LeaderElectionTimings::realistic(),
            apiserver_identity: IdentityLeaseTimings::realistic(),
            handover: HandoverTimings::realistic(),
        }
    }

    /// Pod latencies a thousand times faster than real ones (every ordering kept), with
    /// heartbeats slow enough that a busy two-core machine never misses one: for tests.
    pub fn fast() -> Self {
        Self::scaled(1_000)
    }

    /// Pod latencies `factor` times faster than real ones (the hand-over model's too, pod-spec
    /// seconds included), heartbeats and node monitoring as in [`SimTimings::fast`] (a factor of 100 makes a control-plane rollout last about a
    /// second: long enough for a prober to watch it), Lease clocks `factor` times faster up
    /// to a hundred times (at 100 a leader-election Lease lasts 150 ms).
    pub fn scaled(factor: u32) -> Self {
        let lease_factor = factor.clamp(1, LEASE_SPEEDUP_LIMIT);
        let mut kubelet = Timings::realistic().scaled(factor);
        kubelet.lease_renew_interval = Duration::from_millis(200);
        kubelet.lease_duration = Duration::from_secs(2);
        kubelet.node_status_report_interval = Duration::from_secs(5);
        SimTimings {
            kubelet,
            node_lifecycle: NodeLifecycleConfig {
                monitor_grace_period: Duration::from_secs(2),
                startup_grace_period: Duration::from_secs(4),
            },
            node_monitor_period: Duration::from_millis(100),
            manifest_scan_interval: Duration::from_millis(20),
            leader_election: LeaderElectionTimings::realistic().scaled(lease_factor),
            apiserver_identity: IdentityLeaseTimings::realistic().scaled(lease_factor),
            handover: HandoverTimings::scaled(factor),
        }
    }

    /// No pod latency at all, with real heartbeat intervals and Lease clocks (a thousand
    /// nodes renewing their Leases every 200 ms would be all the cluster does): for
    /// benchmarks at scale.
    pub fn instant() -> Self {
        let real = Self::realistic();
        SimTimings {
            kubelet: Timings {
                lease_renew_interval: real.kubelet.lease_renew_interval,
                lease_duration: real.kubelet.lease_duration,
                node_status_report_interval: real.kubelet.node_status_report_interval,
                ..Timings::instant()
            },
            handover: HandoverTimings::instant(),
            ..real
        }
    }
}

impl Default for SimTimings {
    fn default() -> Self {
        Self::fast()
    }
}
