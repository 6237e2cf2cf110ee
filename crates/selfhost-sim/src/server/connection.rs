//! The connections of the simulated apiserver: the accept loop, each connection's life (its
//! process, if a router gave it one, decides when it is accepted, how it is answered, when it
//! closes), and each request's path through authentication, faults and the API router.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::Core;
use super::routing::{Route, ServingProcess, Verdict};
use crate::api::{self, Query};
use crate::error::ApiError;
use crate::faults::RequestFacts;

pub(super) async fn accept_loop(
    listener: TcpListener,
    core: Arc<Core>,
    router: Router,
    crash: CancellationToken,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = crash.cancelled() => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((socket, _)) => {
                    let _ = socket.set_nodelay(true);
                    let process = match core.route() {
                        Route::Direct => None,
                        Route::Refuse => {
                            refuse(socket);
                            continue;
                        }
                        Route::Process(p) => Some(p),
                    };
                    connections.spawn(connection(socket, core.clone(), router.clone(), process));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
        }
    }
    drop(listener);
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

/// Resets a connection nobody accepts (nothing listens where the router sent it).
fn refuse(socket: TcpStream) {
    // A zero linger makes the close an RST, as a closed port answers.
    let _ = socket.set_zero_linger();
    drop(socket);
}

/// One accepted connection: it waits until its process accepts (if it has one), then the TLS
/// handshake and HTTP, until it ends, its process closes its listener (then it closes once
/// idle) or its process exits (then it is cut).
async fn connection(
    socket: TcpStream,
    core: Arc<Core>,
    router: Router,
    process: Option<Arc<ServingProcess>>,
) {
    if let Some(p) = &process {
        p.count_connection();
        tokio::select! {
            biased;
            _ = p.exited().cancelled() => return refuse(socket),
            _ = p.listener_closed().cancelled() => return refuse(socket),
            _ = tokio::time::sleep_until(p.times().accepts_at) => {}
        }
    }
    match core.tls.clone() {
        Some(acceptor) => {
            let handshake = acceptor.accept(socket);
            let tls = match &process {
                Some(p) => tokio::select! {
                    _ = p.exited().cancelled() => return,
                    tls = handshake => tls,
                },
                None => handshake.await,
            };
            match tls {
                Ok(tls) => serve_connection(tls, core, router, process).await,
                Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
            }
        }
        None => serve_connection(socket, core, router, process).await,
    }
}

async fn serve_connection<S>(
    io: S,
    core: Arc<Core>,
    router: Router,
    process: Option<Arc<ServingProcess>>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let serving = process.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let core = core.clone();
        let router = router.clone();
        let serving = serving.clone();
        async move { handle(&core, router, req, serving.as_deref()).await }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(io), service);
    let Some(process) = process else {
        if let Err(e) = conn.await {
            tracing::trace!(error = %e, "connection ended");
        }
        return;
    };
    tokio::pin!(conn);
    let mut closing = false;
    loop {
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    tracing::trace!(error = %e, "connection ended");
                }
                return;
            }
            // Dropping the connection cuts it, watches included.
            _ = process.exited().cancelled() => return,
            _ = process.listener_closed().cancelled(), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Paths anyone may read without a token (the apiserver's public-info-viewer role).
fn is_public(path: &str) -> bool {
    ["/healthz", "/livez", "/readyz", "/version"]
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}/")))
}

/// Counts, authenticates and applies faults, then routes. An `Err` makes hyper close the
/// connection without an answer (the "connection reset" fault).
async fn handle(
    core: &Core,
    router: Router,
    req: Request<Incoming>,
    process: Option<&ServingProcess>,
) -> Result<Response<Body>, io::Error> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    if let Some(p) = process
        && let Verdict::Answer(response) =
            p.verdict(&path, is_public(&path), tokio::time::Instant::now())
    {
        return Ok(response);
    }
    let query = Query::parse(req.uri().query().unwrap_or(""));
    let (verb, resource) = match api::path::parse(&method, &path, &query) {
        Ok(api::path::ApiPath::Resource(r)) => (Some(r.verb), Some(r.resource_name())),
        _ => (None, None),
    };
    let user_agent = req
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match (verb, &resource) {
        (Some(v), Some(r)) => core.metrics.record(v.as_str(), r, user_agent),
        _ => core
            .metrics
            .record(&method.as_str().to_ascii_lowercase(), &path, user_agent),
    }
    if let Some(token) = &core.token
        && !is_public(&path)
    {
        let expected = format!("Bearer {token}");
        let given = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if given != Some(expected.as_str()) {
            return Ok(api::error_response(&ApiError::unauthorized()));
        }
    }
    let decision = core.faults.decide(&RequestFacts {
        method: &method,
        path: &path,
        verb,
        resource: resource.as_deref(),
    });
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    if decision.reset {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionReset,
            "injected connection reset",
        ));
    }
    if let Some(err) = decision.error {
        return Ok(api::error_response(&err));
    }
    let response: Result<Response<Body>, Infallible> = router.oneshot(req).await;
    Ok(response.unwrap_or_else(|never| match never {}))
}
