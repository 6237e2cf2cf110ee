//! The hand-over model's clock: how long a kube-apiserver takes to join a port, how often
//! readiness probes and the load balancer's health checks run, and how pod-spec seconds map
//! onto a scaled cluster's clock.

use std::time::Duration;

use crate::server::NEW_CONNECTION_IDLE;

/// The hand-over model's durations. [`HandoverTimings::realistic`] holds the measured values;
/// [`HandoverTimings::scaled`] divides them like every other latency of a scaled cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandoverTimings {
    /// From a kube-apiserver's start until its listening socket exists and the kernel hands it
    /// new connections (measured 0.1–0.3 s).
    pub socket_after: Duration,
    /// From its start until it accepts them (measured 1.7 s); before, they hang. It is Ready
    /// after the kubelet's ready latency (measured 3.5 s).
    pub accept_after: Duration,
    /// From accepting until its authorization cache is loaded; API requests get 403 meanwhile
    /// (not measured: an estimate, short against the join).
    pub authorization_after_accept: Duration,
    /// The period of a readiness probe whose spec gives none (kubeadm's apiserver probe:
    /// 1 s; a probe's own `periodSeconds` runs on [`HandoverTimings::spec_seconds_divisor`]).
    pub probe_period: Duration,
    /// How often the load balancer checks each node's `/readyz` (HAProxy's default `inter`,
    /// 2 s).
    pub balancer_check_interval: Duration,
    /// How long a stopping kube-apiserver leaves a connection open that has not begun its
    /// first request (Go's `http.Server.Shutdown` counts a `StateNew` connection as idle once
    /// it is 5 s old).
    pub new_connection_idle: Duration,
    /// Durations pod specs give in seconds (grace periods, probe periods,
    /// `--shutdown-delay-duration`) are divided by this, so that they run on the cluster's
    /// clock: 1 for real time, `factor` for [`HandoverTimings::scaled`].
    pub spec_seconds_divisor: u32,
}

impl HandoverTimings {
    /// The measured values (see `docs/simulator.md`).
    pub fn realistic() -> Self {
        HandoverTimings {
            socket_after: Duration::from_millis(200),
            accept_after: Duration::from_millis(1_700),
            authorization_after_accept: Duration::from_millis(300),
            probe_period: Duration::from_secs(1),
            balancer_check_interval: Duration::from_secs(2),
            new_connection_idle: NEW_CONNECTION_IDLE,
            spec_seconds_divisor: 1,
        }
    }

    /// No join latency at all (a process serves the moment it starts), real probe and check
    /// periods: for benchmarks at scale, with the kubelets' instant latencies.
    pub fn instant() -> Self {
        HandoverTimings {
            socket_after: Duration::ZERO,
            accept_after: Duration::ZERO,
            authorization_after_accept: Duration::ZERO,
            ..Self::realistic()
        }
    }

    /// Every duration `factor` times shorter (at least 1), pod-spec seconds included.
    pub fn scaled(factor: u32) -> Self {
        let factor = factor.max(1);
        let real = Self::realistic();
        HandoverTimings {
            socket_after: real.socket_after / factor,
            accept_after: real.accept_after / factor,
            authorization_after_accept: real.authorization_after_accept / factor,
            probe_period: real.probe_period / factor,
            balancer_check_interval: real.balancer_check_interval / factor,
            new_connection_idle: real.new_connection_idle / factor,
            spec_seconds_divisor: factor,
        }
    }
}

impl Default for HandoverTimings {
    fn default() -> Self {
        Self::realistic()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_keeps_the_order_of_a_join() {
        for factor in [1, 20, 100, 1_000] {
            let t = HandoverTimings::scaled(factor);
            assert!(t.socket_after < t.accept_after, "factor {factor}");
            assert_eq!(t.accept_after * factor, Duration::from_millis(1_700));
            // Go's idle rule for new connections keeps its place within the grace period.
            assert_eq!(t.new_connection_idle * factor, Duration::from_secs(5));
            assert_eq!(t.spec_seconds_divisor, factor);
        }
        assert_eq!(HandoverTimings::scaled(1), HandoverTimings::realistic());
    }
}
