//! What the scenarios share: a bed, the selfhost binary run as a user runs it, the two kinds
//! of prober, and a watch on the controllers' Leases.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use selfhost_e2e::bed::{BedOptions, TestBed};
use selfhost_e2e::binaries::{Binaries, FROM_TAG};
use selfhost_sim::cluster::{Connections, ProbeReport, Prober, ProberOptions};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Starts a bed of `nodes` control-plane nodes on the first tag, as kubeadm leaves it.
pub async fn bed(nodes: usize) -> (TestBed, Binaries) {
    let binaries = match Binaries::locate() {
        Ok(b) => b,
        Err(e) => panic!("{e}"),
    };
    let bed = TestBed::start(BedOptions {
        nodes,
        tag: FROM_TAG.into(),
        binaries: binaries.clone(),
        kubelet: PathBuf::from(env!("CARGO_BIN_EXE_selfhost-e2e-kubelet")),
        start_timeout: Duration::from_secs(240),
    })
    .await
    .unwrap_or_else(|e| panic!("the bed starts: {e}"));
    let (tag, component) = crate::scenarios::CHECKPOINTER_IMAGE
        .rsplit_once('/')
        .and_then(|(_, name)| name.split_once(':'))
        .map(|(component, tag)| (tag, component))
        .expect("an image name with a tag");
    bed.add_program_image(tag, component, selfhost_binary())
        .unwrap_or_else(|e| panic!("the checkpointer's image: {e}"));
    (bed, binaries)
}

/// The `selfhost` binary, built once per test process (the workspace's, by cargo).
pub fn selfhost_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let output = std::process::Command::new(env!("CARGO"))
            .args([
                "build",
                "--quiet",
                "-p",
                "selfhost-cli",
                "--bin",
                "selfhost",
                "--message-format=json",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stderr(Stdio::inherit())
            .output()
            .expect("cargo runs");
        assert!(output.status.success(), "cargo builds selfhost");
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter_map(|m| m["executable"].as_str().map(PathBuf::from))
            .next_back()
            .expect("cargo names the selfhost executable")
    })
}

/// What a run of selfhost printed and how it ended.
#[derive(Debug)]
pub struct Run {
    /// The exit code (`None`: killed).
    pub code: Option<i32>,
    /// The JSON events, one per stdout line.
    pub events: Vec<serde_json::Value>,
    /// Everything on stderr.
    pub stderr: String,
    /// How long it ran.
    pub wall: Duration,
}

impl Run {
    /// The final `result` event.
    pub fn result(&self) -> Option<&serde_json::Value> {
        self.events.iter().rev().find(|e| e["event"] == "result")
    }

    /// The failed preflight checks of a refused run, one line each (empty when it was not
    /// refused).
    pub fn refusals(&self) -> Vec<String> {
        let Some(refused) = self.events.iter().find(|e| e["event"] == "refused") else {
            return Vec::new();
        };
        refused["plan"]["preflight"]["checks"]
            .as_array()
            .map(|checks| {
                checks
                    .iter()
                    .filter(|c| c["verdict"] == "fail")
                    .map(|c| format!("{}: {}", c["id"], c["message"]))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The HTTP requests the run sent, as its `result` event reports them.
    pub fn api_requests(&self) -> Option<u64> {
        self.result()?["api_requests"].as_u64()
    }

    /// Where the time went: per component, the seconds spent in each step (repeated steps
    /// summed), in the order the steps first ran, one line per component.
    pub fn step_seconds(&self) -> Vec<String> {
        let mut components: Vec<(String, Vec<(String, f64)>)> = Vec::new();
        let marks: Vec<(f64, &str, &str)> = self
            .events
            .iter()
            .filter(|e| e["event"] == "step" || e["event"] == "component-finished")
            .filter_map(|e| {
                let step = if e["event"] == "step" {
                    e["step"].as_str()?
                } else {
                    ""
                };
                Some((e["at"].as_f64()?, e["component"].as_str()?, step))
            })
            .collect();
        for pair in marks.windows(2) {
            let ((at, component, step), (next, _, _)) = (pair[0], pair[1]);
            if step.is_empty() {
                continue;
            }
            let index = match components.iter().position(|(c, _)| c == component) {
                Some(i) => i,
                None => {
                    components.push((component.to_string(), Vec::new()));
                    components.len() - 1
                }
            };
            let steps = &mut components[index].1;
            match steps.iter_mut().find(|(s, _)| s == step) {
                Some((_, seconds)) => *seconds += next - at,
                None => steps.push((step.to_string(), next - at)),
            }
        }
        components
            .into_iter()
            .map(|(component, steps)| {
                let steps: Vec<String> = steps
                    .iter()
                    .filter(|(_, seconds)| *seconds >= 0.05)
                    .map(|(step, seconds)| format!("{step} {seconds:.1} s"))
                    .collect();
                format!("{component}: {}", steps.join(", "))
            })
            .collect()
    }
}

/// Runs `selfhost --kubeconfig <bed admin> <args> -o json --yes`, killing it with SIGKILL
/// right after the first event for which `kill_after` says so.
pub async fn selfhost(
    bed: &TestBed,
    args: &[&str],
    kill_after: impl Fn(&serde_json::Value) -> bool + Send + 'static,
) -> Run {
    use std::io::{BufRead, BufReader, Read};
    let kubeconfig = bed.admin_kubeconfig().to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let binary = selfhost_binary().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        let mut child = std::process::Command::new(binary)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(&args)
            .args(["-o", "json", "--yes"])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("selfhost runs");
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let stderr_reader = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            text
        });
        let stdout = child.stdout.take().expect("stdout");
        let mut events = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
                panic!("stdout line is not one JSON event: {line}");
            };
            let hit = kill_after(&event);
            events.push(event);
            if hit {
                child.kill().expect("SIGKILL");
                break;
            }
        }
        let status = child.wait().expect("exits");
        let stderr = stderr_reader.join().unwrap_or_default();
        Run {
            code: status.code(),
            events,
            stderr,
            wall: started.elapsed(),
        }
    })
    .await
    .expect("joined")
}

/// Runs selfhost to its end.
pub async fn selfhost_to_end(bed: &TestBed, args: &[&str]) -> Run {
    selfhost(bed, args, |_| false).await
}

/// Runs `selfhost --kubeconfig <bed admin> <args>` as it is (for commands that take no
/// `--yes`); its output and how long it took.
pub async fn selfhost_output(bed: &TestBed, args: &[&str]) -> (std::process::Output, Duration) {
    let started = Instant::now();
    let output = tokio::process::Command::new(selfhost_binary())
        .arg("--kubeconfig")
        .arg(bed.admin_kubeconfig())
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .await
        .expect("selfhost runs");
    (output, started.elapsed())
}

/// Runs `selfhost --kubeconfig <bed admin> plan <target> --force` (the bed's versions are
/// older than the ones selfhost supports, as the scenarios' `apply --force`): whether the plan
/// proceeds (exit 0), and its text.
pub async fn plan(bed: &TestBed, target: &str) -> (bool, String) {
    let (output, _) = selfhost_output(bed, &["plan", target, "--force"]).await;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// Whether `event` is the `step` event of `step` for `component`.
pub fn is_step(event: &serde_json::Value, component: &str, step: &str) -> bool {
    event["event"] == "step" && event["component"] == component && event["step"] == step
}

/// Runs `kubectl --kubeconfig <bed admin> <args>` (the independent client) and returns stdout.
pub fn kubectl(bed: &TestBed, args: &[&str]) -> String {
    let output = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(bed.admin_kubeconfig())
        .args(args)
        .output()
        .expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The image of each control-plane pod, as kubectl shows it (`<name> <image>` per line).
pub fn control_plane_images(bed: &TestBed) -> Vec<String> {
    let text = kubectl(
        bed,
        &[
            "-n",
            "kube-system",
            "get",
            "pods",
            "-l",
            "tier=control-plane",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].image}{\"\\n\"}{end}",
        ],
    );
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// Both kinds of client, probing at once: reads of a real object every 20 ms, writes of a
/// ConfigMap every 100 ms.
pub struct Probers {
    new_connections: Prober,
    keep_alive: Prober,
}

/// What both probers saw.
#[derive(Debug)]
pub struct Availability {
    /// The client that opens a new connection per request.
    pub new_connections: ProbeReport,
    /// The client on keep-alive connections.
    pub keep_alive: ProbeReport,
}

/// The ConfigMaps the probers read and write, one per kind of client.
const PROBER_CONFIG_MAPS: [&str; 2] = ["prober-new-connections", "prober-keep-alive"];

impl Probers {
    /// Starts both, once the ConfigMaps they read exist: a read before its prober's first
    /// write would fail with 404 and count against the API.
    pub async fn start(bed: &TestBed) -> Probers {
        let client = bed.client().await.expect("client");
        let config_maps: Api<ConfigMap> = Api::namespaced(client, "default");
        for name in PROBER_CONFIG_MAPS {
            let config_map = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            };
            match config_maps
                .create(&PostParams::default(), &config_map)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => panic!("creating ConfigMap default/{name}: {e}"),
            }
        }
        let config = bed.kube_config().await.expect("admin kubeconfig");
        let options = |connections, config_map: &str| ProberOptions {
            read_interval: Duration::from_millis(20),
            write_interval: Duration::from_millis(100),
            read_path: format!("/api/v1/namespaces/default/configmaps/{config_map}"),
            timeout: Duration::from_secs(2),
            namespace: "default".into(),
            config_map: config_map.into(),
            connections,
        };
        let [new_connections_map, keep_alive_map] = PROBER_CONFIG_MAPS;
        let new_connections = Prober::start_with_config(
            config.clone(),
            options(Connections::NewPerRequest, new_connections_map),
        )
        .expect("prober");
        let keep_alive =
            Prober::start_with_config(config, options(Connections::KeepAlive, keep_alive_map))
                .expect("prober");
        Probers {
            new_connections,
            keep_alive,
        }
    }

    /// Stops both.
    pub async fn stop(self) -> Availability {
        Availability {
            new_connections: self.new_connections.stop().await,
            keep_alive: self.keep_alive.stop().await,
        }
    }
}

/// One change of a controller's leader: the previous holder's last renewal seen, and the new
/// holder's acquisition (the gap between them bounds the time nobody led).
#[derive(Debug, Clone)]
pub struct LeaderChange {
    /// `kube-controller-manager` or `kube-scheduler`.
    pub lease: String,
    /// The time nobody provably led.
    pub leaderless: Duration,
}

/// Watches the controllers' Leases (polling every 100 ms) and records each change of holder.
pub struct LeaderWatch {
    changes: Arc<Mutex<Vec<LeaderChange>>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl LeaderWatch {
    /// Starts watching.
    pub async fn start(bed: &TestBed) -> LeaderWatch {
        let client = bed.client().await.expect("client");
        let changes = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let task = {
            let (changes, stop) = (changes.clone(), stop.clone());
            tokio::spawn(async move {
                let leases: Api<Lease> = Api::namespaced(client, "kube-system");
                let mut last: [(Option<String>, Option<Timestamp>); 2] = Default::default();
                let names = ["kube-controller-manager", "kube-scheduler"];
                while !stop.is_cancelled() {
                    for (i, name) in names.iter().enumerate() {
                        let Ok(Some(lease)) = leases.get_opt(name).await else {
                            continue;
                        };
                        let spec = lease.spec.unwrap_or_default();
                        let holder = spec.holder_identity.filter(|h| !h.is_empty());
                        let renewed = spec.renew_time.map(|t| t.0);
                        let (previous, previous_renewal) = &last[i];
                        if holder.is_some() && previous.is_some() && holder != *previous {
                            let acquired = spec.acquire_time.map(|t| t.0);
                            if let (Some(acquired), Some(renewal)) = (acquired, previous_renewal) {
                                let gap = acquired.duration_since(*renewal);
                                let leaderless = Duration::try_from(gap).unwrap_or(Duration::ZERO);
                                changes.lock().unwrap_or_else(|e| e.into_inner()).push(
                                    LeaderChange {
                                        lease: name.to_string(),
                                        leaderless,
                                    },
                                );
                            }
                        }
                        last[i] = (holder, renewed);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
        };
        LeaderWatch {
            changes,
            stop,
            task,
        }
    }

    /// Stops watching and returns every change seen.
    pub async fn stop(self) -> Vec<LeaderChange> {
        self.stop.cancel();
        let _ = self.task.await;
        let changes = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        changes.clone()
    }
}

/// What one run measured.
#[derive(Debug)]
pub struct Figures {
    /// How long the tool ran.
    pub wall: Duration,
    /// What both kinds of client saw.
    pub availability: Availability,
    /// Each change of a controller's leader.
    pub leader_changes: Vec<LeaderChange>,
    /// The HTTP requests the tool sent, where it reports them.
    pub api_requests: Option<u64>,
}

/// Why probes of `r` failed, with how often, e.g. `2 x read: timed out`.
fn failure_reasons(r: &ProbeReport) -> String {
    let mut counts: std::collections::BTreeMap<(&str, String), usize> = Default::default();
    for (series, kind) in [(&r.reads, "read"), (&r.writes, "write")] {
        for sample in series.samples.iter().filter(|s| !s.ok) {
            let reason = sample.error.clone().unwrap_or_default();
            *counts.entry((kind, reason)).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .map(|((kind, reason), n)| format!("{n} x {kind}: {reason}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn series(r: &ProbeReport) -> String {
    format!(
        "reads {} of {} failed (longest gap {:.1} s), writes {} of {} failed",
        r.reads.failures(),
        r.reads.attempts(),
        r.reads.longest_gap().as_secs_f64(),
        r.writes.failures(),
        r.writes.attempts()
    )
}

impl Figures {
    /// Why probes failed, one line per kind of client that saw failures.
    pub fn failure_lines(&self) -> Vec<String> {
        [
            (
                "new connection per request",
                &self.availability.new_connections,
            ),
            ("keep-alive", &self.availability.keep_alive),
        ]
        .into_iter()
        .map(|(kind, r)| (kind, failure_reasons(r)))
        .filter(|(_, reasons)| !reasons.is_empty())
        .map(|(kind, reasons)| format!("{kind}: {reasons}"))
        .collect()
    }

    /// One line naming each client kind, for the log and docs/benchmarks.md.
    pub fn line(&self, scenario: &str, nodes: usize) -> String {
        let leaderless: Vec<String> = self
            .leader_changes
            .iter()
            .map(|c| format!("{} {:.1} s", c.lease, c.leaderless.as_secs_f64()))
            .collect();
        let requests = self
            .api_requests
            .map_or_else(|| "not counted".to_string(), |n| n.to_string());
        format!(
            "{scenario} on {nodes} node(s): wall {:.1} s; new connection per request: {}; \
             keep-alive: {}; leaderless per controller change: [{}]; API requests: {requests}",
            self.wall.as_secs_f64(),
            series(&self.availability.new_connections),
            series(&self.availability.keep_alive),
            leaderless.join(", "),
        )
    }
}

/// Waits until `check` holds, polling every 500 ms, or panics after `timeout` with `what`.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?}: {what}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
