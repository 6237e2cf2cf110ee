//! The front end of the simulated API: the kube-apiserver processes and node-local API
//! fronts of every node as their connections see them. Kubelets publish their processes here;
//! the HTTP server asks it, per new connection, which process serves it (through the load
//! balancer and a node's front when there are; see `reach.rs`); the self-hosting model asks it
//! which processes really serve, for the cluster's own components.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::front::Front;
use super::kernel::{Kernel, node_seed};
use super::readiness::SharedPortReadiness;
use super::sockets::{ApiProcess, FrontProcess, api_processes, front_processes};
use super::{CrossTalkEvent, HandoverTimings, Handovers};
use crate::cluster::model::{
    ApiBackend, ApiServing, ControlPlaneSnapshot, ServingPolicy, image_version,
};
use crate::cluster::node_input::NodeInput;
use crate::cluster::process_table::ApiDecision;
use crate::controllers::kubelet::{ImageRef, Kubelet, ProcessId, ReadinessModel};
use crate::server::{ProcessOrigin, ProcessTimes, ServingProcess};

/// One kube-apiserver process as the model last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiProcessState {
    /// Its node.
    pub node: String,
    /// Its pod's name.
    pub pod: String,
    /// Its pod's uid.
    pub uid: String,
    /// Its process id on the node.
    pub process: ProcessId,
    /// Whether its socket is bound to the port (new connections may reach it).
    pub holds_port: bool,
    /// Whether it accepts connections now.
    pub accepting: bool,
    /// Whether its `/readyz` passes now.
    pub ready: bool,
    /// Whether it was told to stop.
    pub shutting_down: bool,
    /// The address its socket is bound to (`None`: every address).
    pub address: Option<IpAddr>,
    /// How many connections were handed to it.
    pub connections: u64,
    /// When it accepts, is authorized and serves.
    pub times: ProcessTimes,
}

#[derive(Debug)]
pub(super) struct Entry {
    pub view: ApiProcess,
    pub serving: Arc<ServingProcess>,
}

#[derive(Debug)]
pub(super) struct FrontEntry {
    pub view: FrontProcess,
    pub front: Arc<Front>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// By node, then process.
    pub nodes: BTreeMap<String, BTreeMap<ProcessId, Entry>>,
    /// The node-local API fronts, by node, then process.
    pub fronts: BTreeMap<String, BTreeMap<ProcessId, FrontEntry>>,
    /// Fronts whose process is gone, latest last.
    pub gone_fronts: VecDeque<Arc<Front>>,
    /// Whether each control-plane node passed the load balancer's last check.
    pub healthy: BTreeMap<String, bool>,
    /// The load balancer's round-robin position.
    pub cursor: usize,
}

/// What the cluster wires in once the process table exists.
struct Attachment {
    /// Decides the self-hosting model again (which processes serve changed).
    redecide: Box<dyn Fn() + Send + Sync>,
    /// The model's decisions: whether it is on (off: connections are served by no process).
    decisions: watch::Receiver<ApiDecision>,
}

/// The stand-in for every process while the self-hosting model is off (bootstrap): it always
/// serves, and exits when the model takes over, so no connection outlives it unmodelled.
fn unmodelled() -> Arc<ServingProcess> {
    let now = Instant::now();
    ServingProcess::new(
        "unmodelled",
        ProcessTimes {
            accepts_at: now,
            authorizes_at: None,
            serves_at: Some(now),
        },
    )
}

/// The hand-over model at run time.
pub struct ApiFrontEnd {
    handovers: Handovers,
    timings: HandoverTimings,
    control_planes: Vec<String>,
    /// Each control-plane node's address.
    addresses: BTreeMap<String, IpAddr>,
    kernels: BTreeMap<String, Arc<Kernel>>,
    state: Mutex<State>,
    attachment: OnceLock<Attachment>,
    changed: Notify,
    cross_talk: Arc<Mutex<Vec<CrossTalkEvent>>>,
    unmodelled: Mutex<Arc<ServingProcess>>,
    /// Itself, for the connections its fronts hold.
    me: Weak<ApiFrontEnd>,
    /// Each node's kubelet, told when a front exits by itself (drained).
    kubelets: OnceLock<HashMap<String, mpsc::UnboundedSender<NodeInput>>>,
}

impl std::fmt::Debug for ApiFrontEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiFrontEnd")
            .field("handovers", &self.handovers)
            .field("control_planes", &self.control_planes)
            .finish_non_exhaustive()
    }
}

impl ApiFrontEnd {
    /// The model for a cluster whose control-plane nodes are `control_planes`, each with its
    /// address (the kubeconfig reaches the first one's API address, or the load balancer in
    /// front of them all).
    pub(crate) fn new(
        handovers: Handovers,
        timings: HandoverTimings,
        control_planes: Vec<(String, IpAddr)>,
    ) -> Arc<Self> {
        let kernels = control_planes
            .iter()
            .map(|(n, _)| (n.clone(), Arc::new(Kernel::new(handovers.balancing, n))))
            .collect();
        Arc::new_cyclic(|me| ApiFrontEnd {
            handovers,
            timings,
            addresses: control_planes.iter().cloned().collect(),
            control_planes: control_planes.into_iter().map(|(n, _)| n).collect(),
            kernels,
            state: Mutex::default(),
            attachment: OnceLock::new(),
            changed: Notify::new(),
            cross_talk: Arc::default(),
            unmodelled: Mutex::new(unmodelled()),
            me: me.clone(),
            kubelets: OnceLock::new(),
        })
    }

    /// Itself, weakly (the connections its fronts hold must not keep it alive).
    pub(super) fn me(&self) -> Weak<ApiFrontEnd> {
        self.me.clone()
    }

    /// A node's address (`None`: not a control-plane node).
    pub(super) fn node_address(&self, node: &str) -> Option<IpAddr> {
        self.addresses.get(node).copied()
    }

    /// A node's kernel (`None`: not a control-plane node).
    pub(super) fn kernel(&self, node: &str) -> Option<&Kernel> {
        self.kernels.get(node).map(Arc::as_ref)
    }

    /// The kubelet of `node`, where its fronts say they exit.
    pub(super) fn kubelet_of(&self, node: &str) -> Option<mpsc::UnboundedSender<NodeInput>> {
        self.kubelets.get().and_then(|k| k.get(node)).cloned()
    }

    /// Tells fronts where their node's kubelet is: a front that has drained tells it it
    /// exits.
    pub(crate) fn attach_kubelets(
        &self,
        kubelets: HashMap<String, mpsc::UnboundedSender<NodeInput>>,
    ) {
        let _ = self.kubelets.set(kubelets);
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The switches.
    pub fn handovers(&self) -> Handovers {
        self.handovers
    }

    /// The durations.
    pub fn timings(&self) -> HandoverTimings {
        self.timings
    }

    /// Connects the model to the process table: `redecide` is called when the set of serving
    /// processes changes with time; `decisions` tell whether the self-hosting model is on.
    pub(crate) fn attach(
        &self,
        redecide: impl Fn() + Send + Sync + 'static,
        decisions: watch::Receiver<ApiDecision>,
    ) {
        let _ = self.attachment.set(Attachment {
            redecide: Box::new(redecide),
            decisions,
        });
    }

    fn redecide(&self) {
        if let Some(a) = self.attachment.get() {
            (a.redecide)();
        }
    }

    pub(super) fn is_coupled(&self) -> bool {
        self.attachment
            .get()
            .is_some_and(|a| a.decisions.borrow().coupled)
    }

    /// The stand-in that serves every connection while the model is off.
    pub(super) fn unmodelled(&self) -> Arc<ServingProcess> {
        self.unmodelled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The model took over: connections made while it was off are cut.
    fn take_over(&self) {
        let mut current = self.unmodelled.lock().unwrap_or_else(|e| e.into_inner());
        let previous = std::mem::replace(&mut *current, unmodelled());
        previous.exit();
    }

    /// The readiness model of a node's kubelet: lying probes on a shared port, loopback
    /// cross-talk (`None`: the kubelet's own model is right, the switches being off).
    pub(crate) fn readiness(&self, node: &str) -> Option<Arc<dyn ReadinessModel>> {
        let h = &self.handovers;
        if !h.lying_probes && h.cross_talk.probability <= 0.0 {
            return None;
        }
        let kernel = self.kernels.get(node)?.clone();
        let seed = match h.balancing {
            super::PortBalancing::Random { seed } => node_seed(seed, node) ^ 0x10_0b_ac_c0,
            super::PortBalancing::RoundRobin => node_seed(0, node),
        };
        let mut model = SharedPortReadiness::new(
            node,
            kernel,
            h,
            self.timings.probe_period,
            seed,
            self.cross_talk.clone(),
        );
        if let Some(address) = self.node_address(node) {
            model = model.at_address(address);
        }
        Some(Arc::new(model))
    }

    /// A kubelet's processes after it advanced: new sockets join the port, stopped ones
    /// leave it, exited ones cut their connections; fronts likewise.
    pub(crate) fn publish(&self, node: &str, kubelet: &Kubelet) {
        if !self.kernels.contains_key(node) {
            return;
        }
        let containers = kubelet.containers();
        let views = api_processes(kubelet, &containers);
        let fronts = front_processes(kubelet, &containers);
        self.publish_views(node, views, fronts);
    }

    /// A node's kube-apiserver processes and fronts as its kubelet sees them now.
    pub(super) fn publish_views(
        &self,
        node: &str,
        views: Vec<ApiProcess>,
        fronts: Vec<FrontProcess>,
    ) {
        let changed = {
            let mut state = self.lock();
            let table = state.nodes.entry(node.to_string()).or_default();
            let apis = self.reconcile(node, table, views);
            apis | self.reconcile_fronts(node, &mut state, fronts)
        };
        if changed {
            self.changed.notify_one();
            self.redecide();
        }
    }

    fn reconcile(
        &self,
        node: &str,
        table: &mut BTreeMap<ProcessId, Entry>,
        views: Vec<ApiProcess>,
    ) -> bool {
        let mut changed = false;
        table.retain(|id, entry| {
            let alive = views.iter().any(|v| v.id == *id);
            if !alive {
                entry.serving.exit();
                changed = true;
            }
            alive
        });
        for view in views {
            match table.get_mut(&view.id) {
                Some(entry) if !entry.view.differs_from(&view) => {}
                Some(entry) => {
                    if view.stopping {
                        entry.serving.signal_shutdown();
                    }
                    if !view.holds_port {
                        entry.serving.close_listener();
                    }
                    entry.view = view;
                    changed = true;
                }
                None => {
                    let origin = ProcessOrigin {
                        node: node.to_string(),
                        pod: view.pod.name.clone(),
                        image: view.image.clone(),
                    };
                    let serving = ServingProcess::in_pod_idling_after(
                        format!("{node}/{}#{}", view.pod.name, view.id),
                        Some(origin),
                        self.times_of(&view),
                        self.timings.new_connection_idle,
                    );
                    if view.stopping {
                        serving.signal_shutdown();
                    }
                    if !view.holds_port {
                        serving.close_listener();
                    }
                    table.insert(view.id, Entry { view, serving });
                    changed = true;
                }
            }
        }
        changed
    }

    fn times_of(&self, view: &ApiProcess) -> ProcessTimes {
        let accepts_at = view
            .accepts
            .map_or(view.listening, |a| a.max(view.listening));
        let authorizes_at = self
            .handovers
            .early_forbidden
            .then(|| accepts_at + self.timings.authorization_after_accept);
        ProcessTimes {
            accepts_at,
            authorizes_at,
            serves_at: view.ready.map(|r| r.max(accepts_at)),
        }
    }

    /// Whether a load balancer stands in front of the nodes.
    pub(super) fn balanced(&self) -> bool {
        self.handovers.load_balancer && self.control_planes.len() > 1
    }

    pub(super) fn control_planes(&self) -> &[String] {
        &self.control_planes
    }

    /// Every kube-apiserver process that has a socket, by node and bind order.
    pub fn processes(&self) -> Vec<ApiProcessState> {
        let now = Instant::now();
        let state = self.lock();
        state
            .nodes
            .iter()
            .flat_map(|(node, table)| table.values().map(move |e| (node, e)))
            .map(|(node, e)| ApiProcessState {
                node: node.clone(),
                pod: e.view.pod.name.clone(),
                uid: e.view.pod.uid.clone(),
                process: e.view.id,
                holds_port: e.view.holds_port,
                accepting: e.serving.accepts(now),
                ready: e.serving.is_ready(now),
                shutting_down: e.serving.is_shutting_down(),
                address: e.view.address,
                connections: e.serving.connections(),
                times: e.serving.times(),
            })
            .collect()
    }

    /// The control-plane nodes whose `/readyz` passed the load balancer's last check.
    pub fn healthy_nodes(&self) -> Vec<String> {
        let state = self.lock();
        state
            .healthy
            .iter()
            .filter(|(_, ok)| **ok)
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// Every loopback cross-talk so far.
    pub fn cross_talk(&self) -> Vec<CrossTalkEvent> {
        self.cross_talk
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// When the set of serving processes next changes by itself (a process finishes
    /// starting) after `since`; possibly already past.
    fn next_change(&self, since: Instant) -> Option<Instant> {
        let state = self.lock();
        state
            .nodes
            .values()
            .flat_map(|t| t.values())
            .filter_map(|e| e.serving.times().serves_at)
            .filter(|at| *at > since)
            .min()
    }

    /// Runs until shutdown: decides again whenever a process finishes starting, and checks
    /// the nodes for the load balancer.
    pub(crate) async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut decisions = match self.attachment.get() {
            Some(a) => a.decisions.clone(),
            None => watch::channel(ApiDecision::default()).1,
        };
        let mut coupled = decisions.borrow_and_update().coupled;
        let mut checks = tokio::time::interval(
            self.timings
                .balancer_check_interval
                .max(std::time::Duration::from_millis(1)),
        );
        checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Every process that finished starting up to here has been decided on. Only a
        // re-decision moves it on: when a publication wakes the loop after a process finished
        // starting but before its timer fired (a busy machine runs both late, and `select!`
        // picks either), the start is still ahead of it and is decided at once, rather than
        // forgotten until something else happens to change.
        let mut decided_until = Instant::now();
        loop {
            let next = self.next_change(decided_until);
            let next_check = self.next_front_check();
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = self.changed.notified() => {}
                _ = sleep_until(next) => {
                    decided_until = Instant::now();
                    self.redecide();
                }
                _ = check_at(next_check) => self.check_fronts(),
                _ = checks.tick(), if self.balanced() => self.check_nodes(),
                changed = decisions.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let now_coupled = decisions.borrow_and_update().coupled;
                    if now_coupled && !coupled {
                        self.take_over();
                    }
                    coupled = now_coupled;
                }
            }
        }
    }
}

/// Sleeps until a front's checks are due (never, with no front).
async fn check_at(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        // A little after, so that the process counts as serving when the model looks.
        Some(at) => tokio::time::sleep_until(at + std::time::Duration::from_micros(100)).await,
        None => std::future::pending().await,
    }
}

impl ServingPolicy for ApiFrontEnd {
    /// The processes that serve by their own account and can still be reached; `/version`
    /// reports the newest version among them.
    fn serving(&self, _snapshot: &ControlPlaneSnapshot) -> ApiServing {
        let now = Instant::now();
        let state = self.lock();
        let backends: Vec<ApiBackend> = state
            .nodes
            .iter()
            .flat_map(|(node, table)| table.values().map(move |e| (node, e)))
            .filter(|(_, e)| e.view.holds_port && e.serving.serves(now))
            .map(|(node, e)| ApiBackend {
                node: node.clone(),
                pod: e.view.pod.clone(),
                process: Some(e.view.id),
                image: e.view.image.clone(),
            })
            .collect();
        let version = backends
            .iter()
            .filter_map(|b| {
                let image = b.image.as_deref()?;
                Some((image_version(image)?, ImageRef::parse(image).ok()?.tag?))
            })
            .max()
            .map(|(_, tag)| tag);
        ApiServing { backends, version }
    }
}
