//! What a pivot will cost on this cluster, stated before it runs.
//!
//! The cost follows from the cluster's shape alone: whether the kube-apiservers listen behind
//! each node's API front (`front_shape.rs`), how many control-plane nodes serve behind the
//! load balancer, whether the live and the target templates (and so the backup) let two
//! processes share a port, and whether kube-apiservers publish identity Leases. The figures
//! are the measured behaviour of real processes:
//! a starting kube-apiserver takes a share of new connections ~1.7 s before it serves, the
//! kubelet's crash-loop back-off reaches 5 min, a leader Lease lasts 15 s and a standby
//! retries every 2 s (every 500 ms in the templates selfhost writes).

mod front_shape;
#[cfg(test)]
mod front_tests;
#[cfg(test)]
mod tests;

pub use front_shape::FrontShape;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, PodTemplateSpec};
use serde::Serialize;

use crate::command_line;
use crate::component::Component;
use crate::control_plane::{PERMIT_PORT_SHARING, PORT_SHARING_SINCE_MINOR, supports_port_sharing};
use crate::observation::{IdentityPublishing, Observation, identity_publishing};

/// How long a starting kube-apiserver takes new connections before it can serve them
/// (socket at ~0.1–0.3 s, accepting at ~1.7 s after start; measured).
pub const LISTEN_BEFORE_SERVE: Duration = Duration::from_millis(1700);
/// The kubelet's longest crash-loop back-off: how long a process that could not bind may wait
/// before its next try.
pub const MAX_CRASH_LOOP_BACK_OFF: Duration = Duration::from_secs(300);
/// Leader-election Lease duration of kube-controller-manager and kube-scheduler.
pub const LEADER_LEASE_DURATION: Duration = Duration::from_secs(15);
/// Bound of the leaderless gap per leader change with selfhost's hand-over: the kubelet
/// reporting the old process gone and the engine seeing it (about 1–2 s), then a standby's
/// next try — at most 1.1 s with the 500 ms retry period selfhost's templates set
/// ([`crate::daemonset::LEADER_ELECT_RETRY_PERIOD`]; client-go waits up to 2.2 periods).
pub const HANDED_OVER_GAP: Duration = Duration::from_secs(3);

/// Whether kube-apiservers publish identity Leases, as far as the plan can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdentityLeases {
    /// They do.
    Published,
    /// They do not: new kube-apiservers are trusted after Ready plus a soak from their start.
    NotPublished,
    /// Not known yet (the apiservers are too young to tell).
    Unknown,
}

/// The facts of a cluster that decide what a pivot costs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterShape {
    /// Control-plane nodes the component runs on.
    pub nodes: usize,
    /// The live template passes `--permit-port-sharing=true`: the backup can serve next to
    /// the old pod.
    pub live_shares_port: bool,
    /// The backup passes it: the live template does, or selfhost adds it because the live
    /// version knows the flag. Then the new pods can serve next to the backup.
    pub backup_shares_port: bool,
    /// The target template passes it.
    pub target_shares_port: bool,
    /// `maxUnavailable` of the real DaemonSet when a plain number (1 by default).
    pub max_unavailable: Option<i32>,
    /// Identity Leases.
    pub identity_leases: IdentityLeases,
    /// Whether the kube-apiservers listen behind each node's API front.
    pub front: FrontShape,
}

impl ClusterShape {
    /// Reads the shape from an observation of the component and its target template.
    pub fn observe(obs: &Observation, target: &PodTemplateSpec) -> Self {
        let component = obs.component;
        let live = obs.real.as_ref();
        let live_shares_port = live.is_some_and(|ds| permits_port_sharing(&ds.template, component));
        let nodes = live
            .map(|ds| ds.nodes().len())
            .filter(|n| *n > 0)
            .unwrap_or(obs.nodes.len());
        ClusterShape {
            nodes,
            live_shares_port,
            backup_shares_port: live_shares_port
                || live.is_some_and(|ds| knows_port_sharing(&ds.template, component)),
            target_shares_port: permits_port_sharing(target, component),
            max_unavailable: live.and_then(|ds| ds.max_unavailable()),
            identity_leases: match identity_publishing(obs) {
                IdentityPublishing::Published => IdentityLeases::Published,
                IdentityPublishing::NotPublished => IdentityLeases::NotPublished,
                IdentityPublishing::Undetermined { .. } => IdentityLeases::Unknown,
            },
            front: FrontShape::observe(component, live, target),
        }
    }

    /// The front's layout, when the kube-apiserver's pivot runs behind the node's API front
    /// (see [`FrontShape::layout`]).
    pub fn behind_front(&self) -> Option<crate::front::FrontLayout> {
        self.front.layout()
    }

    /// Whether a backup cannot serve before the old pods have stopped: the live template
    /// does not share its port, and no front gives the backup an address of its own.
    pub fn backup_waits_for_the_port(&self) -> bool {
        !self.live_shares_port && self.behind_front().is_none()
    }
}

/// How a component's pivot hands over, in a word for the plan's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HandOver {
    /// Behind each node's API front: the backup listens on an address of its own, and the
    /// front moves new connections to it while the kube-apiserver restarts.
    Front,
    /// Several nodes behind a load balancer: each node leaves it while its kube-apiserver is
    /// replaced, and the others serve.
    Balancer,
    /// One node, port sharing: the backup serves beside the old and the new kube-apiserver on
    /// the shared port.
    SharedPort,
    /// One node without port sharing: the backup takes the port once the old process has
    /// stopped, after an outage.
    Restart,
    /// The controller-manager or scheduler: a standby takes the leader Lease.
    Lease,
    /// None: the pivot is refused on this shape.
    Refused,
}

impl HandOver {
    /// The word the plan's table shows.
    pub fn word(self) -> &'static str {
        match self {
            HandOver::Front => "front",
            HandOver::Balancer => "balancer",
            HandOver::SharedPort => "shared port",
            HandOver::Restart => "restart",
            HandOver::Lease => "lease",
            HandOver::Refused => "refused",
        }
    }
}

/// What the API will see during the hand-over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "impact")]
pub enum ApiImpact {
    /// No failed request expected.
    None,
    /// Short windows in which a share of *new* connections fails.
    ListenBeforeServe {
        /// How many windows.
        windows: u32,
        /// How long each lasts, in milliseconds.
        window_ms: u64,
    },
    /// The API is down for a while.
    Outage {
        /// The longest it may last, in seconds.
        up_to_seconds: u64,
    },
}

/// The expected cost of upgrading one component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExpectedDisruption {
    /// The component.
    pub component: Component,
    /// How the pivot hands over on this shape.
    pub hand_over: HandOver,
    /// What API clients see.
    pub api: ApiImpact,
    /// Bound of each leaderless gap of the controller-manager or scheduler, in seconds.
    pub leaderless_gap_seconds: Option<u64>,
    /// How many leader changes the pivot makes at most.
    pub leader_changes: u32,
    /// `--accept-downtime` is required to proceed.
    pub requires_accept_downtime: bool,
    /// Why the pivot cannot proceed at all on this shape, if it cannot.
    pub blocked: Option<String>,
    /// What the operator can do about a block, or instead of `--accept-downtime`: which
    /// DaemonSet to change and how, or which option to pass.
    pub fix: Option<String>,
    /// One sentence per fact, for the plan.
    pub explanation: Vec<String>,
}

/// The expected cost of upgrading `component` on a cluster of this shape.
pub fn expected_disruption(component: Component, shape: &ClusterShape) -> ExpectedDisruption {
    let mut out = ExpectedDisruption {
        component,
        hand_over: HandOver::Refused,
        api: ApiImpact::None,
        leaderless_gap_seconds: None,
        leader_changes: 0,
        requires_accept_downtime: false,
        blocked: None,
        fix: None,
        explanation: Vec::new(),
    };
    let daemonset = component.daemonset_name();
    if let Some((blocked, fix)) = shape.front.blocked(&daemonset) {
        out.blocked = Some(blocked);
        out.fix = Some(fix);
        return out;
    }
    // Behind a front no two processes share a socket: the port-sharing rules below do not
    // apply.
    if let Some(layout) = shape.behind_front() {
        front_shape::explain(
            &mut out,
            &shape.front,
            layout,
            shape.nodes,
            shape.live_shares_port && shape.target_shares_port,
        );
        return out;
    }
    if !shape.target_shares_port {
        out.blocked = Some(format!(
            "the target template of {component} lacks --{PERMIT_PORT_SHARING}=true, so its \
             pods could never bind their port next to the backup"
        ));
        out.fix = Some(format!(
            "upgrade to Kubernetes 1.{PORT_SHARING_SINCE_MINOR} or later: its {component} \
             knows the flag, and selfhost gives every target template it renders, or takes \
             from the live DaemonSet, --{PERMIT_PORT_SHARING}=true"
        ));
        return out;
    }
    if !shape.backup_shares_port {
        out.blocked = Some(format!(
            "the live template of {component} lacks --{PERMIT_PORT_SHARING}=true and its \
             version is unknown or older than 1.{PORT_SHARING_SINCE_MINOR}, so the backup \
             could not share its port with the new pods"
        ));
        out.fix = Some(format!(
            "if kube-system/{daemonset} runs {component} 1.{PORT_SHARING_SINCE_MINOR} or \
             later, run it from an image tagged with that version (e.g. \
             registry.k8s.io/{component}:v1.{PORT_SHARING_SINCE_MINOR}.0) so that selfhost \
             can tell; otherwise no backup can hand it over: convert the control plane to \
             static pods (`selfhost convert to-static` on each control-plane node), upgrade \
             it there, and convert it back (`selfhost convert to-self-hosted`)"
        ));
        return out;
    }
    let single = shape.nodes <= 1;
    if !shape.live_shares_port && !single && shape.max_unavailable != Some(1) {
        out.blocked = Some(format!(
            "the live template of {component} lacks --{PERMIT_PORT_SHARING}=true, so the \
             backup cannot serve next to the old pods, and the DaemonSet may replace more \
             than one node at a time (maxUnavailable is not 1)"
        ));
        out.fix = Some(format!(
            "set maxUnavailable of DaemonSet kube-system/{daemonset} to 1 (an update \
             strategy change replaces no pod): `kubectl -n kube-system patch daemonset \
             {daemonset} --type merge -p \
             '{{\"spec\":{{\"updateStrategy\":{{\"type\":\"RollingUpdate\",\
             \"rollingUpdate\":{{\"maxUnavailable\":1}}}}}}}}'`, then re-run"
        ));
        return out;
    }
    if !shape.live_shares_port {
        out.explanation.push(format!(
            "the live template of {component} lacks --{PERMIT_PORT_SHARING}=true and the \
             target passes it (selfhost adds it where the live template lacks it): from this \
             upgrade on, a backup {component} shares its port with the real one"
        ));
    }
    match component {
        Component::ApiServer => api_server(&mut out, shape, single),
        Component::ControllerManager | Component::Scheduler => leader(&mut out, shape, single),
    }
    out
}

fn api_server(out: &mut ExpectedDisruption, shape: &ClusterShape, single: bool) {
    match (shape.live_shares_port, single) {
        (true, true) => {
            out.hand_over = HandOver::SharedPort;
            out.api = ApiImpact::ListenBeforeServe {
                windows: 2,
                window_ms: duration_ms(LISTEN_BEFORE_SERVE),
            };
            out.explanation.push(format!(
                "one control-plane node with port sharing: the backup and then the new \
                 kube-apiserver each take a share of new connections about {:.1} s before \
                 they serve, so expect two short windows of failed new connections; nothing \
                 is removed until its replacement serves",
                LISTEN_BEFORE_SERVE.as_secs_f64()
            ));
        }
        (true, false) | (false, false) => {
            out.hand_over = HandOver::Balancer;
            out.explanation.push(format!(
                "{} control-plane nodes behind a health-checked load balancer: while one \
                 node hands over, the others serve; no failed requests expected",
                shape.nodes
            ));
            if shape.live_shares_port {
                out.explanation.push(
                    "selfhost holds the kube-apiserver's rollout to one node at a time \
                     (update strategy OnDelete while it pivots): each new kube-apiserver must \
                     serve by its own identity before the next old pod is replaced, so a target \
                     that never serves stays on one node until the rollback"
                        .to_string(),
                );
                out.explanation.push(
                    "each node leaves the load balancer while its old kube-apiserver is \
                     replaced (the old process fails /readyz from its SIGTERM on, for its \
                     shutdown delay) and joins again once the new one passes /readyz: no \
                     client connection reaches a kube-apiserver that has not finished starting \
                     (this adds one shutdown delay per node)"
                        .to_string(),
                );
                if shape.target_shares_port {
                    out.explanation.push(
                        "the backup DaemonSet is a record only, with no pods (the target, the \
                         original template and the upgrade's progress, for resume and \
                         rollback): on several nodes the other nodes serve while one is \
                         replaced, and a backup process would only join nodes still in the \
                         load balancer's rotation, catching connections before it serves; so \
                         the update follows the backup at once, and the backup is deleted at \
                         once at the end"
                            .to_string(),
                    );
                }
            } else {
                out.explanation.push(
                    "without port sharing on the live template each node is out of service \
                     until its backup wins the port after the old pod stops (a crash-loop \
                     back-off, up to 5 min), one node at a time"
                        .to_string(),
                );
            }
            out.explanation.push(if shape.live_shares_port {
                "a backup with pods (made by an earlier selfhost) leaves each node before its \
                 old kube-apiserver is replaced, and is removed one node at a time, so that \
                 only one node at a time has a stopping backup kube-apiserver failing its \
                 load-balancer health checks"
                    .to_string()
            } else {
                "the backup is removed one node at a time, so that only one node at a time \
                 has a stopping backup kube-apiserver failing its load-balancer health checks \
                 (this adds one shutdown delay per node)"
                    .to_string()
            });
        }
        (false, true) => {
            out.hand_over = HandOver::Restart;
            out.api = ApiImpact::Outage {
                up_to_seconds: MAX_CRASH_LOOP_BACK_OFF.as_secs(),
            };
            out.requires_accept_downtime = true;
            out.fix = Some(accept_downtime_fix(out.component));
            out.explanation.push(format!(
                "one control-plane node without port sharing on the live template: the backup \
                 cannot bind while the old kube-apiserver holds the port, so when the old pod \
                 stops the API is down until the kubelet restarts the backup (its crash-loop \
                 back-off, up to {} s); needs --accept-downtime",
                MAX_CRASH_LOOP_BACK_OFF.as_secs()
            ));
        }
    }
    match shape.identity_leases {
        IdentityLeases::Published => out.explanation.push(
            "kube-apiservers publish identity Leases: a new one counts as serving only once \
             its own Lease appears"
                .to_string(),
        ),
        IdentityLeases::NotPublished => out.explanation.push(
            "this cluster publishes no kube-apiserver identity Leases: a new kube-apiserver \
             counts as serving after Ready plus a soak from its process's start"
                .to_string(),
        ),
        IdentityLeases::Unknown => out.explanation.push(
            "whether kube-apiservers publish identity Leases is not known yet; the engine \
             waits until it is"
                .to_string(),
        ),
    }
}

fn leader(out: &mut ExpectedDisruption, shape: &ClusterShape, single: bool) {
    out.hand_over = HandOver::Lease;
    out.leader_changes = 2;
    if !shape.live_shares_port && single {
        out.leaderless_gap_seconds =
            Some(MAX_CRASH_LOOP_BACK_OFF.as_secs() + LEADER_LEASE_DURATION.as_secs());
        out.requires_accept_downtime = true;
        out.fix = Some(accept_downtime_fix(out.component));
        out.explanation.push(format!(
            "one control-plane node without port sharing on the live template: the backup \
             {c} cannot start while the old one holds the port, so there is no leader from \
             the old pod's exit until the kubelet restarts the backup (up to {} s); needs \
             --accept-downtime",
            MAX_CRASH_LOOP_BACK_OFF.as_secs(),
            c = out.component
        ));
        return;
    }
    out.leaderless_gap_seconds = Some(HANDED_OVER_GAP.as_secs());
    out.explanation.push(format!(
        "the Lease is handed over as soon as its holder's process is confirmed gone, and the \
         standbys (the backup's and the new pods, started with \
         --leader-elect-retry-period={retry}) try again within 2.2 retry periods, so each \
         of at most {} leader changes leaves no leader for at most {} s (a stopped process \
         does not release its Lease: without hand-over a standby waits {} s)",
        out.leader_changes,
        HANDED_OVER_GAP.as_secs(),
        LEADER_LEASE_DURATION.as_secs(),
        retry = crate::daemonset::LEADER_ELECT_RETRY_PERIOD,
    ));
}

/// The way past `--accept-downtime` on one node without port sharing: accept it once, since
/// the target shares the port from then on. Not an edit of the live DaemonSet: rolling out a
/// self-hosted component's template without a backup deletes its only pod, and nothing could
/// recreate it.
fn accept_downtime_fix(component: Component) -> String {
    format!(
        "re-run with --accept-downtime to accept it this once: the target template passes \
         --{PERMIT_PORT_SHARING}=true, so later upgrades of {component} share the port. (Do \
         not add the flag to kube-system/{} by hand: rolling out its template without a backup \
         deletes the only {component} pod, and nothing would recreate it.)",
        component.daemonset_name()
    )
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The component's container in a template: the one named after it, else the first.
fn main_container(template: &PodTemplateSpec, component: Component) -> Option<&Container> {
    command_line::main_container(template.spec.as_ref()?, component.name())
}

/// Whether the template's component runs with `--permit-port-sharing=true` (in its command
/// or its args).
pub fn permits_port_sharing(template: &PodTemplateSpec, component: Component) -> bool {
    command_line::template_flag(template, component.name(), PERMIT_PORT_SHARING).as_deref()
        == Some("true")
}

/// Whether the template's component is a version that knows `--permit-port-sharing`, read
/// from its image tag; `false` when the tag is not a version (a digest, a custom tag).
pub fn knows_port_sharing(template: &PodTemplateSpec, component: Component) -> bool {
    main_container(template, component)
        .and_then(|container| container.image.as_deref())
        .and_then(image_version)
        .is_some_and(|v| supports_port_sharing(&v))
}

pub use crate::version::image_version;
