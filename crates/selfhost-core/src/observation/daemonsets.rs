//! The real and the backup DaemonSet as a decision sees them.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSetUpdateStrategy;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use super::pods::PodObservation;
use crate::backup::{BackupError, BackupOrigin, BackupRecord};

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
    /// inferred: from a pod that carries the current template generation, or, when no pod was
    /// replaced since the restore, from the controller's own count ([`Self::settled_hash`]).
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
            .chain(self.settled_hash())
    }

    /// The one revision hash all its live pods carry, when the controller has observed the
    /// current generation and counts every scheduled pod as updated: by its rule (generation
    /// or hash) those pods then run the current revision, although none carries the current
    /// generation — as after a rollback that comes before any pod was replaced.
    fn settled_hash(&self) -> Option<&str> {
        let status = &self.status;
        let observed = self
            .generation
            .is_some_and(|g| status.observed_generation.is_some_and(|o| o >= g));
        if !observed || status.desired == 0 || status.updated < status.desired {
            return None;
        }
        let mut live = self.pods.iter().filter(|p| !p.is_terminating());
        let hash = live.next()?.revision_hash.as_deref()?;
        live.all(|p| p.revision_hash.as_deref() == Some(hash))
            .then_some(hash)
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
