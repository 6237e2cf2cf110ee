//! The control-plane process table: which containers and processes every node's kubelet
//! runs, as the kubelets publish them, and the self-hosting model's decisions, taken
//! synchronously on every publication: whether the API may serve, which processes serve it,
//! and who acts for the controller-manager and the scheduler. Each decision goes into the
//! availability recorder as it is taken. In-process components read the decisions at once
//! (a kubelet whose apiserver just exited cannot get its next write through); the coupling
//! task applies them to the HTTP server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

use super::availability_recorder::AvailabilityRecorder;
use super::model::{
    ApiServing, ControlPlaneSnapshot, LeaderPolicy, Leadership, NodeContainers, Role, ServingPolicy,
};

/// What the model decided about the API.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ApiDecision {
    /// Whether the model is on.
    pub coupled: bool,
    /// Which processes serve (decided even when uncoupled, for `/version`).
    pub serving: ApiServing,
}

impl ApiDecision {
    /// Whether the API may answer.
    pub(crate) fn is_up(&self) -> bool {
        !self.coupled || self.serving.is_up()
    }
}

/// The model's decisions as controllers and the coupling task wait on them (cheap to clone).
#[derive(Debug, Clone)]
pub(crate) struct ModelDecisions {
    /// Whether the model lets the API answer.
    pub api_up: watch::Receiver<bool>,
    /// The whole API decision.
    pub api: watch::Receiver<ApiDecision>,
    /// Who acts for the controller-manager.
    pub controller_manager: watch::Receiver<Leadership>,
    /// Who acts for the scheduler.
    pub scheduler: watch::Receiver<Leadership>,
}

#[derive(Debug, Default)]
struct State {
    snapshot: ControlPlaneSnapshot,
    coupled: bool,
}

/// What every kubelet runs, and the model's decisions about it.
#[derive(Debug)]
pub(crate) struct ProcessTable {
    state: Mutex<State>,
    serving_policy: Arc<dyn ServingPolicy>,
    leader_policy: Arc<dyn LeaderPolicy>,
    recorder: AvailabilityRecorder,
    configured_version: String,
    api_allowed: AtomicBool,
    changes: watch::Sender<u64>,
    api_up: watch::Sender<bool>,
    api: watch::Sender<ApiDecision>,
    controller_manager: watch::Sender<Leadership>,
    scheduler: watch::Sender<Leadership>,
}

impl ProcessTable {
    /// An empty table, uncoupled: the API answers and every controller acts.
    pub(crate) fn new(
        serving_policy: Arc<dyn ServingPolicy>,
        leader_policy: Arc<dyn LeaderPolicy>,
        recorder: AvailabilityRecorder,
        configured_version: &str,
    ) -> (Arc<ProcessTable>, ModelDecisions) {
        let (api_up, api_up_rx) = watch::channel(true);
        let (api, api_rx) = watch::channel(ApiDecision::default());
        let (cm, cm_rx) = watch::channel(Leadership::Ungated);
        let (sched, sched_rx) = watch::channel(Leadership::Ungated);
        let table = ProcessTable {
            state: Mutex::default(),
            serving_policy,
            leader_policy,
            recorder,
            configured_version: configured_version.to_string(),
            api_allowed: AtomicBool::new(true),
            changes: watch::channel(0).0,
            api_up,
            api,
            controller_manager: cm,
            scheduler: sched,
        };
        let decisions = ModelDecisions {
            api_up: api_up_rx,
            api: api_rx,
            controller_manager: cm_rx,
            scheduler: sched_rx,
        };
        (Arc::new(table), decisions)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a node's containers and decides again if anything changed.
    pub(crate) fn publish(&self, node: &str, containers: NodeContainers) {
        let mut state = self.lock();
        if state.snapshot.nodes.get(node) == Some(&containers) {
            return;
        }
        state.snapshot.nodes.insert(node.to_string(), containers);
        self.decide(&state);
        drop(state);
        self.changes.send_modify(|n| *n += 1);
    }

    /// Switches the model on or off.
    pub(crate) fn set_coupled(&self, on: bool) {
        let mut state = self.lock();
        state.coupled = on;
        self.decide(&state);
    }

    /// Decides again with what the table holds (a policy's inputs changed with time: a
    /// Lease was acquired or expired without any kubelet publishing).
    pub(crate) fn redecide(&self) {
        let state = self.lock();
        self.decide(&state);
    }

    /// Whether the model lets the API answer now.
    pub(crate) fn api_allowed(&self) -> bool {
        self.api_allowed.load(Ordering::SeqCst)
    }

    /// What every node runs now.
    pub(crate) fn snapshot(&self) -> ControlPlaneSnapshot {
        self.lock().snapshot.clone()
    }

    /// Changes with every publication that changed something.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Decides under the state lock, so decisions are taken in publication order.
    fn decide(&self, state: &State) {
        let decision = ApiDecision {
            coupled: state.coupled,
            serving: self.serving_policy.serving(&state.snapshot),
        };
        let up = decision.is_up();
        self.api_allowed.store(up, Ordering::SeqCst);
        let serving = decision
            .serving
            .backends
            .iter()
            .map(|b| format!("{}/{}", b.node, b.pod.name))
            .collect();
        let version = decision
            .serving
            .version
            .clone()
            .unwrap_or_else(|| self.configured_version.clone());
        self.recorder.record_api(up, serving, Some(version));
        let leader = |role: Role, current: &watch::Sender<Leadership>| {
            if state.coupled {
                let current = current.borrow().clone();
                self.leader_policy.leader(role, &state.snapshot, &current)
            } else {
                Leadership::Ungated
            }
        };
        let cm = leader(Role::ControllerManager, &self.controller_manager);
        let scheduler = leader(Role::Scheduler, &self.scheduler);
        self.recorder.record_leader(Role::ControllerManager, &cm);
        self.recorder.record_leader(Role::Scheduler, &scheduler);
        replace(&self.api_up, up);
        replace(&self.api, decision);
        replace(&self.controller_manager, cm);
        replace(&self.scheduler, scheduler);
    }
}

/// Sends `value` if it differs from the current one (receivers wake only on real changes).
fn replace<T: PartialEq>(sender: &watch::Sender<T>, value: T) {
    sender.send_if_modified(|current| {
        if *current == value {
            false
        } else {
            *current = value;
            true
        }
    });
}
