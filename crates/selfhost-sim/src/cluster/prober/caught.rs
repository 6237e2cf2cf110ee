//! Who caught a failed probe: the process whose socket the kernel (through the load balancer)
//! handed the probe's connection to, as the simulator's connection log recorded it. A test can
//! then tell the failures the hand-over model forces — a broken kube-apiserver that takes its
//! share of a shared port before it fails — from failures anywhere else.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use hyper_util::client::legacy::connect::{CaptureConnection, HttpInfo};
use tokio::time::Instant;

use crate::server::{Catcher, ConnectionLog};

/// Who caught a probe's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaughtBy {
    /// A kube-apiserver process of a pod.
    Process {
        /// Its node.
        node: String,
        /// Its pod.
        pod: String,
        /// Its container's image.
        image: Option<String>,
        /// Its name in the simulator's logs (`<node>/<pod>#<pid>`).
        process: String,
        /// Whether it had finished starting (served) when the probe was sent. A process that
        /// had not answers "still starting" until it does, so the probe's end, which comes
        /// later (the answer's way back, a loaded machine's scheduling), would credit it with
        /// serving it had not done when it answered.
        had_served: bool,
    },
    /// Nothing listened where the load balancer or the node's kernel sent the connection.
    Refused,
    /// A node's API front accepted the connection and passed it to no kube-apiserver: it
    /// held it (none was healthy), then closed it unserved.
    Front {
        /// The front's name in the simulator's logs (`<node>/<pod>#<pid>`).
        front: String,
    },
    /// The simulator itself, with its process model off.
    Simulator,
    /// Not known: no connection was established that the server noted (`why` says more).
    Unknown {
        /// Why it is not known.
        why: String,
    },
}

impl CaughtBy {
    /// Whether a process of `image` on `node` caught it.
    pub fn is_process_of(&self, node: &str, image: &str) -> bool {
        matches!(self, CaughtBy::Process { node: n, image: Some(i), .. } if n == node && i == image)
    }
}

impl std::fmt::Display for CaughtBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaughtBy::Process {
                process,
                image,
                had_served,
                ..
            } => write!(
                f,
                "caught by {process} ({}, {})",
                image.as_deref().unwrap_or("no image"),
                if *had_served {
                    "had served"
                } else {
                    "not serving yet when the probe was sent"
                }
            ),
            CaughtBy::Refused => write!(f, "refused: nothing listened where it was sent"),
            CaughtBy::Front { front } => write!(
                f,
                "held by the front {front}, passed to no kube-apiserver (none was healthy)"
            ),
            CaughtBy::Simulator => write!(f, "served by the simulator (no process model)"),
            CaughtBy::Unknown { why } => write!(f, "caught by an unknown process: {why}"),
        }
    }
}

/// The connection of a probe's latest send, as hyper reports it once it has one: kept apart
/// from the send so that it can still be read when the attempt timed out.
#[derive(Debug, Clone, Default)]
pub(super) struct LastConnection(Arc<Mutex<Option<CaptureConnection>>>);

impl LastConnection {
    pub(super) fn set(&self, capture: CaptureConnection) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(capture);
    }

    /// The local address of the connection, if one was established.
    pub(super) fn local_addr(&self) -> Option<SocketAddr> {
        let slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let capture = slot.as_ref()?;
        let metadata = capture.connection_metadata();
        let connected = metadata.as_ref()?;
        let mut extras = http::Extensions::new();
        connected.get_extras(&mut extras);
        extras.get::<HttpInfo>().map(HttpInfo::local_addr)
    }
}

/// Who caught the connection of `last`, by the server's log; when no connection was
/// established (reset before its TLS handshake ended), by the connections the attempt itself
/// dialled that never carried a request (`dialled`): all of them must have gone to the same
/// place to say where.
pub(super) fn caught_by(
    log: Option<&ConnectionLog>,
    last: &LastConnection,
    dialled: &[SocketAddr],
    sent: Instant,
) -> CaughtBy {
    let Some(log) = log else {
        return CaughtBy::Unknown {
            why: "the prober has no connection log (not a simulated cluster)".into(),
        };
    };
    if let Some(local) = last.local_addr() {
        return match log.catcher(local) {
            None => CaughtBy::Unknown {
                why: format!("the server noted no connection from {local}"),
            },
            Some(catcher) => of(&catcher, sent),
        };
    }
    let caught: Vec<CaughtBy> = dialled
        .iter()
        .filter_map(|local| log.catcher(*local))
        .map(|catcher| of(&catcher, sent))
        .collect();
    match caught.split_first() {
        None => CaughtBy::Unknown {
            why: "no connection was established, and the server noted none the attempt \
                  dialled"
                .into(),
        },
        Some((first, rest)) if rest.iter().all(|c| c == first) => first.clone(),
        Some(_) => CaughtBy::Unknown {
            why: format!(
                "no connection was established, and those the attempt dialled went to \
                 different places: {}",
                caught
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        },
    }
}

fn of(catcher: &Catcher, sent: Instant) -> CaughtBy {
    match catcher {
        Catcher::Direct => CaughtBy::Simulator,
        Catcher::Refused => CaughtBy::Refused,
        Catcher::Front(front) => CaughtBy::Front {
            front: front.clone(),
        },
        Catcher::Process(p) => {
            let origin = p.origin();
            CaughtBy::Process {
                node: origin.map(|o| o.node.clone()).unwrap_or_default(),
                pod: origin.map(|o| o.pod.clone()).unwrap_or_default(),
                image: origin.and_then(|o| o.image.clone()),
                process: p.label().to_string(),
                had_served: p.had_served(sent),
            }
        }
    }
}
