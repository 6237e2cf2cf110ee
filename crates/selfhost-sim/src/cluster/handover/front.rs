//! One node-local API front (`selfhost front`) as the model runs it, beside the node's
//! kube-apiserver processes: it listens on the node's API address and passes each new
//! connection, bytes untouched, to a kube-apiserver of the node.
//!
//! - **Checks.** Every check interval it checks each backend's `/readyz`: the process a
//!   connection to the backend's address reaches passes when it accepts, is ready by its own
//!   account and was not told to stop. A backend is healthy after one pass, unhealthy at its
//!   first failure.
//! - **Passing on.** A new connection goes to the healthy backend with the fewest open
//!   connections (ties in turn); a refused connect (nothing listens there any more) counts as
//!   a failed check and the next healthy backend is tried. A connection passed on is never cut
//!   when its backend turns unhealthy.
//! - **Holding.** With no healthy backend a new connection waits up to the hold for one, then
//!   is closed unserved ("refused" in the counts).
//! - **Stopping.** On SIGTERM it stops accepting and lets its connections end; the kubelet
//!   ends the process when the drain runs out, which cuts those still open. It exits sooner
//!   once none is left.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::pool::Pool;
use super::sockets::FrontProcess;
use crate::cluster::node_input::NodeInput;
use crate::controllers::kubelet::{
    DEFAULT_FRONT_CHECK_INTERVAL, DEFAULT_FRONT_HOLD, PodRef, ProcessId,
};
use crate::server::{PassedOn, Relay, ServingProcess, WIRE};

/// Where a front's connection to a backend's address lands.
pub(super) trait Backends: Send + Sync {
    /// The kube-apiserver process the node's kernel hands a connection to `to` to (`None`:
    /// refused, nothing listens there).
    fn connect(&self, node: &str, to: SocketAddr) -> Option<Arc<ServingProcess>>;
}

/// One backend of a front as the model last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontBackendState {
    /// Its address (`--backend`).
    pub address: SocketAddr,
    /// Whether it takes new connections (its last check passed).
    pub healthy: bool,
    /// Connections passed to it and still open.
    pub open: u64,
}

/// One node-local API front as the model last saw it, with what it did with its connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiFrontState {
    /// Its node.
    pub node: String,
    /// Its pod's name.
    pub pod: String,
    /// Its process id on the node.
    pub process: ProcessId,
    /// Where it listens (`--listen`).
    pub listen: SocketAddr,
    /// Whether its socket is bound (new connections reach it).
    pub accepting: bool,
    /// Whether it was told to stop (it drains).
    pub stopping: bool,
    /// Whether its process is gone.
    pub exited: bool,
    /// Its backends, in `--backend` order.
    pub backends: Vec<FrontBackendState>,
    /// Connections passed on to a backend.
    pub passed: u64,
    /// Connections that found no healthy backend and were held.
    pub held: u64,
    /// Connections closed unserved: held the whole hold, or when it exited.
    pub refused: u64,
    /// Connections passed on and still open when it exited (its drain ran out), cut.
    pub cut: u64,
}

/// The durations a front runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FrontTiming {
    pub check_interval: Duration,
    pub hold: Duration,
}

impl FrontTiming {
    /// The front's flags as given (its caller renders them on the cluster's clock); its own
    /// defaults, for flags it lacks, on the clock of pod-spec durations (`divisor`).
    pub fn of(front: &FrontProcess, divisor: u32) -> FrontTiming {
        let default = |d: Duration| d / divisor.max(1);
        FrontTiming {
            check_interval: front
                .command
                .check_interval
                .unwrap_or_else(|| default(DEFAULT_FRONT_CHECK_INTERVAL))
                .max(Duration::from_millis(1)),
            hold: front
                .command
                .hold
                .unwrap_or_else(|| default(DEFAULT_FRONT_HOLD)),
        }
    }
}

/// A front at run time, shared by the model and the connections it holds or passed on.
#[derive(Debug)]
pub(crate) struct Front {
    pub label: String,
    pub node: String,
    pub pod: PodRef,
    pub process: ProcessId,
    pub listen: SocketAddr,
    pub timing: FrontTiming,
    pool: Mutex<Pool>,
    /// Bumped each time a backend becomes healthy: held connections wait on it.
    healthy: watch::Sender<u64>,
    accepting: AtomicBool,
    stopping: AtomicBool,
    exited: CancellationToken,
    /// Connections held now.
    holding: AtomicU64,
    passed: AtomicU64,
    held: AtomicU64,
    refused: AtomicU64,
    cut: AtomicU64,
    next_check: Mutex<Instant>,
    /// Where it says it exits, once drained (its node's kubelet).
    kubelet: Option<mpsc::UnboundedSender<NodeInput>>,
    exit_told: AtomicBool,
}

impl Front {
    /// The front `view` of `node`, on `timing`, checked first at once; it tells `kubelet`
    /// when it has drained.
    pub fn new(
        node: &str,
        view: &FrontProcess,
        timing: FrontTiming,
        kubelet: Option<mpsc::UnboundedSender<NodeInput>>,
    ) -> Front {
        Front {
            label: format!("{node}/{}#{}", view.pod.name, view.id),
            node: node.to_string(),
            pod: view.pod.clone(),
            process: view.id,
            listen: view.command.listen,
            timing,
            pool: Mutex::new(Pool::new(&view.command.backends)),
            healthy: watch::Sender::new(0),
            accepting: AtomicBool::new(view.holds_port),
            stopping: AtomicBool::new(false),
            exited: CancellationToken::new(),
            holding: AtomicU64::new(0),
            passed: AtomicU64::new(0),
            held: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            cut: AtomicU64::new(0),
            next_check: Mutex::new(Instant::now()),
            kubelet,
            exit_told: AtomicBool::new(false),
        }
    }

    fn pool(&self) -> MutexGuard<'_, Pool> {
        // A panic while holding the lock leaves counts that are still usable.
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes what the kubelet says of its process now.
    pub fn observe(&self, view: &FrontProcess) {
        if !view.holds_port && self.accepting.swap(false, Ordering::SeqCst) {
            tracing::debug!(target: WIRE, front = self.label, "no longer accepting");
        }
        if view.stopping && !self.stopping.swap(true, Ordering::SeqCst) {
            tracing::debug!(target: WIRE, front = self.label, "SIGTERM: draining");
            self.exit_if_drained();
        }
    }

    /// Whether new connections reach it.
    pub fn is_accepting(&self) -> bool {
        self.accepting.load(Ordering::SeqCst) && !self.exited.is_cancelled()
    }

    /// Its process is gone: every connection it holds or passed on is cut.
    pub fn exit(&self) {
        if !self.exited.is_cancelled() {
            tracing::debug!(target: WIRE, front = self.label, "exited");
        }
        self.accepting.store(false, Ordering::SeqCst);
        self.exited.cancel();
    }

    /// Whether its process is gone.
    pub fn has_exited(&self) -> bool {
        self.exited.is_cancelled()
    }

    /// Whether some backend takes new connections.
    pub fn any_healthy(&self) -> bool {
        self.pool().any_healthy()
    }

    /// When its next round of checks is due.
    pub fn next_check(&self) -> Instant {
        *self.next_check.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One round of checks at `now`: `passes` says whether a backend's `/readyz` passes.
    pub fn check(&self, now: Instant, passes: impl Fn(SocketAddr) -> bool) {
        let addresses: Vec<SocketAddr> = self.pool().backends.iter().map(|b| b.address).collect();
        let results: Vec<bool> = addresses.iter().map(|a| passes(*a)).collect();
        let mut rose = false;
        {
            let mut pool = self.pool();
            for (index, passed) in results.into_iter().enumerate() {
                let was = pool.backends.get(index).is_some_and(|b| b.healthy);
                if pool.record(index, passed) {
                    rose = true;
                }
                if was != passed {
                    let backend = addresses.get(index);
                    tracing::debug!(target: WIRE, front = self.label, ?backend, healthy = passed, "backend checked");
                }
            }
        }
        *self.next_check.lock().unwrap_or_else(|e| e.into_inner()) =
            now + self.timing.check_interval;
        if rose {
            self.healthy.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Tells the kubelet the process exits, once it was told to stop and no connection is
    /// left (held or passed on).
    fn exit_if_drained(&self) {
        let drained = self.stopping.load(Ordering::SeqCst)
            && self.holding.load(Ordering::SeqCst) == 0
            && self.pool().open() == 0;
        if !drained || self.exit_told.swap(true, Ordering::SeqCst) {
            return;
        }
        tracing::debug!(target: WIRE, front = self.label, "drained: exits");
        if let Some(kubelet) = &self.kubelet {
            // The kubelet task ends only at shutdown, when nobody needs the exit.
            let _ = kubelet.send(NodeInput::ExitProcess {
                process: self.process,
                code: 0,
                message: String::new(),
            });
        }
    }

    /// Passes the connection to a healthy backend, if one is; a refused connect takes the
    /// backend out and tries the next.
    fn try_pass(self: &Arc<Self>, backends: &dyn Backends) -> Option<PassedOn> {
        loop {
            let (index, address) = {
                let mut pool = self.pool();
                let index = pool.pick()?;
                (index, pool.backends.get(index)?.address)
            };
            match backends.connect(&self.node, address) {
                Some(process) => {
                    self.passed.fetch_add(1, Ordering::Relaxed);
                    return Some(PassedOn {
                        process,
                        cut: self.exited.clone(),
                        lease: Box::new(Lease {
                            front: self.clone(),
                            index,
                        }),
                    });
                }
                None => {
                    tracing::debug!(target: WIRE, front = self.label, %address, "connect refused: backend taken out");
                    self.pool().connect_failed(index);
                }
            }
        }
    }

    /// Passes a new connection on, holding it up to the hold while no backend is healthy;
    /// `None`: closed unserved.
    async fn pass_on(self: Arc<Self>, backends: Weak<dyn Backends>) -> Option<PassedOn> {
        let _holding = Holding::new(&self);
        let deadline = Instant::now() + self.timing.hold;
        let mut healthy = self.healthy.subscribe();
        let mut held = false;
        while !self.exited.is_cancelled() {
            // The model is gone (the cluster shuts down): nothing to pass to.
            let Some(model) = backends.upgrade() else {
                break;
            };
            if let Some(passed) = self.try_pass(model.as_ref()) {
                return Some(passed);
            }
            drop(model);
            if !held {
                held = true;
                self.held.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(target: WIRE, front = self.label, "no healthy backend: held");
            }
            tokio::select! {
                biased;
                () = self.exited.cancelled() => break,
                changed = healthy.changed() => if changed.is_err() { break },
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// What it is and did, for tests and reports.
    pub fn state(&self) -> ApiFrontState {
        let backends = self
            .pool()
            .backends
            .iter()
            .map(|b| FrontBackendState {
                address: b.address,
                healthy: b.healthy,
                open: b.open,
            })
            .collect();
        ApiFrontState {
            node: self.node.clone(),
            pod: self.pod.name.clone(),
            process: self.process,
            listen: self.listen,
            accepting: self.is_accepting(),
            stopping: self.stopping.load(Ordering::SeqCst),
            exited: self.has_exited(),
            backends,
            passed: self.passed.load(Ordering::Relaxed),
            held: self.held.load(Ordering::Relaxed),
            refused: self.refused.load(Ordering::Relaxed),
            cut: self.cut.load(Ordering::Relaxed),
        }
    }
}

/// Counts a connection held while it waits for a backend.
struct Holding(Arc<Front>);

impl Holding {
    fn new(front: &Arc<Front>) -> Holding {
        front.holding.fetch_add(1, Ordering::SeqCst);
        Holding(front.clone())
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.0.holding.fetch_sub(1, Ordering::SeqCst);
        self.0.exit_if_drained();
    }
}

/// A connection passed to backend `index`, open until dropped.
struct Lease {
    front: Arc<Front>,
    index: usize,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.front.has_exited() {
            self.front.cut.fetch_add(1, Ordering::Relaxed);
        }
        self.front.pool().release(self.index);
        self.front.exit_if_drained();
    }
}

/// A connection that reached a front: the server waits on it for the process it is passed
/// to.
pub(super) struct FrontConnection {
    pub front: Arc<Front>,
    pub backends: Weak<dyn Backends>,
}

impl std::fmt::Debug for FrontConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontConnection")
            .field("front", &self.front.label)
            .finish_non_exhaustive()
    }
}

impl Relay for FrontConnection {
    fn label(&self) -> &str {
        &self.front.label
    }

    fn pass_on(self: Arc<Self>) -> BoxFuture<'static, Option<PassedOn>> {
        Box::pin(self.front.clone().pass_on(self.backends.clone()))
    }
}
