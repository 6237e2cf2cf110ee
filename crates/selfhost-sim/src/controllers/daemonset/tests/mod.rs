//! Table and scenario tests of the DaemonSet controller. A small harness applies each
//! decision to in-memory objects the way the apiserver would, so rollouts can be walked
//! through stage by stage with the time injected.

mod history;
mod placement;
mod rolling;
mod surge;

use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, DaemonSetSpec, DaemonSetStatus, DaemonSetUpdateStrategy,
    RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{
    Container, Node, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, ObjectMeta, OwnerReference, Time,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::controllers::clock;
use crate::controllers::fixtures::{map, t};
use crate::controllers::objects::TEMPLATE_GENERATION_ANNOTATION;

pub(super) fn daemon_set(name: &str) -> DaemonSet {
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("kube-system".into()),
            uid: Some(format!("uid-ds-{name}")),
            generation: Some(1),
            annotations: Some(map(&[(TEMPLATE_GENERATION_ANNOTATION, "1")])),
            ..ObjectMeta::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(map(&[("k8s-app", name)])),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(map(&[("k8s-app", name)])),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "main".into(),
                        image: Some("registry.k8s.io/kube-apiserver:v1.32.0".into()),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString::Int(1)),
                    max_surge: Some(IntOrString::Int(0)),
                }),
            }),
            ..DaemonSetSpec::default()
        }),
        status: None,
    }
}

pub(super) fn with_strategy(
    mut ds: DaemonSet,
    unavailable: IntOrString,
    surge: IntOrString,
) -> DaemonSet {
    let strategy = ds.spec.as_mut().unwrap().update_strategy.as_mut().unwrap();
    strategy.rolling_update = Some(RollingUpdateDaemonSet {
        max_unavailable: Some(unavailable),
        max_surge: Some(surge),
    });
    ds
}

pub(super) fn pct(s: &str) -> IntOrString {
    IntOrString::String(s.into())
}

/// The controller plus an apiserver stand-in over in-memory objects.
pub(super) struct Harness {
    pub ds: DaemonSet,
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub revisions: Vec<ControllerRevision>,
    pub backoff: FailedPodBackoff,
    pub now: Timestamp,
    pub last: Decision,
    created: usize,
}

/// The status counters in one tuple: (desired, current, updated, ready, available,
/// unavailable, misscheduled, observedGeneration).
pub(super) type Counters = (i32, i32, i32, i32, i32, i32, i32, i64);

impl Harness {
    pub fn new(ds: DaemonSet, nodes: Vec<Node>) -> Self {
        Harness {
            ds,
            nodes,
            pods: Vec::new(),
            revisions: Vec::new(),
            backoff: failed_pod_backoff(),
            now: t(0),
            last: Decision::default(),
            created: 0,
        }
    }

    pub fn advance(&mut self, seconds: u64) {
        self.now = clock::after(self.now, Duration::from_secs(seconds));
    }

    /// One sync, applied.
    pub fn sync(&mut self) -> &Decision {
        let view = DaemonSetView {
            daemon_set: &self.ds,
            nodes: &self.nodes,
            pods: &self.pods,
            revisions: &self.revisions,
        };
        let decision = reconcile(&view, self.now, &mut self.backoff).unwrap();
        for action in decision.actions.clone() {
            self.apply(action);
        }
        self.last = decision;
        &self.last
    }

    /// Syncs until the controller has nothing more to do right now.
    pub fn settle(&mut self) {
        for _ in 0..20 {
            self.sync();
            let idle = self
                .last
                .actions
                .iter()
                .all(|a| matches!(a, Action::UpdateStatus(_)));
            if idle {
                return;
            }
        }
        panic!("the controller keeps acting: {:?}", self.last.actions);
    }

    fn pod_mut(&mut self, name: &str) -> &mut Pod {
        self.pods
            .iter_mut()
            .find(|p| p.metadata.name.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no pod {name}"))
    }

    fn apply(&mut self, action: Action) {
        let ds_ref = template::daemon_set_reference(&self.ds);
        match action {
            Action::CreatePod(pod) => {
                let mut pod = *pod;
                self.created += 1;
                let name = format!(
                    "{}{:05}",
                    pod.metadata.generate_name.clone().unwrap(),
                    self.created
                );
                pod.metadata.uid = Some(format!("uid-{name}"));
                pod.metadata.name = Some(name);
                pod.metadata.creation_timestamp = Some(Time(clock::after(
                    self.now,
                    Duration::from_millis(self.created as u64),
                )));
                pod.status = Some(PodStatus {
                    phase: Some("Pending".into()),
                    ..PodStatus::default()
                });
                self.pods.push(pod);
            }
            Action::DeletePod { name, .. } => {
                let now = self.now;
                let pod = self.pod_mut(&name);
                pod.metadata.deletion_timestamp.get_or_insert(Time(now));
            }
            Action::AdoptPod { name } => {
                self.pod_mut(&name).metadata.owner_references = Some(vec![ds_ref]);
            }
            Action::ReleasePod { name } => self.pod_mut(&name).metadata.owner_references = None,
            Action::LabelPod { name, hash } => {
                let pod = self.pod_mut(&name);
                pod.metadata
                    .labels
                    .get_or_insert_default()
                    .insert("controller-revision-hash".into(), hash);
            }
            Action::CreateRevision(revision) => self.revisions.push(*revision),
            Action::SetRevisionNumber { name, revision } => {
                self.revision_mut(&name).revision = revision;
            }
            Action::DeleteRevision { name } => {
                self.revisions
                    .retain(|r| r.metadata.name.as_deref() != Some(&name));
            }
            Action::LabelRevision { name, hash } => {
                let r = self.revision_mut(&name);
                r.metadata
                    .labels
                    .get_or_insert_default()
                    .insert("controller-revision-hash".into(), hash);
            }
            Action::AdoptRevision { name } => {
                self.revision_mut(&name).metadata.owner_references = Some(vec![ds_ref]);
            }
            Action::ReleaseRevision { name } => {
                self.revision_mut(&name).metadata.owner_references = None;
            }
            Action::UpdateStatus(status) => self.ds.status = Some(*status),
        }
    }

    fn revision_mut(&mut self, name: &str) -> &mut ControllerRevision {
        self.revisions
            .iter_mut()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap()
    }

    /// The scheduler binds every pending pod to the node its affinity names.
    pub fn bind_all(&mut self) {
        for pod in &mut self.pods {
            let target = template::target_node(pod).map(str::to_string);
            let spec = pod.spec.as_mut().unwrap();
            if spec.node_name.is_none() {
                spec.node_name = target;
            }
        }
    }

    /// The kubelets report every bound, live pod Running and Ready from now.
    pub fn ready_all(&mut self) {
        let now = self.now;
        for pod in &mut self.pods {
            let bound = pod.spec.as_ref().unwrap().node_name.is_some();
            let ready = crate::controllers::objects::is_pod_ready(pod);
            if bound && !ready && pod.metadata.deletion_timestamp.is_none() {
                set_ready(pod, now);
            }
        }
    }

    /// The kubelets finish every graceful deletion: the pods disappear from the API.
    pub fn finish_terminations(&mut self) {
        self.pods
            .retain(|p| p.metadata.deletion_timestamp.is_none());
    }

    /// `kubectl set image`: a new template, the apiserver bumps the generations.
    pub fn set_image(&mut self, image: &str) {
        let spec = self.ds.spec.as_mut().unwrap();
        spec.template.spec.as_mut().unwrap().containers[0].image = Some(image.into());
        let generation = self.ds.metadata.generation.unwrap() + 1;
        self.ds.metadata.generation = Some(generation);
        let annotations = self.ds.metadata.annotations.get_or_insert_default();
        let template_generation: i64 = annotations[TEMPLATE_GENERATION_ANNOTATION].parse().unwrap();
        annotations.insert(
            TEMPLATE_GENERATION_ANNOTATION.into(),
            (template_generation + 1).to_string(),
        );
    }

    pub fn live_pods(&self) -> Vec<&Pod> {
        self.pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect()
    }

    pub fn pods_on(&self, node: &str) -> Vec<&Pod> {
        self.pods
            .iter()
            .filter(|p| template::target_node(p) == Some(node))
            .collect()
    }

    pub fn image_of(pod: &Pod) -> &str {
        pod.spec.as_ref().unwrap().containers[0]
            .image
            .as_deref()
            .unwrap()
    }

    /// Images of the live pods, per node, sorted by node.
    pub fn images(&self) -> Vec<(String, String)> {
        let mut images: Vec<(String, String)> = self
            .live_pods()
            .iter()
            .map(|p| {
                (
                    template::target_node(p).unwrap().to_string(),
                    Self::image_of(p).to_string(),
                )
            })
            .collect();
        images.sort();
        images
    }

    pub fn counters(&self) -> Counters {
        let s: &DaemonSetStatus = self.ds.status.as_ref().expect("no status yet");
        (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.updated_number_scheduled.unwrap_or(0),
            s.number_ready,
            s.number_available.unwrap_or(0),
            s.number_unavailable.unwrap_or(0),
            s.number_misscheduled,
            s.observed_generation.unwrap_or(0),
        )
    }

    /// Whether `kubectl rollout status` would report the rollout complete.
    pub fn rollout_complete(&self) -> bool {
        let s = self.ds.status.as_ref().unwrap();
        s.observed_generation >= self.ds.metadata.generation
            && s.updated_number_scheduled.unwrap_or(0) >= s.desired_number_scheduled
            && s.number_available.unwrap_or(0) >= s.desired_number_scheduled
    }
}

pub(super) fn set_ready(pod: &mut Pod, since: Timestamp) {
    let status = pod.status.get_or_insert_default();
    status.phase = Some("Running".into());
    status.conditions = Some(vec![PodCondition {
        type_: "Ready".into(),
        status: "True".into(),
        last_transition_time: Some(Time(since)),
        ..PodCondition::default()
    }]);
}

pub(super) fn owner_refs(pod: &Pod) -> &[OwnerReference] {
    pod.metadata.owner_references.as_deref().unwrap_or_default()
}
