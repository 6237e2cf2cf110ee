//! The node-local API front (`selfhost front`): a TCP proxy on the node's API address that
//! passes each new connection, TLS untouched, to one of the node's kube-apiservers on their
//! loopback ports, only to those whose `/readyz` passes (see `docs/design.md`, "Node-local
//! API front"). The decisions (health from checks, the choice of a backend) are
//! `selfhost_core::front`'s; here are the sockets: `check.rs` (the `/readyz` checks),
//! `proxy.rs` (accepting and copying), `state.rs` (what their tasks share).

mod check;
mod error;
pub(crate) mod install;
mod proxy;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use selfhost_core::front::{HealthPolicy, Pool};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use check::trusting;
pub use error::FrontError;
pub use selfhost_core::front::Event as FrontEvent;

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
    /// How long open connections may take to finish once the front is stopped.
    pub drain: Duration,
}

impl FrontOptions {
    /// A front on `listen` before `backends`, with the default CA file and timings.
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
        }
    }
}

/// How a front ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrontStopped {
    /// Connections still open when the drain's time was up, and cut.
    pub cut: usize,
}

/// A front listening, its options checked, not yet passing connections on.
#[derive(Debug)]
pub struct Front {
    listener: TcpListener,
    checker: Checker,
    options: FrontOptions,
}

impl Front {
    /// Checks the options, reads the CA and listens.
    ///
    /// # Errors
    /// No backend, a backend on the listen address, a CA file missing or not PEM, a server
    /// name that is none, or an address that cannot be listened on.
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
        let listener = TcpListener::bind(options.listen)
            .await
            .map_err(|e| FrontError::listen(options.listen, e))?;
        Ok(Front {
            listener,
            checker,
            options,
        })
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
    pub async fn run(
        self,
        cancel: CancellationToken,
        report: impl Fn(&FrontEvent) + Send + Sync + 'static,
    ) -> FrontStopped {
        let Front {
            listener,
            checker,
            options,
        } = self;
        let pool = Pool::new(
            options.backends.iter().map(ToString::to_string),
            HealthPolicy { rise: options.rise },
        );
        let shared = Arc::new(Shared::new(
            pool,
            options.backends.clone(),
            Box::new(report),
        ));
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
        let cut = proxy::serve(listener, shared, timing, cancel).await;
        checks.cancel();
        FrontStopped { cut }
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
