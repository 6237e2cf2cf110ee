//! Readiness probes on a shared port, answered by whichever process the node's kernel picks
//! among those the probe's connection reaches (so a new pod can be reported Ready because the
//! old process answered), and loopback cross-talk: a starting kube-apiserver's loopback client
//! reaching the other process on the port and failing TLS verification, now and then fatally.
//!
//! A probe connects to its `httpGet.host`, or to the node's address (a hostNetwork pod's IP);
//! the port table says which sockets that reaches. Processes bound to distinct addresses are
//! thus never each other's answerers.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::kernel::{Kernel, SplitMix};
use super::sockets::APISERVER;
use super::{CrossTalk, CrossTalkEvent, Handovers};
use crate::controllers::clock;
use crate::controllers::kubelet::{
    BindContext, Exit, HostPort, OwnProcessReadiness, ProbeContext, ProbeResult, Process,
    ProcessId, ProcessState, ReadinessModel,
};

/// A probe's consecutive failures before a Ready container is reported unready (the
/// kubelet's default `failureThreshold`).
const DEFAULT_FAILURE_THRESHOLD: u32 = 3;

/// Whether `p`'s `/readyz` passes at `now`, as a probe reaching it sees it.
pub(crate) fn answers_ready(p: &Process, now: Timestamp) -> bool {
    p.state == ProcessState::Running
        && p.listening_since.is_some_and(|t| t <= now)
        && p.accepts_at.is_none_or(|t| t <= now)
        && p.ready_at.is_some_and(|t| t <= now)
}

#[derive(Debug, Clone, Copy, Default)]
struct ProbeState {
    ready: bool,
    failures: u32,
}

/// The readiness model of one node with the hand-over model on.
#[derive(Debug)]
pub(crate) struct SharedPortReadiness {
    pub node: String,
    pub kernel: Arc<Kernel>,
    /// Whether the kernel hands connections to processes that do not serve yet.
    pub joining: bool,
    /// The period of a probe whose spec gives none.
    pub period: Duration,
    /// Whether probes of a shared port are answered by whichever process the kernel picks
    /// (off: by the container's own process).
    pub lying: bool,
    pub cross_talk: CrossTalk,
    pub rng: Mutex<SplitMix>,
    pub log: Arc<Mutex<Vec<CrossTalkEvent>>>,
    /// The node's address, where a probe without a host connects (`None`: not known; it
    /// then reaches only the wildcard's sockets).
    pub address: Option<IpAddr>,
    states: Mutex<HashMap<ProcessId, ProbeState>>,
}

impl SharedPortReadiness {
    /// The model of `node`, whose kernel is `kernel`; `period` for probes that give none,
    /// `seed` for cross-talk draws, logged into `log`.
    pub(crate) fn new(
        node: &str,
        kernel: Arc<Kernel>,
        handovers: &Handovers,
        period: Duration,
        seed: u64,
        log: Arc<Mutex<Vec<CrossTalkEvent>>>,
    ) -> Self {
        SharedPortReadiness {
            node: node.to_string(),
            kernel,
            joining: handovers.joining,
            period,
            lying: handovers.lying_probes,
            cross_talk: handovers.cross_talk,
            rng: Mutex::new(SplitMix::new(seed)),
            log,
            address: None,
            states: Mutex::default(),
        }
    }

    /// The same model on a node whose address is `address`.
    pub(crate) fn at_address(mut self, address: IpAddr) -> Self {
        self.address = Some(address);
        self
    }

    /// Who answers a connection to `to`:`port` at `now`: one of the processes it reaches, as
    /// the kernel picks (`None`: nobody listens there).
    fn answerer<'a>(
        &self,
        ctx: &ProbeContext<'a>,
        port: HostPort,
        to: Option<IpAddr>,
    ) -> Option<&'a Process> {
        let candidates: Vec<&Process> = ctx
            .ports
            .reached(port, to)
            .iter()
            .filter_map(|id| ctx.processes.get(id))
            .filter(|p| p.is_alive())
            .filter(|p| self.joining || answers_ready(p, ctx.now))
            .collect();
        let index = self.kernel.pick(candidates.len())?;
        candidates.get(index).copied()
    }
}

/// The port an HTTP readiness probe of a container reaches on its node, when the container
/// binds it itself (hostNetwork): the probe's number, or the container's first port; and the
/// address it connects to, when its `host` names one.
fn probed_port(ctx: &ProbeContext<'_>) -> Option<(HostPort, Option<IpAddr>)> {
    let probe = ctx.container.readiness_probe.as_ref()?;
    let http = probe.http_get.as_ref()?;
    let claimed = &ctx.process.claim.ports;
    let port = match &http.port {
        IntOrString::Int(n) => {
            let port = HostPort::tcp(u16::try_from(*n).ok()?);
            claimed.contains(&port).then_some(port)
        }
        IntOrString::String(_) => claimed.first().copied(),
    }?;
    let host = http.host.as_deref().and_then(|h| h.parse::<IpAddr>().ok());
    Some((port, host))
}

impl ReadinessModel for SharedPortReadiness {
    fn probe(&self, ctx: &ProbeContext<'_>) -> ProbeResult {
        let probed = probed_port(ctx).filter(|_| self.lying);
        let Some((port, host)) = probed else {
            return OwnProcessReadiness.probe(ctx);
        };
        let mut states = self.states.lock().unwrap_or_else(|e| e.into_inner());
        states.retain(|id, _| ctx.processes.get(id).is_some_and(Process::is_alive));
        let not_ready = ProbeResult {
            ready: false,
            recheck_at: None,
        };
        if ctx.process.state != ProcessState::Running {
            // A terminating pod's containers are reported unready at once.
            states.remove(&ctx.process.id);
            return not_ready;
        }
        let probe = ctx.container.readiness_probe.as_ref();
        let period = probe
            .and_then(|p| p.period_seconds)
            .map(|s| ctx.timings.spec_seconds(clock::seconds(i64::from(s))))
            .unwrap_or(self.period);
        let threshold = probe
            .and_then(|p| p.failure_threshold)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(DEFAULT_FAILURE_THRESHOLD)
            .max(1);
        let passed = self
            .answerer(ctx, port, host.or(self.address))
            .is_some_and(|p| answers_ready(p, ctx.now));
        let state = states.entry(ctx.process.id).or_default();
        if passed {
            *state = ProbeState {
                ready: true,
                failures: 0,
            };
        } else {
            state.failures += 1;
            if state.failures >= threshold {
                state.ready = false;
            }
        }
        ProbeResult {
            ready: state.ready,
            recheck_at: Some(clock::after(ctx.now, period.max(Duration::from_millis(1)))),
        }
    }

    fn after_bind(&self, ctx: &BindContext<'_>) -> Option<Exit> {
        let process = ctx.process;
        if process.binary.as_deref() != Some(APISERVER) || self.cross_talk.probability <= 0.0 {
            return None;
        }
        // Its loopback client connects to the address it binds, or to 127.0.0.1 when it
        // binds every address: whoever else that reaches may answer.
        let loopback = process
            .claim
            .address
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
        let shared = process.claim.ports.iter().any(|port| {
            ctx.ports
                .reached(*port, Some(loopback))
                .iter()
                .any(|id| *id != process.id && ctx.processes.get(id).is_some_and(Process::is_alive))
        });
        if !shared {
            return None;
        }
        let (hit, fatal) = {
            let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
            let hit = rng.next_f64() < self.cross_talk.probability;
            (hit, hit && rng.next_f64() < self.cross_talk.fatal)
        };
        if !hit {
            return None;
        }
        let port = process.claim.ports.first().map_or(6443, |p| p.port);
        let target = std::net::SocketAddr::new(loopback, port);
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(CrossTalkEvent {
                node: self.node.clone(),
                pod_uid: process.pod_uid.clone(),
                identity: process.identity.clone(),
                fatal,
            });
        // Its loopback client runs once it serves its own port.
        let at = process.accepts_at.unwrap_or(ctx.now).max(ctx.now);
        fatal.then(|| Exit {
            at,
            code: 1,
            message: Some(format!(
                "loopback client: Get \"https://{target}/api/v1/namespaces/kube-system\": \
                 tls: failed to verify certificate: x509: certificate signed by unknown authority"
            )),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::controllers::kubelet::{PortClaim, PortTable};

    fn at(ms: u64) -> Timestamp {
        clock::after(Timestamp::UNIX_EPOCH, Duration::from_millis(ms))
    }

    fn apiserver(
        id: u64,
        listening: Option<u64>,
        accepts: Option<u64>,
        ready: Option<u64>,
    ) -> Process {
        Process {
            id: ProcessId(id),
            pod_uid: format!("pod-{id}"),
            container: "kube-apiserver".into(),
            binary: Some(APISERVER.into()),
            identity: format!("cp-1_{id}"),
            started_at: at(0),
            claim: PortClaim {
                ports: vec![HostPort::tcp(6443)],
                permit_sharing: true,
                address: None,
            },
            listening_since: listening.map(at),
            accepts_at: accepts.map(at),
            ready_at: ready.map(at),
            shutdown_delay: Duration::ZERO,
            listener_closes_at: None,
            drain: None,
            planned_exit: None,
            state: ProcessState::Running,
        }
    }

    #[test]
    fn a_process_answers_ready_once_it_listens_accepts_and_has_started() {
        let joining = apiserver(1, Some(200), Some(1_700), Some(3_500));
        let cases = [(100, false), (1_000, false), (2_000, false), (3_500, true)];
        for (ms, ready) in cases {
            assert_eq!(answers_ready(&joining, at(ms)), ready, "at {ms} ms");
        }
        assert!(
            !answers_ready(&apiserver(2, None, None, Some(0)), at(10)),
            "no socket"
        );
        assert!(
            !answers_ready(&apiserver(3, Some(0), None, None), at(10_000)),
            "never ready"
        );
        let mut stopping = apiserver(4, Some(0), None, Some(0));
        stopping.state = ProcessState::Stopping {
            signalled_at: at(5),
            kill_at: at(30_005),
        };
        assert!(
            !answers_ready(&stopping, at(10)),
            "readiness fails from SIGTERM on"
        );
    }

    fn model(cross_talk: CrossTalk) -> SharedPortReadiness {
        let handovers = Handovers {
            cross_talk,
            ..Handovers::measured()
        };
        SharedPortReadiness::new(
            "cp-1",
            Arc::new(Kernel::new(handovers.balancing, "cp-1")),
            &handovers,
            Duration::from_secs(1),
            42,
            Arc::default(),
        )
    }

    /// Binds `newcomer` to a port `holders` hold and asks the model about it.
    fn bind(model: &SharedPortReadiness, holders: &[Process], newcomer: &Process) -> Option<Exit> {
        let mut ports = PortTable::default();
        let mut processes = BTreeMap::new();
        for p in holders.iter().chain([newcomer]) {
            ports.bind(p.id, &p.claim).unwrap();
            processes.insert(p.id, p.clone());
        }
        model.after_bind(&BindContext {
            now: at(200),
            process: newcomer,
            processes: &processes,
            ports: &ports,
        })
    }

    #[test]
    fn loopback_cross_talk_happens_at_the_measured_rate_and_only_on_a_shared_port() {
        let old = apiserver(1, Some(0), Some(0), Some(0));
        let new = apiserver(2, Some(200), Some(1_700), Some(3_500));
        let measured = model(CrossTalk::measured());
        let starts = 2_600;
        let exits = (0..starts)
            .filter(|_| bind(&measured, std::slice::from_ref(&old), &new).is_some())
            .count();
        let events = measured.log.lock().unwrap().clone();
        // 2 in 26 starts: about 200 of 2,600, half of them fatal.
        assert!(
            (150..=250).contains(&events.len()),
            "{} cross-talks",
            events.len()
        );
        assert_eq!(exits, events.iter().filter(|e| e.fatal).count());
        assert!(
            (events.len() / 4..=events.len() * 3 / 4).contains(&exits),
            "{exits} fatal"
        );

        let always = model(CrossTalk {
            probability: 1.0,
            fatal: 1.0,
        });
        let exit = bind(&always, std::slice::from_ref(&old), &new).expect("fatal");
        assert_eq!(
            exit.at,
            at(1_700),
            "when its loopback client runs: once it accepts"
        );
        assert_eq!(exit.code, 1);
        assert!(
            bind(&always, &[], &new).is_none(),
            "alone on the port: nobody to reach"
        );
        assert!(bind(&model(CrossTalk::NEVER), &[old], &new).is_none());
    }

    fn probed(container_port: i32) -> k8s_openapi::api::core::v1::Container {
        serde_json::from_value(serde_json::json!({
            "name": "kube-apiserver",
            "readinessProbe": {
                "httpGet": { "path": "/readyz", "port": container_port },
                "periodSeconds": 1,
                "failureThreshold": 3,
            },
        }))
        .unwrap()
    }

    #[test]
    fn a_probe_of_a_shared_port_is_answered_by_whichever_process_the_kernel_picks() {
        let old = apiserver(1, Some(0), Some(0), Some(0));
        let new = apiserver(2, Some(200), Some(1_700), Some(3_500));
        let mut ports = PortTable::default();
        let mut processes = BTreeMap::new();
        for p in [&old, &new] {
            ports.bind(p.id, &p.claim).unwrap();
            processes.insert(p.id, p.clone());
        }
        let container = probed(6443);
        let timings = crate::controllers::kubelet::Timings::realistic();
        let behaviour = crate::controllers::kubelet::ImageBehaviour::default();
        let probe = |model: &SharedPortReadiness, ms: u64| {
            model.probe(&ProbeContext {
                now: at(ms),
                process: &new,
                container: &container,
                behaviour: &behaviour,
                timings: &timings,
                processes: &processes,
                ports: &ports,
            })
        };
        let in_turn = |lying| {
            let handovers = Handovers {
                balancing: super::super::PortBalancing::RoundRobin,
                lying_probes: lying,
                ..Handovers::measured()
            };
            SharedPortReadiness::new(
                "cp-1",
                Arc::new(Kernel::new(handovers.balancing, "cp-1")),
                &handovers,
                Duration::from_secs(1),
                1,
                Arc::default(),
            )
        };
        // In turn: the new process (hangs), the old one (Ready), the new one...
        let lying = in_turn(true);
        let answers: Vec<bool> = (0..6).map(|i| probe(&lying, 300 + i * 100).ready).collect();
        assert_eq!(
            answers,
            [false, true, true, true, true, true],
            "one failure in a row never unreadies it"
        );
        let result = probe(&lying, 1_000);
        assert_eq!(
            result.recheck_at,
            Some(at(2_000)),
            "probed again after its period"
        );
        let honest = in_turn(false);
        assert!(
            !probe(&honest, 1_000).ready,
            "its own process is not ready yet"
        );
        assert!(probe(&honest, 3_500).ready);
    }

    #[test]
    fn a_probe_with_a_host_is_answered_by_the_process_bound_there() {
        let bound = |mut p: Process, address: &str| {
            p.claim.address = Some(address.parse().unwrap());
            p
        };
        let old = bound(apiserver(1, Some(0), Some(0), Some(0)), "127.0.0.1");
        let new = bound(
            apiserver(2, Some(200), Some(1_700), Some(3_500)),
            "127.0.0.2",
        );
        let mut ports = PortTable::default();
        let mut processes = BTreeMap::new();
        for p in [&old, &new] {
            ports.bind(p.id, &p.claim).unwrap();
            processes.insert(p.id, p.clone());
        }
        let container = |host: &str| {
            let mut c = probed(6443);
            if let Some(http) = c.readiness_probe.as_mut().and_then(|p| p.http_get.as_mut()) {
                http.host = Some(host.to_string());
            }
            c
        };
        let timings = crate::controllers::kubelet::Timings::realistic();
        let behaviour = crate::controllers::kubelet::ImageBehaviour::default();
        let handovers = Handovers {
            balancing: super::super::PortBalancing::RoundRobin,
            ..Handovers::measured()
        };
        let model = SharedPortReadiness::new(
            "cp-1",
            Arc::new(Kernel::new(handovers.balancing, "cp-1")),
            &handovers,
            Duration::from_secs(1),
            1,
            Arc::default(),
        )
        .at_address("10.0.0.11".parse().unwrap());
        let probe = |process: &Process, host: &str, ms: u64| {
            model
                .probe(&ProbeContext {
                    now: at(ms),
                    process,
                    container: &container(host),
                    behaviour: &behaviour,
                    timings: &timings,
                    processes: &processes,
                    ports: &ports,
                })
                .ready
        };
        // Every probe of the new process reaches it alone: never the old one's answer.
        let answers: Vec<bool> = (0..6)
            .map(|i| probe(&new, "127.0.0.2", 300 + i * 100))
            .collect();
        assert_eq!(answers, [false; 6], "its own, not yet Ready");
        assert!(probe(&new, "127.0.0.2", 3_500), "Ready by its own account");
        assert!(probe(&old, "127.0.0.1", 300));
        assert!(
            bind(&model_always(), std::slice::from_ref(&old), &new).is_none(),
            "its loopback client reaches its own address: no cross-talk"
        );
    }

    fn model_always() -> SharedPortReadiness {
        model(CrossTalk {
            probability: 1.0,
            fatal: 1.0,
        })
    }
}
