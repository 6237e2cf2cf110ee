//! Scenario tests of the kubelet with injected time. A small harness plays the API: it feeds
//! pods in, advances the kubelet, writes the statuses it reports back onto its copies, and
//! removes pods whose deletion the kubelet finished.

mod fronts;
mod hostports;
mod images;
mod init_containers;
mod lifecycle;
mod nodes;
mod restarts;
mod sockets;
mod static_pods;
mod termination;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::controllers::backoff::BackoffPolicy;
use crate::controllers::clock;
use crate::controllers::fixtures::t;

pub(super) const APISERVER_V1: &str = "registry.k8s.io/kube-apiserver:v1.32.0";
pub(super) const APISERVER_V2: &str = "registry.k8s.io/kube-apiserver:v1.33.0";

/// Round numbers, so expectations read as seconds.
pub(super) fn timings() -> Timings {
    Timings {
        sandbox: Duration::from_secs(1),
        pull: Duration::from_secs(2),
        start: Duration::from_secs(1),
        ready: Duration::from_secs(3),
        stop: Duration::from_secs(1),
        one_shot: Duration::from_secs(1),
        pull_error_hold: Duration::from_secs(2),
        crash_loop: BackoffPolicy::kubelet_crash_loop(),
        image_pull: BackoffPolicy::kubelet_image_pull(),
        lease_renew_interval: Duration::from_secs(10),
        lease_duration: Duration::from_secs(40),
        node_status_report_interval: Duration::from_secs(300),
        spec_seconds_divisor: 1,
    }
}

pub(super) fn ms(at: Timestamp) -> u64 {
    clock::elapsed(t(0), at).as_millis() as u64
}

pub(super) struct Harness {
    pub kubelet: Kubelet,
    pub registry: Registry,
    pub now: Timestamp,
    pub api: BTreeMap<String, Pod>,
    pub deleted: Vec<String>,
    pub events: Vec<KubeletEvent>,
    pub lease_renewals: Vec<Timestamp>,
    pub last: KubeletReport,
}

impl Harness {
    pub fn new() -> Self {
        let mut config = KubeletConfig::new("cp-1", "10.0.0.11", 1);
        config.timings = timings();
        Harness {
            kubelet: Kubelet::new(config),
            registry: Registry::with_control_plane(32..=33, 0),
            now: t(0),
            api: BTreeMap::new(),
            deleted: Vec::new(),
            events: Vec::new(),
            lease_renewals: Vec::new(),
            last: KubeletReport::default(),
        }
    }

    /// Creates an API pod bound to the node.
    pub fn create(&mut self, pod: Pod) -> String {
        let uid = pod.metadata.uid.clone().unwrap();
        self.kubelet.observe_pod(&pod, self.now);
        self.api.insert(uid.clone(), pod);
        uid
    }

    /// The kubelet lists its pods from the API again, as a starting kubelet does.
    pub fn relist(&mut self) {
        for pod in self.api.values() {
            self.kubelet.observe_pod(pod, self.now);
        }
    }

    /// A graceful delete with the pod's grace period (or `grace` seconds).
    pub fn delete(&mut self, uid: &str, grace: Option<i64>) {
        let now = self.now;
        let pod = self.api.get_mut(uid).unwrap();
        let spec_grace = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30);
        pod.metadata.deletion_timestamp.get_or_insert(Time(now));
        pod.metadata.deletion_grace_period_seconds = Some(grace.unwrap_or(spec_grace));
        let pod = pod.clone();
        self.kubelet.observe_pod(&pod, now);
    }

    /// Advances to `seconds` after the epoch (in small steps, like a real kubelet waking up
    /// on its timers) and applies the reports.
    pub fn run_to(&mut self, seconds: f64) {
        let target = clock::after(t(0), Duration::from_secs_f64(seconds));
        loop {
            let report = self.kubelet.advance(&self.registry, self.now);
            self.apply(report);
            let next = self.last.next_wakeup.filter(|w| *w > self.now);
            match next {
                Some(next) if next <= target => self.now = next,
                _ => break,
            }
        }
        self.now = target;
        let report = self.kubelet.advance(&self.registry, self.now);
        self.apply(report);
    }

    fn apply(&mut self, report: KubeletReport) {
        for update in &report.status_updates {
            if let Some(pod) = self.api.get_mut(&update.pod.uid) {
                pod.status = Some(update.status.clone());
                self.kubelet
                    .acknowledge_status(&update.pod.uid, &update.status);
            }
        }
        for done in &report.finished_deletions {
            self.api.remove(&done.uid);
            self.deleted.push(done.uid.clone());
            self.kubelet.pod_removed(&done.uid, self.now);
        }
        self.events.extend(report.events.iter().cloned());
        self.lease_renewals.extend(report.lease_renewal);
        self.last = report;
    }

    pub fn status(&self, uid: &str) -> PodStatus {
        self.api[uid].status.clone().unwrap_or_default()
    }

    pub fn container(&self, uid: &str) -> ContainerStatus {
        self.status(uid).container_statuses.unwrap()[0].clone()
    }

    pub fn phase(&self, uid: &str) -> String {
        self.status(uid).phase.unwrap_or_default()
    }

    pub fn condition(&self, uid: &str, type_: &str) -> Option<(String, u64)> {
        let status = self.status(uid);
        let c = status.conditions?.into_iter().find(|c| c.type_ == type_)?;
        Some((c.status, ms(c.last_transition_time?.0)))
    }

    /// The waiting reason, `Running`, or `Terminated:<reason>` of the first container.
    pub fn state(&self, uid: &str) -> String {
        let state = self.container(uid).state.unwrap();
        if let Some(w) = state.waiting {
            return w.reason.unwrap_or_default();
        }
        if state.running.is_some() {
            return "Running".into();
        }
        format!(
            "Terminated:{}",
            state.terminated.unwrap().reason.unwrap_or_default()
        )
    }

    pub fn event_reasons(&self, uid: &str) -> Vec<&'static str> {
        self.events
            .iter()
            .filter(|e| e.pod.uid == uid)
            .map(|e| e.reason)
            .collect()
    }
}

pub(super) fn pod(name: &str, image: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("kube-system".into()),
            uid: Some(format!("uid-{name}")),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some("cp-1".into()),
            containers: vec![Container {
                name: "main".into(),
                image: Some(image.into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
        status: None,
    }
}

/// A hostNetwork kube-apiserver pod, optionally permitting port sharing.
pub(super) fn apiserver(name: &str, image: &str, sharing: bool) -> Pod {
    let mut p = pod(name, image);
    let spec = p.spec.as_mut().unwrap();
    spec.host_network = Some(true);
    let mut command = vec![
        "kube-apiserver".to_string(),
        "--secure-port=6443".to_string(),
    ];
    if sharing {
        command.push("--permit-port-sharing=true".into());
    }
    spec.containers[0].name = "kube-apiserver".into();
    spec.containers[0].command = Some(command);
    p
}
