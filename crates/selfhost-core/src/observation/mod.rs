//! What the upgrade engine sees of one component, as plain data.
//!
//! The engine reads the cluster once per decision and hands the result to
//! [`crate::pivot::next_step`]; nothing else is remembered between decisions, so every fact a
//! decision needs is a field here — including the current time, which is data like any other
//! so that decisions are reproducible in tests.
//!
//! The constructors in `convert.rs` turn API objects into these structs. They are pure, so the
//! engine's only job is to fetch the objects. Three facts cannot be read from a single snapshot
//! and are documented on their fields: [`IdentitySighting::holder_since`] (when a kube-apiserver
//! process took its identity Lease), [`Observation::stopped`] (processes the engine saw stop)
//! and [`DaemonSetObservation::current_revision_hash`].

mod convert;
mod identity;
mod pods;
#[cfg(test)]
mod tests;
pub(crate) mod time;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSetUpdateStrategy;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::backup::{BackupError, BackupOrigin, BackupRecord};
use crate::component::Component;

pub use convert::{HOSTNAME_LABEL, IDENTITY_LABEL, IDENTITY_LABEL_VALUE};
pub(crate) use identity::sighting_node;
pub use identity::{IdentityPublishing, identity_publishing};
pub use pods::{ContainerObservation, ContainerState, PodObservation};

/// How long after its last renewal an identity Lease still proves that its kube-apiserver
/// process serves. kube-apiserver renews its identity every 10 s; three periods tolerate one
/// slow or lost renewal without treating a live process as gone.
pub const IDENTITY_FRESHNESS: Duration = Duration::from_secs(30);

/// Everything one decision of the pivot needs about one component.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    /// The component observed.
    pub component: Component,
    /// When the observation was made; every age and deadline is measured against it.
    pub now: Timestamp,
    /// The real DaemonSet `self-hosted-<c>`, if it exists.
    pub real: Option<DaemonSetObservation>,
    /// The backup DaemonSet `temp-upgrade-self-hosted-<c>`, if it exists.
    pub backup: Option<BackupObservation>,
    /// The control-plane nodes: the nodes the component's DaemonSets are meant to run on.
    pub nodes: Vec<NodeObservation>,
    /// The API server's health as the engine's probe client saw it.
    pub api: ApiHealth,
    /// kube-apiserver identity Leases (`apiserver.kubernetes.io/identity=kube-apiserver`), one
    /// entry per holder seen. Read for every component; used for the apiserver.
    pub identity_leases: Vec<IdentitySighting>,
    /// The leader-election Lease of the controller-manager or scheduler (`None` for the
    /// apiserver, or when the Lease does not exist).
    pub leader_lease: Option<LeaderLease>,
    /// Pods whose process the engine knows started after an exact moment, because its own
    /// write made them (a static manifest it wrote): finer than the kubelet's whole seconds.
    pub known_starts: Vec<KnownStart>,
    /// Processes of the component's pods the engine saw running earlier in this run and has
    /// since seen stopped, or whose pods have left the API (see [`StoppedProcess`]).
    pub stopped: Vec<StoppedProcess>,
    /// Uids of the component's leader Lease objects the engine deleted in this run to hand
    /// them over. A Lease of that name with another uid was created after such a hand-over,
    /// so it was acquired while the engine watched (see `pivot/leader.rs`).
    pub handed_over: Vec<String>,
}

/// A process of a pod of the real or backup DaemonSet that the engine saw running during the
/// run and then saw stopped: its container no longer running, or its pod removed from the
/// API. A pod deleted gracefully (the DaemonSet controller's, the garbage collector's and the
/// engine's deletes all are) leaves the API only once its kubelet reported its containers
/// stopped. Only the engine can know this: a snapshot no longer shows a removed pod at all,
/// and a stopped container's `finishedAt` has whole-second precision.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoppedProcess {
    /// Its pod's name.
    pub pod: String,
    /// Its pod's uid.
    pub pod_uid: String,
    /// The node it ran on.
    pub node: String,
    /// When it started (the kubelet's `startedAt`, whole seconds).
    pub started_at: Timestamp,
    /// When the engine first saw it stopped or its pod gone (engine clock): it stopped no
    /// later than this.
    pub stopped_by: Timestamp,
}

/// A pod whose process cannot have started before `not_before`: the engine's own write at
/// that moment (its clock) is what made the pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KnownStart {
    /// The pod's uid.
    pub pod_uid: String,
    /// The moment of the write, to the engine's clock's precision.
    pub not_before: Timestamp,
}

impl Observation {
    /// The node named `name`, if it is a control-plane node.
    pub fn node(&self, name: &str) -> Option<&NodeObservation> {
        self.nodes.iter().find(|node| node.name == name)
    }

    /// Where a process that names itself after `host` runs, as far as the control-plane nodes
    /// tell (see [`HostPlacement`]).
    ///
    /// The node whose `kubernetes.io/hostname` label is `host`, else the node named `host`
    /// (compared without case: the kubelet lowercases the hostname it names its node after);
    /// else, on a cluster of one control-plane node, that node, which is where every process
    /// of the control plane runs; else any control-plane node.
    pub fn place_host(&self, host: &str) -> HostPlacement<'_> {
        let by_label: Vec<&NodeObservation> = self
            .nodes
            .iter()
            .filter(|node| {
                node.hostname
                    .as_deref()
                    .is_some_and(|label| label.eq_ignore_ascii_case(host))
            })
            .collect();
        let by_name = || {
            let mut named = self
                .nodes
                .iter()
                .filter(|node| node.name.eq_ignore_ascii_case(host));
            match (named.next(), named.next()) {
                (Some(node), None) => Some(node),
                _ => None,
            }
        };
        match by_label.as_slice() {
            [node] => HostPlacement::Node(node),
            [] => match (by_name(), self.nodes.as_slice()) {
                (Some(node), _) | (None, [node]) => HostPlacement::Node(node),
                (None, _) => HostPlacement::AnyNode,
            },
            _ => HostPlacement::AnyNode,
        }
    }

    /// Whether a process that names itself after `host` may run on `node`: `host` is that
    /// node, or tells no single node ([`Self::place_host`]).
    pub fn host_may_be(&self, host: &str, node: &str) -> bool {
        match self.place_host(host) {
            HostPlacement::Node(placed) => placed.name == node,
            HostPlacement::AnyNode => true,
        }
    }

    /// Whether `node` is a control-plane node that reports Ready.
    pub fn node_is_ready(&self, node: &str) -> bool {
        self.node(node)
            .is_some_and(|n| n.ready == NodeReadiness::Ready)
    }

    /// The pods of the real and the backup DaemonSet.
    pub fn all_pods(&self) -> impl Iterator<Item = &PodObservation> {
        self.real
            .iter()
            .flat_map(|ds| ds.pods.iter())
            .chain(self.backup.iter().flat_map(|b| b.daemonset.pods.iter()))
    }
}

/// One DaemonSet as read from the API, reduced to what decisions use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DaemonSetObservation {
    /// Its name.
    pub name: String,
    /// Its uid (a precondition for deletes).
    pub uid: Option<String>,
    /// Its resourceVersion (the precondition of every update).
    pub resource_version: Option<String>,
    /// `metadata.generation`: bumped by every spec change.
    pub generation: Option<i64>,
    /// The `deprecated.daemonset.template.generation` annotation the API server maintains: the
    /// generation at which the pod template last changed. Pods carry it as their
    /// `pod-template-generation` label.
    pub template_generation: Option<i64>,
    /// The `controller-revision-hash` of the DaemonSet's newest ControllerRevision, if the
    /// engine read the revisions; pods on the current template carry it as a label. Optional:
    /// the template generation alone identifies current pods as upstream does.
    pub current_revision_hash: Option<String>,
    /// Its annotations (ours live under `selfhost.dev/`).
    pub annotations: BTreeMap<String, String>,
    /// Its own labels (another tool that manages it says so there).
    pub labels: BTreeMap<String, String>,
    /// `spec.selector.matchLabels`: how it finds its pods.
    pub selector: BTreeMap<String, String>,
    /// When it was created.
    pub created: Option<Timestamp>,
    /// When its deletion was requested; a DaemonSet deleted in the foreground stays until its
    /// pods are gone.
    pub deleting_since: Option<Timestamp>,
    /// The pod template, as the API server stores it (with defaults filled in).
    pub template: PodTemplateSpec,
    /// `spec.updateStrategy`.
    pub update_strategy: Option<DaemonSetUpdateStrategy>,
    /// `spec.minReadySeconds`.
    pub min_ready_seconds: Option<i32>,
    /// `spec.revisionHistoryLimit`.
    pub revision_history_limit: Option<i32>,
    /// The status counters.
    pub status: DaemonSetCounters,
    /// Its pods (selected by its selector), on any node, in any state.
    pub pods: Vec<PodObservation>,
}

impl DaemonSetObservation {
    /// The pods on `node`.
    pub fn pods_on<'a>(&'a self, node: &'a str) -> impl Iterator<Item = &'a PodObservation> {
        self.pods
            .iter()
            .filter(move |pod| pod.node.as_deref() == Some(node))
    }

    /// The nodes that run one of its pods, sorted and without repeats.
    pub fn nodes(&self) -> Vec<&str> {
        let mut nodes: Vec<&str> = self.pods.iter().filter_map(|p| p.node.as_deref()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }

    /// Whether `pod` runs the current pod template, by the DaemonSet controller's own rule: its
    /// `pod-template-generation` label equals the DaemonSet's template generation, or its
    /// `controller-revision-hash` label is the current revision's.
    ///
    /// The hash matters after a rollback: the restored template is an old revision again, so
    /// the pods that never left it count as current although their generation label is old.
    /// The current hash is [`Self::current_revision_hash`] when the engine read it, otherwise
    /// inferred from a pod that carries the current template generation.
    pub fn is_current(&self, pod: &PodObservation) -> bool {
        let by_generation = self
            .template_generation
            .is_some_and(|g| pod.template_generation == Some(g));
        by_generation
            || pod
                .revision_hash
                .as_deref()
                .is_some_and(|hash| self.current_hashes().any(|current| current == hash))
    }

    /// The revision hashes known to be current: the engine's, and those of pods labelled with
    /// the current template generation.
    fn current_hashes(&self) -> impl Iterator<Item = &str> {
        let inferred = self
            .pods
            .iter()
            .filter(move |p| {
                self.template_generation.is_some()
                    && p.template_generation == self.template_generation
            })
            .filter_map(|p| p.revision_hash.as_deref());
        self.current_revision_hash
            .as_deref()
            .into_iter()
            .chain(inferred)
    }

    /// Whether the update strategy is `OnDelete`: then the DaemonSet controller never replaces
    /// a pod by itself and the engine must delete old pods.
    pub fn is_on_delete(&self) -> bool {
        self.update_strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref())
            == Some("OnDelete")
    }

    /// `maxUnavailable` of a RollingUpdate strategy when it is a plain number (the default 1
    /// when unset); `None` for a percentage or `OnDelete`.
    pub fn max_unavailable(&self) -> Option<i32> {
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        if self.is_on_delete() {
            return None;
        }
        let rolling = self
            .update_strategy
            .as_ref()
            .and_then(|s| s.rolling_update.as_ref());
        match rolling.and_then(|r| r.max_unavailable.as_ref()) {
            None => Some(1),
            Some(IntOrString::Int(n)) => Some(*n),
            Some(IntOrString::String(_)) => None,
        }
    }

    /// The value of one of its annotations.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key).map(String::as_str)
    }
}

/// `status` of a DaemonSet. Missing counters read as zero, as the API server's do.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DaemonSetCounters {
    /// `observedGeneration`: the generation the controller last acted on.
    pub observed_generation: Option<i64>,
    /// `desiredNumberScheduled`.
    pub desired: i32,
    /// `currentNumberScheduled`.
    pub current: i32,
    /// `updatedNumberScheduled`.
    pub updated: i32,
    /// `numberReady`.
    pub ready: i32,
    /// `numberAvailable`.
    pub available: i32,
    /// `numberUnavailable`.
    pub unavailable: i32,
    /// `numberMisscheduled`.
    pub misscheduled: i32,
}

/// The backup DaemonSet and what it says about the upgrade that made it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BackupObservation {
    /// The backup DaemonSet itself.
    pub daemonset: DaemonSetObservation,
    /// What [`crate::backup::read_backup`] made of it.
    #[serde(serialize_with = "serialize_record")]
    pub record: Result<BackupRecord, BackupError>,
}

fn serialize_record<S: serde::Serializer>(
    record: &Result<BackupRecord, BackupError>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(None)?;
    match record {
        Ok(record) => {
            match &record.origin {
                BackupOrigin::Selfhost { target } => {
                    map.serialize_entry("origin", "selfhost")?;
                    map.serialize_entry("target", target)?;
                }
                BackupOrigin::Kubeadm => map.serialize_entry("origin", "kubeadm")?,
            }
            map.serialize_entry("originalTemplate", &record.original_template)?;
        }
        Err(error) => map.serialize_entry("error", &error.to_string())?,
    }
    map.end()
}

/// Whether a node reports Ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "status")]
pub enum NodeReadiness {
    /// The Ready condition is True.
    Ready,
    /// The Ready condition is False.
    NotReady {
        /// The condition's reason, e.g. `KubeletNotReady`.
        reason: Option<String>,
    },
    /// The Ready condition is Unknown or missing: the kubelet stopped reporting.
    Unknown,
}

/// Where a process that names itself after its host runs.
///
/// Lease holder identities (`<host>_<uuid>`) and kube-apiserver identity Leases name the host
/// as the process sees it: `os.Hostname()`, which for a host-network pod is the machine's
/// hostname. A node is named by its kubelet, after `--hostname-override` when given (kubeadm
/// passes its `nodeRegistration.name`; clouds name nodes apart from their machines), so the
/// two need not agree, and machines of a test bed may all share one hostname.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HostPlacement<'a> {
    /// The host is this control-plane node.
    Node(&'a NodeObservation),
    /// The host names no control-plane node, or several: the process may run on any of them.
    AnyNode,
}

/// One control-plane node.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeObservation {
    /// The node's name.
    pub name: String,
    /// Its `kubernetes.io/hostname` label: the name host-network processes know themselves by,
    /// and so the host part of Lease holder identities.
    pub hostname: Option<String>,
    /// Its Ready condition.
    pub ready: NodeReadiness,
    /// When the Ready condition last changed.
    pub ready_since: Option<Timestamp>,
    /// Whether it is cordoned.
    pub unschedulable: bool,
}

/// The API server's health as seen through the engine's probe client (no retries).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ApiHealth {
    /// Whether `/readyz` answered 200.
    pub readyz_ok: bool,
    /// What `/readyz` answered otherwise (status and the failing checks), for messages.
    pub readyz_detail: Option<String>,
    /// `gitVersion` from `/version`, if it answered.
    pub git_version: Option<String>,
    /// Until when the engine last saw the API unreachable (connections refused, cut or timed
    /// out): the moment it answered again after its latest outage, or `now` while one lasts.
    /// `None` when this run saw none. Control-plane processes exit when they cannot reach the
    /// API, so their exits until then say nothing about their image.
    pub unreachable_until: Option<Timestamp>,
}

/// One holder of a kube-apiserver identity Lease.
///
/// kube-apiserver (≥ 1.26, `APIServerIdentity`) publishes a Lease labelled
/// `apiserver.kubernetes.io/identity=kube-apiserver` once it serves, holder identity unique
/// per process, renewed every 10 s. Depending on the version the Lease is named after the
/// process (holder = name) or after a hash of the host name, in which case every process on
/// that host takes the same Lease over with its own holder identity. So one entry here is one
/// (Lease, holder) pair.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IdentitySighting {
    /// The Lease's name.
    pub lease: String,
    /// The Lease's `kubernetes.io/hostname` label: the host the process runs on.
    pub hostname: Option<String>,
    /// The holder identity (one per kube-apiserver process).
    pub holder: String,
    /// When this holder is known to have started holding the Lease: the Lease's creation time
    /// when the Lease is named after its holder (it was created by that process), or the first
    /// renewal the engine saw with this holder after it had seen another holder on the same
    /// Lease. `None` when the holder already held the Lease when the engine started watching:
    /// then nothing proves *which* process it is, and it vouches for no new pod.
    pub holder_since: Option<Timestamp>,
    /// The latest renewal seen with this holder.
    pub last_renewed: Option<Timestamp>,
    /// When the engine first saw this holder, by the engine's own clock (the one
    /// [`Observation::now`] comes from): its process existed then. `None` when unknown (one
    /// Lease read on its own). A holder first seen before selfhost created the backup cannot
    /// be a backup process's.
    pub first_seen: Option<Timestamp>,
}

impl IdentitySighting {
    /// Whether the holder renewed recently enough to be alive (see [`IDENTITY_FRESHNESS`]).
    pub fn is_fresh(&self, now: Timestamp) -> bool {
        self.last_renewed
            .is_some_and(|renewed| time::age(now, renewed) <= IDENTITY_FRESHNESS)
    }
}

/// The leader-election Lease of the controller-manager or the scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaderLease {
    /// The Lease's name (`kube-controller-manager` or `kube-scheduler`).
    pub name: String,
    /// Its uid.
    pub uid: Option<String>,
    /// Its resourceVersion: the precondition of a hand-over.
    pub resource_version: Option<String>,
    /// `holderIdentity`: `<hostname>_<uuid>`, unique per process; empty when released.
    pub holder: Option<String>,
    /// `acquireTime`: when the holder acquired the Lease.
    pub acquire_time: Option<Timestamp>,
    /// `renewTime`: the holder's latest renewal.
    pub renew_time: Option<Timestamp>,
    /// `leaseDurationSeconds`: how long after `renewTime` a standby may take the Lease.
    pub lease_duration_seconds: Option<i32>,
    /// `leaseTransitions`.
    pub transitions: Option<i32>,
}

impl LeaderLease {
    /// The holder identity, if the Lease is held (not empty).
    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }

    /// The host part of the holder identity (`cp-1` in `cp-1_0f6e…`).
    pub fn holder_hostname(&self) -> Option<&str> {
        self.holder()
            .map(|holder| holder.rsplit_once('_').map_or(holder, |(host, _)| host))
    }

    /// When a standby may take the Lease without help: `renewTime + leaseDurationSeconds`.
    pub fn expires_at(&self) -> Option<Timestamp> {
        let renewed = self.renew_time?;
        let seconds = u64::try_from(self.lease_duration_seconds?).ok()?;
        Some(time::after(renewed, Duration::from_secs(seconds)))
    }

    /// Whether the Lease is held and not expired at `now`.
    pub fn is_held_at(&self, now: Timestamp) -> bool {
        self.holder().is_some() && self.expires_at().is_some_and(|expiry| now < expiry)
    }
}
