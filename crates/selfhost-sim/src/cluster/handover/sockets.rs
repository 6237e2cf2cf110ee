//! What a node's kubelet tells the hand-over model: its kube-apiserver processes and its API
//! fronts that have created their socket, with their times on the monotonic clock the HTTP
//! server runs on.

use std::net::IpAddr;

use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use crate::controllers::clock;
use crate::controllers::kubelet::{
    ContainerView, FrontCommand, Kubelet, PodRef, Process, ProcessId, ProcessState,
};

/// The binary whose processes the model routes connections to.
pub(crate) const APISERVER: &str = "kube-apiserver";

/// One kube-apiserver process that has created its listening socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiProcess {
    pub id: ProcessId,
    pub pod: PodRef,
    pub image: Option<String>,
    /// When its socket was created.
    pub listening: Instant,
    /// When it accepts connections (`None`: as soon as it listens).
    pub accepts: Option<Instant>,
    /// When it is ready by its own account (`None`: never).
    pub ready: Option<Instant>,
    /// Whether it was sent SIGTERM.
    pub stopping: bool,
    /// Whether its socket is still bound to the port.
    pub holds_port: bool,
    /// Its place in bind order among the port's sockets.
    pub bind_rank: usize,
    /// The address its socket is bound to (`None`: every address).
    pub address: Option<IpAddr>,
    /// Its port.
    pub port: u16,
}

impl ApiProcess {
    /// Whether `other` says something new about the same process: its socket or its stop.
    /// (Its times, fixed at its start, are read anew on every publication and may differ by
    /// the microseconds between two clock readings.)
    pub(crate) fn differs_from(&self, other: &ApiProcess) -> bool {
        (self.holds_port, self.stopping, self.bind_rank)
            != (other.holds_port, other.stopping, other.bind_rank)
    }
}

/// A wall-clock time of the kubelet on the monotonic clock (`now` seen on both).
pub(crate) fn instant_of(at: Timestamp, now_wall: Timestamp, now: Instant) -> Instant {
    if at <= now_wall {
        now.checked_sub(clock::elapsed(at, now_wall)).unwrap_or(now)
    } else {
        now + clock::elapsed(now_wall, at)
    }
}

fn is_apiserver(p: &Process) -> bool {
    p.binary.as_deref() == Some(APISERVER)
}

/// The kube-apiserver processes of a node that have a socket (or had one), alive; its
/// `containers` as the kubelet lists them.
pub(crate) fn api_processes(kubelet: &Kubelet, containers: &[ContainerView]) -> Vec<ApiProcess> {
    let now_wall = Timestamp::now();
    let now = Instant::now();
    let at = |t: Timestamp| instant_of(t, now_wall, now);
    let ports = kubelet.ports();
    let mut out = Vec::new();
    for p in kubelet.processes() {
        if !p.is_alive() || !is_apiserver(p) {
            continue;
        }
        let Some(listening) = p.listening_since else {
            continue;
        };
        let Some(view) = containers.iter().find(|c| c.process == Some(p.id)) else {
            continue;
        };
        let Some(port) = p.claim.ports.first() else {
            continue;
        };
        let holders = ports.holders(*port);
        let rank = holders.iter().position(|h| *h == p.id);
        out.push(ApiProcess {
            address: p.claim.address,
            port: port.port,
            id: p.id,
            pod: view.pod.clone(),
            image: view.image.clone(),
            listening: at(listening),
            accepts: p.accepts_at.map(at),
            ready: p.ready_at.map(at),
            stopping: matches!(p.state, ProcessState::Stopping { .. }),
            holds_port: rank.is_some(),
            bind_rank: rank.unwrap_or(usize::MAX),
        });
    }
    out.sort_by_key(|p| (p.bind_rank, p.id));
    out
}

/// One node-local API front that has created its listening socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FrontProcess {
    pub id: ProcessId,
    pub pod: PodRef,
    /// Its command line.
    pub command: FrontCommand,
    /// Whether it was sent SIGTERM (it then stops accepting and drains).
    pub stopping: bool,
    /// Whether its socket is still bound.
    pub holds_port: bool,
    /// Its place in bind order among the port's sockets.
    pub bind_rank: usize,
    /// The address its socket is bound to (`None`: every address).
    pub address: Option<IpAddr>,
}

impl FrontProcess {
    /// Whether `other` says something new about the same front: its socket or its stop.
    pub(crate) fn differs_from(&self, other: &FrontProcess) -> bool {
        (self.holds_port, self.stopping, self.bind_rank)
            != (other.holds_port, other.stopping, other.bind_rank)
    }
}

/// The fronts of a node that have a socket (or had one), alive; its `containers` as the
/// kubelet lists them.
pub(crate) fn front_processes(
    kubelet: &Kubelet,
    containers: &[ContainerView],
) -> Vec<FrontProcess> {
    let ports = kubelet.ports();
    let mut out = Vec::new();
    for p in kubelet.processes() {
        if !p.is_alive() || p.listening_since.is_none() {
            continue;
        }
        let Some(view) = containers.iter().find(|c| c.process == Some(p.id)) else {
            continue;
        };
        let Some(command) = FrontCommand::parse(&view.command_line) else {
            continue;
        };
        let Some(port) = p.claim.ports.first() else {
            continue;
        };
        let rank = ports.holders(*port).iter().position(|h| *h == p.id);
        out.push(FrontProcess {
            id: p.id,
            pod: view.pod.clone(),
            command,
            stopping: matches!(p.state, ProcessState::Stopping { .. }),
            holds_port: rank.is_some(),
            bind_rank: rank.unwrap_or(usize::MAX),
            address: p.claim.address,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn wall_times_map_onto_the_monotonic_clock_both_ways() {
        let wall = Timestamp::from_second(1_000).unwrap();
        let now = Instant::now();
        let earlier = clock::after(Timestamp::from_second(998).unwrap(), Duration::ZERO);
        assert_eq!(instant_of(earlier, wall, now), now - Duration::from_secs(2));
        let later = clock::after(wall, Duration::from_millis(1_500));
        assert_eq!(
            instant_of(later, wall, now),
            now + Duration::from_millis(1_500)
        );
    }
}
