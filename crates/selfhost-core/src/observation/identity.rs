//! What the identity Leases say about the cluster as a whole: whether its kube-apiservers
//! publish them at all, and which node a sighting's host is.
//!
//! Both the pivot (whether a pod serves) and the plan (what a pivot will cost) read these
//! facts, so they live with the observation they are read from.

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::cluster::{HostPlacement, Observation};
use super::leases::{IDENTITY_FRESHNESS, IdentitySighting};
use super::time;
use crate::component::Component;

/// Whether the cluster's kube-apiservers publish identity Leases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "publishing")]
pub enum IdentityPublishing {
    /// A fresh identity Lease exists.
    Published,
    /// kube-apiservers have run longer than [`IDENTITY_FRESHNESS`] and none published one.
    NotPublished,
    /// No apiserver has run long enough to tell; decided at `decided_at` at the latest.
    Undetermined {
        /// When an apiserver will have run long enough to tell.
        decided_at: Option<Timestamp>,
    },
}

/// Decides [`IdentityPublishing`] from the apiservers already running.
pub fn identity_publishing(obs: &Observation) -> IdentityPublishing {
    if obs.identity_leases.iter().any(|s| s.is_fresh(obs.now)) {
        return IdentityPublishing::Published;
    }
    let name = Component::ApiServer.name();
    let started = obs
        .all_pods()
        .filter(|pod| pod.ready)
        .filter_map(|pod| pod.process_started_at(name));
    let earliest = started.min();
    match earliest {
        Some(start) if time::age(obs.now, start) >= IDENTITY_FRESHNESS => {
            IdentityPublishing::NotPublished
        }
        _ => IdentityPublishing::Undetermined {
            decided_at: earliest.map(|start| time::after(start, IDENTITY_FRESHNESS)),
        },
    }
}

/// The node a sighting's host is, when its hostname label tells one
/// ([`Observation::place_host`]).
pub(crate) fn sighting_node<'a>(
    obs: &'a Observation,
    sighting: &IdentitySighting,
) -> Option<&'a str> {
    match obs.place_host(sighting.hostname.as_deref()?) {
        HostPlacement::Node(node) => Some(node.name.as_str()),
        HostPlacement::AnyNode => None,
    }
}
