//! A builder of observations, so that each table row is one line of setup. It sits with the
//! observation so that the tests of every module that reads one (pivot, disruption,
//! preflight) share it without importing each other.
//!
//! Times are seconds relative to `t(0)`, the start of the run. A steady cluster's pods
//! started an hour before; the backup is created at `t(1)`; the real DaemonSet is updated at
//! [`UPDATE_AT`].

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSetUpdateStrategy, RollingUpdateDaemonSet};
use k8s_openapi::api::core::v1::{Container, HTTPGetAction, PodSpec, PodTemplateSpec, Probe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use crate::component::Component;
use crate::daemonset::self_hosted_labels;
use crate::front::{FrontLayout, listening_on};
use crate::observation::{
    ApiHealth, BackupObservation, ContainerObservation, ContainerState, DaemonSetCounters,
    DaemonSetObservation, IdentitySighting, LeaderLease, NodeObservation, NodeReadiness,
    Observation, PodObservation,
};
use crate::version::KubeVersion;

/// The version the cluster runs.
pub(crate) const OLD: &str = "v1.32.4";
/// The version the run moves to.
pub(crate) const NEW: &str = "v1.33.1";
/// When the real DaemonSet is updated in scenarios that need it.
pub(crate) const UPDATE_AT: i64 = 30;

/// `t(0)` is the start of the run.
pub(crate) fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_798_761_600 + seconds).expect("in range")
}

pub(crate) fn version(v: &str) -> KubeVersion {
    KubeVersion::parse(v).expect("version")
}

/// A control-plane pod template as the engine renders it.
pub(crate) fn template(component: Component, v: &str, port_sharing: bool) -> PodTemplateSpec {
    let name = component.name();
    let mut command = vec![name.to_string(), "--leader-elect=true".to_string()];
    if port_sharing {
        command.push("--permit-port-sharing=true".to_string());
    }
    command.push(format!("--secure-port={}", component.default_secure_port()));
    if component == Component::ApiServer {
        // As selfhost's conversion writes it.
        command.push("--shutdown-delay-duration=5s".to_string());
    }
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(self_hosted_labels(component)),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: name.to_string(),
                image: Some(format!("registry.k8s.io/{name}:{v}")),
                command: Some(command),
                ..Container::default()
            }],
            host_network: Some(true),
            dns_policy: Some("ClusterFirstWithHostNet".to_string()),
            ..PodSpec::default()
        }),
    }
}

/// `template` as behind the node's API front: its kube-apiserver listens on `address`, where
/// its readiness probe (`GET /readyz`, as kubeadm's) asks.
pub(crate) fn on_front(
    mut template: PodTemplateSpec,
    address: std::net::IpAddr,
) -> PodTemplateSpec {
    let Some(spec) = template.spec.take() else {
        return template;
    };
    let mut spec = spec;
    for container in spec.containers.iter_mut().take(1) {
        container.readiness_probe = Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/readyz".into()),
                port: IntOrString::Int(6443),
                scheme: Some("HTTPS".into()),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        });
    }
    template.spec = Some(listening_on(spec, address));
    template
}

/// What a pod is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pod {
    /// Running and Ready since `started`; for the apiserver its own identity appeared at
    /// `started + 2` and is renewed.
    Serving { started: i64 },
    /// Running and reported Ready since `started`, but no identity of its own (yet).
    ReadyNoIdentity { started: i64 },
    /// Running since `started`, not Ready yet.
    Starting { started: i64 },
    /// Waiting on its image: `ImagePullBackOff`.
    ImagePull,
    /// Crash-looping with this many restarts.
    CrashLoop { restarts: i32 },
    /// Not started yet (`ContainerCreating`).
    Creating,
}

/// A cluster under construction.
#[derive(Debug, Clone)]
pub(crate) struct World {
    pub(crate) obs: Observation,
    /// Whether to give pods marked [`Pod::Serving`] an identity sighting.
    identities: bool,
    /// Whether the DaemonSet controller lags one generation behind the real DaemonSet.
    lagging: bool,
    /// The `controller-revision-hash` new pods get: the real template's revision.
    pub(crate) revision: &'static str,
    /// The pod whose process publishes each identity holder: a process that is gone (pod
    /// removed, or its container not running) publishes nothing, so [`World::build`] drops
    /// its sightings.
    owners: BTreeMap<String, String>,
    /// The hostname every process sees, when it is not its node's name (see
    /// [`World::machine_hostname`]).
    machine_hostname: Option<String>,
    /// The layout of the node's API front the kube-apiservers listen behind (see
    /// [`World::behind_front`]).
    pub(crate) front: Option<FrontLayout>,
}

impl World {
    /// A converged cluster on [`OLD`] with `nodes` control-plane nodes, port sharing on, no
    /// backup, observed at `t(0)`. Old apiservers' identities were already held when the
    /// engine started watching (`holder_since` unknown); the controller-manager or scheduler
    /// on `cp-1` leads since `t(-3000)`.
    pub(crate) fn steady(component: Component, nodes: usize) -> World {
        let node_names: Vec<String> = (1..=nodes).map(|i| format!("cp-{i}")).collect();
        let mut annotations = BTreeMap::new();
        annotations.insert(
            "deprecated.daemonset.template.generation".to_string(),
            "1".to_string(),
        );
        let real = DaemonSetObservation {
            name: component.daemonset_name(),
            uid: Some("uid-real".into()),
            resource_version: Some("100".into()),
            generation: Some(1),
            template_generation: Some(1),
            current_revision_hash: None,
            annotations,
            labels: self_hosted_labels(component),
            selector: self_hosted_labels(component),
            created: Some(t(-7200)),
            deleting_since: None,
            template: template(component, OLD, true),
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString::Int(1)),
                    max_surge: Some(IntOrString::Int(0)),
                }),
            }),
            min_ready_seconds: None,
            revision_history_limit: Some(10),
            status: DaemonSetCounters::default(),
            pods: Vec::new(),
        };
        let mut world = World {
            obs: Observation {
                component,
                now: t(0),
                real: Some(real),
                backup: None,
                nodes: node_names
                    .iter()
                    .map(|name| NodeObservation {
                        name: name.clone(),
                        hostname: Some(name.clone()),
                        ready: NodeReadiness::Ready,
                        ready_since: Some(t(-7200)),
                        unschedulable: false,
                        labels: BTreeMap::new(),
                        taints: Vec::new(),
                    })
                    .collect(),
                api: ApiHealth {
                    readyz_ok: true,
                    readyz_detail: None,
                    git_version: Some(OLD.to_string()),
                    unreachable_until: None,
                },
                identity_leases: Vec::new(),
                leader_lease: None,
                known_starts: Vec::new(),
                stopped: Vec::new(),
                handed_over: Vec::new(),
                availability: Default::default(),
            },
            identities: true,
            lagging: false,
            revision: "rev-1",
            owners: BTreeMap::new(),
            machine_hostname: None,
            front: None,
        };
        for node in &node_names {
            let pod = world.pod(
                &format!("old-{node}"),
                node,
                1,
                Pod::Serving { started: -3600 },
            );
            world.real_mut().pods.push(pod);
            if component == Component::ApiServer {
                world
                    .owners
                    .insert(format!("apiserver-{node}-old_1"), format!("old-{node}"));
                world.obs.identity_leases.push(IdentitySighting {
                    lease: format!("apiserver-{node}-old"),
                    hostname: Some(node.clone()),
                    holder: format!("apiserver-{node}-old_1"),
                    holder_since: None,
                    last_renewed: Some(t(-3)),
                    first_seen: None,
                });
            }
        }
        if let Some(lease) = component.leader_lease_name() {
            world.obs.leader_lease = Some(LeaderLease {
                name: lease.to_string(),
                uid: Some("uid-lease".into()),
                resource_version: Some("500".into()),
                holder: Some("cp-1_old-uuid".into()),
                acquire_time: Some(t(-3000)),
                renew_time: Some(t(-1)),
                lease_duration_seconds: Some(15),
                transitions: Some(3),
            });
        }
        world
    }

    pub(crate) fn nodes(&self) -> Vec<String> {
        self.obs.nodes.iter().map(|n| n.name.clone()).collect()
    }

    pub(crate) fn real_mut(&mut self) -> &mut DaemonSetObservation {
        self.obs.real.as_mut().expect("real DaemonSet")
    }

    pub(crate) fn backup_mut(&mut self) -> &mut BackupObservation {
        self.obs.backup.as_mut().expect("backup DaemonSet")
    }

    /// The engine's probes of the API so far failed `failed_probes` times, the longest
    /// stretch lasting `longest_seconds`.
    pub(crate) fn probes_failed(mut self, failed_probes: u32, longest_seconds: f64) -> Self {
        self.obs.availability = super::AvailabilitySoFar {
            failed_probes,
            longest_unavailable_seconds: longest_seconds,
        };
        self
    }

    /// Observed at `t(seconds)`; fresh identities and the leader stay fresh.
    pub(crate) fn at(mut self, seconds: i64) -> Self {
        let shift = seconds - self.obs.now.as_second() + t(0).as_second();
        self.obs.now = t(seconds);
        for sighting in &mut self.obs.identity_leases {
            if let Some(renewed) = sighting.last_renewed.as_mut() {
                *renewed = Timestamp::from_second(renewed.as_second() + shift).expect("time");
            }
        }
        if let Some(lease) = self.obs.leader_lease.as_mut()
            && let Some(renewed) = lease.renew_time.as_mut()
        {
            *renewed = Timestamp::from_second(renewed.as_second() + shift).expect("time");
        }
        self
    }

    pub(crate) fn pod(
        &mut self,
        name: &str,
        node: &str,
        generation: i64,
        state: Pod,
    ) -> PodObservation {
        let container_name = self.obs.component.name();
        let (ready, container) = match state {
            Pod::Serving { started }
            | Pod::ReadyNoIdentity { started }
            | Pod::Starting { started } => (
                !matches!(state, Pod::Starting { .. }),
                ContainerState::Running {
                    started_at: Some(t(started)),
                },
            ),
            Pod::ImagePull => (false, waiting("ImagePullBackOff")),
            Pod::CrashLoop { .. } => (false, waiting("CrashLoopBackOff")),
            Pod::Creating => (false, waiting("ContainerCreating")),
        };
        let restarts = match state {
            Pod::CrashLoop { restarts } => restarts,
            _ => 0,
        };
        if let Pod::Serving { started } = state
            && self.identities
            && self.obs.component == Component::ApiServer
            && started > -3600
        {
            self.owners
                .insert(format!("apiserver-{name}_uuid"), name.to_string());
            self.obs.identity_leases.push(IdentitySighting {
                lease: format!("apiserver-{name}"),
                hostname: Some(node.to_string()),
                holder: format!("apiserver-{name}_uuid"),
                holder_since: Some(t(started + 2)),
                last_renewed: Some(self.obs.now),
                first_seen: None,
            });
        }
        let started = match state {
            Pod::Serving { started }
            | Pod::ReadyNoIdentity { started }
            | Pod::Starting { started } => Some(t(started)),
            _ => None,
        };
        PodObservation {
            name: name.to_string(),
            uid: Some(format!("uid-{name}")),
            node: Some(node.to_string()),
            template_generation: Some(generation),
            revision_hash: Some(self.revision.to_string()),
            phase: Some(
                if container_is_running(&container) {
                    "Running"
                } else {
                    "Pending"
                }
                .into(),
            ),
            ready,
            ready_since: if ready { started } else { None },
            created: started.or(Some(self.obs.now)),
            start_time: started,
            deleting_since: None,
            deletion_grace_seconds: None,
            termination_grace_seconds: Some(30),
            containers: vec![ContainerObservation {
                name: container_name.to_string(),
                image: String::new(),
                ready,
                restart_count: restarts,
                state: container,
                last_termination: (restarts > 0).then(|| "Error".to_string()),
                last_exit_at: None,
            }],
        }
    }

    /// Every process sees `host` as its hostname, which is no node's name (a test bed whose
    /// machines share one hostname, or nodes named apart from their machines): the leader
    /// Lease's holder and every identity Lease name `host`, not the node.
    pub(crate) fn machine_hostname(mut self, host: &str) -> Self {
        self.machine_hostname = Some(host.to_string());
        self
    }

    /// The cluster publishes no identity Leases at all.
    pub(crate) fn without_identity_leases(mut self) -> Self {
        self.identities = false;
        self.obs.identity_leases.clear();
        self
    }

    /// The old apiservers' identities are attributable: their Leases are named after their
    /// holders, so their creation times are known.
    pub(crate) fn old_identities_known(mut self) -> Self {
        for sighting in &mut self.obs.identity_leases {
            if sighting.holder_since.is_none() {
                sighting.holder_since = Some(t(-3598));
            }
        }
        self
    }

    /// The live template does not permit port sharing.
    pub(crate) fn live_without_port_sharing(mut self) -> Self {
        let component = self.obs.component;
        let live = template(component, OLD, false);
        self.real_mut().template = match self.front {
            Some(layout) => on_front(live, layout.backend),
            None => live,
        };
        self
    }

    /// The kube-apiservers listen behind each node's API front with the default layout: the
    /// real DaemonSet is annotated, and its template (and every one [`World::template_for`]
    /// makes) listens on the layout's address for it.
    pub(crate) fn behind_front(self) -> Self {
        self.behind_front_with(FrontLayout::default())
    }

    /// The real DaemonSet annotated to listen behind each node's API front with the default
    /// layout while its template still listens on every address, as `selfhost front install`
    /// leaves it for the next upgrade to move.
    pub(crate) fn marked_behind_front(mut self) -> Self {
        self.real_mut().annotations.insert(
            crate::front::FRONT_ANNOTATION.into(),
            FrontLayout::default().to_annotation(),
        );
        self
    }

    /// [`World::behind_front`] with `layout`.
    pub(crate) fn behind_front_with(mut self, layout: FrontLayout) -> Self {
        self.front = Some(layout);
        let real = self.real_mut();
        real.annotations.insert(
            crate::front::FRONT_ANNOTATION.into(),
            layout.to_annotation(),
        );
        real.template = on_front(real.template.clone(), layout.backend);
        self
    }

    /// The real DaemonSet's template at `v` with port sharing, behind the front if the world
    /// is.
    pub(crate) fn template_for(&self, v: &str) -> PodTemplateSpec {
        let plain = template(self.obs.component, v, true);
        match self.front {
            Some(layout) => on_front(plain, layout.backend),
            None => plain,
        }
    }

    pub(crate) fn node_not_ready(mut self, node: &str) -> Self {
        for n in self.obs.nodes.iter_mut().filter(|n| n.name == node) {
            n.ready = NodeReadiness::NotReady {
                reason: Some("KubeletNotReady".into()),
            };
        }
        self
    }

    /// The leader Lease is held by a process on `node` acquired at `acquired`.
    pub(crate) fn leader(mut self, node: &str, acquired: i64) -> Self {
        let now = self.obs.now;
        if let Some(lease) = self.obs.leader_lease.as_mut() {
            lease.holder = Some(format!("{node}_uuid-{acquired}"));
            lease.acquire_time = Some(t(acquired));
            lease.renew_time = Some(now);
        }
        self
    }

    /// The leader Lease was last renewed at `renewed` (so it expires 15 s later).
    pub(crate) fn leader_renewed(mut self, renewed: i64) -> Self {
        if let Some(lease) = self.obs.leader_lease.as_mut() {
            lease.renew_time = Some(t(renewed));
        }
        self
    }

    /// The real DaemonSet's update strategy is `OnDelete`.
    pub(crate) fn on_delete(mut self) -> Self {
        self.real_mut().update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            rolling_update: None,
        });
        self
    }

    /// The API server reports `v` and `/readyz` ok (or not).
    pub(crate) fn api(mut self, v: &str, readyz_ok: bool) -> Self {
        self.obs.api = ApiHealth {
            readyz_ok,
            readyz_detail: (!readyz_ok).then(|| "[-]etcd failed".to_string()),
            git_version: Some(v.to_string()),
            unreachable_until: self.obs.api.unreachable_until,
        };
        self
    }

    /// The DaemonSet controller has not observed the real DaemonSet's latest generation.
    pub(crate) fn controller_lagging(mut self) -> Self {
        self.lagging = true;
        self
    }

    /// The observation, with DaemonSet status counters derived from the pods.
    pub(crate) fn build(&self) -> Observation {
        let mut obs = self.obs.clone();
        let nodes = obs.nodes.len();
        for ds in obs
            .real
            .iter_mut()
            .chain(obs.backup.iter_mut().map(|b| &mut b.daemonset))
        {
            ds.status = counters(ds, nodes);
        }
        if self.lagging
            && let Some(real) = obs.real.as_mut()
        {
            real.status.observed_generation = real.generation.map(|g| g - 1);
        }
        let name = obs.component.name();
        let running: Vec<String> = obs
            .all_pods()
            .filter(|p| p.is_running(name))
            .map(|p| p.name.clone())
            .collect();
        obs.identity_leases.retain(|s| {
            self.owners
                .get(&s.holder)
                .is_none_or(|owner| running.contains(owner))
        });
        if let Some(host) = &self.machine_hostname {
            for sighting in &mut obs.identity_leases {
                sighting.hostname = Some(host.clone());
            }
            if let Some(lease) = obs.leader_lease.as_mut()
                && let Some(holder) = lease.holder.as_mut()
                && let Some((_, uuid)) = holder.rsplit_once('_')
            {
                *holder = format!("{host}_{uuid}");
            }
        }
        obs
    }
}

fn counters(ds: &DaemonSetObservation, nodes: usize) -> DaemonSetCounters {
    let live: Vec<&PodObservation> = ds.pods.iter().filter(|p| !p.is_terminating()).collect();
    let count = |f: &dyn Fn(&PodObservation) -> bool| {
        i32::try_from(live.iter().filter(|p| f(p)).count()).expect("small")
    };
    let desired = i32::try_from(nodes).expect("small");
    let ready = count(&|p| p.ready);
    DaemonSetCounters {
        observed_generation: ds.generation,
        desired,
        current: count(&|_| true),
        updated: count(&|p| ds.is_current(p)),
        ready,
        available: ready,
        unavailable: (desired - ready).max(0),
        misscheduled: 0,
    }
}

fn waiting(reason: &str) -> ContainerState {
    ContainerState::Waiting {
        reason: Some(reason.to_string()),
        message: None,
    }
}

fn container_is_running(state: &ContainerState) -> bool {
    matches!(state, ContainerState::Running { .. })
}
