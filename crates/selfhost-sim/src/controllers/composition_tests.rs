//! The controllers composed the way the wiring drives them, over in-memory objects, with the
//! self-hosting coupling: the API answers only while some kube-apiserver container is Ready,
//! the DaemonSet controller acts only while a kube-controller-manager is Ready, binding happens
//! only while a kube-scheduler is Ready, and kubelets learn about pods only through the API.
//!
//! These are the "the model proves the problem" scenarios at the level of the pure
//! logic: a naive rollout on one node deadlocks, on three nodes it completes without downtime.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{Container, Node, Pod, PodSpec, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::daemonset::{self, Action, DaemonSetView, FailedPodBackoff};
use super::fixtures::{map, t};
use super::kubelet::{Kubelet, KubeletConfig, Registry, Timings};
use super::objects::{self, TEMPLATE_GENERATION_ANNOTATION};
use super::taints::{self, effect, key};
use super::{clock, scheduler};

const COMPONENTS: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

fn control_plane_daemon_set(component: &str) -> DaemonSet {
    let app = format!("self-hosted-{component}");
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(app.clone()),
            namespace: Some("kube-system".into()),
            uid: Some(format!("uid-{app}")),
            generation: Some(1),
            annotations: Some(map(&[(TEMPLATE_GENERATION_ANNOTATION, "1")])),
            ..ObjectMeta::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(map(&[("k8s-app", &app)])),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(map(&[("k8s-app", &app), ("component", component)])),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    host_network: Some(true),
                    node_selector: Some(map(&[("node-role.kubernetes.io/control-plane", "")])),
                    tolerations: Some(vec![taints::exists_toleration(
                        key::CONTROL_PLANE,
                        effect::NO_SCHEDULE,
                    )]),
                    containers: vec![Container {
                        name: component.into(),
                        image: Some(format!("registry.k8s.io/{component}:v1.32.0")),
                        command: Some(vec![component.into()]),
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

struct Cluster {
    now: Timestamp,
    nodes: Vec<Node>,
    kubelets: Vec<Kubelet>,
    told: Vec<BTreeSet<String>>,
    registry: Registry,
    daemon_sets: Vec<DaemonSet>,
    pods: BTreeMap<String, Pod>,
    revisions: Vec<ControllerRevision>,
    backoff: FailedPodBackoff,
    coupled: bool,
    created: u64,
    api_up: Vec<bool>,
}

impl Cluster {
    fn new(control_planes: usize) -> Self {
        let mut nodes = Vec::new();
        let mut kubelets = Vec::new();
        for i in 0..control_planes {
            let name = format!("cp-{}", i + 1);
            let mut config = KubeletConfig::new(
                &name,
                &format!("10.0.0.{}", 11 + i),
                u8::try_from(i).unwrap(),
            );
            config.timings = Timings::realistic();
            let labels = map(&[("node-role.kubernetes.io/control-plane", "")]);
            let mut node = super::kubelet::registration(&config, &labels, t(0));
            node.metadata.uid = Some(format!("uid-{name}"));
            node.spec.get_or_insert_default().taints =
                Some(vec![taints::taint(key::CONTROL_PLANE, effect::NO_SCHEDULE)]);
            let mut kubelet = Kubelet::new(config);
            kubelet.observe_node(&node);
            nodes.push(node);
            kubelets.push(kubelet);
        }
        Cluster {
            now: t(0),
            told: vec![BTreeSet::new(); nodes.len()],
            nodes,
            kubelets,
            registry: Registry::with_control_plane(32..=33, 0),
            daemon_sets: COMPONENTS
                .iter()
                .map(|c| control_plane_daemon_set(c))
                .collect(),
            pods: BTreeMap::new(),
            revisions: Vec::new(),
            backoff: daemonset::failed_pod_backoff(),
            coupled: false,
            created: 0,
            api_up: Vec::new(),
        }
    }

    /// Whether some container running `binary` is Ready on some node (or the coupling is off).
    fn serving(&self, binary: &str) -> bool {
        !self.coupled
            || self
                .kubelets
                .iter()
                .flat_map(Kubelet::containers)
                .any(|c| c.ready && c.binary.as_deref() == Some(binary))
    }

    fn step(&mut self) {
        if self.serving("kube-apiserver") {
            self.kubelets_watch();
            if self.serving("kube-controller-manager") {
                self.run_daemon_set_controller();
            }
            if self.serving("kube-scheduler") {
                self.run_scheduler();
            }
        }
        let reports: Vec<_> = self
            .kubelets
            .iter_mut()
            .map(|k| k.advance(&self.registry, self.now))
            .collect();
        // A report reaches the API only if the API is up after what the kubelets just did.
        let up = self.serving("kube-apiserver");
        self.api_up.push(up);
        if !up {
            return;
        }
        for (kubelet, report) in self.kubelets.iter_mut().zip(reports) {
            for update in report.status_updates {
                if let Some(pod) = self.pods.get_mut(&update.pod.uid) {
                    pod.status = Some(update.status.clone());
                    kubelet.acknowledge_status(&update.pod.uid, &update.status);
                }
            }
            for done in report.finished_deletions {
                self.pods.remove(&done.uid);
            }
        }
    }

    fn kubelets_watch(&mut self) {
        for (i, kubelet) in self.kubelets.iter_mut().enumerate() {
            let node = self.nodes[i].metadata.name.clone();
            let mut current = BTreeSet::new();
            for (uid, pod) in &self.pods {
                if pod.spec.as_ref().and_then(|s| s.node_name.clone()) == node {
                    kubelet.observe_pod(pod, self.now);
                    current.insert(uid.clone());
                }
            }
            for gone in self.told[i].difference(&current) {
                kubelet.pod_removed(gone, self.now);
            }
            self.told[i] = current;
        }
    }

    fn run_daemon_set_controller(&mut self) {
        let pods: Vec<Pod> = self.pods.values().cloned().collect();
        for i in 0..self.daemon_sets.len() {
            let view = DaemonSetView {
                daemon_set: &self.daemon_sets[i],
                nodes: &self.nodes,
                pods: &pods,
                revisions: &self.revisions,
            };
            let decision = daemonset::reconcile(&view, self.now, &mut self.backoff).unwrap();
            for action in decision.actions {
                match action {
                    Action::CreatePod(pod) => {
                        let mut pod = *pod;
                        self.created += 1;
                        let uid = format!("pod-{}", self.created);
                        pod.metadata.name = Some(format!(
                            "{}{}",
                            pod.metadata.generate_name.clone().unwrap(),
                            self.created
                        ));
                        pod.metadata.uid = Some(uid.clone());
                        pod.metadata.creation_timestamp = Some(Time(self.now));
                        pod.status = Some(PodStatus {
                            phase: Some("Pending".into()),
                            ..PodStatus::default()
                        });
                        self.pods.insert(uid, pod);
                    }
                    Action::DeletePod { name, .. } => {
                        let now = self.now;
                        if let Some(pod) = self
                            .pods
                            .values_mut()
                            .find(|p| p.metadata.name.as_deref() == Some(&name))
                        {
                            pod.metadata.deletion_timestamp.get_or_insert(Time(now));
                            pod.metadata.deletion_grace_period_seconds.get_or_insert(30);
                        }
                    }
                    Action::CreateRevision(revision) => self.revisions.push(*revision),
                    Action::UpdateStatus(status) => self.daemon_sets[i].status = Some(*status),
                    other => panic!("unexpected action in this scenario: {other:?}"),
                }
            }
        }
    }

    fn run_scheduler(&mut self) {
        let assigned: Vec<Pod> = self
            .pods
            .values()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some())
            .cloned()
            .collect();
        let now = self.now;
        for pod in self
            .pods
            .values_mut()
            .filter(|p| scheduler::wants_scheduling(p))
        {
            if let Ok(node) = scheduler::schedule(pod, &self.nodes, &assigned) {
                pod.spec.get_or_insert_default().node_name = node.metadata.name.clone();
                let status = pod.status.get_or_insert_default();
                objects::set_condition(
                    status.conditions.get_or_insert_default(),
                    "PodScheduled",
                    true,
                    None,
                    None,
                    now,
                );
            }
        }
    }

    fn run_for(&mut self, seconds: u64) {
        let end = clock::after(self.now, Duration::from_secs(seconds));
        while self.now < end {
            self.step();
            self.now = clock::after(self.now, Duration::from_millis(250));
        }
    }

    fn set_image(&mut self, component: &str, tag: &str) {
        let ds = self
            .daemon_sets
            .iter_mut()
            .find(|d| d.metadata.name.as_deref() == Some(&format!("self-hosted-{component}")))
            .unwrap();
        let spec = ds.spec.as_mut().unwrap().template.spec.as_mut().unwrap();
        spec.containers[0].image = Some(format!("registry.k8s.io/{component}:{tag}"));
        ds.metadata.generation = Some(ds.metadata.generation.unwrap() + 1);
        ds.metadata.annotations = Some(map(&[(
            TEMPLATE_GENERATION_ANNOTATION,
            &ds.metadata.generation.unwrap().to_string(),
        )]));
    }

    /// Brings the control plane up without the coupling (as a bootstrap would), then couples.
    fn bootstrap(&mut self) {
        self.run_for(30);
        for component in COMPONENTS {
            assert_eq!(
                self.live_pods(component).len(),
                self.nodes.len(),
                "{component} on every node"
            );
        }
        assert!(
            self.daemon_sets
                .iter()
                .all(|d| d.status.as_ref().unwrap().number_available
                    == Some(self.nodes.len() as i32))
        );
        self.coupled = true;
        self.api_up.clear();
    }

    fn live_pods(&self, component: &str) -> Vec<&Pod> {
        self.pods
            .values()
            .filter(|p| {
                objects::labels(&p.metadata)
                    .get("component")
                    .map(String::as_str)
                    == Some(component)
            })
            .filter(|p| !objects::is_terminating(&p.metadata))
            .collect()
    }

    fn images(&self, component: &str) -> Vec<String> {
        self.live_pods(component)
            .iter()
            .map(|p| {
                p.spec.as_ref().unwrap().containers[0]
                    .image
                    .clone()
                    .unwrap()
            })
            .collect()
    }
}

#[test]
fn a_naive_apiserver_rollout_on_one_node_takes_the_api_down_for_good() {
    let mut c = Cluster::new(1);
    c.bootstrap();
    c.set_image("kube-apiserver", "v1.33.0");
    c.run_for(600);
    assert!(c.api_up.iter().any(|up| !up), "the API went down");
    assert!(!c.api_up.last().unwrap(), "and never came back");
    assert!(
        c.live_pods("kube-apiserver").is_empty(),
        "no replacement was ever created"
    );
    let terminating = c
        .pods
        .values()
        .filter(|p| objects::is_terminating(&p.metadata))
        .count();
    assert_eq!(
        terminating, 1,
        "the old pod is stuck Terminating: its final delete needed the API"
    );
}

#[test]
fn the_same_rollout_on_three_nodes_completes_with_the_api_up_throughout() {
    let mut c = Cluster::new(3);
    c.bootstrap();
    c.set_image("kube-apiserver", "v1.33.0");
    c.run_for(300);
    assert!(c.api_up.iter().all(|up| *up), "never down");
    assert_eq!(
        c.images("kube-apiserver"),
        vec!["registry.k8s.io/kube-apiserver:v1.33.0"; 3]
    );
    let status = c.daemon_sets[0].status.clone().unwrap();
    assert_eq!(
        (status.updated_number_scheduled, status.number_available),
        (Some(3), Some(3))
    );
    assert_eq!(status.observed_generation, Some(2));
}

#[test]
fn a_naive_controller_manager_rollout_on_one_node_never_creates_the_replacement() {
    let mut c = Cluster::new(1);
    c.bootstrap();
    c.set_image("kube-controller-manager", "v1.33.0");
    c.run_for(300);
    assert!(c.api_up.iter().all(|up| *up), "the API itself stays up");
    assert!(
        c.pods
            .values()
            .all(|p| objects::labels(&p.metadata)["component"] != "kube-controller-manager")
    );
}

#[test]
fn a_naive_scheduler_rollout_on_one_node_leaves_the_replacement_pending() {
    let mut c = Cluster::new(1);
    c.bootstrap();
    c.set_image("kube-scheduler", "v1.33.0");
    c.run_for(300);
    let schedulers = c.live_pods("kube-scheduler");
    assert_eq!(schedulers.len(), 1);
    assert!(
        schedulers[0].spec.as_ref().unwrap().node_name.is_none(),
        "nobody binds it"
    );
    assert_eq!(
        c.images("kube-scheduler"),
        ["registry.k8s.io/kube-scheduler:v1.33.0"]
    );
}
