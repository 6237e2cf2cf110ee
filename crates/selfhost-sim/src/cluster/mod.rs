//! The simulated cluster as a whole: the API server, one kubelet per node, the
//! controller-manager and the scheduler running as tasks over the same store the HTTP API
//! serves, coupled to the control-plane pods by the self-hosting model.
//!
//! ```no_run
//! # async fn demo() -> Result<(), selfhost_sim::cluster::ClusterError> {
//! use selfhost_sim::bootstrap::BootstrapMode;
//! use selfhost_sim::cluster::SimCluster;
//!
//! let cluster = SimCluster::builder()
//!     .control_plane_nodes(3)
//!     .mode(BootstrapMode::SelfHosted)
//!     .start()
//!     .await?;
//! let client = cluster.client(); // kube-rs, over real HTTP
//! let since = tokio::time::Instant::now();
//! // ... roll something out ...
//! assert!(!cluster.recorder().was_down(since, tokio::time::Instant::now()));
//! cluster.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! The model (on by default): the API answers only while some kube-apiserver container is
//! Ready on some node (otherwise the server stops listening: connections are refused, the
//! store survives like etcd); the DaemonSet controller, garbage collector, node lifecycle and
//! pod garbage collector act only while a kube-controller-manager process holds the leader
//! Lease `kube-system/kube-controller-manager`; binding happens only while a kube-scheduler
//! process holds `kube-system/kube-scheduler` (leader election as client-go performs it: a
//! stopped leader's Lease must expire, a leader that cannot renew exits); every kube-apiserver
//! of v1.26 or later publishes its identity Lease once it serves; kubelets keep running what
//! they run, and learn about new pods only through the API. See [`model`] for the seams.

mod api;
mod availability_recorder;
mod builder;
mod controller_manager;
mod coupling;
mod daemonset_sync;
mod events;
pub mod handover;
mod identity;
mod informer;
mod kubelet_pod_watch;
mod leader_election;
mod leader_election_task;
mod leader_gated_loop;
mod leader_timeline;
pub mod model;
mod node_agent;
mod node_input;
mod prober;
mod process_table;
mod program_runner;
mod registry;
mod scheduler;
mod start;
mod timings;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use availability_recorder::{ApiSample, AvailabilityRecorder, PodSample};
pub use builder::{NodeManifest, SimClusterBuilder};
pub use handover::{ApiFrontEnd, HandoverTimings, Handovers};
pub use identity::{
    ApiserverIdentity, HOSTNAME_LABEL, IDENTITY_LABEL, IDENTITY_LABEL_VALUE,
    IDENTITY_LEASE_NAMESPACE, IdentityLeaseTimings, identity_lease_name,
};
pub use leader_election::{
    LEADER_LEASE_NAMESPACE, LeaderElectionTimings, LeaseRelease, leader_lease_name,
};
pub use leader_timeline::LeaderSample;
pub use model::{
    AnyReadyApiserver, ApiBackend, ApiServing, ControlPlaneSnapshot, FirstReadyProcess,
    LeaderPolicy, Leadership, NodeContainers, ProcessRef, Role, ServingPolicy,
};
pub use prober::{
    CaughtBy, Connections, PROBE_HEADER, PROBER_USER_AGENT, ProbeReport, ProbeSample, ProbeSeries,
    Prober, ProberOptions,
};
pub use registry::RegistryHandle;
pub use timings::SimTimings;

use crate::bootstrap::{BootstrapMode, NodeSpec};
use crate::controllers::kubelet::NodeState;
use crate::faults::Faults;
use crate::metrics::Metrics;
use crate::server::{SimError, SimServer};
use crate::store::Store;
use node_agent::NodeInput;
use process_table::{ModelDecisions, ProcessTable};

/// Why a cluster could not start, or a control could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The API server could not start.
    #[error(transparent)]
    Server(#[from] SimError),
    /// The options contradict each other or name something impossible.
    #[error("invalid cluster: {0}")]
    Invalid(String),
    /// A node's directory or manifest could not be written.
    #[error("cannot write {path}: {source}")]
    Files {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The control plane did not come up in time.
    #[error("the control plane did not come up within {waited:?}: {missing}")]
    Bootstrap {
        /// How long it waited.
        waited: Duration,
        /// What was still missing.
        missing: String,
    },
    /// No node has that name.
    #[error("no node named {0:?}")]
    UnknownNode(String),
    /// The simulated etcd could not start.
    #[error(transparent)]
    Etcd(#[from] crate::etcd::EtcdError),
}

/// A running simulated cluster. Dropping it stops everything; [`SimCluster::shutdown`]
/// stops it and waits until every task has ended.
pub struct SimCluster {
    server: Arc<SimServer>,
    nodes: Vec<NodeSpec>,
    manifests: BTreeMap<String, PathBuf>,
    nodes_root: tempfile::TempDir,
    registry: RegistryHandle,
    recorder: AvailabilityRecorder,
    process_table: Arc<ProcessTable>,
    decisions: ModelDecisions,
    inputs: HashMap<String, mpsc::UnboundedSender<NodeInput>>,
    mode: BootstrapMode,
    configured_version: String,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
    front_end: Option<Arc<ApiFrontEnd>>,
    etcd: crate::etcd::SimEtcd,
}

impl std::fmt::Debug for SimCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimCluster")
            .field("endpoint", &self.endpoint())
            .field("nodes", &self.nodes.len())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl SimCluster {
    /// A builder with the defaults (see [`SimClusterBuilder`]).
    pub fn builder() -> SimClusterBuilder {
        SimClusterBuilder::default()
    }

    async fn start(builder: SimClusterBuilder) -> Result<SimCluster, ClusterError> {
        start::start(builder).await
    }

    /// A kube client from the kubeconfig (kube-rs defaults, retries included).
    pub fn client(&self) -> kube::Client {
        self.server.client()
    }

    /// A new client with `configure` applied (e.g. no retries, short timeouts).
    ///
    /// # Errors
    /// The kubeconfig cannot be turned into a client.
    pub async fn client_with(
        &self,
        configure: impl FnOnce(&mut kube::Config),
    ) -> Result<kube::Client, ClusterError> {
        Ok(self.server.client_with(configure).await?)
    }

    /// A kubeconfig that authenticates as `user` (e.g.
    /// [`UserInfo::service_account`](crate::auth::UserInfo::service_account)) with a freshly
    /// minted token; with [`SimClusterBuilder::rbac`] on, that user may do only what the
    /// stored RBAC objects grant. The text holds the token: do not log it.
    ///
    /// # Errors
    /// The kubeconfig cannot be rendered.
    pub fn kubeconfig_for(&self, user: crate::auth::UserInfo) -> Result<String, ClusterError> {
        Ok(self.server.kubeconfig_for(user)?)
    }

    /// A kube client that authenticates as `user` (see [`SimCluster::kubeconfig_for`]).
    ///
    /// # Errors
    /// The kubeconfig cannot be turned into a client.
    pub async fn client_for(
        &self,
        user: crate::auth::UserInfo,
    ) -> Result<kube::Client, ClusterError> {
        Ok(self.server.client_for(user).await?)
    }

    /// Where the kubeconfig is.
    pub fn kubeconfig_path(&self) -> &Path {
        self.server.kubeconfig_path()
    }

    /// The kubeconfig text.
    pub fn kubeconfig_yaml(&self) -> &str {
        self.server.kubeconfig_yaml()
    }

    /// `http://127.0.0.1:PORT` (or `https://`).
    pub fn endpoint(&self) -> &str {
        self.server.endpoint()
    }

    /// Request-level fault injection for HTTP clients (the cluster's own components reach
    /// the store directly and see only whether the server is up).
    pub fn faults(&self) -> &Faults {
        self.server.faults()
    }

    /// Counters of the HTTP requests served.
    pub fn metrics(&self) -> &Metrics {
        self.server.metrics()
    }

    /// The API server (crash, restart, health checks).
    pub fn server(&self) -> &SimServer {
        &self.server
    }

    /// The store (the cluster's etcd).
    pub fn store(&self) -> &Store {
        self.server.store()
    }

    /// The store as etcd serves it to clients with no API server (see [`crate::etcd`]): its
    /// endpoint and client certificate files. It answers while every node is down.
    pub fn etcd(&self) -> &crate::etcd::SimEtcd {
        &self.etcd
    }

    /// The availability recorder.
    pub fn recorder(&self) -> &AvailabilityRecorder {
        &self.recorder
    }

    /// The image registry, changeable at runtime.
    pub fn registry(&self) -> &RegistryHandle {
        &self.registry
    }

    /// The nodes, control-plane nodes first.
    pub fn nodes(&self) -> &[NodeSpec] {
        &self.nodes
    }

    /// How the control plane was bootstrapped.
    pub fn mode(&self) -> BootstrapMode {
        self.mode
    }

    /// The version the cluster started at.
    pub fn initial_version(&self) -> &str {
        &self.configured_version
    }

    /// What `/version` reports now.
    pub fn version(&self) -> String {
        self.server.version()
    }

    /// The manifests directory of a node's kubelet (write or remove files to add or remove
    /// static pods).
    pub fn manifests_dir(&self, node: &str) -> Option<&Path> {
        self.manifests.get(node).map(PathBuf::as_path)
    }

    /// A node's own directory, the root its host paths live under: its kubelet's manifests
    /// directory is `etc/kubernetes/manifests` in it, the kubelet's kubeconfig
    /// `etc/kubernetes/kubelet.conf`, and what real programs in its containers print is in
    /// `var/log/containers`.
    pub fn node_root(&self, node: &str) -> Option<PathBuf> {
        self.manifests
            .contains_key(node)
            .then(|| self.nodes_root.path().join(node))
    }

    /// What every kubelet runs now.
    pub fn processes(&self) -> ControlPlaneSnapshot {
        self.process_table.snapshot()
    }

    /// The hand-over model at run time (`None` when the cluster runs without it): which
    /// apiserver processes hold the port, the load balancer's view, loopback cross-talk.
    pub fn handover(&self) -> Option<&ApiFrontEnd> {
        self.front_end.as_deref()
    }

    /// Who acts for a role now: with leader election, the process holding the role's Lease
    /// (while it runs and is not stopping).
    pub fn leader(&self, role: Role) -> Leadership {
        match role {
            Role::ControllerManager => self.decisions.controller_manager.borrow().clone(),
            Role::Scheduler => self.decisions.scheduler.borrow().clone(),
        }
    }

    /// Whether the API server listens now.
    pub fn is_api_up(&self) -> bool {
        self.server.is_up()
    }

    /// Switches the self-hosting model on or off at runtime.
    pub fn set_self_hosting_model(&self, on: bool) {
        self.process_table.set_coupled(on);
    }

    /// Puts a node's machine in a state: `Down` (off: its processes are gone, nothing is
    /// reported), `NotReady` (its kubelet posts `Ready=False`, no pod progresses) or `Up`.
    ///
    /// # Errors
    /// No node has that name.
    pub fn set_node_state(&self, node: &str, state: NodeState) -> Result<(), ClusterError> {
        self.send(node, NodeInput::SetState(state))
    }

    /// The names of the control-plane nodes, in order (`cp-1`, …).
    pub fn control_plane_names(&self) -> Vec<String> {
        self.nodes()
            .iter()
            .filter(|n| n.role == crate::bootstrap::NodeRole::ControlPlane)
            .map(|n| n.name.clone())
            .collect()
    }

    /// Restarts a node's kubelet process, as `systemctl restart kubelet` does: its containers
    /// keep running, and it learns its pods from the API again (until it can list them, it
    /// acts only on its static pods).
    ///
    /// # Errors
    /// No node has that name.
    pub fn restart_kubelet(&self, node: &str) -> Result<(), ClusterError> {
        self.send(node, NodeInput::RestartKubelet)
    }

    /// Reboots a node: every process on it ends, the node is off for `off_for`, then its
    /// kubelet starts its static pods from its manifests directory and its pods from the API
    /// once it can list them.
    ///
    /// # Errors
    /// No node has that name.
    pub async fn reboot(&self, node: &str, off_for: Duration) -> Result<(), ClusterError> {
        self.set_node_state(node, NodeState::Down)?;
        tokio::time::sleep(off_for).await;
        self.set_node_state(node, NodeState::Up)
    }

    /// A power cut of every node, then power back after `off_for`: every process ends at
    /// once and every machine boots again; only the store (etcd's data on disk) is kept.
    pub async fn power_cycle(&self, off_for: Duration) {
        let nodes: Vec<String> = self.inputs.keys().cloned().collect();
        for node in &nodes {
            // Every name comes from the node inputs themselves.
            let _ = self.set_node_state(node, NodeState::Down);
        }
        tokio::time::sleep(off_for).await;
        for node in &nodes {
            let _ = self.set_node_state(node, NodeState::Up);
        }
    }

    fn send(&self, node: &str, input: NodeInput) -> Result<(), ClusterError> {
        let tx = self
            .inputs
            .get(node)
            .ok_or_else(|| ClusterError::UnknownNode(node.to_string()))?;
        // The kubelet task only stops at shutdown, when nobody calls this any more.
        let _ = tx.send(input);
        Ok(())
    }

    /// Starts a prober against this cluster's API (see [`Prober`]), with a client that does
    /// not retry (each attempt gives up after `options.timeout`), whose connector notes every
    /// connection so that a failed attempt can say who caught it, and that sends the user agent
    /// [`PROBER_USER_AGENT`] so that its requests can be told apart in [`Metrics`].
    ///
    /// # Errors
    /// The kubeconfig cannot be turned into a client.
    pub async fn prober(&self, options: ProberOptions) -> Result<Prober, ClusterError> {
        let mut config = self.server.config().await?;
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(PROBER_USER_AGENT),
        ));
        Prober::start_attributed(config, options, self.server.connections())
            .map_err(|e| ClusterError::from(SimError::Client(e.to_string())))
    }

    /// Stops every component and the API server, and waits until they are gone.
    pub async fn shutdown(mut self) {
        self.shutdown.cancel();
        while self.tasks.join_next().await.is_some() {}
        self.server.garbage_collector().set_enabled(false);
        if let Err(e) = self.server.hold_down(true).await {
            tracing::debug!(error = %e, "stopping the API server");
        }
    }
}

impl Drop for SimCluster {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.tasks.abort_all();
    }
}
