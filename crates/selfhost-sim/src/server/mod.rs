//! The simulated apiserver as a process-like thing: it listens on a port, writes a
//! kubeconfig, and can crash (listener closed, every connection cut) and restart on the
//! same port, the way a kube-apiserver pod dies and comes back.
//!
//! The accept loop is our own (not `axum::serve`) so that a crash really cuts keep-alive
//! connections and watch streams, so a fault can reset a connection without answering, and so
//! a [`ConnectionRouter`] can hand each new connection to a simulated process (see
//! [`routing`]).

mod caught;
mod connection;
mod routing;

pub use caught::{Catcher, ConnectionLog};

/// The `User-Agent` of the simulator's probers (`SimCluster::prober`): the server counts and
/// logs their requests apart from everyone else's.
pub const PROBER_USER_AGENT: &str = "selfhost-sim-prober";

/// A header naming each probe attempt (`read-<n>`, `write-<n>`, counted from 0 in each
/// series, the index of its sample), so that the server's log can tell attempts apart.
pub const PROBE_HEADER: &str = "x-selfhost-probe";
pub(crate) use routing::WIRE;
pub use routing::{
    ConnectionRouter, NEW_CONNECTION_IDLE, PassedOn, ProcessOrigin, ProcessTimes, Relay, Route,
    ServingProcess, Verdict,
};

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::{self, ApiConfig, AppState, system::Control};
use crate::auth::{Authenticator, UserInfo};
use crate::faults::Faults;
use crate::gc::GarbageCollector;
use crate::kubeconfig::{self, Endpoint};
use crate::metrics::Metrics;
use crate::store::{Store, StoreOptions};
use connection::accept_loop;

/// Why the simulator could not start or restart.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The port could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// The kubeconfig could not be written.
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// Where it was written.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The kubeconfig could not be rendered or read back.
    #[error("invalid kubeconfig: {0}")]
    KubeconfigFormat(String),
    /// A kube client could not be built from the kubeconfig.
    #[error("cannot build a client for the simulator: {0}")]
    Client(String),
    /// The TLS identity could not be minted.
    #[error("cannot create the TLS identity: {0}")]
    Tls(String),
    /// The bootstrap RBAC policy could not be stored.
    #[error("cannot store the bootstrap RBAC policy: {0}")]
    RbacPolicy(crate::error::ApiError),
}

/// How to start a simulated apiserver.
#[derive(Debug, Clone)]
pub struct SimServerOptions {
    /// Address to listen on (127.0.0.1 by default).
    pub address: IpAddr,
    /// Port; 0 picks a free one (kept across restarts).
    pub port: u16,
    /// Serve HTTPS with a freshly minted CA and require a bearer token.
    pub tls: bool,
    /// Require a bearer token and authorize every request by the stored RBAC objects (seeded
    /// with the bootstrap policy); the kubeconfig's token is `kubernetes-admin`'s, in
    /// `system:masters`. Off: every authenticated request is allowed.
    pub rbac: bool,
    /// `gitVersion` reported by `/version`.
    pub git_version: String,
    /// Sizing of the store.
    pub store: StoreOptions,
    /// Watch timings.
    pub api: ApiConfig,
    /// Whether the garbage collector runs from the start.
    pub garbage_collector: bool,
    /// Where to write the kubeconfig; a temporary directory removed on shutdown by default.
    pub kubeconfig_path: Option<PathBuf>,
    /// The default namespace of the kubeconfig's context.
    pub namespace: String,
}

impl Default for SimServerOptions {
    fn default() -> Self {
        SimServerOptions {
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            tls: false,
            rbac: false,
            git_version: "v1.33.2".into(),
            store: StoreOptions::default(),
            api: ApiConfig::default(),
            garbage_collector: true,
            kubeconfig_path: None,
            namespace: "default".into(),
        }
    }
}

struct Running {
    crash: CancellationToken,
    task: JoinHandle<()>,
}

/// Shared by the server handle, its accept loop and the down-for fault.
struct Core {
    addr: SocketAddr,
    store: Store,
    faults: Faults,
    metrics: Metrics,
    control: Arc<Control>,
    config: ApiConfig,
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// Whether a token is required (TLS or RBAC mode).
    token_required: bool,
    auth: Arc<Authenticator>,
    running: Mutex<Option<Running>>,
    /// Kept down from outside (the self-hosting model: no kube-apiserver is Ready).
    held_down: AtomicBool,
    /// The end of a `down_for` fault in progress.
    fault_until: Mutex<Option<tokio::time::Instant>>,
    /// Who serves each new connection (`None`: the simulator itself).
    router: RwLock<Option<Arc<dyn ConnectionRouter>>>,
    /// Where each connection went, for reports of who caught a failed request.
    connections: Arc<ConnectionLog>,
}

impl Core {
    fn running(&self) -> MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn route(&self) -> Route {
        let router = self.router.read().unwrap_or_else(|e| e.into_inner());
        router.as_ref().map_or(Route::Direct, |r| r.route())
    }

    fn in_fault_window(&self) -> bool {
        let until = self.fault_until.lock().unwrap_or_else(|e| e.into_inner());
        until.is_some_and(|u| u > tokio::time::Instant::now())
    }

    /// Binds the port (retrying briefly while the old socket lets go) and starts serving;
    /// does nothing while the server is held down.
    async fn listen(self: &Arc<Self>) -> Result<(), SimError> {
        if self.held_down.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut attempt = 0;
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) if attempt < 50 && e.kind() == io::ErrorKind::AddrInUse => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(source) => {
                    return Err(SimError::Bind {
                        addr: self.addr,
                        source,
                    });
                }
            }
        };
        self.serve(listener);
        Ok(())
    }

    fn serve(self: &Arc<Self>, listener: TcpListener) {
        let crash = CancellationToken::new();
        let router = api::router(AppState {
            store: self.store.clone(),
            faults: self.faults.clone(),
            control: self.control.clone(),
            crash: crash.clone(),
            config: self.config,
        });
        let task = tokio::spawn(accept_loop(listener, self.clone(), router, crash.clone()));
        if let Some(old) = self.running().replace(Running { crash, task }) {
            old.crash.cancel();
        }
    }

    /// Closes the listener and cuts every connection; returns once they are gone.
    async fn crash(&self) {
        let running = self.running().take();
        if let Some(r) = running {
            r.crash.cancel();
            let _ = r.task.await;
        }
    }
}

/// A running simulated apiserver.
pub struct SimServer {
    core: Arc<Core>,
    endpoint: Endpoint,
    kubeconfig_path: PathBuf,
    kubeconfig_yaml: String,
    namespace: String,
    _kubeconfig_dir: Option<tempfile::TempDir>,
    client: kube::Client,
    gc: GarbageCollector,
}

impl std::fmt::Debug for SimServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimServer")
            .field("endpoint", &self.endpoint)
            .field("kubeconfig", &self.kubeconfig_path)
            .finish()
    }
}

impl SimServer {
    /// Starts a simulator: binds the port, writes the kubeconfig, builds a client and starts
    /// the garbage collector.
    pub async fn start(options: SimServerOptions) -> Result<SimServer, SimError> {
        let requested = SocketAddr::new(options.address, options.port);
        let listener = TcpListener::bind(requested)
            .await
            .map_err(|source| SimError::Bind {
                addr: requested,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            addr: requested,
            source,
        })?;
        let (tls, endpoint) = tls_identity(options.tls, options.rbac, addr)?;
        let store = Store::new(options.store);
        let auth = Arc::new(Authenticator::new(endpoint.token.as_deref(), options.rbac));
        if options.rbac {
            crate::auth::bootstrap::seed(&store).map_err(SimError::RbacPolicy)?;
        }
        let core = Arc::new(Core {
            addr,
            store: store.clone(),
            faults: Faults::default(),
            metrics: Metrics::default(),
            control: Arc::new(Control::new(&options.git_version)),
            config: options.api,
            tls,
            token_required: endpoint.token.is_some(),
            auth,
            running: Mutex::new(None),
            held_down: AtomicBool::new(false),
            fault_until: Mutex::new(None),
            router: RwLock::new(None),
            connections: Arc::default(),
        });
        core.serve(listener);
        let weak: Weak<Core> = Arc::downgrade(&core);
        core.faults.set_down_hook(Arc::new(move |duration| {
            let weak = weak.clone();
            tokio::spawn(async move {
                let Some(core) = weak.upgrade() else { return };
                let until = tokio::time::Instant::now() + duration;
                *core.fault_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(until);
                core.crash().await;
                tokio::time::sleep_until(until).await;
                if core.running().is_some() {
                    // Someone restarted it already.
                    return;
                }
                if let Err(e) = core.listen().await {
                    tracing::error!(error = %e, "the simulated apiserver could not come back");
                }
            });
        }));

        let kubeconfig_yaml = kubeconfig::render(&endpoint, &options.namespace)
            .map_err(|e| SimError::KubeconfigFormat(e.to_string()))?;
        let (dir, kubeconfig_path) = match options.kubeconfig_path {
            Some(p) => (None, p),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("selfhost-sim-")
                    .tempdir()
                    .map_err(|source| SimError::Kubeconfig {
                        path: std::env::temp_dir(),
                        source,
                    })?;
                let path = dir.path().join("kubeconfig");
                (Some(dir), path)
            }
        };
        kubeconfig::write(&kubeconfig_path, &kubeconfig_yaml).map_err(|source| {
            SimError::Kubeconfig {
                path: kubeconfig_path.clone(),
                source,
            }
        })?;
        let client = client_for(&kubeconfig_yaml).await?;
        let gc = GarbageCollector::spawn(store, options.garbage_collector);
        Ok(SimServer {
            core,
            endpoint,
            kubeconfig_path,
            kubeconfig_yaml,
            namespace: options.namespace,
            _kubeconfig_dir: dir,
            client,
            gc,
        })
    }

    /// A kube client configured from the kubeconfig (default settings, retries included).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Builds a new client from the kubeconfig, with `configure` applied to its config (e.g.
    /// `default_retry = false` or a read timeout).
    pub async fn client_with(
        &self,
        configure: impl FnOnce(&mut kube::Config),
    ) -> Result<kube::Client, SimError> {
        let mut config = config_for(&self.kubeconfig_yaml).await?;
        configure(&mut config);
        kube::Client::try_from(config).map_err(|e| SimError::Client(e.to_string()))
    }

    /// The kube client configuration of this server's kubeconfig, for a client built by hand.
    ///
    /// # Errors
    /// The kubeconfig cannot be read as a client configuration.
    pub async fn config(&self) -> Result<kube::Config, SimError> {
        config_for(&self.kubeconfig_yaml).await
    }

    /// A kubeconfig for this server that authenticates as `user` with a freshly minted
    /// bearer token (the text holds the token: do not log it).
    ///
    /// # Errors
    /// The kubeconfig cannot be rendered.
    pub fn kubeconfig_for(&self, user: UserInfo) -> Result<String, SimError> {
        let endpoint = Endpoint {
            token: Some(self.core.auth.mint(user)),
            ..self.endpoint.clone()
        };
        kubeconfig::render(&endpoint, &self.namespace)
            .map_err(|e| SimError::KubeconfigFormat(e.to_string()))
    }

    /// A kube client that authenticates as `user` (see [`SimServer::kubeconfig_for`]).
    ///
    /// # Errors
    /// The kubeconfig cannot be rendered or turned into a client.
    pub async fn client_for(&self, user: UserInfo) -> Result<kube::Client, SimError> {
        client_for(&self.kubeconfig_for(user)?).await
    }

    /// Whether requests are authorized by RBAC.
    pub fn rbac(&self) -> bool {
        self.core.auth.rbac()
    }

    /// Where the kubeconfig was written.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The kubeconfig text.
    pub fn kubeconfig_yaml(&self) -> &str {
        &self.kubeconfig_yaml
    }

    /// `http://127.0.0.1:PORT` (or `https://` in TLS mode).
    pub fn endpoint(&self) -> &str {
        &self.endpoint.server
    }

    /// The PEM of the CA that signed the serving certificate, in TLS mode.
    pub fn ca_pem(&self) -> Option<&str> {
        self.endpoint.ca_pem.as_deref()
    }

    /// The address the server listens on (the same across restarts).
    pub fn address(&self) -> SocketAddr {
        self.core.addr
    }

    /// Whether the server is currently accepting connections.
    pub fn is_up(&self) -> bool {
        self.core.running().is_some()
    }

    /// Crashes the apiserver: the listener closes and every connection (watches included)
    /// is cut. Returns once nothing is served any more. The store survives, as etcd would.
    pub async fn crash(&self) {
        self.core.crash().await;
    }

    /// Holds the server down (`true`: it stops listening, as [`SimServer::crash`]) or lets
    /// it serve again (`false`: it listens, unless a `down_for` fault is still running, whose
    /// end then brings it back). The self-hosting model holds it down while no
    /// kube-apiserver is Ready; while held, [`SimServer::restart`] does nothing.
    pub async fn hold_down(&self, held: bool) -> Result<(), SimError> {
        self.core.held_down.store(held, Ordering::SeqCst);
        if held {
            self.core.crash().await;
            return Ok(());
        }
        if self.is_up() || self.core.in_fault_window() {
            return Ok(());
        }
        self.core.listen().await
    }

    /// Whether the server is held down (see [`SimServer::hold_down`]).
    pub fn is_held_down(&self) -> bool {
        self.core.held_down.load(Ordering::SeqCst)
    }

    /// Starts serving again on the same port (a no-op if already up, or while held down).
    pub async fn restart(&self) -> Result<(), SimError> {
        if self.is_up() {
            return Ok(());
        }
        self.core.listen().await
    }

    /// Installs (or removes) the router that hands each new connection to a simulated
    /// process; connections already open keep theirs.
    pub fn set_router(&self, router: Option<Arc<dyn ConnectionRouter>>) {
        *self.core.router.write().unwrap_or_else(|e| e.into_inner()) = router;
    }

    /// Where each connection went (see [`ConnectionLog`]).
    pub fn connections(&self) -> Arc<ConnectionLog> {
        self.core.connections.clone()
    }

    /// The fault injector.
    pub fn faults(&self) -> &Faults {
        &self.core.faults
    }

    /// The request counters.
    pub fn metrics(&self) -> &Metrics {
        &self.core.metrics
    }

    /// The store, for in-process writers that must go through the same path as HTTP.
    pub fn store(&self) -> &Store {
        &self.core.store
    }

    /// The garbage collector (pause it to simulate a controller-manager outage).
    pub fn garbage_collector(&self) -> &GarbageCollector {
        &self.gc
    }

    /// Sets the `gitVersion` `/version` reports, e.g. `v1.34.0`.
    pub fn set_version(&self, git_version: &str) {
        self.core.control.set_version(git_version);
    }

    /// The `gitVersion` `/version` reports.
    pub fn version(&self) -> String {
        self.core.control.git_version()
    }

    /// Makes a named health check (`etcd`, `shutdown`, `poststarthook/...`) fail or pass on
    /// `/healthz`, `/livez` and `/readyz`.
    pub fn set_health_check_failing(&self, check: &str, failing: bool) {
        self.core.control.set_check_failing(check, failing);
    }

    /// Stops serving for good.
    pub async fn shutdown(self) {
        self.gc.set_enabled(false);
        self.core.crash().await;
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        if let Some(r) = self.core.running().take() {
            r.crash.cancel();
            r.task.abort();
        }
    }
}

/// The TLS acceptor and the endpoint clients use.
fn tls_identity(
    tls: bool,
    rbac: bool,
    addr: SocketAddr,
) -> Result<(Option<tokio_rustls::TlsAcceptor>, Endpoint), SimError> {
    if !tls {
        let endpoint = Endpoint {
            server: format!("http://{addr}"),
            ca_pem: None,
            token: rbac.then(crate::tls::generate_token),
        };
        return Ok((None, endpoint));
    }
    let identity = crate::tls::TlsIdentity::generate(&[addr.ip().to_string()])
        .map_err(|e| SimError::Tls(e.to_string()))?;
    let endpoint = Endpoint {
        server: format!("https://{addr}"),
        ca_pem: Some(identity.ca_pem().to_string()),
        token: Some(crate::tls::generate_token()),
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(identity.server_config());
    Ok((Some(acceptor), endpoint))
}

async fn config_for(yaml: &str) -> Result<kube::Config, SimError> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml)
        .map_err(|e| SimError::KubeconfigFormat(e.to_string()))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| SimError::Client(e.to_string()))
}

async fn client_for(yaml: &str) -> Result<kube::Client, SimError> {
    let config = config_for(yaml).await?;
    kube::Client::try_from(config).map_err(|e| SimError::Client(e.to_string()))
}
