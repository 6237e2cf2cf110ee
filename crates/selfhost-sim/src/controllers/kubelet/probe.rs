//! Readiness, as a pluggable model. The kubelet asks the model whether a container's
//! readiness probe passes; the default answers from the container's own process (Ready some
//! time after it started and opened its ports). Later models can answer differently, e.g. a
//! probe to a shared port answered by whichever process the kernel picks.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::jiff::Timestamp;

use super::config::Timings;
use super::images::ImageBehaviour;
use super::port_table::PortTable;
use super::process::{Exit, Process, ProcessId, ProcessState};
use crate::controllers::clock;

/// What a readiness model may look at.
#[derive(Debug, Clone, Copy)]
pub struct ProbeContext<'a> {
    /// The time of the probe.
    pub now: Timestamp,
    /// The container's current process.
    pub process: &'a Process,
    /// The container's spec (its probes, ports, flags).
    pub container: &'a Container,
    /// How its image behaves.
    pub behaviour: &'a ImageBehaviour,
    /// The kubelet's latencies.
    pub timings: &'a Timings,
    /// Every process on the node.
    pub processes: &'a BTreeMap<ProcessId, Process>,
    /// Who holds which port on the node.
    pub ports: &'a PortTable,
}

/// A probe's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeResult {
    /// Whether the probe passes now.
    pub ready: bool,
    /// When the answer may change by itself (the kubelet probes again then).
    pub recheck_at: Option<Timestamp>,
}

/// What a model may look at when a process has just bound its ports.
#[derive(Debug, Clone, Copy)]
pub struct BindContext<'a> {
    /// The time of the bind.
    pub now: Timestamp,
    /// The process that bound.
    pub process: &'a Process,
    /// Every process on the node.
    pub processes: &'a BTreeMap<ProcessId, Process>,
    /// Who holds which port on the node, the new process included.
    pub ports: &'a PortTable,
}

/// Decides readiness probes: how the processes of a node answer on their ports.
pub trait ReadinessModel: fmt::Debug + Send + Sync {
    /// The probe's answer at `ctx.now`.
    fn probe(&self, ctx: &ProbeContext<'_>) -> ProbeResult;

    /// A process has just bound its ports; the model may plan its exit (a starting
    /// kube-apiserver whose loopback client reached the other process on a shared port and
    /// failed TLS verification). By default nothing happens.
    fn after_bind(&self, _ctx: &BindContext<'_>) -> Option<Exit> {
        None
    }
}

/// The container is Ready once its own process has run for the ready delay and has opened its
/// ports; never while stopping, never if its image never gets Ready.
#[derive(Debug, Clone, Copy, Default)]
pub struct OwnProcessReadiness;

impl ReadinessModel for OwnProcessReadiness {
    fn probe(&self, ctx: &ProbeContext<'_>) -> ProbeResult {
        let not_ready = ProbeResult {
            ready: false,
            recheck_at: None,
        };
        if ctx.behaviour.never_ready || ctx.process.state != ProcessState::Running {
            return not_ready;
        }
        let delay = ctx.behaviour.ready_delay.unwrap_or(ctx.timings.ready);
        let mut ready_at = clock::after(ctx.process.started_at, delay);
        if !ctx.process.claim.ports.is_empty() {
            match ctx.process.listening_since {
                Some(since) => ready_at = ready_at.max(since),
                // It will be asked again when it starts listening.
                None => return not_ready,
            }
        }
        if ctx.now >= ready_at {
            ProbeResult {
                ready: true,
                recheck_at: None,
            }
        } else {
            ProbeResult {
                ready: false,
                recheck_at: Some(ready_at),
            }
        }
    }
}
