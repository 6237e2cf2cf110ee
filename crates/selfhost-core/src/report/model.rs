//! The report as data: the lanes of the timeline with their pod bars, the API's availability,
//! the tables and the markers of the engine's steps.

use crate::Component;

/// Which template a pod runs, which decides its colour in the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TemplateKind {
    /// The real DaemonSet's template as it was when the recording started.
    Old,
    /// The temporary backup DaemonSet's (a copy of the old template that serves during the
    /// hand-over).
    Backup,
    /// The real DaemonSet's template after the change.
    New,
}

impl TemplateKind {
    /// A word for people and a CSS class name.
    pub fn name(self) -> &'static str {
        match self {
            TemplateKind::Old => "old",
            TemplateKind::Backup => "backup",
            TemplateKind::New => "new",
        }
    }
}

/// A pod's state at some moment, as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    pub phase: String,
    /// The pod's Ready condition.
    pub ready: bool,
    /// Whether deletion has begun (the pod is Terminating).
    pub terminating: bool,
}

/// A pod seen in a new state, or gone (`state: None`).
#[derive(Debug, Clone, PartialEq)]
pub struct PodChange {
    /// When, in seconds since the recording started.
    pub at: f64,
    /// The pod's node (empty while it is not bound to one).
    pub node: String,
    /// The component it runs.
    pub component: Component,
    /// The pod's name.
    pub pod: String,
    /// The template it runs.
    pub kind: TemplateKind,
    /// Its state; `None` once it is gone from the API.
    pub state: Option<PodState>,
}

/// A stretch of time in which a pod's state did not change.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Start, in seconds.
    pub from: f64,
    /// End, in seconds.
    pub to: f64,
    /// The state in that stretch.
    pub state: PodState,
}

/// One pod's life on its lane.
#[derive(Debug, Clone, PartialEq)]
pub struct PodBar {
    /// The pod's name.
    pub pod: String,
    /// The template it runs.
    pub kind: TemplateKind,
    /// The row inside the lane (pods that overlap in time get different rows).
    pub track: usize,
    /// Its states, in order.
    pub segments: Vec<Segment>,
}

/// One lane: a component on a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    /// The node.
    pub node: String,
    /// The component.
    pub component: Component,
    /// How many rows the lane needs.
    pub tracks: usize,
    /// The pods, in the order they appeared.
    pub pods: Vec<PodBar>,
}

/// How a client uses its connections to the API. Availability differs between the two kinds
/// (a kept-alive connection stays with the process it reached; a new one meets whichever the
/// kernel or a load balancer hands it to), so every availability figure names its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientConnections {
    /// Requests share keep-alive connections, as controllers and client-go programs do.
    KeepAlive,
    /// Every request opens a new connection, as kubectl and scripts do.
    NewPerRequest,
}

impl ClientConnections {
    /// The words figures name this kind by.
    pub fn describe(self) -> &'static str {
        match self {
            ClientConnections::KeepAlive => "keep-alive connections",
            ClientConnections::NewPerRequest => "a new connection per request",
        }
    }

    /// A short label for a lane.
    pub fn label(self) -> &'static str {
        match self {
            ClientConnections::KeepAlive => "keep-alive",
            ClientConnections::NewPerRequest => "new connections",
        }
    }

    /// The label as an HTML id part.
    pub fn slug(self) -> &'static str {
        match self {
            ClientConnections::KeepAlive => "keep-alive",
            ClientConnections::NewPerRequest => "new-connections",
        }
    }
}

/// What an API availability lane was measured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AvailabilitySource {
    /// An independent client reading and writing at fixed intervals (the demo's prober).
    Prober {
        /// Milliseconds between reads.
        read_every_ms: u64,
        /// Milliseconds between writes.
        write_every_ms: u64,
        /// How the prober uses its connections.
        connections: ClientConnections,
    },
    /// The engine's own `/readyz` health probe, as it observes the API while it works (its
    /// client opens a new connection per request).
    EngineHealth {
        /// Milliseconds between probes.
        every_ms: u64,
    },
}

impl AvailabilitySource {
    /// How the client that measured uses its connections.
    pub fn connections(&self) -> ClientConnections {
        match self {
            AvailabilitySource::Prober { connections, .. } => *connections,
            AvailabilitySource::EngineHealth { .. } => ClientConnections::NewPerRequest,
        }
    }

    /// What the lane shows and how it was measured, in a sentence.
    pub fn describe(&self) -> String {
        match self {
            AvailabilitySource::Prober {
                read_every_ms,
                write_every_ms,
                connections,
            } => format!(
                "API availability as an independent prober on {} saw it: a read every \
                 {read_every_ms} ms and a write every {write_every_ms} ms, each without retries.",
                connections.describe()
            ),
            AvailabilitySource::EngineHealth { every_ms } => format!(
                "API availability as the engine's own health probe saw it (/readyz every \
                 {every_ms} ms through the engine's client, a new connection per request); no \
                 independent prober ran, so short gaps between probes are not visible."
            ),
        }
    }
}

/// Which kind of probe failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// A read.
    Read,
    /// A write.
    Write,
    /// A health probe (`/readyz`).
    Health,
}

impl ProbeKind {
    /// A word for people and a CSS class name.
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::Read => "read",
            ProbeKind::Write => "write",
            ProbeKind::Health => "health",
        }
    }
}

/// One failed probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeFailure {
    /// When it was sent, in seconds.
    pub at: f64,
    /// What kind of probe.
    pub kind: ProbeKind,
    /// Why it failed.
    pub error: String,
}

/// The API availability lane.
#[derive(Debug, Clone, PartialEq)]
pub struct Availability {
    /// How it was measured.
    pub source: AvailabilitySource,
    /// Probes sent.
    pub attempts: u64,
    /// Every failed probe.
    pub failures: Vec<ProbeFailure>,
    /// Stretches in which the API answered nothing at all (from the simulator's model in the
    /// demo; from consecutive failed health probes on a real cluster).
    pub outages: Vec<(f64, f64)>,
}

/// A table for the summary.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Table {
    /// Its heading.
    pub title: String,
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<String>>,
}

/// Everything the page shows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UpgradeReport {
    /// The page's heading, e.g. `Upgrade to v1.34.0`.
    pub title: String,
    /// One line under the heading: where and when.
    pub subtitle: String,
    /// The verdict, in a sentence.
    pub verdict: String,
    /// Whether the verdict is good (green) or bad (red).
    pub success: bool,
    /// The length of the recording, in seconds.
    pub duration: f64,
    /// One lane per node and component.
    pub lanes: Vec<Lane>,
    /// The API availability lanes, one per kind of client that measured.
    pub availability: Vec<Availability>,
    /// The engine's steps.
    pub markers: Vec<Marker>,
    /// Tables under the timeline.
    pub tables: Vec<Table>,
    /// Notes at the end: how things were measured.
    pub notes: Vec<String>,
}

/// One of the engine's steps, or a component's end, as a marker on the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// When, in seconds.
    pub at: f64,
    /// The component it belongs to.
    pub component: Component,
    /// The step's stable name (`create-backup`, ...) or the component's outcome.
    pub step: String,
    /// What it does, in words.
    pub detail: String,
    /// Whether it marks the component's end (its outcome) rather than a step.
    pub finish: bool,
}
