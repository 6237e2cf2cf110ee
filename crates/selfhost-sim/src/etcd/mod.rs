//! A simulated etcd: the store served as etcd's v3 JSON gateway over HTTPS with client
//! certificates, for tools that read the cluster's data with no API server (`selfhost
//! recover`). It is the store's other face, as etcd is the API server's: it answers whether or
//! not any kube-apiserver runs, through power cuts and reboots of every node.
//!
//! `POST /v3/kv/range` is served (a key, or a range of keys; the values are what a
//! kube-apiserver writes), `/health`, `/version` and `POST /v3/maintenance/snapshot` (see
//! [`gateway`]).

mod encode;
mod gateway;
mod message;
mod pki;
mod schema;
#[cfg(test)]
mod tests;
mod wire;

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use gateway::PREFIX;
pub use pki::EtcdClientFiles;

use crate::store::Store;

/// Why the simulated etcd could not start.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// A certificate could not be minted.
    #[error("cannot mint the etcd certificates: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("cannot configure etcd's TLS: {0}")]
    Tls(String),
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Files {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The port could not be bound.
    #[error("cannot listen for etcd clients: {0}")]
    Listen(std::io::Error),
}

impl From<rustls::Error> for EtcdError {
    fn from(e: rustls::Error) -> Self {
        EtcdError::Tls(e.to_string())
    }
}

/// The running simulated etcd; it stops when dropped.
pub struct SimEtcd {
    address: SocketAddr,
    files: EtcdClientFiles,
    encrypted: Arc<Mutex<BTreeSet<String>>>,
    member: Arc<Mutex<gateway::Member>>,
    stop: CancellationToken,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for SimEtcd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimEtcd")
            .field("endpoint", &self.endpoint())
            .finish_non_exhaustive()
    }
}

impl SimEtcd {
    /// Serves `store` on a free loopback port, with a freshly minted PKI.
    ///
    /// # Errors
    /// The PKI cannot be minted or written, or no port can be bound.
    pub async fn start(store: Store) -> Result<SimEtcd, EtcdError> {
        let dir = tempfile::tempdir().map_err(|source| EtcdError::Files {
            path: std::env::temp_dir(),
            source,
        })?;
        let (tls, files) = pki::mint(dir.path())?;
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(EtcdError::Listen)?;
        let address = listener.local_addr().map_err(EtcdError::Listen)?;
        let encrypted = Arc::new(Mutex::new(BTreeSet::new()));
        let member = Arc::new(Mutex::new(gateway::Member::default()));
        let gateway = gateway::Gateway {
            store,
            encrypted: Arc::clone(&encrypted),
            member: Arc::clone(&member),
        };
        let stop = CancellationToken::new();
        tokio::spawn(serve(
            listener,
            tokio_rustls::TlsAcceptor::from(tls),
            gateway,
            stop.clone(),
        ));
        Ok(SimEtcd {
            address,
            files,
            encrypted,
            member,
            stop,
            _dir: dir,
        })
    }

    /// `https://127.0.0.1:PORT`, for `--etcd-endpoints`.
    pub fn endpoint(&self) -> String {
        format!("https://{}", self.address)
    }

    /// The CA, client certificate and key a client presents.
    pub fn client_files(&self) -> &EtcdClientFiles {
        &self.files
    }

    /// Serves every object of `resource` (`secrets`) as encrypted at rest from now on, as an
    /// API server with an `EncryptionConfiguration` for it would have stored them.
    pub fn encrypt_at_rest(&self, resource: &str) {
        if let Ok(mut encrypted) = self.encrypted.lock() {
            encrypted.insert(resource.to_string());
        }
    }
}

impl SimEtcd {
    /// The version `/version` reports (`3.5.24` unless set).
    pub fn set_version(&self, version: &str) {
        if let Ok(mut member) = self.member.lock() {
            member.version = version.to_string();
        }
    }

    /// Whether `/health` says the member is healthy (it is unless set).
    pub fn set_healthy(&self, healthy: bool) {
        if let Ok(mut member) = self.member.lock() {
            member.healthy = healthy;
        }
    }
}

impl Drop for SimEtcd {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn serve(
    listener: TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    gateway: gateway::Gateway,
    stop: CancellationToken,
) {
    loop {
        let socket = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => socket,
                Err(e) => {
                    tracing::debug!(error = %e, "etcd accept");
                    continue;
                }
            },
        };
        let (acceptor, gateway, stop) = (acceptor.clone(), gateway.clone(), stop.clone());
        tokio::spawn(async move {
            // A client without a certificate of the etcd CA fails here, as with etcd.
            let Ok(tls) = acceptor.accept(socket).await else {
                return;
            };
            let service =
                hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let gateway = gateway.clone();
                    async move {
                        let method = request.method().to_string();
                        let path = request.uri().path().to_string();
                        let body = match request.into_body().collect().await {
                            Ok(collected) => collected.to_bytes(),
                            Err(_) => Bytes::new(),
                        };
                        let (status, text) =
                            if method == "POST" && path == "/v3/maintenance/snapshot" {
                                (200, gateway.snapshot().join("\n"))
                            } else {
                                let answer = gateway.answer(&method, &path, &body);
                                (answer.status, answer.body.to_string())
                            };
                        let mut response = http::Response::new(Full::new(Bytes::from(text)));
                        *response.status_mut() = http::StatusCode::from_u16(status)
                            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
                        response.headers_mut().insert(
                            http::header::CONTENT_TYPE,
                            http::HeaderValue::from_static("application/json"),
                        );
                        Ok::<_, Infallible>(response)
                    }
                });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let connection = builder.serve_connection(TokioIo::new(tls), service);
            tokio::select! {
                () = stop.cancelled() => {}
                _ = connection => {}
            }
        });
    }
}
