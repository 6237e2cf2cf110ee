//! The node-local API front (`selfhost front`): a TCP proxy on the node's API address that
//! passes each new connection, TLS untouched, to one of the node's kube-apiservers on their
//! loopback addresses, only to those whose `/readyz` passes (see `docs/design.md`, "Node-local
//! API front"). The decisions (health from checks, the choice of a backend) are
//! `selfhost_core::front`'s; here are the sockets: `check.rs` (the `/readyz` checks),
//! `start.rs` (the checks before listening), `listen.rs` and `handover.rs` (the listening
//! socket, bound afresh or taken over from the front serving before, and given to the next),
//! `proxy.rs` (accepting and copying), `state.rs` (what their tasks share); `install.rs`
//! puts the front's static pod on a self-hosted node.

mod check;
mod error;
mod handover;
pub(crate) mod install;
mod listen;
mod proxy;
mod start;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use selfhost_core::front::{Event, HealthPolicy, Pool};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

pub use check::trusting;
pub use error::FrontError;
pub use handover::FreshBecause;
pub use listen::Listening;
pub use selfhost_core::front::Event as FrontEvent;
pub use selfhost_core::front::HANDOVER_SOCKET as DEFAULT_HANDOVER_SOCKET;
pub use start::Found;

use check::Checker;
use state::Shared;

/// Where kubeadm keeps the cluster CA.
pub const DEFAULT_CA_FILE: &str = "/etc/kubernetes/pki/ca.crt";
/// How often each backend's `/readyz` is checked.
pub const DEFAULT_CHECK_INTERVAL: Duration = Duration::from_millis(200);
/// How long a check may take before it fails.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a new connection is held while no backend is healthy, before it is closed.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(2);
/// How long open connections may take to finish once the front is stopped.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(25);
/// How long a starting front checks its backends for a healthy one before it listens anyway.
pub const DEFAULT_START_PATIENCE: Duration = Duration::from_secs(30);
/// How long a connection to a backend may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// What a front listens on, what it passes connections to and how it checks them.
#[derive(Debug, Clone)]
pub struct FrontOptions {
    /// The node's API address, e.g. `0.0.0.0:6443`.
    pub listen: SocketAddr,
    /// The node's kube-apiservers, each on its own loopback port (e.g. `127.0.0.1:6444`).
    pub backends: Vec<SocketAddr>,
    /// The PEM CA the backends' serving certificates are verified against.
    pub ca_file: PathBuf,
    /// The name the backends' certificates are verified for; `None`: each backend's IP
    /// address (kube-apiserver's certificate has 127.0.0.1 as an IP SAN).
    pub check_server_name: Option<String>,
    /// How often each backend is checked.
    pub check_interval: Duration,
    /// How long a check may take before it fails.
    pub check_timeout: Duration,
    /// Passes in a row before a backend takes connections; one failure takes it out.
    pub rise: u32,
    /// How long a new connection waits for a healthy backend before it is closed.
    pub hold: Duration,
    /// How long open connections may take to finish once the front is stopped, or once it
    /// handed its listening socket over.
    pub drain: Duration,
    /// How long it checks the backends for a healthy one before it listens anyway; while a
    /// front serves at the hand-over socket, it checks on and takes over only once one is.
    pub start_patience: Duration,
    /// The Unix socket where it takes the listening socket of the front serving before it,
    /// and then gives its own to the next one; `None`: it binds afresh and gives none.
    pub handover: Option<PathBuf>,
}

impl FrontOptions {
    /// A front on `listen` before `backends`, with the default CA file and timings, and no
    /// hand-over socket (`selfhost front` gives [`DEFAULT_HANDOVER_SOCKET`]).
    pub fn new(listen: SocketAddr, backends: Vec<SocketAddr>) -> FrontOptions {
        FrontOptions {
            listen,
            backends,
            ca_file: PathBuf::from(DEFAULT_CA_FILE),
            check_server_name: None,
            check_interval: DEFAULT_CHECK_INTERVAL,
            check_timeout: DEFAULT_CHECK_TIMEOUT,
            rise: 1,
            hold: DEFAULT_HOLD,
            drain: DEFAULT_DRAIN,
            start_patience: DEFAULT_START_PATIENCE,
            handover: None,
        }
    }
}

/// How a front ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrontStopped {
    /// Connections still open when the drain's time was up, and cut.
    pub cut: usize,
    /// Whether a new front took its listening socket before it was stopped.
    pub handed_over: bool,
}

/// How a front started: what its checks found, and how it came by its listening socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontStart {
    /// The backends as found before listening.
    pub found: Found,
    /// Taken over, or bound afresh and why.
    pub listening: Listening,
}

/// A front listening, its options checked, not yet passing connections on.
#[derive(Debug)]
pub struct Front {
    listener: TcpListener,
    /// Where it gives its listening socket to the next front.
    server: Option<UnixListener>,
    /// The conversation with the front it took its socket from.
    conversation: Option<UnixStream>,
    checker: Checker,
    options: FrontOptions,
    /// The backends' health as checked before listening.
    pool: Pool,
    /// The changes those checks made, told when it runs.
    told: Vec<Event>,
    start: FrontStart,
}

impl Front {
    /// Checks the options and reads the CA; checks the backends until one is healthy (or the
    /// start's patience is spent with no front serving at the hand-over socket); then takes the
    /// listening socket of the front serving the hand-over socket, or listens afresh, and
    /// serves the hand-over socket for the next front. The front it takes the socket from keeps
    /// accepting until this one runs.
    ///
    /// # Errors
    /// No backend, a backend on the listen address, a CA file missing or not PEM, a server
    /// name that is none, a hand-over socket that cannot be served or whose front listens
    /// elsewhere, or an address that cannot be listened on.
    pub async fn bind(options: FrontOptions) -> Result<Front, FrontError> {
        if options.backends.is_empty() {
            return Err(FrontError::NoBackend);
        }
        if let Some(&backend) = options.backends.iter().find(|&&b| b == options.listen) {
            return Err(FrontError::BackendIsListen { backend });
        }
        let checker = Checker::new(
            &options.ca_file,
            options.check_server_name.as_deref(),
            options.check_timeout,
        )?;
        if let Some(path) = &options.handover {
            listen::prepare(path)?;
        }
        let mut pool = Pool::new(
            options.backends.iter().map(ToString::to_string),
            HealthPolicy { rise: options.rise },
        );
        let (found, told) = start::check_backends(
            &checker,
            &options.backends,
            &mut pool,
            options.check_interval,
            options.start_patience,
            options.handover.as_deref(),
        )
        .await;
        let held = listen::acquire(options.listen, options.handover.as_deref()).await?;
        Ok(Front {
            listener: held.listener,
            server: held.server,
            conversation: held.conversation,
            checker,
            options,
            pool,
            told,
            start: FrontStart {
                found,
                listening: held.listening,
            },
        })
    }

    /// What its checks found before it listened, and how it came by its listening socket.
    pub fn start(&self) -> &FrontStart {
        &self.start
    }

    /// The address it listens on (with the port chosen, when 0 was asked for).
    ///
    /// # Errors
    /// The socket cannot say.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Checks the backends and passes connections on until `cancel`; then stops accepting,
    /// lets the open connections finish (up to the drain time) and returns. `report` hears
    /// each change of a backend's health and of the front's, once.
    ///
    /// When it took its socket over, it first tells the front it took it from, which stops
    /// accepting. When a new front takes its socket, it stops accepting, lets the open
    /// connections finish (up to the drain time) and then idles until `cancel`: as a static pod,
    /// a front that exits is started again, and would take the socket back.
    pub async fn run(
        self,
        cancel: CancellationToken,
        report: impl Fn(&FrontEvent) + Send + Sync + 'static,
    ) -> FrontStopped {
        let Front {
            listener,
            server,
            conversation,
            checker,
            options,
            pool,
            told,
            start: _,
        } = self;
        let shared = Arc::new(Shared::new(
            pool,
            options.backends.clone(),
            Box::new(report),
        ));
        for event in told {
            shared.tell(event);
        }
        if let Some(conversation) = conversation {
            handover::confirm(conversation).await;
        }
        let checks = cancel.child_token();
        for (index, &backend) in options.backends.iter().enumerate() {
            tokio::spawn(check_loop(
                checker.clone(),
                backend,
                index,
                options.check_interval,
                shared.clone(),
                checks.clone(),
            ));
        }
        let timing = proxy::Timing {
            hold: options.hold,
            connect: CONNECT_TIMEOUT,
            drain: options.drain,
        };
        let listener = Arc::new(listener);
        // Accepting ends at `cancel`, or when a new front took the socket.
        let accepting = cancel.child_token();
        let giving = server.map(|server| {
            let (socket, accepting, shared) = (listener.clone(), accepting.clone(), shared.clone());
            let held = socket.local_addr().unwrap_or(options.listen);
            let stop = cancel.clone();
            tokio::spawn(async move {
                let taken = handover::serve(server, socket, held, stop).await;
                if taken {
                    // Said once accepting has stopped: a connection made after it is the new
                    // front's.
                    accepting.cancel();
                    shared.tell(Event::HandedOver);
                }
                taken
            })
        });
        let cut = proxy::serve(listener, shared.clone(), timing, accepting).await;
        checks.cancel();
        let handed_over = match giving {
            Some(giving) => giving.await.unwrap_or(false),
            None => false,
        };
        if handed_over {
            shared.tell(Event::Drained { cut });
            cancel.cancelled().await;
        }
        FrontStopped { cut, handed_over }
    }
}

/// Checks one backend every `interval` until `stop`.
async fn check_loop(
    checker: Checker,
    backend: SocketAddr,
    index: usize,
    interval: Duration,
    shared: Arc<Shared>,
    stop: CancellationToken,
) {
    let mut ticks = tokio::time::interval(interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let check = tokio::select! {
            () = stop.cancelled() => return,
            check = checker.check(backend) => check,
        };
        shared.record(index, &check);
    }
}
