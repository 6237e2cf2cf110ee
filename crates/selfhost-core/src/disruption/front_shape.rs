//! The kube-apiserver behind the node's API front: whether its DaemonSet says so, whether its
//! templates agree, and what a pivot costs there.
//!
//! Behind a front the kube-apiserver and its backup listen on addresses of their own (see
//! [`crate::front::FrontLayout`]), so no two processes share a socket: port sharing is not
//! needed, neither on one node nor on several, and each process answers its own probes and
//! the front's checks. The front passes a new connection only to a process whose `/readyz`
//! passes, which is what makes the hand-over on one node free of failed requests.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde::Serialize;

use super::{ApiImpact, ExpectedDisruption, HandOver};
use crate::command_line::template_flag;
use crate::component::Component;
use crate::front::{FRONT_ANNOTATION, FrontLayout, bound_address};
use crate::observation::DaemonSetObservation;

/// Whether the kube-apiserver listens behind its node's API front, as the real DaemonSet's
/// annotation [`FRONT_ANNOTATION`] says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "front")]
pub enum FrontShape {
    /// No front (or a component other than the kube-apiserver): the processes listen on the
    /// node's API address themselves.
    Absent,
    /// The DaemonSet says its pods listen behind a front.
    Behind {
        /// Where its pods and a backup's listen.
        layout: FrontLayout,
        /// The port both listen on, the node's API port.
        port: u16,
        /// Where the live template listens (`None`: every address).
        live: Option<IpAddr>,
        /// Whether the live template permits port sharing.
        live_shares_port: bool,
        /// Where the target template listens (`None`: every address).
        target: Option<IpAddr>,
    },
    /// The annotation is there and cannot be read.
    Unreadable {
        /// Why, naming the value found.
        reason: String,
    },
}

impl FrontShape {
    /// Reads the shape from the component's live DaemonSet and its target template.
    pub fn observe(
        component: Component,
        live: Option<&DaemonSetObservation>,
        target: &PodTemplateSpec,
    ) -> Self {
        let Some(live) = live.filter(|_| component == Component::ApiServer) else {
            return FrontShape::Absent;
        };
        match FrontLayout::of_annotations(&live.annotations) {
            Ok(None) => FrontShape::Absent,
            Ok(Some(layout)) => FrontShape::Behind {
                layout,
                port: template_flag(&live.template, component.name(), "secure-port")
                    .and_then(|p| p.trim().parse().ok())
                    .unwrap_or(component.default_secure_port()),
                live: listens_on(&live.template),
                live_shares_port: crate::disruption::permits_port_sharing(
                    &live.template,
                    component,
                ),
                target: listens_on(target),
            },
            Err(error) => FrontShape::Unreadable {
                reason: error.to_string(),
            },
        }
    }

    /// The layout, when the pivot runs behind the front: the annotation reads, the target
    /// template listens on its address for the DaemonSet's pods, and the live one either does
    /// too or still listens on every address with port sharing, as before a front was put in
    /// front of it ([`FrontShape::moves_behind`]).
    pub fn layout(&self) -> Option<FrontLayout> {
        match self {
            FrontShape::Behind {
                layout,
                live,
                target,
                ..
            } if (*live == Some(layout.backend) || self.moves_behind())
                && *target == Some(layout.backend) =>
            {
                Some(*layout)
            }
            _ => None,
        }
    }

    /// Whether this pivot moves the kube-apiserver behind the front: its live template
    /// listens on every address with port sharing, beside the front on the node's address
    /// (the kernel gives the more specific socket the node's connections, and the wildcard
    /// answers the front's backends until a process listens on their own addresses).
    pub fn moves_behind(&self) -> bool {
        matches!(
            self,
            FrontShape::Behind {
                live: None,
                live_shares_port: true,
                ..
            }
        )
    }

    /// Why no pivot can run on this shape, and what fixes it: the annotation is unreadable,
    /// or a template listens elsewhere than it says. `daemonset` is the real DaemonSet's name.
    pub(super) fn blocked(&self, daemonset: &str) -> Option<(String, String)> {
        let remove = format!(
            "remove the annotation where no front runs (`kubectl -n kube-system annotate \
             daemonset {daemonset} {FRONT_ANNOTATION}-`)"
        );
        match self {
            FrontShape::Absent => None,
            FrontShape::Unreadable { reason } => Some((
                format!(
                    "kube-system/{daemonset}: {reason}, so where a backup kube-apiserver must \
                     listen behind the node's API front is unknown"
                ),
                format!(
                    "set it to the addresses the kube-apiserver and a backup listen on behind \
                     the front (`kubectl -n kube-system annotate --overwrite daemonset \
                     {daemonset} {FRONT_ANNOTATION}={}`), or {remove}; then re-run",
                    FrontLayout::default().to_annotation()
                ),
            )),
            FrontShape::Behind { layout, live, .. }
                if *live != Some(layout.backend) && !self.moves_behind() =>
            {
                Some((
                    format!(
                        "kube-system/{daemonset} is annotated {FRONT_ANNOTATION}={} (its pods listen \
                     behind the node's API front on {}), but its template listens on {}",
                        layout.to_annotation(),
                        layout.backend,
                        describe(*live)
                    ),
                    format!(
                        "finish moving the kube-apiserver behind the front (--bind-address={} with \
                     its probes aimed there, or every address with --permit-port-sharing=true \
                     for the next upgrade to move it), or {remove}; then re-run",
                        layout.backend
                    ),
                ))
            }
            FrontShape::Behind { layout, target, .. } if *target != Some(layout.backend) => Some((
                format!(
                    "the target template of kube-apiserver listens on {}, not on {} where \
                         the node's API front passes connections: the upgrade would take the \
                         kube-apiserver off the front",
                    describe(*target),
                    layout.backend
                ),
                format!(
                    "selfhost renders every target of a kube-apiserver behind a front with \
                         --bind-address={} and its probes aimed there; a target from elsewhere \
                         must do the same",
                    layout.backend
                ),
            )),
            FrontShape::Behind { .. } => None,
        }
    }
}

/// The kube-apiserver pivot's cost behind the node's API front (`layout` read from `front`),
/// on `nodes` nodes whose templates share the port or not (`port_sharing`).
pub(super) fn explain(
    out: &mut ExpectedDisruption,
    front: &FrontShape,
    layout: FrontLayout,
    nodes: usize,
    port_sharing: bool,
) {
    let port = match front {
        FrontShape::Behind { port, .. } => *port,
        _ => Component::ApiServer.default_secure_port(),
    };
    out.api = ApiImpact::None;
    out.hand_over = HandOver::Front;
    out.explanation.push(format!(
        "none: the node's API front moves new connections to the backup at {} while the \
         kube-apiserver restarts",
        SocketAddr::new(layout.backup, port)
    ));
    out.explanation.push(format!(
        "the kube-apiserver listens on {} and its backup on {}: each answers its own \
         readiness probe and the front's /readyz checks, so a new one counts as serving once \
         Ready (no soak, no identity Lease to wait for), and neither takes the other's \
         connections",
        SocketAddr::new(layout.backend, port),
        SocketAddr::new(layout.backup, port)
    ));
    out.explanation.push(
        "the front passes a new connection only to a kube-apiserver whose /readyz passes: a \
         starting one gets none before it serves, a stopping one none from its first failed \
         check; a connection passed on is never cut"
            .to_string(),
    );
    out.explanation.push(if nodes > 1 {
        format!(
            "the backup runs on each of the {nodes} nodes, which keep their place behind the \
             load balancer: selfhost holds the rollout (update strategy OnDelete while it \
             pivots) and replaces one node's kube-apiserver at a time, each once the new ones \
             so far are Ready"
        )
    } else {
        "selfhost holds the rollout (update strategy OnDelete while it pivots) and deletes the \
         old kube-apiserver once the backup is Ready"
            .to_string()
    });
    if !port_sharing {
        out.explanation.push(
            "no two processes share a socket, so the templates need no \
             --permit-port-sharing=true"
                .to_string(),
        );
    }
}

/// Where a template's kube-apiserver listens (`None`: every address).
fn listens_on(template: &PodTemplateSpec) -> Option<IpAddr> {
    template.spec.as_ref().and_then(bound_address)
}

/// An address as the plan says it.
fn describe(address: Option<IpAddr>) -> String {
    address.map_or_else(
        || "every address (no --bind-address)".to_string(),
        |a| a.to_string(),
    )
}
