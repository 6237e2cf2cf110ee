//! A client-side availability probe over real HTTP, as an operator would measure an upgrade:
//! one loop reads (`/readyz`, or any GET path) every 10 ms, another writes (updates a
//! ConfigMap) every 50 ms, each with a short timeout and no retries; every attempt is recorded
//! with its time and outcome. Works against any cluster a kube client reaches.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The `User-Agent` of the probers [`SimCluster::prober`](super::SimCluster::prober) starts.
pub const PROBER_USER_AGENT: &str = "selfhost-sim-prober";

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

fn lock(log: &Mutex<Log>) -> MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

impl Prober {
    /// Starts probing with `client` (give it no retries: a retry would hide a failure).
    pub fn start(client: kube::Client, options: ProberOptions) -> Prober {
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
        let reads = {
            let (client, options, log) = (client.clone(), options.clone(), log.clone());
            tokio::spawn(probe_loop(stop.clone(), options.read_interval, move || {
                let (client, options, log) = (client.clone(), options.clone(), log.clone());
                async move {
                    let sample = attempt(options.timeout, read(&client, &options.read_path)).await;
                    lock(&log).reads.samples.push(sample);
                }
            }))
        };
        let writes = {
            let (options, log) = (options.clone(), log.clone());
            let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
            tokio::spawn(probe_loop(
                stop.clone(),
                options.write_interval,
                move || {
                    let (client, options, log) = (client.clone(), options.clone(), log.clone());
                    let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    async move {
                        let sample = attempt(options.timeout, write(&client, &options, n)).await;
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

async fn attempt<F>(timeout: Duration, call: F) -> ProbeSample
where
    F: std::future::Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    let time = Timestamp::now();
    let outcome = match tokio::time::timeout(timeout, call).await {
        Ok(r) => r,
        Err(_) => Err(format!("no answer within {timeout:?}")),
    };
    ProbeSample {
        started,
        finished: Instant::now(),
        time,
        ok: outcome.is_ok(),
        error: outcome.err(),
    }
}

async fn read(client: &kube::Client, path: &str) -> Result<(), String> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    client
        .request_text(request)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

async fn write(client: &kube::Client, options: &ProberOptions, n: u64) -> Result<(), String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &options.namespace);
    let data = json!({ "data": { "counter": n.to_string() } });
    match api
        .patch(
            &options.config_map,
            &PatchParams::default(),
            &Patch::Merge(&data),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => {
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
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(outcomes: &[(u64, u64, bool)]) -> ProbeSeries {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        ProbeSeries {
            since: t0,
            samples: outcomes
                .iter()
                .map(|(from, to, ok)| ProbeSample {
                    started: at(*from),
                    finished: at(*to),
                    time: Timestamp::UNIX_EPOCH,
                    ok: *ok,
                    error: (!ok).then(|| "refused".to_string()),
                })
                .collect(),
        }
    }

    #[test]
    fn windows_and_gaps_follow_the_failures() {
        let clean = series(&[(0, 1, true), (10, 11, true), (20, 21, true)]);
        assert_eq!(clean.failures(), 0);
        assert!(clean.failure_windows().is_empty());
        assert_eq!(clean.longest_gap(), Duration::from_millis(10));

        let outage = series(&[
            (0, 1, true),
            (10, 11, false),
            (20, 21, false),
            (30, 41, true),
            (50, 51, false),
        ]);
        assert_eq!((outage.attempts(), outage.failures()), (5, 3));
        let windows = outage.failure_windows();
        assert_eq!(windows.len(), 2);
        assert_eq!(
            outage.longest_failure_window(),
            Duration::from_millis(31),
            "from the first failed start to the recovering answer"
        );
        assert_eq!(outage.longest_gap(), Duration::from_millis(40));
    }
}
