//! Carries out a scenario's fault schedule against a running simulated cluster and keeps the
//! record the invariants need: what was injected, what fired, and which windows of
//! unavailability the schedule itself forced.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;
use selfhost_sim::controllers::kubelet::NodeState;
use selfhost_sim::{FaultAction, RequestMatcher, SimCluster};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::rng::Rng;
use super::scenario::Scenario;

/// The resources the tool reads and writes (and the prober does not: it reads a Namespace
/// and writes a ConfigMap), so that injected errors measure the tool's resilience and never
/// count as lost availability.
const TOOL_RESOURCES: [&str; 4] = ["daemonsets", "pods", "leases", "nodes"];

/// How a request error was injected.
const ERROR_KINDS: [&str; 4] = ["500", "503", "429", "reset"];

/// After an apiserver crash ends, a probe may still fail while clients reconnect: the
/// window a crash forces is its downtime plus this.
pub const CRASH_SLACK: Duration = Duration::from_millis(500);

/// How long a rebooted node's cluster may take to serve again (its checkpointer's grace and
/// a kube-apiserver's start, on a loaded machine).
const REBOOT_RECOVERY: Duration = Duration::from_secs(60);

/// What the schedule did, for the invariants and the campaign's figures.
#[derive(Debug, Default, Clone)]
pub struct FaultLog {
    /// Request errors armed, by kind (`500`, `503`, `429`, `reset`) and resource.
    pub armed: BTreeMap<(&'static str, &'static str), u64>,
    /// Armed errors that no request consumed by the end of the run, by resource.
    pub unfired: BTreeMap<&'static str, u64>,
    pub watch_drops: u64,
    pub expiries: u64,
    pub crashes: u64,
    pub not_ready: u64,
    pub reboots: u64,
    pub power_cuts: u64,
    /// Windows in which the schedule itself took the API down (crash-restarts, with slack),
    /// or a machine took the requests in flight on it down with it (reboots, power cuts).
    pub forced: Vec<(Instant, Instant)>,
    /// Windows in which a control-plane node was NotReady.
    pub not_ready_windows: Vec<(Instant, Instant)>,
    /// Windows from a reboot's power-off until the API served again after its boot.
    pub reboot_windows: Vec<(Instant, Instant)>,
}

impl FaultLog {
    /// Request errors that fired, by kind: armed minus unconsumed (spread over kinds in
    /// proportion, which is exact when nothing was left over).
    pub fn fired_by_kind(&self) -> BTreeMap<&'static str, u64> {
        let mut out = BTreeMap::new();
        for ((kind, _), n) in &self.armed {
            *out.entry(*kind).or_insert(0) += n;
        }
        let armed: u64 = out.values().sum();
        let unfired: u64 = self.unfired.values().sum();
        if unfired > 0 && armed > 0 {
            for n in out.values_mut() {
                *n -= (*n * unfired).div_ceil(armed).min(*n);
            }
        }
        out
    }
}

/// The running schedule.
pub struct Schedule {
    log: Arc<Mutex<FaultLog>>,
    tasks: JoinSet<()>,
    not_ready_node: Option<String>,
    /// The reboot, apart from the other faults: one under way is finished, not cut short.
    reboot: Option<tokio::task::JoinHandle<()>>,
}

fn log(log: &Mutex<FaultLog>) -> std::sync::MutexGuard<'_, FaultLog> {
    log.lock().unwrap_or_else(|e| e.into_inner())
}

/// The tool's requests so far, by resource: every client's but the checkpointers', whose
/// reads of their node's pods neither count towards the rate nor meet its errors.
fn tool_requests(sim: &SimCluster) -> BTreeMap<&'static str, u64> {
    let mut out = BTreeMap::new();
    for ((_, resource), n) in sim
        .metrics()
        .snapshot_sparing(selfhost::CHECKPOINTER_USER_AGENT)
    {
        if let Some(r) = TOOL_RESOURCES.iter().find(|r| **r == resource) {
            *out.entry(*r).or_insert(0) += n;
        }
    }
    out
}

impl Schedule {
    /// Starts the schedule, its clock at `start`.
    pub fn start(sim: Arc<SimCluster>, scenario: &Scenario, start: Instant) -> Schedule {
        let log_cell = Arc::new(Mutex::new(FaultLog::default()));
        let mut tasks = JoinSet::new();
        if scenario.error_percent > 0 {
            // Errors at the scenario's rate: every few milliseconds, one error is armed for
            // each 100/percent requests the tool made to a resource since the last look.
            let (sim, log_cell, percent) = (sim.clone(), log_cell.clone(), scenario.error_percent);
            let mut rng = Rng::new(scenario.seed ^ 0xe44);
            tasks.spawn(async move {
                let mut seen = tool_requests(&sim);
                let mut budget: BTreeMap<&'static str, u64> = BTreeMap::new();
                loop {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    let now = tool_requests(&sim);
                    for (resource, n) in &now {
                        let delta = n - seen.get(resource).copied().unwrap_or(0);
                        // In hundredths of a request, so no rounding is lost.
                        let b = budget.entry(resource).or_insert(0);
                        *b += delta * percent;
                        while *b >= 100 {
                            *b -= 100;
                            let kind = rng.pick(&ERROR_KINDS);
                            let action = match kind {
                                "reset" => FaultAction::ResetConnection,
                                code => FaultAction::Status {
                                    code: code.parse().unwrap_or(500),
                                    // Scaled time: a real second of Retry-After is a few
                                    // milliseconds here.
                                    retry_after: Some(0),
                                },
                            };
                            sim.faults().inject(
                                RequestMatcher::resource(resource)
                                    .sparing(selfhost::CHECKPOINTER_USER_AGENT),
                                action,
                                Some(1),
                            );
                            *log(&log_cell).armed.entry((kind, resource)).or_insert(0) += 1;
                        }
                    }
                    seen = now;
                }
            });
        }
        for at in scenario.watch_drops.clone() {
            let (sim, log_cell) = (sim.clone(), log_cell.clone());
            tasks.spawn(async move {
                tokio::time::sleep_until(start + at).await;
                sim.faults().drop_watches();
                log(&log_cell).watch_drops += 1;
            });
        }
        for (at, n) in scenario.expiries.clone() {
            let (sim, log_cell) = (sim.clone(), log_cell.clone());
            tasks.spawn(async move {
                tokio::time::sleep_until(start + at).await;
                sim.faults().expire_next_watches(n);
                log(&log_cell).expiries += u64::from(n);
            });
        }
        for crash in scenario.crashes.clone() {
            let (sim, log_cell) = (sim.clone(), log_cell.clone());
            tasks.spawn(async move {
                tokio::time::sleep_until(start + crash.at).await;
                let from = Instant::now();
                {
                    let mut l = log(&log_cell);
                    l.crashes += 1;
                    l.forced.push((from, from + crash.down_for + CRASH_SLACK));
                }
                sim.faults().down_for(crash.down_for);
            });
        }
        let not_ready_node = scenario.not_ready.map(|w| sim.nodes()[w.node].name.clone());
        if let (Some(window), Some(node)) = (scenario.not_ready, not_ready_node.clone()) {
            let (sim, log_cell) = (sim.clone(), log_cell.clone());
            tasks.spawn(async move {
                tokio::time::sleep_until(start + window.at).await;
                let from = Instant::now();
                let _ = sim.set_node_state(&node, NodeState::NotReady);
                log(&log_cell).not_ready += 1;
                tokio::time::sleep(window.lasting).await;
                let _ = sim.set_node_state(&node, NodeState::Up);
                log(&log_cell)
                    .not_ready_windows
                    .push((from, Instant::now()));
            });
        }
        let reboot = scenario.reboot.map(|reboot| {
            let (sim, log_cell) = (sim.clone(), log_cell.clone());
            let node = sim.nodes()[reboot.node].name.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(start + reboot.at).await;
                let off = Instant::now();
                log(&log_cell).reboots += 1;
                let _ = sim.reboot(&node, reboot.off_for).await;
                // One node is the whole control plane (its checkpointer brings it back after
                // its grace), and with two the other may have been replacing its apiserver:
                // the API was down, by the machine's doing, until it serves again.
                let deadline = Instant::now() + REBOOT_RECOVERY;
                while !crate::checkpointed::api_answers(&sim).await && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let back = Instant::now();
                let down = sim.recorder().was_down(off, back);
                // Otherwise only the requests in flight on the node when its power went.
                let until = if down { back } else { off };
                let mut l = log(&log_cell);
                l.forced.push((off, until + CRASH_SLACK));
                l.reboot_windows.push((off, back));
            })
        });
        Schedule {
            log: log_cell,
            tasks,
            not_ready_node,
            reboot,
        }
    }

    /// Records a power cut of every node, from `off` until the API served again at `back`.
    pub fn power_cut(&self, off: Instant, back: Instant) {
        let mut l = log(&self.log);
        l.power_cuts += 1;
        l.forced.push((off, back + CRASH_SLACK));
    }

    /// Whether a reboot is under way now or ended since `since`.
    pub fn node_was_rebooted_since(&self, since: Instant) -> bool {
        let l = log(&self.log);
        l.reboots > l.reboot_windows.len() as u64
            || l.reboot_windows.iter().any(|(_, to)| *to >= since)
    }

    /// Whether a reboot is under way now.
    pub fn reboot_open(&self) -> bool {
        let l = log(&self.log);
        l.reboots > l.reboot_windows.len() as u64
    }

    /// Lets a reboot under way finish (one not begun yet never begins); returns when the
    /// last reboot's node came back, if one did.
    pub async fn finish_reboot(&mut self) -> Option<Instant> {
        if let Some(task) = self.reboot.take() {
            if self.reboot_open() {
                let _ = task.await;
            } else {
                task.abort();
                let _ = task.await;
            }
        }
        log(&self.log).reboot_windows.last().map(|w| w.1)
    }

    /// Whether a NotReady window is open now or was open since `since`.
    pub fn node_was_not_ready_since(&self, since: Instant) -> bool {
        let l = log(&self.log);
        l.not_ready > l.not_ready_windows.len() as u64
            || l.not_ready_windows.iter().any(|(_, to)| *to >= since)
    }

    /// Whether a NotReady window is open now.
    pub fn not_ready_open(&self) -> bool {
        let l = log(&self.log);
        l.not_ready > l.not_ready_windows.len() as u64
    }

    /// Whether a crash-restart forced the API down at some moment between `from` and `to`.
    pub fn api_forced_down_between(&self, from: Instant, to: Instant) -> bool {
        log(&self.log)
            .forced
            .iter()
            .any(|(a, b)| *a < to && *b > from)
    }

    /// Stops injecting; heals whatever is still broken (a NotReady node comes back, a crash
    /// in progress ends); counts the armed errors nobody consumed by draining them with
    /// requests of our own. Returns the log.
    pub async fn stop(mut self, sim: &SimCluster) -> FaultLog {
        self.finish_reboot().await;
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        if let Some(node) = &self.not_ready_node {
            let _ = sim.set_node_state(node, NodeState::Up);
        }
        let ends: Vec<Instant> = log(&self.log).forced.iter().map(|w| w.1).collect();
        if let Some(last) = ends.into_iter().max() {
            tokio::time::sleep_until(last).await;
        }
        let mut out = log(&self.log).clone();
        let armed: BTreeMap<&'static str, u64> =
            out.armed
                .iter()
                .fold(BTreeMap::new(), |mut m, ((_, resource), n)| {
                    *m.entry(*resource).or_insert(0) += n;
                    m
                });
        if !armed.is_empty() {
            let client = sim
                .client_with(|c| {
                    c.default_retry = false;
                    c.read_timeout = Some(Duration::from_secs(2));
                })
                .await
                .expect("a drain client");
            for (resource, n) in armed {
                let mut unfired = 0;
                // A counted error fires on the next matching request: fail until one passes.
                for _ in 0..=n {
                    if drain_request(&client, resource).await {
                        break;
                    }
                    unfired += 1;
                }
                out.unfired.insert(resource, unfired);
            }
        }
        sim.faults().clear();
        out
    }
}

async fn drain_request(client: &kube::Client, resource: &str) -> bool {
    let params = ListParams::default().limit(1);
    let ns = "kube-system";
    match resource {
        "daemonsets" => Api::<DaemonSet>::namespaced(client.clone(), ns)
            .list(&params)
            .await
            .is_ok(),
        "pods" => Api::<Pod>::namespaced(client.clone(), ns)
            .list(&params)
            .await
            .is_ok(),
        "leases" => Api::<Lease>::namespaced(client.clone(), ns)
            .list(&params)
            .await
            .is_ok(),
        _ => Api::<Node>::all(client.clone()).list(&params).await.is_ok(),
    }
}
