//! How to describe a simulated cluster before starting it.

use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::handover::Handovers;
use super::identity::ApiserverIdentity;
use super::leader_election::LeaseRelease;
use super::model::{AnyReadyApiserver, FirstReadyProcess, LeaderPolicy, ServingPolicy};
use super::timings::SimTimings;
use super::{ClusterError, SimCluster};
use crate::bootstrap::{BootstrapMode, FrontLayout, NodeSpec};
use crate::controllers::kubelet::ImageBehaviour;

/// A simulated cluster to start: nodes, mode, version, latencies, registry and the model.
///
/// Defaults: one control-plane node, no worker, `v1.33.2`, kubeadm's static pods, no port
/// sharing, [`SimTimings::fast`], the self-hosting model on, plain HTTP on a free port, a
/// kubeconfig in a temporary directory, control-plane images v1.29.0–v1.37.9 and the `pause`
/// images (`registry.k8s.io/pause:3.9`, `3.10`, `3.10.1`), the garbage
/// collector on, Lease-based leader election with no Lease released on stop (as v1.20 did),
/// identity Leases from apiservers of v1.26 and later, each machine's hostname its node's name.
#[derive(Debug, Clone)]
pub struct SimClusterBuilder {
    pub(crate) control_plane_nodes: usize,
    pub(crate) workers: usize,
    pub(crate) version: String,
    pub(crate) mode: BootstrapMode,
    pub(crate) port_sharing: bool,
    pub(crate) timings: SimTimings,
    pub(crate) self_hosting_model: bool,
    pub(crate) tls: bool,
    pub(crate) rbac: bool,
    pub(crate) port: u16,
    pub(crate) kubeconfig_path: Option<PathBuf>,
    pub(crate) registry_minors: RangeInclusive<u32>,
    pub(crate) registry_max_patch: u32,
    pub(crate) images: Vec<(String, ImageBehaviour)>,
    pub(crate) pause_images: bool,
    pub(crate) garbage_collector: bool,
    pub(crate) history_limit: usize,
    pub(crate) bootstrap_timeout: Duration,
    pub(crate) serving_policy: Arc<dyn ServingPolicy>,
    pub(crate) leader_policy: Arc<dyn LeaderPolicy>,
    pub(crate) leader_election: bool,
    pub(crate) lease_release: LeaseRelease,
    pub(crate) start_needs_api: bool,
    pub(crate) apiserver_identity: ApiserverIdentity,
    pub(crate) handovers: Option<Handovers>,
    pub(crate) process_hostname: Option<String>,
    pub(crate) control_plane_static_pods: Vec<(String, NodeManifest)>,
    pub(crate) api_front: Option<FrontLayout>,
}

/// Renders one node's copy of a static pod manifest, given the node.
#[derive(Clone)]
pub struct NodeManifest(Arc<dyn Fn(&NodeSpec) -> String + Send + Sync>);

impl NodeManifest {
    /// A manifest rendered by `render` for each node, given its name.
    pub fn new(render: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        NodeManifest(Arc::new(move |node: &NodeSpec| render(&node.name)))
    }

    /// A manifest rendered by `render` for each node, given the node (its name and address:
    /// a node-local API front listens on the node's address).
    pub fn for_node(render: impl Fn(&NodeSpec) -> String + Send + Sync + 'static) -> Self {
        NodeManifest(Arc::new(render))
    }

    /// The manifest for `node`.
    pub fn render(&self, node: &NodeSpec) -> String {
        (self.0)(node)
    }
}

impl std::fmt::Debug for NodeManifest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeManifest(..)")
    }
}

impl Default for SimClusterBuilder {
    fn default() -> Self {
        SimClusterBuilder {
            control_plane_nodes: 1,
            workers: 0,
            version: "v1.33.2".into(),
            mode: BootstrapMode::Static,
            port_sharing: false,
            timings: SimTimings::fast(),
            self_hosting_model: true,
            tls: false,
            rbac: false,
            port: 0,
            kubeconfig_path: None,
            registry_minors: 29..=37,
            registry_max_patch: 9,
            images: Vec::new(),
            pause_images: true,
            garbage_collector: true,
            history_limit: crate::store::StoreOptions::default().history_limit,
            bootstrap_timeout: Duration::from_secs(60),
            serving_policy: Arc::new(AnyReadyApiserver),
            leader_policy: Arc::new(FirstReadyProcess),
            leader_election: true,
            lease_release: LeaseRelease::Never,
            start_needs_api: true,
            apiserver_identity: ApiserverIdentity::ByVersion,
            handovers: None,
            process_hostname: None,
            control_plane_static_pods: Vec::new(),
            api_front: None,
        }
    }
}

impl SimClusterBuilder {
    /// How many control-plane nodes (`cp-1`, `cp-2`, …); zero only without the model.
    pub fn control_plane_nodes(mut self, n: usize) -> Self {
        self.control_plane_nodes = n;
        self
    }

    /// A static pod every control-plane node's kubelet runs from the start, beside the control
    /// plane, in its manifests directory as `file` (a node agent, such as a checkpointer).
    pub fn control_plane_static_pod(mut self, file: &str, manifest: NodeManifest) -> Self {
        self.control_plane_static_pods
            .push((file.to_string(), manifest));
        self
    }

    /// A self-hosted control plane behind node-local API fronts, as `convert to-self-hosted`
    /// builds it: the kube-apiserver DaemonSet's pods listen on `layout.backend`
    /// (`--bind-address`, their probes aimed there) and the DaemonSet carries the
    /// `selfhost.dev/api-front` annotation naming `layout`. The fronts themselves are the
    /// caller's to place, as a static pod on every control-plane node
    /// ([`control_plane_static_pod`](SimClusterBuilder::control_plane_static_pod)) listening on
    /// the node's address; with the hand-over model on, the control plane counts as up only
    /// once each node's front passes connections on. Self-hosted mode only.
    pub fn api_front(mut self, layout: FrontLayout) -> Self {
        self.api_front = Some(layout);
        self
    }

    /// How many workers (`worker-1`, …).
    pub fn workers(mut self, n: usize) -> Self {
        self.workers = n;
        self
    }

    /// The Kubernetes version the control plane starts at (`v1.33.2`); the registry always
    /// knows its images.
    pub fn version(mut self, version: &str) -> Self {
        self.version = version.to_string();
        self
    }

    /// Static pods (kubeadm) or self-hosted DaemonSets.
    pub fn mode(mut self, mode: BootstrapMode) -> Self {
        self.mode = mode;
        self
    }

    /// Whether the control-plane manifests pass `--permit-port-sharing=true`.
    pub fn port_sharing(mut self, on: bool) -> Self {
        self.port_sharing = on;
        self
    }

    /// The cluster's latencies.
    pub fn timings(mut self, timings: SimTimings) -> Self {
        self.timings = timings;
        self
    }

    /// Couples the API and the controllers to the control-plane pods (on by default).
    pub fn self_hosting_model(mut self, on: bool) -> Self {
        self.self_hosting_model = on;
        self
    }

    /// Serve HTTPS with a throw-away CA and a bearer token.
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Authorize every API request by RBAC (see [`crate::auth`]): the kubeconfig's token is
    /// the administrator's (`system:masters`, allowed everything) and
    /// [`SimCluster::kubeconfig_for`] mints tokens for other users and service accounts,
    /// whose requests are allowed only as the stored roles and bindings say. Off by default.
    pub fn rbac(mut self, on: bool) -> Self {
        self.rbac = on;
        self
    }

    /// The port on 127.0.0.1 (0: any free one).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Where to write the kubeconfig (default: a temporary directory removed on shutdown).
    pub fn kubeconfig_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.kubeconfig_path = Some(path.into());
        self
    }

    /// The control-plane releases the registry knows: `v1.<minor>.0` to
    /// `v1.<minor>.<max_patch>` for each minor.
    pub fn control_plane_releases(mut self, minors: RangeInclusive<u32>, max_patch: u32) -> Self {
        self.registry_minors = minors;
        self.registry_max_patch = max_patch;
        self
    }

    /// Adds an image to the registry with its behaviour (or changes a known image's).
    pub fn image(mut self, image: &str, behaviour: ImageBehaviour) -> Self {
        self.images.push((image.to_string(), behaviour));
        self
    }

    /// Whether the registry has the `pause` images real nodes use as their sandbox image
    /// ([`crate::controllers::kubelet::PAUSE_IMAGES`]; on by default). Off, pulling them fails
    /// as any unknown image does.
    pub fn pause_images(mut self, on: bool) -> Self {
        self.pause_images = on;
        self
    }

    /// Whether the garbage collector runs (while a controller-manager acts).
    pub fn garbage_collector(mut self, on: bool) -> Self {
        self.garbage_collector = on;
        self
    }

    /// How many events the store's history keeps (watches further behind get 410).
    pub fn history_limit(mut self, events: usize) -> Self {
        self.history_limit = events;
        self
    }

    /// How long the control plane may take to come up before `start` fails.
    pub fn bootstrap_timeout(mut self, timeout: Duration) -> Self {
        self.bootstrap_timeout = timeout;
        self
    }

    /// Replaces the rule deciding which apiserver processes serve.
    pub fn serving_policy(mut self, policy: Arc<dyn ServingPolicy>) -> Self {
        self.serving_policy = policy;
        self
    }

    /// Replaces the rule deciding which controller-manager and scheduler process acts, and
    /// switches Lease-based leader election off.
    pub fn leader_policy(mut self, policy: Arc<dyn LeaderPolicy>) -> Self {
        self.leader_policy = policy;
        self.leader_election = false;
        self
    }

    /// Whether every controller-manager and scheduler process elects its leader through the
    /// Leases `kube-system/kube-controller-manager` and `kube-system/kube-scheduler` (on by
    /// default; off, the first Ready process acts at once, or the [`leader_policy`]'s choice).
    ///
    /// [`leader_policy`]: SimClusterBuilder::leader_policy
    pub fn leader_election(mut self, on: bool) -> Self {
        self.leader_election = on;
        self
    }

    /// Whether a stopping leader releases its Lease (default [`LeaseRelease::Never`], as the
    /// measured v1.20 control plane did).
    pub fn lease_release(mut self, release: LeaseRelease) -> Self {
        self.lease_release = release;
        self
    }

    /// Whether a kube-controller-manager or kube-scheduler that starts while the API is
    /// unreachable exits at once, as the real ones do when their delegated authentication
    /// cannot read its ConfigMap (on by default; part of leader election).
    pub fn start_needs_api(mut self, on: bool) -> Self {
        self.start_needs_api = on;
        self
    }

    /// Which kube-apiserver processes publish identity Leases (default: v1.26 and later).
    pub fn apiserver_identity(mut self, identity: ApiserverIdentity) -> Self {
        self.apiserver_identity = identity;
        self
    }

    /// Makes kube-apiserver processes hand the API over as real ones do (see [`Handovers`];
    /// `Handovers::measured()` turns every behaviour on); `None`, the default, keeps the
    /// idealised model where a connection only ever reaches a Ready apiserver. The model
    /// replaces the [`serving_policy`](SimClusterBuilder::serving_policy).
    pub fn handovers(mut self, model: impl Into<Option<Handovers>>) -> Self {
        self.handovers = model.into();
        self
    }

    /// The hostname every node's machine has, shared by all of them (a test bed of nodes on
    /// one machine), when it is not each node's own name. A host-network process sees its
    /// machine's hostname (`os.Hostname()`) and names itself after it: leader-election holder
    /// identities are `<hostname>_<uuid>`, and kube-apiserver identity Leases are named after
    /// and labelled with it, while the kubelet names the node apart from it (as
    /// `--hostname-override` does: the node's name and its `kubernetes.io/hostname` label stay
    /// `cp-1`, …). By default each machine's hostname is its node's name.
    pub fn process_hostname(mut self, hostname: impl Into<String>) -> Self {
        self.process_hostname = Some(hostname.into());
        self
    }

    /// Starts the cluster and waits until its control plane is Ready.
    ///
    /// # Errors
    /// Contradictory options, a port or file that cannot be used, or a control plane that
    /// does not come up within the bootstrap timeout.
    pub async fn start(self) -> Result<SimCluster, ClusterError> {
        SimCluster::start(self).await
    }
}
