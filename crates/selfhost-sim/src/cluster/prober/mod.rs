//! A client-side availability probe over real HTTP, as an operator would measure an upgrade:
//! one loop reads (`/readyz`, or any GET path) every 10 ms, another writes (updates a
//! ConfigMap) every 50 ms, each with a short timeout; every attempt is recorded with its time
//! and outcome. Works against any cluster a kube client reaches.
//!
//! The prober retries nothing a real client would not: it behaves as client-go does over Go's
//! HTTP/1.1 transport, which sends a request again, at once and by itself, only when the
//! server closed a *reused* keep-alive connection before answering and the request is
//! replayable (`GET`/`HEAD`/`OPTIONS`/`TRACE`, or one carrying an `Idempotency-Key` header:
//! the write, a merge patch setting the counter to a fixed value, carries one). That is the
//! race every HTTP/1.1 client meets when a server closes its idle connections (Go's
//! `Server.Shutdown`, or a stopping kube-apiserver leaving its port) just as a request is sent
//! on one. Such an attempt counts as succeeded if the replay succeeds, and is recorded as
//! replayed, with the reason, so that reports show it ([`ProbeSeries::replayed`]).
//!
//! Against a simulated cluster each failed attempt also says who caught it ([`CaughtBy`]):
//! the process whose socket got its connection, from the simulator's connection log.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper_util::client::legacy::connect::capture_connection;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::server::ConnectionLog;

mod caught;
mod dial;
mod wire;

pub use caught::CaughtBy;
use caught::{LastConnection, caught_by};
use wire::{closed_before_answer, is_replayable, status_error, with_causes};

pub use crate::server::{PROBE_HEADER, PROBER_USER_AGENT};

/// What and how often to probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProberOptions {
    /// Time between reads.
    pub read_interval: Duration,
    /// Time between writes.
    pub write_interval: Duration,
    /// The path read (`/readyz`; `/api/v1/namespaces/default/configmaps` for a real GET).
    pub read_path: String,
    /// How long one attempt may take before it counts as failed.
    pub timeout: Duration,
    /// The namespace of the ConfigMap written.
    pub namespace: String,
    /// The ConfigMap written (created when missing).
    pub config_map: String,
    /// Whether attempts reuse keep-alive connections or each opens its own.
    pub connections: Connections,
}

/// How a client uses connections: availability differs between the two kinds, so every
/// figure names the one it was measured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Connections {
    /// Requests share keep-alive connections from a pool, as a long-running controller or
    /// client-go program does; a request caught on a reused connection that the server
    /// closed is replayed as Go's transport does.
    #[default]
    KeepAlive,
    /// Every request opens a new connection, as `kubectl` and scripts do (one process, one
    /// request): each one meets whichever process the kernel or balancer hands it to.
    NewPerRequest,
}

impl Connections {
    /// The words figures name this kind by.
    pub fn describe(self) -> &'static str {
        match self {
            Connections::KeepAlive => "keep-alive connections",
            Connections::NewPerRequest => "a new connection per request",
        }
    }
}

impl Default for ProberOptions {
    fn default() -> Self {
        ProberOptions {
            read_interval: Duration::from_millis(10),
            write_interval: Duration::from_millis(50),
            read_path: "/readyz".into(),
            timeout: Duration::from_secs(1),
            namespace: "default".into(),
            config_map: "selfhost-prober".into(),
            connections: Connections::KeepAlive,
        }
    }
}

/// One attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSample {
    /// When it was sent.
    pub started: Instant,
    /// When it ended.
    pub finished: Instant,
    /// When it was sent (wall clock).
    pub time: Timestamp,
    /// Whether it succeeded.
    pub ok: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// Why it was sent again, as Go's transport would have: the server closed a reused
    /// connection before answering (`None`: sent once).
    pub replayed: Option<String>,
    /// Who caught its (last) connection, for a failed attempt (`None` when it succeeded).
    pub caught_by: Option<CaughtBy>,
}

/// The attempts of one kind (reads or writes), oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSeries {
    /// When probing started.
    pub since: Instant,
    /// Every attempt.
    pub samples: Vec<ProbeSample>,
}

impl ProbeSeries {
    /// How many attempts.
    pub fn attempts(&self) -> usize {
        self.samples.len()
    }

    /// How many failed.
    pub fn failures(&self) -> usize {
        self.samples.iter().filter(|s| !s.ok).count()
    }

    /// How many were sent again by the transport (whether or not the replay succeeded).
    pub fn replayed(&self) -> usize {
        self.samples.iter().filter(|s| s.replayed.is_some()).count()
    }

    /// The windows of consecutive failures: from the first failed attempt's start to the
    /// end of the next successful attempt (or of the last failed one, if none followed).
    pub fn failure_windows(&self) -> Vec<(Instant, Instant)> {
        let mut out = Vec::new();
        let mut open: Option<(Instant, Instant)> = None;
        for s in &self.samples {
            match (s.ok, open) {
                (false, None) => open = Some((s.started, s.finished)),
                (false, Some((from, _))) => open = Some((from, s.finished)),
                (true, Some((from, _))) => {
                    out.push((from, s.finished));
                    open = None;
                }
                (true, None) => {}
            }
        }
        out.extend(open);
        out
    }

    /// The longest failure window (zero when nothing failed).
    pub fn longest_failure_window(&self) -> Duration {
        self.failure_windows()
            .iter()
            .map(|(a, b)| b.duration_since(*a))
            .max()
            .unwrap_or_default()
    }

    /// The longest time without a success: between two successive successful attempts,
    /// from the start to the first, or from the last to the last attempt.
    pub fn longest_gap(&self) -> Duration {
        let mut last = self.since;
        let mut longest = Duration::ZERO;
        for s in &self.samples {
            if s.ok {
                longest = longest.max(s.finished.duration_since(last));
                last = s.finished;
            }
        }
        if let Some(end) = self.samples.last() {
            longest = longest.max(end.finished.duration_since(last));
        }
        longest
    }
}

/// Reads and writes so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// The read attempts.
    pub reads: ProbeSeries,
    /// The write attempts.
    pub writes: ProbeSeries,
}

impl ProbeReport {
    /// How many attempts, reads and writes, were sent again by the transport.
    pub fn replayed(&self) -> usize {
        self.reads.replayed() + self.writes.replayed()
    }

    /// Why attempts were sent again, with how many each reason.
    pub fn replay_reasons(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for s in self.reads.samples.iter().chain(&self.writes.samples) {
            if let Some(reason) = &s.replayed {
                *out.entry(reason.clone()).or_insert(0) += 1;
            }
        }
        out
    }
}

#[derive(Debug)]
struct Log {
    reads: ProbeSeries,
    writes: ProbeSeries,
}

/// A running prober.
#[derive(Debug)]
pub struct Prober {
    log: Arc<Mutex<Log>>,
    stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the probes share: the client and the connections it has used so far (by local
/// address), which tell a reused connection from a fresh one, as Go's transport knows.
struct Transport {
    client: kube::Client,
    used: Mutex<HashSet<SocketAddr>>,
    /// The simulator's record of who caught each connection, when probing a simulator.
    connections: Option<Arc<ConnectionLog>>,
    /// The connections the prober's own connector dialled (empty with another client).
    dials: dial::Dials,
    /// The number the next attempt takes, to find the dials it made.
    attempts: AtomicU64,
}

impl Prober {
    /// Starts probing with `client` (give it no retries of its own: the prober replays only
    /// what Go's transport would, and records it).
    pub fn start(client: kube::Client, options: ProberOptions) -> Prober {
        Self::start_with(client, options, None, dial::Dials::default())
    }

    /// [`Prober::start`] against a simulated cluster whose connection log says who caught
    /// each failed attempt ([`ProbeSample::caught_by`]), with a client made from `config`
    /// (no retries, no timeouts of its own) whose connector notes every connection it dials.
    ///
    /// # Errors
    /// The client cannot be made from `config` (its TLS or credentials).
    pub fn start_attributed(
        config: kube::Config,
        options: ProberOptions,
        connections: Arc<ConnectionLog>,
    ) -> Result<Prober, kube::Error> {
        let dials = dial::Dials::default();
        let client = dial::client(config, dials.clone(), options.connections)?;
        Ok(Self::start_with(client, options, Some(connections), dials))
    }

    /// [`Prober::start`] against any cluster, with a client made from `config` (no retries,
    /// no timeouts of its own) that uses connections as [`ProberOptions::connections`] says.
    ///
    /// # Errors
    /// The client cannot be made from `config` (its TLS or credentials).
    pub fn start_with_config(
        config: kube::Config,
        options: ProberOptions,
    ) -> Result<Prober, kube::Error> {
        let dials = dial::Dials::default();
        let client = dial::client(config, dials.clone(), options.connections)?;
        Ok(Self::start_with(client, options, None, dials))
    }

    fn start_with(
        client: kube::Client,
        options: ProberOptions,
        connections: Option<Arc<ConnectionLog>>,
        dials: dial::Dials,
    ) -> Prober {
        let since = Instant::now();
        let series = || ProbeSeries {
            since,
            samples: Vec::new(),
        };
        let log = Arc::new(Mutex::new(Log {
            reads: series(),
            writes: series(),
        }));
        let stop = CancellationToken::new();
        let options = Arc::new(options);
        let transport = Arc::new(Transport {
            client,
            used: Mutex::default(),
            connections,
            dials,
            attempts: AtomicU64::new(0),
        });
        let reads = {
            let (transport, options, log) = (transport.clone(), options.clone(), log.clone());
            let mut n = 0u64;
            tokio::spawn(probe_loop(stop.clone(), options.read_interval, move || {
                let (transport, options, log) = (transport.clone(), options.clone(), log.clone());
                let id = n;
                n += 1;
                async move {
                    let sample = attempt(&transport, options.timeout, |last| {
                        read(&transport, &options, id, last)
                    })
                    .await;
                    lock(&log).reads.samples.push(sample);
                }
            }))
        };
        let writes = {
            let (options, log) = (options.clone(), log.clone());
            let mut n = 0u64;
            tokio::spawn(probe_loop(
                stop.clone(),
                options.write_interval,
                move || {
                    let (transport, options, log) =
                        (transport.clone(), options.clone(), log.clone());
                    let id = n;
                    n += 1;
                    async move {
                        let sample = attempt(&transport, options.timeout, |last| {
                            write(&transport, &options, id, last)
                        })
                        .await;
                        lock(&log).writes.samples.push(sample);
                    }
                },
            ))
        };
        Prober {
            log,
            stop,
            tasks: vec![reads, writes],
        }
    }

    /// What was recorded so far (probing goes on).
    pub fn report(&self) -> ProbeReport {
        let log = lock(&self.log);
        ProbeReport {
            reads: log.reads.clone(),
            writes: log.writes.clone(),
        }
    }

    /// Stops probing (attempts in flight finish first) and returns everything recorded.
    pub async fn stop(mut self) -> ProbeReport {
        self.stop.cancel();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        self.report()
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn probe_loop<F, Fut>(stop: CancellationToken, every: Duration, mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut ticks = tokio::time::interval(every.max(Duration::from_millis(1)));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = ticks.tick() => probe().await,
        }
    }
}

/// How one probe ended, and why it was sent again, if it was.
#[derive(Debug)]
struct Outcome {
    result: Result<(), String>,
    replayed: Option<String>,
}

async fn attempt<F, Fut>(transport: &Transport, timeout: Duration, call: F) -> ProbeSample
where
    F: FnOnce(LastConnection) -> Fut,
    Fut: std::future::Future<Output = Outcome>,
{
    let last = LastConnection::default();
    let id = dial::AttemptId(transport.attempts.fetch_add(1, Ordering::Relaxed));
    let started = Instant::now();
    let time = Timestamp::now();
    let sent = dial::as_attempt(id, tokio::time::timeout(timeout, call(last.clone())));
    let outcome = match sent.await {
        Ok(outcome) => outcome,
        Err(_) => Outcome {
            result: Err(format!("no answer within {timeout:?}")),
            replayed: None,
        },
    };
    let finished = Instant::now();
    let caught_by = outcome.result.is_err().then(|| {
        // Connections this attempt dialled that never carried a request to its end.
        let dialled: Vec<SocketAddr> = {
            let used = lock(&transport.used);
            transport
                .dials
                .by(id)
                .into_iter()
                .map(|d| d.local)
                .filter(|local| !used.contains(local))
                .collect()
        };
        caught_by(transport.connections.as_deref(), &last, &dialled, started)
    });
    ProbeSample {
        started,
        finished,
        time,
        ok: outcome.result.is_ok(),
        error: outcome.result.err(),
        replayed: outcome.replayed,
        caught_by,
    }
}

/// The most times one probe is sent again (Go's transport has no fixed limit, but every
/// replay needs another reused connection that closed, and the pool holds a few at most).
const MAX_REPLAYS: usize = 3;

/// An answered request: its status and body.
type Answer = (http::StatusCode, bytes::Bytes);

/// Sends the request `make` builds, and sends it again while the failure is one Go's
/// transport replays.
async fn exchange(
    transport: &Transport,
    last: &LastConnection,
    make: impl Fn() -> Result<http::Request<Vec<u8>>, String>,
) -> (Result<Answer, String>, Option<String>) {
    let mut replayed = None;
    let mut replays = 0;
    loop {
        let request = match make() {
            Ok(r) => r,
            Err(e) => return (Err(e), replayed),
        };
        match send_once(transport, last, request).await {
            Ok(answer) => return (Ok(answer), replayed),
            Err(Failure { error, replay }) => match replay {
                Some(reason) if replays < MAX_REPLAYS => {
                    tracing::debug!(%error, reason, "the prober's transport replays a request");
                    replays += 1;
                    replayed.get_or_insert_with(|| format!("{reason}: {error}"));
                }
                _ => return (Err(error), replayed),
            },
        }
    }
}

/// A failed send, and why Go's transport would send it again (`None`: it would not).
#[derive(Debug)]
struct Failure {
    error: String,
    replay: Option<&'static str>,
}

async fn send_once(
    transport: &Transport,
    last: &LastConnection,
    request: http::Request<Vec<u8>>,
) -> Result<Answer, Failure> {
    let replayable = is_replayable(&request);
    let mut request = request.map(kube::client::Body::from);
    last.set(capture_connection(&mut request));
    let sent = transport.client.send(request).await;
    let local = last.local_addr();
    // A connection is reused when an earlier request went over it. The local address names a
    // connection while it is open; an address the system hands out again later would count a
    // fresh connection as reused, which the few connections of one probing run make unlikely.
    let reused = local.is_some_and(|addr| !lock(&transport.used).insert(addr));
    let response = sent.map_err(|e| Failure {
        replay: (reused && replayable)
            .then(|| closed_before_answer(&e))
            .flatten(),
        error: with_causes(&e),
    })?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| Failure {
            // Part of the answer arrived: Go's transport would not replay it either.
            error: format!("the answer was cut: {e}"),
            replay: None,
        })?
        .to_bytes();
    Ok((status, body))
}

async fn read(
    transport: &Transport,
    options: &ProberOptions,
    id: u64,
    last: LastConnection,
) -> Outcome {
    let (answer, replayed) = exchange(transport, &last, || {
        http::Request::get(&options.read_path)
            .header(PROBE_HEADER, format!("read-{id}"))
            .body(Vec::new())
            .map_err(|e| e.to_string())
    })
    .await;
    let result = answer.and_then(|(status, body)| {
        if status.is_success() {
            Ok(())
        } else {
            Err(status_error(status, &body))
        }
    });
    Outcome { result, replayed }
}

async fn write(
    transport: &Transport,
    options: &ProberOptions,
    n: u64,
    last: LastConnection,
) -> Outcome {
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/{}",
        options.namespace, options.config_map
    );
    let patch = json!({ "data": { "counter": n.to_string() } }).to_string();
    let (answer, replayed) = exchange(transport, &last, || {
        http::Request::patch(&path)
            .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
            .header(PROBE_HEADER, format!("write-{n}"))
            // Setting the counter to a fixed value is idempotent: say so, as a Go client may,
            // so that the transport replays it like a read.
            .header("idempotency-key", format!("{}-{n}", options.config_map))
            .body(patch.clone().into_bytes())
            .map_err(|e| e.to_string())
    })
    .await;
    let result = match answer {
        Ok((status, _)) if status.is_success() => Ok(()),
        Ok((status, _)) if status == http::StatusCode::NOT_FOUND => {
            create(&transport.client, options, n).await
        }
        Ok((status, body)) => Err(status_error(status, &body)),
        Err(e) => Err(e),
    };
    Outcome { result, replayed }
}

/// Creates the ConfigMap the writes patch (the first write, or after someone deleted it).
async fn create(client: &kube::Client, options: &ProberOptions, n: u64) -> Result<(), String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &options.namespace);
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": options.config_map },
        "data": { "counter": n.to_string() },
    }))
    .map_err(|e| e.to_string())?;
    api.create(&PostParams::default(), &cm)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
