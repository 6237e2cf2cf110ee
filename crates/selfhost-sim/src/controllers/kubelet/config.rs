//! How long things take on a simulated node. Every duration is configurable so that tests run
//! in milliseconds and `selfhost sim` runs at a pace a human can follow.

use std::time::Duration;

use crate::controllers::backoff::BackoffPolicy;

/// Latencies and back-off policies of one kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// From admission to the pod sandbox and network (`PodReadyToStartContainers`).
    pub sandbox: Duration,
    /// Pulling an image that is not on the node yet (an image may override it).
    pub pull: Duration,
    /// Creating and starting a container (an image may add to it).
    pub start: Duration,
    /// From process start until the readiness probe passes (an image may override it).
    pub ready: Duration,
    /// From SIGTERM until a well-behaved process exits (an image may override it).
    pub stop: Duration,
    /// How long a one-shot invocation (`<binary> --version`, `true`) runs before it exits:
    /// the rule is in `process.rs`, `one_shot_exit`.
    pub one_shot: Duration,
    /// How long a failed pull shows `ErrImagePull` before `ImagePullBackOff`.
    pub pull_error_hold: Duration,
    /// Restart back-off of exited containers (`CrashLoopBackOff`).
    pub crash_loop: BackoffPolicy,
    /// Back-off between failed image pulls (`ImagePullBackOff`).
    pub image_pull: BackoffPolicy,
    /// How often the kubelet renews its node Lease.
    pub lease_renew_interval: Duration,
    /// The node Lease's `leaseDurationSeconds`.
    pub lease_duration: Duration,
    /// How often the kubelet posts node status even when nothing changed.
    pub node_status_report_interval: Duration,
    /// Durations pod specs give in seconds (grace periods, probe periods,
    /// `--shutdown-delay-duration`) are divided by this: 1 keeps real seconds; a cluster whose
    /// latencies are scaled can run them on its scaled clock too.
    pub spec_seconds_divisor: u32,
}

impl Timings {
    /// The kubelet's real defaults and latencies measured on real control-plane nodes: a
    /// kube-apiserver is Ready about 3.5 s after its process starts.
    pub fn realistic() -> Self {
        Timings {
            sandbox: Duration::from_millis(300),
            pull: Duration::from_secs(3),
            start: Duration::from_millis(500),
            ready: Duration::from_millis(3_500),
            stop: Duration::from_secs(1),
            one_shot: Duration::from_millis(100),
            pull_error_hold: Duration::from_secs(2),
            crash_loop: BackoffPolicy::kubelet_crash_loop(),
            image_pull: BackoffPolicy::kubelet_image_pull(),
            lease_renew_interval: Duration::from_secs(10),
            lease_duration: Duration::from_secs(40),
            node_status_report_interval: Duration::from_secs(300),
            spec_seconds_divisor: 1,
        }
    }

    /// The same shape a thousand times faster, for tests and benchmarks: every ordering of
    /// events is kept, only the clock runs faster.
    pub fn fast() -> Self {
        Self::realistic().scaled(1_000)
    }

    /// A duration a pod spec gives in seconds, on this kubelet's clock (see
    /// [`Timings::spec_seconds_divisor`]).
    pub fn spec_seconds(&self, seconds: Duration) -> Duration {
        seconds / self.spec_seconds_divisor.max(1)
    }

    /// Every latency divided by `factor` (at least 1); durations from pod specs keep their
    /// divisor.
    pub fn scaled(self, factor: u32) -> Self {
        let factor = factor.max(1);
        let d = |d: Duration| d / factor;
        let b = |p: BackoffPolicy| BackoffPolicy {
            initial: d(p.initial),
            max: d(p.max),
            reset_after: d(p.reset_after),
        };
        Timings {
            sandbox: d(self.sandbox),
            pull: d(self.pull),
            start: d(self.start),
            ready: d(self.ready),
            stop: d(self.stop),
            one_shot: d(self.one_shot),
            pull_error_hold: d(self.pull_error_hold),
            crash_loop: b(self.crash_loop),
            image_pull: b(self.image_pull),
            lease_renew_interval: d(self.lease_renew_interval),
            lease_duration: d(self.lease_duration),
            node_status_report_interval: d(self.node_status_report_interval),
            spec_seconds_divisor: self.spec_seconds_divisor,
        }
    }

    /// No latency at all (back-offs kept, scaled down a thousandfold): pods are Ready the
    /// moment the kubelet sees them.
    pub fn instant() -> Self {
        Timings {
            sandbox: Duration::ZERO,
            pull: Duration::ZERO,
            start: Duration::ZERO,
            ready: Duration::ZERO,
            stop: Duration::ZERO,
            one_shot: Duration::ZERO,
            pull_error_hold: Duration::ZERO,
            ..Self::fast()
        }
    }
}

impl Default for Timings {
    fn default() -> Self {
        Self::fast()
    }
}

/// One node's kubelet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletConfig {
    /// The node's name.
    pub node_name: String,
    /// The hostname of the node's machine, which its host-network processes see
    /// (`os.Hostname()`) and name themselves after: the host part of a leader-election holder
    /// identity, an apiserver identity Lease's host. `None`: the node's name, as when the
    /// kubelet names its node after the machine (no `--hostname-override`).
    pub hostname: Option<String>,
    /// The node's InternalIP: `hostIP`, and `podIP` of hostNetwork pods.
    pub node_ip: String,
    /// The first three octets of this node's pod addresses (`10.244.<n>`).
    pub pod_subnet: [u8; 3],
    /// The kubelet version it reports (`v1.33.0`).
    pub kubelet_version: String,
    /// Latencies.
    pub timings: Timings,
}

impl KubeletConfig {
    /// A kubelet for `node_name` at `node_ip`, with pod addresses in `10.244.<index>.0/24`.
    pub fn new(node_name: &str, node_ip: &str, index: u8) -> Self {
        KubeletConfig {
            node_name: node_name.to_string(),
            hostname: None,
            node_ip: node_ip.to_string(),
            pod_subnet: [10, 244, index],
            kubelet_version: "v1.33.0".into(),
            timings: Timings::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_timings_keep_the_shape_of_realistic_ones() {
        let real = Timings::realistic();
        let fast = Timings::fast();
        assert_eq!(fast.ready * 1_000, real.ready);
        assert_eq!(fast.crash_loop.initial, Duration::from_millis(10));
        assert_eq!(fast.crash_loop.max, Duration::from_millis(300));
        assert_eq!(fast.crash_loop.reset_after, Duration::from_millis(600));
        assert_eq!(Timings::instant().ready, Duration::ZERO);
    }
}
