//! Progress events: what the engine is doing, for people (rendered by the CLI on stderr) and
//! for programs (`-o json`: one JSON object per line on stdout).

use selfhost_core::Component;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::outcome::ComponentOutcome;

/// Version of the shape of `-o json` lines (events, plan, result); bumped when a field is
/// removed, renamed or changes meaning, not when one is added.
pub const EVENTS_SCHEMA: &str = "selfhost.dev/events/v1";

/// One thing that happened during a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    /// Work on a component begins.
    ComponentStarted {
        /// The component.
        component: Component,
    },
    /// The state machine moved to a new step.
    Step {
        /// The component.
        component: Component,
        /// The step's stable name (`create-backup`, `wait-for-rollout`, ...).
        step: String,
        /// What it does, in words.
        description: String,
    },
    /// What a wait is still waiting for changed.
    Waiting {
        /// The component.
        component: Component,
        /// The step's name.
        step: String,
        /// The condition.
        condition: String,
        /// What is still missing.
        pending: Vec<String>,
    },
    /// An API write was made (or, with `--dry-run`, accepted by server-side dry run).
    Action {
        /// The component.
        component: Component,
        /// The step's name.
        step: String,
        /// What was written.
        detail: String,
        /// Whether it was a server-side dry run.
        dry_run: bool,
    },
    /// A component reached an end.
    ComponentFinished {
        /// The component.
        component: Component,
        /// `done`, `rolled-back`, `refused`, `failed`, `interrupted` or `dry-run`.
        outcome: String,
        /// What happened.
        message: String,
        /// Seconds spent on it.
        elapsed_seconds: f64,
    },
}

/// An event with the time since the run started.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stamped {
    /// Seconds since the run started.
    pub at: f64,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

/// Where events go: a channel the CLI reads, or nowhere.
#[derive(Debug, Clone)]
pub struct Events {
    started: Instant,
    sender: Option<mpsc::UnboundedSender<Stamped>>,
}

impl Events {
    /// Events sent to `sender`, timed from now.
    pub fn to(sender: mpsc::UnboundedSender<Stamped>) -> Events {
        Events {
            started: Instant::now(),
            sender: Some(sender),
        }
    }

    /// Events that go nowhere.
    pub fn none() -> Events {
        Events {
            started: Instant::now(),
            sender: None,
        }
    }

    /// Seconds since the run started.
    pub fn elapsed(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Reports that the work on `component`, begun at `started`, ended with `outcome`.
    pub fn component_finished(
        &self,
        component: Component,
        outcome: &ComponentOutcome,
        started: Instant,
    ) {
        self.emit(Event::ComponentFinished {
            component,
            outcome: outcome.name().to_string(),
            message: outcome.message(),
            elapsed_seconds: started.elapsed().as_secs_f64(),
        });
    }

    /// Sends one event. A reader that went away is not the engine's problem.
    pub fn emit(&self, event: Event) {
        if let Some(sender) = &self.sender {
            let _ = sender.send(Stamped {
                at: self.elapsed(),
                event,
            });
        }
    }
}
