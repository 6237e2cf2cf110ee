//! Which simulated process serves a connection. A [`ConnectionRouter`] decides at accept time
//! (the kernel hands a new connection to one of the sockets bound to the port, a load balancer
//! to one of its nodes); the connection then keeps its [`ServingProcess`] for its whole life,
//! and that process's state decides how each request on it is answered.
//!
//! A connection may instead reach a relay, a node's API front: a TCP proxy that accepts it,
//! then passes it on to a process of its choosing ([`Relay`]), or closes it unserved; the
//! connection then keeps that process, and ends too when the relay cuts it.
//!
//! A process goes through: socket created, not accepting (the connection hangs, TLS handshake
//! included) → accepting, authorization cache not loaded (403 to API requests) → accepting,
//! not ready (500 on `/readyz` and `/healthz`; API requests are served, as a real
//! kube-apiserver serves them before its post-start hooks and informers are done — one that
//! never finishes starting answers them 500) → serving. On SIGTERM its
//! `/readyz` fails; when it closes its listener, idle keep-alive connections are closed and
//! connections still queued are reset, while requests in flight (watches) go on; when it
//! exits, every connection it holds is cut.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Body;
use http::Response;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;

/// The `tracing` target of the connection model's debug events: a process's SIGTERM, listener
/// close and exit; each connection accepted, closed and cut; each prober request with the
/// connection and process that read it (`RUST_LOG=selfhost_sim::wire=debug`).
pub(crate) const WIRE: &str = "selfhost_sim::wire";

/// How long Go's HTTP server (kube-apiserver's) lets a connection that has not begun a request
/// stay open once it shuts down: `Server.Shutdown` closes idle connections, and counts a new
/// one (`StateNew`) as idle only after five seconds. Go's constant, in real seconds; a scaled
/// cluster's processes divide it like every other duration of a stopping kube-apiserver
/// (`HandoverTimings::new_connection_idle`).
pub const NEW_CONNECTION_IDLE: Duration = Duration::from_secs(5);

/// Decides, per accepted connection, who serves it.
pub trait ConnectionRouter: std::fmt::Debug + Send + Sync {
    /// The route of a connection accepted now.
    fn route(&self) -> Route;
}

/// Where a new connection goes.
#[derive(Debug, Clone)]
pub enum Route {
    /// Served by the simulator itself, with no process model (the model is off).
    Direct,
    /// Nothing listens there: the connection is reset at once.
    Refuse,
    /// That process serves it.
    Process(Arc<ServingProcess>),
    /// A relay accepted it and passes it on, or closes it.
    Relay(Arc<dyn Relay>),
}

/// A TCP proxy between clients and processes (a node's API front): it accepts a connection
/// at once and passes its bytes, untouched, to the process it chooses.
pub trait Relay: std::fmt::Debug + Send + Sync {
    /// Its name, for logs (`<node>/<pod>#<pid>`).
    fn label(&self) -> &str;

    /// Waits until it passes the connection on (possibly holding it a while); `None`: it
    /// closed the connection unserved.
    fn pass_on(self: Arc<Self>) -> futures::future::BoxFuture<'static, Option<PassedOn>>;
}

/// A connection a relay passed on.
pub struct PassedOn {
    /// The process it reached.
    pub process: Arc<ServingProcess>,
    /// Cancelled when the relay cuts its connections (it exited, or its drain ran out).
    pub cut: CancellationToken,
    /// Kept while the connection lasts, dropped when it ends: the relay counts its open
    /// connections by it.
    pub lease: Box<dyn std::any::Any + Send>,
}

impl std::fmt::Debug for PassedOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassedOn")
            .field("process", &self.process.label())
            .finish_non_exhaustive()
    }
}

/// When a process does what, as its connections see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessTimes {
    /// When it accepts the connections queued on its socket (before: they hang).
    pub accepts_at: Instant,
    /// Until then API requests are refused with 403: its authorization cache is not loaded
    /// (`None`: no such window).
    pub authorizes_at: Option<Instant>,
    /// When its post-start hooks and informers are done and it serves (`None`: never).
    pub serves_at: Option<Instant>,
}

/// The pod a simulated process runs in, for reports of who caught a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOrigin {
    /// Its node.
    pub node: String,
    /// Its pod's name.
    pub pod: String,
    /// Its container's image.
    pub image: Option<String>,
}

/// One simulated kube-apiserver process, shared by every connection it holds.
#[derive(Debug)]
pub struct ServingProcess {
    label: String,
    origin: Option<ProcessOrigin>,
    times: ProcessTimes,
    shutting_down: AtomicBool,
    listener_closed: CancellationToken,
    exited: CancellationToken,
    connections: AtomicU64,
    new_connection_idle: Duration,
}

/// How one request is answered.
#[derive(Debug)]
pub enum Verdict {
    /// Normally.
    Serve,
    /// With this response instead.
    Answer(Response<Body>),
}

impl ServingProcess {
    /// A running process named `label` (`<node>/<pod>#<pid>`, for logs and tests).
    pub fn new(label: impl Into<String>, times: ProcessTimes) -> Arc<Self> {
        Self::in_pod(label, None, times)
    }

    /// A running process named `label`, in the pod `origin`.
    pub fn in_pod(
        label: impl Into<String>,
        origin: Option<ProcessOrigin>,
        times: ProcessTimes,
    ) -> Arc<Self> {
        Self::in_pod_idling_after(label, origin, times, NEW_CONNECTION_IDLE)
    }

    /// A running process named `label`, in the pod `origin`, that once it shuts down counts
    /// a connection as idle when it has not begun a request for `new_connection_idle`.
    pub fn in_pod_idling_after(
        label: impl Into<String>,
        origin: Option<ProcessOrigin>,
        times: ProcessTimes,
        new_connection_idle: Duration,
    ) -> Arc<Self> {
        Arc::new(ServingProcess {
            label: label.into(),
            origin,
            times,
            shutting_down: AtomicBool::new(false),
            listener_closed: CancellationToken::new(),
            exited: CancellationToken::new(),
            connections: AtomicU64::new(0),
            new_connection_idle,
        })
    }

    /// How long, once it shuts down, it leaves a connection open that has not begun a
    /// request, counted from the connection's accept.
    pub fn new_connection_idle(&self) -> Duration {
        self.new_connection_idle
    }

    /// Its name.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The pod it runs in, if it is a pod's process.
    pub fn origin(&self) -> Option<&ProcessOrigin> {
        self.origin.as_ref()
    }

    /// When it does what.
    pub fn times(&self) -> ProcessTimes {
        self.times
    }

    /// Whether it had finished starting (served) by `at`, whatever it does since.
    pub fn had_served(&self, at: Instant) -> bool {
        self.times.serves_at.is_some_and(|serves| serves <= at)
    }

    /// SIGTERM: from now on its `/readyz` fails (it may go on serving, with
    /// `--shutdown-delay-duration`).
    pub fn signal_shutdown(&self) {
        if !self.shutting_down.swap(true, Ordering::SeqCst) {
            tracing::debug!(target: WIRE, process = self.label, "SIGTERM");
        }
    }

    /// Whether it was told to shut down.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }

    /// Its socket left the port: idle keep-alive connections close, queued ones are reset,
    /// requests in flight go on.
    pub fn close_listener(&self) {
        self.signal_shutdown();
        if !self.listener_closed.is_cancelled() {
            tracing::debug!(target: WIRE, process = self.label, "listener closed");
        }
        self.listener_closed.cancel();
    }

    /// Whether its socket left the port.
    pub fn has_closed_listener(&self) -> bool {
        self.listener_closed.is_cancelled()
    }

    /// It exited: every connection it holds is cut.
    pub fn exit(&self) {
        self.close_listener();
        if !self.exited.is_cancelled() {
            tracing::debug!(target: WIRE, process = self.label, "exited");
        }
        self.exited.cancel();
    }

    /// Whether it exited.
    pub fn has_exited(&self) -> bool {
        self.exited.is_cancelled()
    }

    /// How many connections were handed to it.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    pub(crate) fn count_connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn listener_closed(&self) -> &CancellationToken {
        &self.listener_closed
    }

    pub(crate) fn exited(&self) -> &CancellationToken {
        &self.exited
    }

    /// Whether it accepts connections at `now` (before, a connection handed to it hangs).
    pub fn accepts(&self, now: Instant) -> bool {
        now >= self.times.accepts_at && !self.has_exited()
    }

    /// Whether it has finished starting at `now` (its informers synced, its hooks run).
    pub fn serves(&self, now: Instant) -> bool {
        self.accepts(now) && self.times.serves_at.is_some_and(|at| now >= at)
    }

    /// Whether its `/readyz` passes at `now`.
    pub fn is_ready(&self, now: Instant) -> bool {
        self.serves(now) && !self.is_shutting_down()
    }

    /// How a request for `path` is answered at `now`; `public` paths need no credentials
    /// (no authorization, hence no 403).
    pub fn verdict(&self, path: &str, public: bool, now: Instant) -> Verdict {
        let under = |p: &str| path == p || path.starts_with(&format!("{p}/"));
        if path == "/readyz" {
            if !self.serves(now) {
                return Verdict::Answer(not_started("readyz"));
            }
            if self.is_shutting_down() {
                return Verdict::Answer(health_text(
                    500,
                    "[-]shutdown failed: reason withheld\nreadyz check failed\n".into(),
                ));
            }
            return Verdict::Serve;
        }
        if let Some(check) = path.strip_prefix("/readyz/") {
            // `/readyz/<check>` runs that one check alone, as the real apiserver's handler
            // does: a stopping process still passes `/readyz/etcd`, a starting one
            // `/readyz/ping`.
            let failing = match check {
                "shutdown" => self.is_shutting_down(),
                "informer-sync" => !self.serves(now),
                hook if hook.starts_with("poststarthook/") => !self.serves(now),
                _ => false,
            };
            if failing {
                return Verdict::Answer(health_text(
                    500,
                    format!("internal server error: {check} check failed\n"),
                ));
            }
            return Verdict::Serve;
        }
        if under("/healthz") && !self.serves(now) {
            return Verdict::Answer(not_started("healthz"));
        }
        if public {
            return Verdict::Serve;
        }
        if self.times.authorizes_at.is_some_and(|at| now < at) {
            return Verdict::Answer(crate::api::error_response(&ApiError::forbidden(
                "forbidden: the authorizer's caches are not synced yet",
            )));
        }
        if !self.serves(now) && self.times.serves_at.is_none() {
            return Verdict::Answer(crate::api::error_response(&ApiError::internal(
                "the server is still starting: informers not synced",
            )));
        }
        Verdict::Serve
    }
}

/// The health answer of a process whose post-start hooks and informers are not done.
fn not_started(probe: &str) -> Response<Body> {
    health_text(
        500,
        format!(
            "[-]informer-sync failed: reason withheld\n\
             [-]poststarthook/start-apiserver-admission-initializer failed: reason withheld\n\
             {probe} check failed\n"
        ),
    )
}

fn health_text(code: u16, text: String) -> Response<Body> {
    let mut response = Response::new(Body::from(text));
    *response.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn process(t0: Instant) -> Arc<ServingProcess> {
        let ms = |n| t0 + Duration::from_millis(n);
        ServingProcess::new(
            "cp-1/kube-apiserver#1",
            ProcessTimes {
                accepts_at: ms(1_700),
                authorizes_at: Some(ms(2_000)),
                serves_at: Some(ms(3_500)),
            },
        )
    }

    fn code(v: Verdict) -> u16 {
        match v {
            Verdict::Serve => 200,
            Verdict::Answer(r) => r.status().as_u16(),
        }
    }

    #[test]
    fn a_starting_process_answers_by_phase() {
        let t0 = Instant::now();
        let p = process(t0);
        let at = |n| t0 + Duration::from_millis(n);
        // (time, path, public, code)
        let cases = [
            (1_800, "/readyz", true, 500),
            (1_800, "/livez", true, 200),
            (1_800, "/version", true, 200),
            (1_800, "/healthz", true, 500),
            (1_800, "/api/v1/namespaces/default/configmaps", false, 403),
            (2_500, "/api/v1/namespaces/default/configmaps", false, 200),
            (2_500, "/readyz/informer-sync", true, 500),
            (2_500, "/readyz/etcd", true, 200),
            (3_500, "/readyz", true, 200),
            (3_500, "/healthz", true, 200),
            (3_500, "/api/v1/namespaces/default/configmaps", false, 200),
        ];
        for (ms, path, public, expected) in cases {
            assert_eq!(
                code(p.verdict(path, public, at(ms))),
                expected,
                "{path} at {ms} ms"
            );
        }
        assert!(!p.accepts(at(1_000)) && p.accepts(at(1_700)));
        assert!(!p.is_ready(at(3_000)) && p.is_ready(at(3_500)));
    }

    #[test]
    fn a_process_that_never_finishes_starting_answers_api_requests_500() {
        let t0 = Instant::now();
        let broken = ServingProcess::new(
            "cp-1/kube-apiserver#2",
            ProcessTimes {
                accepts_at: t0,
                authorizes_at: None,
                serves_at: None,
            },
        );
        let later = t0 + Duration::from_secs(60);
        let configmaps = "/api/v1/namespaces/default/configmaps";
        assert_eq!(code(broken.verdict(configmaps, false, later)), 500);
        assert_eq!(code(broken.verdict("/readyz", true, later)), 500);
        assert_eq!(code(broken.verdict("/livez", true, later)), 200);
    }

    #[test]
    fn shutdown_fails_readiness_first_and_exit_ends_everything() {
        let t0 = Instant::now();
        let p = process(t0);
        let later = t0 + Duration::from_secs(10);
        p.signal_shutdown();
        assert_eq!(code(p.verdict("/readyz", true, later)), 500);
        assert_eq!(code(p.verdict("/readyz/shutdown", true, later)), 500);
        assert_eq!(
            code(p.verdict("/readyz/etcd", true, later)),
            200,
            "one check alone: etcd is still reached"
        );
        assert_eq!(
            code(p.verdict("/api/v1/pods", false, later)),
            200,
            "still serving"
        );
        assert!(!p.has_closed_listener());
        p.close_listener();
        assert!(p.has_closed_listener() && !p.has_exited());
        p.exit();
        assert!(p.has_exited() && !p.accepts(later) && !p.is_ready(later));
    }
}
