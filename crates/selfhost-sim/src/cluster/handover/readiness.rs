//! Readiness probes on a shared port, answered by whichever process the node's kernel picks
//! (so a new pod can be reported Ready because the old process answered), and loopback
//! cross-talk: a starting kube-apiserver's loopback client reaching the other process on the
//! port and failing TLS verification, now and then fatally.

use std::collections::HashMap;
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
            states: Mutex::default(),
        }
    }

    /// Who answers a connection to `port` at `now`: one of the processes bound to it, as the
    /// kernel picks (`None`: nobody listens).
    fn answerer<'a>(&self, ctx: &ProbeContext<'a>, port: HostPort) -> Option<&'a Process> {
        let candidates: Vec<&Process> = ctx
            .ports
            .holders(port)
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
/// binds it itself (hostNetwork): the probe's number, or the container's first port.
fn probed_port(ctx: &ProbeContext<'_>) -> Option<HostPort> {
    let probe = ctx.container.readiness_probe.as_ref()?;
    let http = probe.http_get.as_ref()?;
    let claimed = &ctx.process.claim.ports;
    match &http.port {
        IntOrString::Int(n) => {
            let port = HostPort::tcp(u16::try_from(*n).ok()?);
            claimed.contains(&port).then_some(port)
        }
        IntOrString::String(_) => claimed.first().copied(),
    }
}

impl ReadinessModel for SharedPortReadiness {
    fn probe(&self, ctx: &ProbeContext<'_>) -> ProbeResult {
        let port = probed_port(ctx).filter(|_| self.lying);
        let Some(port) = port else {
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
            .answerer(ctx, port)
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
        let shared = process.claim.ports.iter().any(|port| {
            ctx.ports
                .holders(*port)
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
                "loopback client: Get \"https://127.0.0.1:{port}/api/v1/namespaces/kube-system\": \
                 tls: failed to verify certificate: x509: certificate signed by unknown authority"
            )),
        })
    }
}
