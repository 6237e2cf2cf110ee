//! Bringing a simulated cluster up: the API server, the Node objects, the control plane as
//! static pod manifests on disk or as DaemonSets, the kubelets and controllers as tasks.
//!
//! Self-hosted mode bootstraps like bootkube: the model starts switched off, so the
//! controllers act and the API serves while the control-plane DaemonSets are rolled out by
//! the very controllers they run; once every control-plane pod is Ready on every
//! control-plane node, the model is switched on. Static mode starts the same way, waiting for
//! the static pods and their mirror pods.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::api::{ClusterApi, typed};
use super::availability_recorder::AvailabilityRecorder;
use super::builder::SimClusterBuilder;
use super::controller_manager::ControllerManager;
use super::coupling::Coupling;
use super::handover::ApiFrontEnd;
use super::identity::IdentityLeases;
use super::kubelet_pod_watch;
use super::leader_election_task::{Holders, LeaderElection, LeaseHolder};
use super::model::{LeaderPolicy, Leadership, ServingPolicy};
use super::node_agent::NodeAgent;
use super::process_table::ProcessTable;
use super::program_runner::ProgramRunner;
use super::registry::RegistryHandle;
use super::scheduler::Scheduler;
use super::{ClusterError, SimCluster};
use crate::bootstrap::{
    self, BootstrapMode, COMPONENTS, NodeRole, NodeSpec, kubeadm_config_map, mirror_name,
};
use crate::controllers::kubelet::{
    DEFAULT_REPOSITORY, Kubelet, KubeletConfig, Registry, parse_manifest,
};
use crate::controllers::objects;
use crate::resources::{CONFIGMAPS, DAEMONSETS, NODES, PODS};
use crate::server::{SimServer, SimServerOptions};
use crate::store::{Store, StoreOptions, WriteOptions, meta};

/// Pod addresses are `10.<244+i/256>.<i%256>.x`: room for this many nodes.
const MAX_NODES: usize = 12 * 256;

fn check(b: &SimClusterBuilder) -> Result<(), ClusterError> {
    let nodes = b.control_plane_nodes + b.workers;
    if nodes == 0 {
        return Err(ClusterError::Invalid(
            "a cluster needs at least one node".into(),
        ));
    }
    if nodes > MAX_NODES {
        return Err(ClusterError::Invalid(format!(
            "{nodes} nodes: at most {MAX_NODES} are supported"
        )));
    }
    if b.control_plane_nodes == 0 && b.self_hosting_model {
        return Err(ClusterError::Invalid(
            "without a control-plane node nothing could serve the API: switch the self-hosting model off".into(),
        ));
    }
    if b.api_front.is_some() && b.mode != BootstrapMode::SelfHosted {
        return Err(ClusterError::Invalid(
            "an API front stands before a self-hosted control plane: use the self-hosted mode"
                .into(),
        ));
    }
    if b.process_hostname.as_deref().is_some_and(str::is_empty) {
        return Err(ClusterError::Invalid(
            "a machine's hostname cannot be empty".into(),
        ));
    }
    if super::model::parse_version(&b.version).is_none() {
        return Err(ClusterError::Invalid(format!(
            "version {:?} is not of the form v1.33.2",
            b.version
        )));
    }
    Ok(())
}

fn pod_subnet(index: usize) -> [u8; 3] {
    let second = u8::try_from(244 + index / 256).unwrap_or(u8::MAX);
    let third = u8::try_from(index % 256).unwrap_or(0);
    [10, second, third]
}

/// A node's kubelet manifests directory, under its directory.
const MANIFESTS_DIR: &str = "etc/kubernetes/manifests";
/// The kubelet's kubeconfig, under a node's directory.
const KUBELET_CONF: &str = "etc/kubernetes/kubelet.conf";

fn write_manifests(dir: &Path, spec: &NodeSpec, b: &SimClusterBuilder) -> Result<(), ClusterError> {
    for component in COMPONENTS {
        let pod = bootstrap::static_pod(component, &b.version, &spec.ip, b.port_sharing);
        let yaml = serde_saphyr::to_string(&pod)
            .map_err(|e| ClusterError::Invalid(format!("cannot render a manifest: {e}")))?;
        let path = dir.join(format!("{component}.yaml"));
        std::fs::write(&path, yaml).map_err(|source| ClusterError::Files { path, source })?;
    }
    Ok(())
}

fn create(
    store: &Store,
    rt: &crate::ResourceType,
    ns: &str,
    obj: Value,
    manager: &str,
) -> Result<Arc<Value>, ClusterError> {
    store
        .create(rt, ns, obj, &WriteOptions::manager(manager))
        .map_err(|e| ClusterError::Invalid(format!("cannot create the initial objects: {e}")))
}

/// Starts everything and waits for the control plane.
pub(super) async fn start(b: SimClusterBuilder) -> Result<SimCluster, ClusterError> {
    check(&b)?;
    let server = SimServer::start(SimServerOptions {
        port: b.port,
        tls: b.tls,
        rbac: b.rbac,
        git_version: b.version.clone(),
        store: StoreOptions {
            history_limit: b.history_limit,
        },
        garbage_collector: false,
        kubeconfig_path: b.kubeconfig_path.clone(),
        ..SimServerOptions::default()
    })
    .await?;
    let server = Arc::new(server);
    let store = server.store().clone();
    let specs = bootstrap::node_specs(b.control_plane_nodes, b.workers);
    let root = tempfile::Builder::new()
        .prefix("selfhost-sim-nodes-")
        .tempdir()
        .map_err(|source| ClusterError::Files {
            path: std::env::temp_dir(),
            source,
        })?;
    let now = meta::now();
    let mut manifests = BTreeMap::new();
    let mut nodes = Vec::new();
    for spec in &specs {
        let dir = root.path().join(&spec.name).join(MANIFESTS_DIR);
        std::fs::create_dir_all(&dir).map_err(|source| ClusterError::Files {
            path: dir.clone(),
            source,
        })?;
        if spec.role == NodeRole::ControlPlane && b.mode == BootstrapMode::Static {
            write_manifests(&dir, spec, &b)?;
        }
        if spec.role == NodeRole::ControlPlane {
            for (file, render) in &b.control_plane_static_pods {
                let path = dir.join(file);
                std::fs::write(&path, render.render(spec))
                    .map_err(|source| ClusterError::Files { path, source })?;
            }
        }
        // The kubelet's own kubeconfig, which node agents read: the cluster's credentials.
        let kubelet_conf = root.path().join(&spec.name).join(KUBELET_CONF);
        std::fs::write(&kubelet_conf, server.kubeconfig_yaml()).map_err(|source| {
            ClusterError::Files {
                path: kubelet_conf.clone(),
                source,
            }
        })?;
        manifests.insert(spec.name.clone(), dir);
        let node = create(
            &store,
            &NODES,
            "",
            bootstrap::node_object(spec, &b.version, &now),
            "kubelet",
        )?;
        nodes.push(typed::<Node>(&node).unwrap_or_default());
    }
    create(
        &store,
        &CONFIGMAPS,
        "kube-system",
        kubeadm_config_map(&b.version),
        "kubeadm",
    )?;
    if b.mode == BootstrapMode::SelfHosted {
        for component in COMPONENTS {
            let mut ds = bootstrap::daemonset(component, &b.version, b.port_sharing);
            if let (Some(layout), "kube-apiserver") = (&b.api_front, component) {
                layout.apply(&mut ds);
            }
            create(&store, &DAEMONSETS, "kube-system", ds, "selfhost")?;
        }
    }

    let mut registry =
        Registry::with_control_plane(b.registry_minors.clone(), b.registry_max_patch);
    let invalid =
        |e: crate::controllers::kubelet::InvalidImageName| ClusterError::Invalid(e.to_string());
    registry
        .add_control_plane_release(DEFAULT_REPOSITORY, &b.version)
        .map_err(invalid)?;
    if let Some(model) = &b.handovers {
        // Every kube-apiserver image joins and leaves a port as the model says; images the
        // builder names below replace it.
        let behaviour = model.apiserver_behaviour(&b.timings.handover);
        let tags = b
            .registry_minors
            .clone()
            .flat_map(|minor| (0..=b.registry_max_patch).map(move |p| format!("v1.{minor}.{p}")))
            .chain([b.version.clone()]);
        for tag in tags {
            let image = format!("{DEFAULT_REPOSITORY}/kube-apiserver:{tag}");
            registry
                .set_behaviour(&image, behaviour.clone())
                .map_err(invalid)?;
        }
    }
    if b.pause_images {
        registry.add_pause_images();
    }
    for (image, behaviour) in &b.images {
        registry
            .set_behaviour(image, behaviour.clone())
            .map_err(invalid)?;
    }
    let registry = RegistryHandle::new(registry);

    let front_end = b.handovers.map(|model| {
        let control_planes = specs
            .iter()
            .filter(|s| s.role == NodeRole::ControlPlane)
            .map(|s| {
                // Node addresses are rendered by `node_specs`, always literal.
                let ip =
                    s.ip.parse()
                        .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
                (s.name.clone(), ip)
            })
            .collect();
        ApiFrontEnd::new(model, b.timings.handover, control_planes)
    });
    let serving_policy: Arc<dyn ServingPolicy> = match &front_end {
        Some(f) => {
            server.set_router(Some(f.clone()));
            f.clone()
        }
        None => b.serving_policy.clone(),
    };
    let recorder = AvailabilityRecorder::default();
    let holders = Arc::new(Holders::default());
    let leader_policy: Arc<dyn LeaderPolicy> = if b.leader_election {
        Arc::new(LeaseHolder::new(holders.clone()))
    } else {
        b.leader_policy.clone()
    };
    let (process_table, decisions) =
        ProcessTable::new(serving_policy, leader_policy, recorder.clone(), &b.version);
    if let Some(f) = &front_end {
        let weak = Arc::downgrade(&process_table);
        f.attach(
            move || {
                if let Some(process_table) = weak.upgrade() {
                    process_table.redecide();
                }
            },
            decisions.api.clone(),
        );
    }
    let api = ClusterApi::new(server.clone(), process_table.clone());
    let shutdown = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let mut inputs = HashMap::new();
    for (index, (spec, node)) in specs.iter().zip(nodes).enumerate() {
        let mut config = KubeletConfig::new(&spec.name, &spec.ip, 0);
        config.pod_subnet = pod_subnet(index);
        config.kubelet_version.clone_from(&b.version);
        config.hostname.clone_from(&b.process_hostname);
        config.timings = b.timings.kubelet;
        let readiness = front_end.as_ref().and_then(|f| f.readiness(&spec.name));
        if front_end.is_some() {
            config.timings.spec_seconds_divisor = b.timings.handover.spec_seconds_divisor;
        }
        let mut kubelet = match readiness {
            Some(model) => Kubelet::with_readiness(config, model),
            None => Kubelet::new(config),
        };
        if spec.role == NodeRole::ControlPlane {
            // kubeadm pulls the control-plane images before it writes the manifests.
            for component in COMPONENTS {
                let image = format!("{DEFAULT_REPOSITORY}/{component}:{}", b.version);
                kubelet.preload_image(&image).map_err(invalid)?;
            }
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let programs = ProgramRunner::new(root.path().join(&spec.name), tx.clone());
        inputs.insert(spec.name.clone(), tx);
        let agent = NodeAgent {
            kubelet,
            node,
            api: api.clone(),
            registry: registry.clone(),
            process_table: process_table.clone(),
            recorder: recorder.clone(),
            manifests_dir: manifests[&spec.name].clone(),
            scan_interval: b.timings.manifest_scan_interval,
            told: Default::default(),
            pending_deletions: BTreeMap::new(),
            manifests: BTreeMap::new(),
            needs_relist: false,
            retry: false,
            front_end: front_end.clone(),
            programs,
        };
        tasks.spawn(agent.run(rx, decisions.api_up.clone(), shutdown.clone()));
    }
    if let Some(f) = &front_end {
        f.attach_kubelets(inputs.clone());
    }
    tasks.spawn(kubelet_pod_watch::run(
        api.clone(),
        inputs.clone(),
        decisions.api_up.clone(),
        shutdown.clone(),
    ));
    let model = Coupling {
        server: server.clone(),
        decisions: decisions.clone(),
        garbage_collector: b.garbage_collector,
        configured_version: b.version.clone(),
        holds_server_down: front_end.is_none(),
    };
    tasks.spawn(model.run(shutdown.clone()));
    if let Some(f) = &front_end {
        tasks.spawn(f.clone().run(shutdown.clone()));
    }
    let cm = ControllerManager {
        api: api.clone(),
        decisions: decisions.clone(),
        timings: b.timings,
    };
    tasks.spawn(cm.run(shutdown.clone()));
    let scheduler = Scheduler {
        api: api.clone(),
        decisions: decisions.clone(),
    };
    tasks.spawn(scheduler.run(shutdown.clone()));
    if b.leader_election {
        let election = LeaderElection {
            api: api.clone(),
            process_table: process_table.clone(),
            holders,
            inputs: inputs.clone(),
            timings: b.timings.leader_election,
            release: b.lease_release,
            start_needs_api: b.start_needs_api,
        };
        tasks.spawn(election.run(shutdown.clone()));
    }
    let identity = IdentityLeases {
        api,
        process_table: process_table.clone(),
        decisions: decisions.clone(),
        timings: b.timings.apiserver_identity,
        policy: b.apiserver_identity,
    };
    tasks.spawn(identity.run(shutdown.clone()));

    let etcd = crate::etcd::SimEtcd::start(server.store().clone()).await?;
    let cluster = SimCluster {
        etcd,
        server,
        nodes: specs,
        manifests,
        nodes_root: root,
        registry,
        recorder,
        process_table,
        decisions,
        inputs,
        mode: b.mode,
        configured_version: b.version.clone(),
        shutdown,
        tasks,
        front_end,
    };
    let fronts = b.api_front.is_some();
    // The node agents' static pods (a checkpointer, an API front): their mirror pods are
    // Ready before the cluster counts as up, as a converted node's are before `convert` ends.
    let agents: Vec<String> = cluster
        .nodes
        .iter()
        .filter(|spec| spec.role == NodeRole::ControlPlane)
        .flat_map(|spec| {
            b.control_plane_static_pods
                .iter()
                .filter_map(move |(file, render)| {
                    let pod = parse_manifest(render.render(spec).as_bytes(), file).ok()?;
                    Some(mirror_name(pod.metadata.name.as_deref()?, &spec.name))
                })
        })
        .collect();
    if let Err(e) = control_plane_ready(&cluster, fronts, &agents, b.bootstrap_timeout).await {
        cluster.shutdown().await;
        return Err(e);
    }
    if b.self_hosting_model {
        cluster.set_self_hosting_model(true);
        let mut cm = cluster.decisions.controller_manager.clone();
        let mut scheduler = cluster.decisions.scheduler.clone();
        let coupled = |l: &Leadership| *l != Leadership::Ungated;
        let applied = async {
            cm.wait_for(coupled).await.is_ok() && scheduler.wait_for(coupled).await.is_ok()
        };
        if !tokio::time::timeout(b.bootstrap_timeout, applied)
            .await
            .unwrap_or(false)
        {
            cluster.shutdown().await;
            return Err(ClusterError::Bootstrap {
                waited: b.bootstrap_timeout,
                missing: "the self-hosting model never took over".into(),
            });
        }
    }
    Ok(cluster)
}

/// What is still missing before the control plane counts as up (`None`: nothing); `fronts`:
/// each control-plane node's API front must pass connections on (when the hand-over model,
/// which routes through them, is on).
fn missing(cluster: &SimCluster, fronts: bool) -> Option<String> {
    let snapshot = cluster.process_table.snapshot();
    for spec in &cluster.nodes {
        let Some(node) = snapshot.nodes.get(&spec.name) else {
            return Some(format!("the kubelet of {} has not reported", spec.name));
        };
        if spec.role != NodeRole::ControlPlane {
            continue;
        }
        for component in COMPONENTS {
            let ready = node
                .containers
                .iter()
                .any(|c| c.ready && c.binary.as_deref() == Some(component));
            if !ready {
                return Some(format!("{component} is not Ready on {}", spec.name));
            }
        }
    }
    let control_planes = cluster
        .nodes
        .iter()
        .filter(|n| n.role == NodeRole::ControlPlane);
    if let Some(front_end) = cluster.front_end.as_ref().filter(|_| fronts) {
        for spec in control_planes.clone() {
            if !front_end.front_serves(&spec.name) {
                return Some(format!(
                    "no API front on {} passes connections to a ready kube-apiserver",
                    spec.name
                ));
            }
        }
    }
    let store = cluster.store();
    match cluster.mode {
        BootstrapMode::Static => {
            for spec in control_planes {
                for component in COMPONENTS {
                    let name = mirror_name(component, &spec.name);
                    let mirror = store.get_opt(&PODS, "kube-system", &name);
                    let ready = mirror
                        .as_deref()
                        .and_then(typed::<Pod>)
                        .is_some_and(|p| objects::is_pod_ready(&p));
                    if !ready {
                        return Some(format!("the mirror pod {name} is not Ready"));
                    }
                }
            }
        }
        BootstrapMode::SelfHosted => {
            let want = i32::try_from(control_planes.count()).unwrap_or(i32::MAX);
            for component in COMPONENTS {
                let name = format!("self-hosted-{component}");
                let ds = store
                    .get_opt(&DAEMONSETS, "kube-system", &name)
                    .as_deref()
                    .and_then(typed::<DaemonSet>);
                let status = ds
                    .as_ref()
                    .and_then(|d| d.status.clone())
                    .unwrap_or_default();
                let generation = ds.and_then(|d| d.metadata.generation);
                let done = status.desired_number_scheduled == want
                    && status.number_ready == want
                    && status.updated_number_scheduled == Some(want)
                    && status.observed_generation == generation;
                if !done {
                    return Some(format!("the DaemonSet {name} is not rolled out"));
                }
            }
        }
    }
    None
}

/// The first of the node agents' mirror pods `agents` that is not Ready, if any.
fn agent_missing(cluster: &SimCluster, agents: &[String]) -> Option<String> {
    let store = cluster.store();
    agents
        .iter()
        .find(|name| {
            !store
                .get_opt(&PODS, "kube-system", name)
                .as_deref()
                .and_then(typed::<Pod>)
                .is_some_and(|p| objects::is_pod_ready(&p))
        })
        .map(|name| format!("the mirror pod {name} is not Ready"))
}

async fn control_plane_ready(
    cluster: &SimCluster,
    fronts: bool,
    agents: &[String],
    timeout: Duration,
) -> Result<(), ClusterError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut published = cluster.process_table.subscribe();
    let mut revisions = cluster.store().subscribe_revisions();
    // A front's checks change nothing the loop waits on: look again every few milliseconds.
    let mut recheck = tokio::time::interval(Duration::from_millis(5));
    loop {
        let Some(what) = missing(cluster, fronts).or_else(|| agent_missing(cluster, agents)) else {
            return Ok(());
        };
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {
                return Err(ClusterError::Bootstrap { waited: timeout, missing: what });
            }
            _ = published.changed() => {}
            _ = revisions.changed() => {}
            _ = recheck.tick(), if fronts => {}
        }
    }
}
