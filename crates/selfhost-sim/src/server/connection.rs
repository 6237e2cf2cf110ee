//! The connections of the simulated apiserver: the accept loop, each connection's life (its
//! process, if a router gave it one, decides when it is accepted, how it is answered, when it
//! closes), and each request's path through authentication, faults and the API router.

use std::convert::Infallible;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
use super::caught::Catcher;
use super::routing::{PassedOn, Relay, Route, ServingProcess, Verdict, WIRE};
use crate::api::{self, Query};
use crate::auth::{self, Attributes, Authentication, UserInfo, review};
use crate::error::ApiError;
use crate::faults::RequestFacts;

/// Numbers connections in the debug events, so that one connection's life can be followed.
static NEXT_CONNECTION: AtomicU64 = AtomicU64::new(0);

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
                Ok((socket, client)) => {
                    let _ = socket.set_nodelay(true);
                    let process = match core.route() {
                        Route::Direct => {
                            core.connections.note(client, Catcher::Direct);
                            None
                        }
                        Route::Refuse => {
                            tracing::debug!(target: WIRE, "refused: nothing listens where the router sent it");
                            core.connections.note(client, Catcher::Refused);
                            refuse(socket);
                            continue;
                        }
                        Route::Process(p) => {
                            core.connections.note(client, Catcher::Process(p.clone()));
                            Some(p)
                        }
                        Route::Relay(relay) => {
                            core.connections.note(client, Catcher::Front(relay.label().to_string()));
                            connections.spawn(relayed(socket, client, core.clone(), router.clone(), relay));
                            continue;
                        }
                    };
                    let arrived = tokio::time::Instant::now();
                    connections.spawn(connection(socket, core.clone(), router.clone(), process, arrived));
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

/// A connection a relay (a node's API front) accepted: once it passes it on, the connection
/// lives as one the kernel handed to that process, and ends too when the relay cuts it; if
/// the relay closes it unserved, the client sees an orderly close before any answer.
async fn relayed(
    socket: TcpStream,
    client: std::net::SocketAddr,
    core: Arc<Core>,
    router: Router,
    relay: Arc<dyn Relay>,
) {
    let label = relay.label().to_string();
    let Some(PassedOn {
        process,
        cut,
        lease,
    }) = relay.pass_on().await
    else {
        tracing::debug!(target: WIRE, relay = label, "closed unserved");
        drop(socket);
        return;
    };
    core.connections
        .note(client, Catcher::Process(process.clone()));
    tracing::debug!(target: WIRE, relay = label, process = process.label(), "passed on");
    let arrived = tokio::time::Instant::now();
    tokio::select! {
        // Dropping the connection cuts it, as the relay's exit drops both of its sockets.
        _ = cut.cancelled() => {
            tracing::debug!(target: WIRE, relay = label, process = process.label(), "cut by the relay");
        }
        _ = connection(socket, core, router, Some(process.clone()), arrived) => {}
    }
    drop(lease);
}

/// Resets a connection queued on a process that closed its socket or exited before accepting it.
fn refuse_queued(socket: TcpStream, conn: u64, process: &ServingProcess) {
    tracing::debug!(target: WIRE, conn, process = process.label(), "reset in the accept queue");
    refuse(socket);
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
    arrived: tokio::time::Instant,
) {
    let conn = NEXT_CONNECTION.fetch_add(1, Ordering::Relaxed);
    if let Some(p) = &process {
        tracing::debug!(target: WIRE, conn, process = p.label(), "accepted");
        p.count_connection();
        if arrived < p.times().accepts_at {
            // Queued on a socket whose process does not accept yet: reset if the socket
            // closes first, as the kernel resets an accept queue.
            tokio::select! {
                biased;
                _ = p.exited().cancelled() => return refuse_queued(socket, conn, p),
                _ = p.listener_closed().cancelled() => return refuse_queued(socket, conn, p),
                _ = tokio::time::sleep_until(p.times().accepts_at) => {}
            }
        } else if p.has_exited() {
            return refuse_queued(socket, conn, p);
        }
        // A process that accepts takes a connection off its queue at once: the listener
        // closing after that leaves it to `serve_connection` (this task may run late on a
        // busy machine; the connection was accepted when it arrived).
    }
    let accepted = process
        .as_ref()
        .map_or(arrived, |p| arrived.max(p.times().accepts_at));
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
                Ok(tls) => serve_connection(tls, core, router, process, conn, accepted).await,
                Err(e) => tracing::debug!(error = %e, "TLS handshake failed"),
            }
        }
        None => serve_connection(socket, core, router, process, conn, accepted).await,
    }
}

async fn serve_connection<S>(
    io: S,
    core: Arc<Core>,
    router: Router,
    process: Option<Arc<ServingProcess>>,
    conn: u64,
    accepted: tokio::time::Instant,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let serving = process.clone();
    // Requests begun on this connection, and a signal when the first one begins.
    let requests = Arc::new(AtomicU64::new(0));
    let first_request = Arc::new(tokio::sync::Notify::new());
    let (counted, begun) = (requests.clone(), first_request.clone());
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        let core = core.clone();
        let router = router.clone();
        let serving = serving.clone();
        if counted.fetch_add(1, Ordering::SeqCst) == 0 {
            begun.notify_one();
        }
        async move { handle(&core, router, req, serving.as_deref(), conn).await }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let http = builder.serve_connection(TokioIo::new(io), service);
    let Some(process) = process else {
        if let Err(e) = http.await {
            tracing::trace!(error = %e, "connection ended");
        }
        return;
    };
    tokio::pin!(http);
    // Closing: the listener closed. Waiting: this connection has not begun a request yet,
    // and Go's server leaves such a new connection open (`StateNew`) until it either begins
    // one, answered with keep-alive off, or has been new for the process's
    // `new_connection_idle` — on the cluster's clock, so that it ends within the grace period
    // as it does on a real one, and a connection a client opened long before and left unused
    // in its pool is closed with the other idle ones rather than cut at the exit under the
    // request the client later sends on it.
    let idle_after = accepted + process.new_connection_idle();
    let (mut closing, mut waiting) = (false, false);
    loop {
        tokio::select! {
            ended = http.as_mut() => {
                tracing::debug!(target: WIRE, conn, process = process.label(), error = ?ended.err(), "ended");
                return;
            }
            // Dropping the connection cuts it, watches included.
            _ = process.exited().cancelled() => {
                tracing::debug!(target: WIRE, conn, process = process.label(), "cut at exit");
                return;
            }
            _ = process.listener_closed().cancelled(), if !closing => {
                closing = true;
                let begun = requests.load(Ordering::SeqCst);
                waiting = begun == 0 && tokio::time::Instant::now() < idle_after;
                tracing::debug!(target: WIRE, conn, process = process.label(), requests = begun, waiting, "listener closed");
                if !waiting {
                    http.as_mut().graceful_shutdown();
                }
            }
            _ = first_request.notified(), if waiting => {
                waiting = false;
                tracing::debug!(target: WIRE, conn, process = process.label(), "first request after the listener closed: answered with keep-alive off");
                http.as_mut().graceful_shutdown();
            }
            _ = tokio::time::sleep_until(idle_after), if waiting => {
                waiting = false;
                http.as_mut().graceful_shutdown();
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
    conn: u64,
) -> Result<Response<Body>, io::Error> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let from_prober = req
        .headers()
        .get(http::header::USER_AGENT)
        .is_some_and(|v| v.as_bytes() == super::PROBER_USER_AGENT.as_bytes());
    if from_prober {
        let probe = req.headers().get(super::PROBE_HEADER);
        tracing::debug!(target: WIRE, conn, process = process.map(|p| p.label()), %method, %path, ?probe, "prober request");
    }
    if let Some(p) = process {
        // A process that has exited answers nothing: its connections are gone. (This
        // connection's task may read a request before it notices the exit on a busy machine;
        // the client must see the connection cut, as it would, not an answer.)
        if p.has_exited() {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "the process serving this connection has exited",
            ));
        }
        if let Verdict::Answer(response) =
            p.verdict(&path, is_public(&path), tokio::time::Instant::now())
        {
            return Ok(response);
        }
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
    let user = match core.auth.authenticate(req.headers()) {
        Authentication::User(user) => user,
        // Health and version are public; everything else needs a valid token when one is
        // required (without one, the simulator trusts every client as the admin).
        _ if !core.token_required => UserInfo::admin(),
        _ if is_public(&path) => UserInfo::anonymous(),
        _ => return Ok(api::error_response(&ApiError::unauthorized())),
    };
    if core.auth.rbac() {
        let attributes = Attributes::of(&method, &path, req.uri().query().unwrap_or(""));
        if !core.auth.authorize(&core.store, &user, &attributes).allowed {
            return Ok(api::error_response(&auth::forbidden(&user, &attributes)));
        }
    }
    let decision = core.faults.decide(&RequestFacts {
        method: &method,
        path: &path,
        verb,
        resource: resource.as_deref(),
        user_agent,
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
    if path == review::PATH {
        return Ok(access_review(core, &user, req).await);
    }
    let response: Result<Response<Body>, Infallible> = router.oneshot(req).await;
    Ok(response.unwrap_or_else(|never| match never {}))
}

/// Answers a `SelfSubjectAccessReview` (POST only; the review is never stored).
async fn access_review(core: &Core, user: &UserInfo, req: Request<Incoming>) -> Response<Body> {
    if req.method() != http::Method::POST {
        return api::error_response(&ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({})",
            req.method()
        )));
    }
    let content_type = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let body = match http_body_util::BodyExt::collect(req.into_body()).await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return api::error_response(&ApiError::bad_request(format!(
                "the request body could not be read: {e}"
            )));
        }
    };
    match review::answer(&core.auth, &core.store, user, &content_type, &body) {
        Ok(answer) => {
            let mut response = Response::new(Body::from(answer.to_string()));
            *response.status_mut() = http::StatusCode::CREATED;
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(e) => api::error_response(&e),
    }
}
