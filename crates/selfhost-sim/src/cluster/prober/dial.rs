//! The prober's own connector: a plain TCP dial, like hyper's, that notes each connection's
//! local address *before* it connects. A connection reset before its TLS handshake ends (a
//! connection queued on a kube-apiserver socket that closed before accepting it, or refused
//! where nothing listens) never reaches hyper's connection metadata, so without this note a
//! probe that failed that way could not say who caught it.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hyper_util::rt::{TokioExecutor, TokioIo};
use kube::client::ConfigExt;
use tokio::net::{TcpSocket, TcpStream};
use tower::{BoxError, ServiceBuilder};

use super::Connections;

/// One probe attempt, as its dials know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct AttemptId(pub(super) u64);

tokio::task_local! {
    /// The attempt whose future is being polled: the reads and the writes share one client,
    /// so a dial made while one attempt waits belongs to it only if it says so.
    static ATTEMPT: AttemptId;
}

/// Runs `attempt` as `id`: every dial its future makes is noted as made by it.
pub(super) async fn as_attempt<F: Future>(id: AttemptId, attempt: F) -> F::Output {
    ATTEMPT.scope(id, attempt).await
}

/// One dial: the local address, noted when the socket was bound, and the attempt that made
/// it (none when the client dialled from a task of its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Dial {
    pub(super) local: SocketAddr,
    pub(super) by: Option<AttemptId>,
}

/// Every dial so far, oldest first.
#[derive(Debug, Clone, Default)]
pub(super) struct Dials(Arc<Mutex<Vec<Dial>>>);

impl Dials {
    fn note(&self, local: SocketAddr) {
        let mut dials = self.0.lock().unwrap_or_else(|e| e.into_inner());
        dials.push(Dial {
            local,
            by: ATTEMPT.try_with(|id| *id).ok(),
        });
    }

    /// The dials `attempt` made.
    pub(super) fn by(&self, attempt: AttemptId) -> Vec<Dial> {
        let dials = self.0.lock().unwrap_or_else(|e| e.into_inner());
        dials
            .iter()
            .filter(|d| d.by == Some(attempt))
            .copied()
            .collect()
    }
}

/// The connector: resolves the host, binds a socket, notes its address, connects.
#[derive(Debug, Clone)]
struct Dialler {
    dials: Dials,
}

impl tower::Service<http::Uri> for Dialler {
    type Response = TokioIo<TcpStream>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let dials = self.dials.clone();
        Box::pin(async move {
            let host = uri
                .host()
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no host"))?
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string();
            let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
                Some("http") => 80,
                _ => 443,
            });
            let remote = tokio::net::lookup_host((host.as_str(), port))
                .await?
                .next()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
            let (socket, any) = match remote.ip() {
                IpAddr::V4(_) => (TcpSocket::new_v4()?, IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
                IpAddr::V6(_) => (TcpSocket::new_v6()?, IpAddr::V6(Ipv6Addr::UNSPECIFIED)),
            };
            // The address the server will see: the loopback one for a local server.
            let ip = if remote.ip().is_loopback() {
                remote.ip()
            } else {
                any
            };
            socket.bind(SocketAddr::new(ip, 0))?;
            dials.note(socket.local_addr()?);
            let stream = socket.connect(remote).await?;
            stream.set_nodelay(true)?;
            Ok(TokioIo::new(stream))
        })
    }
}

/// A kube client over [`Dialler`], as kube builds its own (base URI, credentials, extra
/// headers, rustls) but with no retry and no timeouts of its own: the prober times each
/// attempt itself. With [`Connections::NewPerRequest`] the pool keeps no idle connection, so
/// every request dials.
pub(super) fn client(
    config: kube::Config,
    dials: Dials,
    connections: Connections,
) -> Result<kube::Client, kube::Error> {
    let https = config.rustls_https_connector_with_connector(Dialler { dials })?;
    let mut builder = hyper_util::client::legacy::Client::builder(TokioExecutor::new());
    if connections == Connections::NewPerRequest {
        builder.pool_max_idle_per_host(0);
    }
    let hyper_client = builder.build::<_, kube::client::Body>(https);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(hyper_client);
    Ok(kube::Client::new(service, config.default_namespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    /// Two attempts in flight together, as a read and a write are: each finds only its own
    /// dials, and a dial from outside any attempt belongs to none.
    #[tokio::test]
    async fn an_attempt_finds_only_the_dials_it_made() {
        let dials = Dials::default();
        let (read, write) = (AttemptId(1), AttemptId(2));
        let (gate_tx, gate_rx) = tokio::sync::oneshot::channel::<()>();
        let slow = as_attempt(read, async {
            dials.note(addr(1001));
            // Waits while the other attempt dials, as a read held by a dead node does.
            let _ = gate_rx.await;
            dials.note(addr(1003));
        });
        let quick = as_attempt(write, async {
            dials.note(addr(1002));
            let _ = gate_tx.send(());
        });
        tokio::join!(slow, quick);
        dials.note(addr(1004));
        let locals = |id| dials.by(id).iter().map(|d| d.local).collect::<Vec<_>>();
        assert_eq!(locals(read), [addr(1001), addr(1003)]);
        assert_eq!(locals(write), [addr(1002)]);
        assert_eq!(locals(AttemptId(3)), Vec::<SocketAddr>::new());
    }
}
