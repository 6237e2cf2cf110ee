//! One run: a simulated cluster shaped by the scenario, a checkpointer on each of its
//! control-plane nodes, the real `selfhost` binary upgrading it under the fault schedule
//! (SIGKILLed, or killed with every node by a power cut, and run again where the scenario
//! says), then every invariant checked.

use std::io::{BufRead, BufReader, Read, Seek};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use selfhost::{CheckpointPolicy, CheckpointTuning};
use selfhost_core::Component;
use selfhost_core::checkpoint::{DEFAULT_API_GRACE, DEFAULT_SOAK};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{
    Handovers, IdentityLeaseTimings, LeaderElectionTimings, ProberOptions,
};
use selfhost_sim::{SimCluster, SimTimings};
use tokio::time::Instant;

use super::invariants::{self, Snapshot};
use super::power;
use super::scenario::{Breakage, Kill, Scenario};
use super::schedule::{FaultLog, Schedule};
use super::writer::{ANNOTATION, Writer, WriterLog};
use crate::checkpointed::{self, Served};

/// At most this many invocations of the tool per run (the first, one after a SIGKILL, and
/// re-runs after a refusal or a stop while a node was NotReady or the API was down).
const MAX_INVOCATIONS: usize = 6;
/// A single invocation that takes longer than this is killed and counts as a violation.
const INVOCATION_LIMIT: Duration = Duration::from_secs(240);

/// What one invocation of the binary did.
#[derive(Debug, Default)]
struct Invocation {
    events: Vec<serde_json::Value>,
    code: Option<i32>,
    killed: bool,
    timed_out: bool,
    not_json: Vec<String>,
    stderr: String,
}

/// The result of one run.
#[derive(Debug)]
pub struct RunResult {
    pub scenario: Scenario,
    pub exit: Option<i32>,
    pub invocations: usize,
    pub killed: bool,
    pub refused_while_not_ready: usize,
    pub refused_while_api_down: usize,
    pub refused_after_reboot: usize,
    /// Seconds from power-on until the API served again, after a power cut.
    pub back_after_power_cut: Option<f64>,
    pub faults: FaultLog,
    pub writer: Option<WriterLog>,
    pub violations: Vec<String>,
    pub seconds: f64,
    /// The last lines the tool wrote to stderr, for a failure's diagnosis.
    pub stderr_tail: String,
}

fn image(component: Component, version: &str) -> String {
    format!("registry.k8s.io/{}:{version}", component.name())
}

fn invoke(kubeconfig: std::path::PathBuf, scenario: &Scenario, kill: Option<Kill>) -> Invocation {
    let mut stderr = tempfile::tempfile().expect("a temporary file");
    let timeout = format!("{}s", scenario.timeout().as_secs());
    let child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "apply",
            &scenario.to,
            "--yes",
            "-o",
            "json",
            "--timeout",
            &timeout,
        ])
        .args(scenario.prepull.then_some("--prepull"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr.try_clone().expect("a second handle"))
        .spawn()
        .expect("selfhost runs");
    let child: Arc<Mutex<Child>> = Arc::new(Mutex::new(child));
    let stdout = child
        .lock()
        .unwrap()
        .stdout
        .take()
        .expect("stdout is piped");
    // A watchdog: an invocation that hangs is killed, and says so.
    let (done, finished) = mpsc::channel::<()>();
    let watchdog = {
        let child = child.clone();
        std::thread::spawn(move || {
            if finished.recv_timeout(INVOCATION_LIMIT).is_err() {
                let _ = child.lock().unwrap().kill();
                return true;
            }
            false
        })
    };
    let mut out = Invocation::default();
    let mut steps = 0;
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
            out.not_json.push(line);
            continue;
        };
        let is_step = event["event"] == "step";
        out.events.push(event);
        if is_step {
            steps += 1;
            if let Some(k) = kill
                && steps == k.after_step
            {
                std::thread::sleep(k.delay);
                let _ = child.lock().unwrap().kill();
                out.killed = true;
                break;
            }
        }
    }
    let status = child
        .lock()
        .unwrap()
        .wait()
        .expect("the child is waited for");
    let _ = done.send(());
    out.timed_out = watchdog.join().unwrap_or(false);
    out.code = status.code();
    let _ = stderr.rewind();
    let mut text = String::new();
    let _ = stderr.read_to_string(&mut text);
    out.stderr = text;
    out
}

/// The cluster's clocks: pod latencies at the scenario's speed-up; Lease and node-heartbeat
/// clocks slower, so that a loaded two-core machine stalling a task for a few hundred
/// milliseconds does not depose leaders or mark nodes unreachable — faults the schedule did
/// not ask for (at a speed-up of 100 a leader's Lease lasts 150 ms).
fn timings(scenario: &Scenario) -> SimTimings {
    let mut timings = SimTimings::scaled(scenario.speedup);
    timings.leader_election = LeaderElectionTimings::realistic().scaled(LEASE_SPEEDUP);
    timings.apiserver_identity = IdentityLeaseTimings::realistic().scaled(LEASE_SPEEDUP);
    timings.node_lifecycle.monitor_grace_period = Duration::from_secs(10);
    timings.node_lifecycle.startup_grace_period = Duration::from_secs(20);
    timings
}

/// How much faster than real ones the Lease clocks run (a leader's Lease lasts 600 ms).
const LEASE_SPEEDUP: u32 = 25;

/// The checkpointers' clock: their soak as fast as the pods'; their grace the real default,
/// unscaled, as on a real node: a loaded two-core machine can stall the API's answers for
/// seconds, and the simulator has no node-local ports for the agent to find the node's own
/// processes at, so a shorter grace starts copies beside DaemonSet pods that never stopped,
/// which a real node's checkpointer would not (see docs/simulator.md, "Not modelled"); a read
/// of the node every 500 ms, since each is a probe and a list on connections of their own,
/// and two runs of up to five nodes each share this process's two threads.
fn checkpointer_tuning(scenario: &Scenario) -> CheckpointTuning {
    CheckpointTuning {
        policy: CheckpointPolicy {
            soak: DEFAULT_SOAK / scenario.speedup,
            api_grace: DEFAULT_API_GRACE,
        },
        interval: Duration::from_millis(500),
    }
}

/// How long the checkpointers' mirror pods may take to be Ready once the cluster runs (two
/// runs of up to five nodes each start their processes on a loaded machine).
const CHECKPOINTERS_WITHIN: Duration = Duration::from_secs(60);

/// A self-hosted cluster as `convert to-self-hosted` leaves one: the checkpointer on every
/// control-plane node.
async fn start_cluster(scenario: &Scenario) -> SimCluster {
    let builder = SimCluster::builder()
        .control_plane_nodes(scenario.control_plane)
        .workers(scenario.workers)
        .version(&scenario.from)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(timings(scenario))
        .handovers(scenario.measured_handovers.then(Handovers::measured))
        .bootstrap_timeout(Duration::from_secs(120));
    let sim = checkpointed::with_tuned_checkpointers(builder, checkpointer_tuning(scenario))
        .start()
        .await
        .unwrap_or_else(|e| panic!("seed {}: the cluster starts: {e}", scenario.seed));
    // `convert` returns once each checkpointer's mirror pod is Ready; the snapshot of what
    // the tool must leave alone is taken after that, as an operator's would be.
    let deadline = Instant::now() + CHECKPOINTERS_WITHIN;
    while !checkpointed::every_checkpointer_ready(&sim) {
        assert!(
            Instant::now() < deadline,
            "seed {}: the checkpointers' mirror pods are not Ready within {CHECKPOINTERS_WITHIN:?}",
            scenario.seed
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Where the machines go down, they have kept what they run, as a cluster converted a
    // while ago has; elsewhere the run need not wait for it.
    if scenario.reboot.is_some() || scenario.power_cut.is_some() {
        checkpointed::every_node_keeps_every_component(&sim).await;
    }
    sim
}

fn break_target(sim: &SimCluster, scenario: &Scenario) {
    let Some((component, how)) = scenario.broken else {
        return;
    };
    let target = image(component, &scenario.to);
    match how {
        Breakage::Unpullable => sim.registry().make_unpullable(&target),
        // Two real seconds, at the cluster's speed.
        Breakage::CrashLoop => sim
            .registry()
            .make_crash_loop(
                &target,
                Duration::from_millis(2_000 / u64::from(scenario.speedup)),
            )
            .expect("a valid image"),
        Breakage::NeverReady => sim
            .registry()
            .make_never_ready(&target)
            .expect("a valid image"),
    }
}

/// The outcome the scenario calls for: the components on the target, the exit code, and how
/// the last message begins (for a `--prepull` refusal: the last event and the image its
/// failed check names).
fn expected(scenario: &Scenario) -> (Vec<Component>, i32, String, String) {
    if let Some((failing, _)) = scenario.broken
        && scenario.prepull_refuses()
    {
        return (
            Vec::new(),
            3,
            "refused".into(),
            image(failing, &scenario.to),
        );
    }
    match scenario.broken {
        None => (
            Component::ALL.to_vec(),
            0,
            "done".into(),
            format!("the control plane runs {}", scenario.to),
        ),
        Some((failing, _)) => (
            Component::ALL
                .into_iter()
                .take_while(|c| *c != failing)
                .collect(),
            1,
            "rolled-back".into(),
            format!("{failing} failed and was rolled back to its original template"),
        ),
    }
}

/// A `--prepull` refusal must be the last event, and its failed `images-pullable` check must
/// name the unpullable `image`.
fn prepull_refusal_violations(last: Option<&serde_json::Value>, image: &str) -> Vec<String> {
    let names_image = last.is_some_and(|e| {
        e["event"] == "refused"
            && e["plan"]["preflight"]["checks"]
                .as_array()
                .is_some_and(|checks| {
                    checks.iter().any(|c| {
                        c["id"] == "images-pullable"
                            && c["verdict"] == "fail"
                            && c["message"].as_str().is_some_and(|m| m.contains(image))
                    })
                })
    });
    if names_image {
        Vec::new()
    } else {
        vec![format!(
            "exit 3 with last event {}; expected the prepull's refusal naming {image}",
            last.map(|e| e.to_string()).unwrap_or_default()
        )]
    }
}

/// Runs one scenario and checks every invariant.
pub async fn run(scenario: Scenario, verbose: bool) -> RunResult {
    let began = Instant::now();
    let sim = Arc::new(start_cluster(&scenario).await);
    // Real nodes have their pod sandbox image, which `--prepull` runs its pods with.
    for tag in ["3.9", "3.10", "3.10.1"] {
        sim.registry()
            .add_image(&format!("registry.k8s.io/pause:{tag}"))
            .expect("a valid image");
    }
    break_target(&sim, &scenario);
    let snapshot = Snapshot::take(&sim);
    let prober = sim
        .prober(ProberOptions {
            // An API object, as clients read: an apiserver in its shutdown delay fails
            // /readyz on purpose while it still serves.
            read_path: "/api/v1/namespaces/kube-system".into(),
            // Two seconds, not one: on a two-core machine shared with other work a request
            // the cluster answers can take longer than a second to be scheduled and served,
            // and that measures the machine, not the upgrade.
            timeout: Duration::from_secs(2),
            config_map: invariants::PROBER_CONFIG_MAP.into(),
            ..ProberOptions::default()
        })
        .await
        .expect("a prober");
    let writer = match scenario.writer_every {
        Some(every) => Some(Writer::start(&sim, every).await),
        None => None,
    };
    // What served before a power cut is all a checkpointer may bring back; watched only
    // where the power goes.
    let mut served = scenario
        .power_cut
        .is_some()
        .then(|| Served::track(sim.clone()));
    let start = Instant::now();
    let mut schedule = Schedule::start(sim.clone(), &scenario, start);
    let mut violations = Vec::new();
    let mut invocations = Vec::new();
    let mut refused_while_not_ready = 0;
    let mut refused_while_api_down = 0;
    let mut refused_after_reboot = 0;
    let mut back_after_power_cut = None;
    let final_invocation = loop {
        // A power cut kills the tool with its machine, where a SIGKILL would have.
        let kill = if invocations.is_empty() {
            scenario
                .power_cut
                .map(|p| Kill {
                    after_step: p.after_step,
                    delay: p.delay,
                })
                .or(scenario.kill)
        } else {
            None
        };
        let invocation_start = Instant::now();
        let (kubeconfig, s) = (sim.kubeconfig_path().to_path_buf(), scenario.clone());
        let invocation = tokio::task::spawn_blocking(move || invoke(kubeconfig, &s, kill))
            .await
            .expect("the invocation thread");
        // A refusal (3) or a stop that names the command to continue (4) is the honest
        // answer while the schedule itself forced the condition — a control-plane node
        // NotReady, or the API down — and the operator then waits for it and runs again.
        let stopped = match invocation.code {
            Some(3) => true,
            Some(4) => invocation.stderr.contains("Continue with: selfhost apply"),
            _ => false,
        };
        let again = if invocation.killed {
            if let (Some(cut), Some(tracker)) = (scenario.power_cut, served.take()) {
                let served = power::served(tracker.stop(), &scenario);
                let (off, back, unserved) = power::cut(&sim, &scenario, cut.off_for, &served).await;
                violations.extend(unserved);
                if let Some(back) = back {
                    schedule.power_cut(off, back);
                    back_after_power_cut = Some((back - off - cut.off_for).as_secs_f64());
                }
                // The operator runs the tool again once the API serves; not at all if it
                // never does.
                back.is_some()
            } else {
                true
            }
        } else if stopped && schedule.node_was_rebooted_since(invocation_start) {
            refused_after_reboot += 1;
            // The operator waits until the machine is back and the cluster has settled.
            while schedule.reboot_open() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            violations.extend(power::settle_after_reboot(&sim).await);
            true
        } else if stopped && schedule.node_was_not_ready_since(invocation_start) {
            refused_while_not_ready += 1;
            // The operator waits until the cluster has settled again, not only until the
            // machine is fixed: its kubelet's next status post comes a moment later, the
            // taints go after it, and the DaemonSets count the node again after that.
            let deadline = Instant::now() + Duration::from_secs(30);
            while (schedule.not_ready_open() || !invariants::settled_after_not_ready(&sim))
                && Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            true
        } else if stopped && schedule.api_forced_down_between(invocation_start, Instant::now()) {
            refused_while_api_down += 1;
            true
        } else {
            false
        };
        let last = !again || invocations.len() + 1 >= MAX_INVOCATIONS;
        invocations.push(invocation);
        if last {
            break invocations.len() - 1;
        }
    };
    // A reboot under way when the tool ended is let finish, and the cluster settle, before
    // the end state is judged.
    if schedule.finish_reboot().await.is_some() {
        violations.extend(power::settle_after_reboot(&sim).await);
    }
    if let Some(tracker) = served.take() {
        tracker.stop();
    }
    let end = Instant::now();
    if verbose {
        for (n, inv) in invocations.iter().enumerate() {
            println!(
                "invocation {n} (exit {:?}, killed {}):",
                inv.code, inv.killed
            );
            for e in inv.events.iter().filter(|e| e["event"] != "waiting") {
                println!("  {e}");
            }
        }
        for (node, lines) in checkpointed::checkpointer_said(&sim) {
            println!("the checkpointer on {node}:");
            for line in lines {
                println!("  {line}");
            }
        }
    }
    let writer = match writer {
        Some(w) => Some(w.stop().await),
        None => None,
    };
    let probes = prober.stop().await;
    let faults = schedule.stop(&sim).await;

    let last = &invocations[final_invocation];
    let (upgraded, code, outcome, message) = expected(&scenario);
    for inv in &invocations {
        if inv.timed_out {
            violations.push(format!("an invocation hung for {INVOCATION_LIMIT:?}"));
        }
        if !inv.not_json.is_empty() {
            violations.push(format!("stdout lines not JSON: {:?}", inv.not_json));
        }
    }
    if last.killed {
        violations.push(format!("still killed after {MAX_INVOCATIONS} invocations"));
    }
    let result = last.events.last();
    if last.code != Some(code) {
        violations.push(format!(
            "exit {:?}, expected {code}; last event {}",
            last.code,
            result.map(|e| e.to_string()).unwrap_or_default()
        ));
    } else if code == 3 {
        violations.extend(prepull_refusal_violations(result, &message));
    } else {
        let (got_outcome, got_message) = result
            .map(|e| {
                (
                    e["outcome"].as_str().unwrap_or(""),
                    e["message"].as_str().unwrap_or(""),
                )
            })
            .unwrap_or_default();
        let message_ok = got_message.starts_with(&message)
            || (code == 0
                && got_message
                    == format!(
                        "the control plane already runs {}; nothing to do",
                        scenario.to
                    ));
        if result.map(|e| &e["event"]) != Some(&"result".into())
            || got_outcome != outcome
            || !message_ok
        {
            violations.push(format!(
                "exit {code} with last event {}; expected outcome {outcome:?}, message {message:?}",
                result.map(|e| e.to_string()).unwrap_or_default()
            ));
        }
    }
    if matches!(last.code, Some(0 | 1)) || (code == 3 && last.code == Some(3)) {
        let upgraded = if last.code == Some(0) {
            Component::ALL.to_vec()
        } else {
            upgraded
        };
        violations.extend(invariants::version_violations(
            &sim,
            &snapshot,
            &upgraded,
            &scenario.to,
        ));
        violations.extend(invariants::leftovers(&sim));
        violations.extend(power::checkpoint_violations(&sim).await);
    }
    violations.extend(snapshot.foreign_changes(&sim));
    violations.extend(invariants::availability_violations(
        &sim,
        &probes,
        start,
        end,
        &faults.forced,
        scenario.measured_handovers,
        scenario.control_plane,
    ));
    if let Some(w) = &writer {
        for component in Component::ALL {
            let name = component.daemonset_name();
            let acknowledged = w.last_acknowledged.get(&name).copied().unwrap_or(0);
            let now = sim
                .store()
                .get_opt(&selfhost_sim::resources::DAEMONSETS, "kube-system", &name)
                .and_then(|d| {
                    d.pointer(&format!(
                        "/metadata/annotations/{}",
                        ANNOTATION.replace('/', "~1")
                    ))
                    .and_then(|v| v.as_str())
                    .and_then(|v| v.parse::<u64>().ok())
                })
                .unwrap_or(0);
            if now < acknowledged {
                violations.push(format!(
                    "{name}: the concurrent writer's annotation went back from {acknowledged} to {now}"
                ));
            }
        }
    }
    let stderr_tail = invocations
        .iter()
        .map(|i| i.stderr.as_str())
        .collect::<Vec<_>>()
        .join("--- next invocation ---\n");
    let stderr_tail = stderr_tail
        .lines()
        .rev()
        .take(if verbose { usize::MAX } else { 12 })
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    let result = RunResult {
        exit: last.code,
        invocations: invocations.len(),
        killed: invocations.iter().any(|i| i.killed),
        refused_while_not_ready,
        refused_while_api_down,
        refused_after_reboot,
        back_after_power_cut,
        faults,
        writer,
        violations,
        seconds: began.elapsed().as_secs_f64(),
        stderr_tail,
        scenario,
    };
    match Arc::try_unwrap(sim) {
        Ok(sim) => sim.shutdown().await,
        Err(sim) => drop(sim),
    }
    result
}
