//! Scale benchmark: the real `selfhost` binary, spawned as a user runs it, doing `status`,
//! `plan <next>` and a plan three minors ahead (three hops) against a simulated self-hosted
//! cluster — first as it starts (one control-plane node), then holding 5,000 more nodes and
//! 100,000 pods outside kube-system — with its peak memory (`VmHWM` of /proc/PID/status), its
//! latency and the API requests it made, side by side. The tool must not list what it does not
//! need: its memory and its pod requests must not grow with the cluster.
//!
//! Not a test. Build the binary with the same profile first, then run:
//! `cargo build -p selfhost-cli --profile dev && cargo bench -p selfhost --bench scale --profile dev`
//! Options after `--`: `--nodes N` (5000), `--pods N` (100000), `--runs N` (3). The binary is
//! looked for next to the benchmark's own target directory, or at `$SELFHOST_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a benchmark, not library code

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::bulk::{self, BulkLoad};
use selfhost_sim::controllers::node_lifecycle::NodeLifecycleConfig;
use selfhost_sim::{SimCluster, SimTimings};

const VERSION: &str = "v1.33.1";
const NEXT: &str = "v1.34.0";
/// A plan three minors ahead, in three hops through the versions given (no release index).
const CHAINED: &str = "v1.36.2";
const CHAINED_VIA: &str = "v1.34.2,v1.35.1";

struct Options {
    nodes: usize,
    pods: usize,
    runs: usize,
}

fn options() -> Options {
    let mut o = Options {
        nodes: 5_000,
        pods: 100_000,
        runs: 3,
    };
    let args: Vec<String> = std::env::args().collect();
    for pair in args.windows(2) {
        let value = || pair[1].parse().expect("a number");
        match pair[0].as_str() {
            "--nodes" => o.nodes = value(),
            "--pods" => o.pods = value(),
            "--runs" => o.runs = value(),
            _ => {}
        }
    }
    o
}

/// The `selfhost` binary built with this benchmark's profile: `target/<profile>/selfhost`,
/// next to `target/<profile>/deps/<this bench>`.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SELFHOST_BIN") {
        return path.into();
    }
    let exe = std::env::current_exe().expect("own path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let path = profile_dir.join("selfhost");
    assert!(
        path.exists(),
        "{} not found: build it first with `cargo build -p selfhost-cli` and the same --profile, \
         or set SELFHOST_BIN",
        path.display()
    );
    path
}

/// `VmHWM` (peak resident set) of a running process, in KiB; `None` once it has exited.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// One run of the binary: wall time and peak RSS (KiB). The peak is read every millisecond
/// until the process exits; `VmHWM` only grows, so the last reading is at most a millisecond
/// of growth short of the true peak.
fn run_once(binary: &Path, kubeconfig: &Path, args: &[&str]) -> (Duration, u64) {
    let started = Instant::now();
    let mut child = Command::new(binary)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns selfhost");
    let pid = child.id();
    let mut peak = 0;
    let status = loop {
        if let Some(kib) = peak_rss_kib(pid) {
            peak = peak.max(kib);
        }
        if let Some(status) = child.try_wait().expect("waits") {
            break status;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let wall = started.elapsed();
    if !status.success() {
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
        }
        panic!("selfhost {args:?} failed ({status}): {stderr}");
    }
    (wall, peak)
}

/// Figures of one command on one cluster: the fastest and the median wall time, the highest
/// peak RSS, and the requests of one run by `(verb, resource)`.
struct Figures {
    fastest: Duration,
    median: Duration,
    peak_kib: u64,
    requests: BTreeMap<(String, String), u64>,
}

fn measure(sim: &SimCluster, binary: &Path, args: &[&str], runs: usize) -> Figures {
    let mut walls = Vec::new();
    let mut peak = 0;
    let mut requests = BTreeMap::new();
    for i in 0..runs {
        let before = sim.metrics().snapshot();
        let (wall, kib) = run_once(binary, sim.kubeconfig_path(), args);
        if i == 0 {
            let after = sim.metrics().snapshot();
            requests = after
                .into_iter()
                .map(|(k, n)| {
                    let was = before.get(&k).copied().unwrap_or(0);
                    (k, n - was)
                })
                .filter(|(_, n)| *n > 0)
                .collect();
        }
        walls.push(wall);
        peak = peak.max(kib);
    }
    walls.sort();
    Figures {
        fastest: walls[0],
        median: walls[walls.len() / 2],
        peak_kib: peak,
        requests,
    }
}

fn count(requests: &BTreeMap<(String, String), u64>, verb: &str, resource: &str) -> u64 {
    requests
        .get(&(verb.to_string(), resource.to_string()))
        .copied()
        .unwrap_or(0)
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// CPU time this process (the simulator) used, from /proc/self/stat, in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the parenthesised command name: state is the 3rd field, utime the 14th and
    // stime the 15th of the whole line.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(14) + field(15)
}

/// CPU ticks the simulator uses in half a second.
fn busy_per_half_second() -> u64 {
    let before = cpu_ticks();
    std::thread::sleep(Duration::from_millis(500));
    cpu_ticks() - before
}

/// Waits until the simulator uses no more CPU than `at_rest` (its heartbeats and Lease
/// renewals before the load) plus a margin — its controllers, informers and watch caches have
/// digested the load — so that the tool is measured against a cluster at rest; returns how
/// long that took.
fn quiesce(at_rest: u64) -> Duration {
    let started = Instant::now();
    loop {
        let busy = busy_per_half_second();
        if busy <= at_rest * 2 + 5 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "the simulator never came to rest: {busy} CPU ticks per half second, {at_rest} \
             before the load (profile it: a controller doing work per object at every pass)"
        );
    }
    started.elapsed()
}

fn main() {
    let options = options();
    let binary = binary();
    // More workers than cores: a controller deserialising thousands of objects in one poll
    // must not leave the simulator's HTTP server without a thread.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(6)
        .enable_all()
        .build()
        .expect("runtime");
    // The bulk nodes have no kubelet: nothing renews their heartbeats, so the node lifecycle
    // controller is given grace periods longer than the benchmark (it would otherwise mark
    // 5,000 nodes Unknown and 100,000 pods not Ready while the tool reads the cluster).
    let timings = SimTimings {
        node_lifecycle: NodeLifecycleConfig {
            monitor_grace_period: Duration::from_secs(3600),
            startup_grace_period: Duration::from_secs(3600),
        },
        ..SimTimings::fast()
    };
    let sim = runtime
        .block_on(
            SimCluster::builder()
                .control_plane_nodes(1)
                .version(VERSION)
                .mode(BootstrapMode::SelfHosted)
                .port_sharing(true)
                .timings(timings)
                // Room for every event of the load, so that informers follow it instead of
                // relisting 100,000 pods each time they fall behind.
                .history_limit(250_000)
                .start(),
        )
        .expect("cluster");
    let commands: [(&str, Vec<&str>); 3] = [
        ("status", vec!["status"]),
        ("plan", vec!["plan", NEXT]),
        ("chain", vec!["plan", CHAINED, "--via", CHAINED_VIA]),
    ];

    let small: Vec<Figures> = commands
        .iter()
        .map(|(_, args)| measure(&sim, &binary, args, options.runs))
        .collect();

    let at_rest = busy_per_half_second();
    let loaded = bulk::load(
        sim.store(),
        &BulkLoad {
            nodes: options.nodes,
            pods: options.pods,
            namespaces: 100,
            kubelet_version: VERSION.into(),
        },
    )
    .expect("bulk load");
    println!(
        "loaded {} nodes and {} pods in {} namespaces through the store in {:.2}s ({:.0} objects/s)",
        loaded.nodes,
        loaded.pods,
        loaded.namespaces,
        loaded.took.as_secs_f64(),
        (loaded.nodes + loaded.pods) as f64 / loaded.took.as_secs_f64()
    );
    let quiet = quiesce(at_rest);
    println!(
        "the simulator's own controllers digested the load in a further {:.2}s",
        quiet.as_secs_f64()
    );
    let large: Vec<Figures> = commands
        .iter()
        .map(|(_, args)| measure(&sim, &binary, args, options.runs))
        .collect();

    println!(
        "selfhost binary {}; {} runs per command; large = +{} nodes, +{} pods outside kube-system",
        binary.display(),
        options.runs,
        options.nodes,
        options.pods
    );
    println!(
        "{:<8} {:<6} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>9}",
        "command",
        "cluster",
        "peak RSS",
        "fastest",
        "median",
        "requests",
        "pod lists",
        "node lists",
        "watches"
    );
    for (i, (name, _)) in commands.iter().enumerate() {
        for (cluster, f) in [("small", &small[i]), ("large", &large[i])] {
            let total: u64 = f.requests.values().sum();
            println!(
                "{name:<8} {cluster:<6} {:>10} {:>10} {:>10} {:>9} {:>10} {:>10} {:>9}",
                mib(f.peak_kib),
                ms(f.fastest),
                ms(f.median),
                total,
                count(&f.requests, "list", "pods"),
                count(&f.requests, "list", "nodes"),
                f.requests
                    .iter()
                    .filter(|((verb, _), _)| verb == "watch")
                    .map(|(_, n)| n)
                    .sum::<u64>(),
            );
        }
        println!(
            "{name:<8} {:<6} {:>10.2} {:>10.2} {:>10.2}",
            "ratio",
            large[i].peak_kib as f64 / small[i].peak_kib as f64,
            large[i].fastest.as_secs_f64() / small[i].fastest.as_secs_f64(),
            large[i].median.as_secs_f64() / small[i].median.as_secs_f64(),
        );
    }
    println!("(ratio: large cluster divided by small)");
    for (i, (name, args)) in commands.iter().enumerate() {
        println!(
            "requests of one `{name}` (selfhost {}) on the large cluster: {:?}",
            args.join(" "),
            large[i].requests
        );
    }
    runtime.block_on(sim.shutdown());
}
