//! How long a simulated cluster takes to come up at scale: a thousand nodes, then a
//! DaemonSet on every one of them until every pod is Ready, with zero pod latencies, driven
//! through kube-rs over HTTP as a test would.
//!
//! Run: `cargo bench -p selfhost-sim --bench cluster --profile dev` (add `-- --nodes N` to
//! change the size, `--history N` for the store's event history). Prints one line per figure; the figures are recorded in
//! `docs/benchmarks.md`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::api::PostParams;
use selfhost_sim::{SimCluster, SimTimings};
use serde_json::json;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Resident memory of this process, from `/proc/self/status` (0 where unavailable).
fn rss_mib() -> f64 {
    let kib: u64 = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    kib as f64 / 1024.0
}

async fn run(nodes: usize, history: usize) {
    let before = rss_mib();
    let started = Instant::now();
    let cluster = SimCluster::builder()
        .control_plane_nodes(1)
        .workers(nodes - 1)
        .timings(SimTimings::instant())
        .history_limit(history)
        .bootstrap_timeout(Duration::from_secs(600))
        .image("registry.k8s.io/pause:3.10", Default::default())
        .start()
        .await
        .expect("the cluster starts");
    let up = started.elapsed();
    println!(
        "start {nodes} nodes (static control plane Ready): {:.2} s, RSS {:.0} MiB",
        up.as_secs_f64(),
        rss_mib() - before
    );

    let ds: DaemonSet = serde_json::from_value(json!({
        "metadata": { "name": "everywhere" },
        "spec": {
            "selector": { "matchLabels": { "app": "everywhere" } },
            "template": {
                "metadata": { "labels": { "app": "everywhere" } },
                "spec": {
                    "tolerations": [{ "operator": "Exists" }],
                    "containers": [{ "name": "pause", "image": "registry.k8s.io/pause:3.10" }],
                },
            },
        },
    }))
    .unwrap();
    let api: Api<DaemonSet> = Api::default_namespaced(cluster.client());
    let rss_before_ds = rss_mib();
    let started = Instant::now();
    api.create(&PostParams::default(), &ds).await.unwrap();
    let want = i32::try_from(nodes).unwrap();
    let ready = |d: Option<&DaemonSet>| {
        d.and_then(|d| d.status.as_ref()).is_some_and(|s| {
            s.desired_number_scheduled == want
                && s.number_ready == want
                && s.updated_number_scheduled == Some(want)
                && s.number_available == Some(want)
        })
    };
    tokio::time::timeout(
        Duration::from_secs(1_800),
        kube::runtime::wait::await_condition(api, "everywhere", ready),
    )
    .await
    .expect("the DaemonSet is Ready everywhere in time")
    .unwrap();
    let took = started.elapsed();
    println!(
        "DaemonSet on {nodes} nodes, create to every pod Ready: {:.2} s ({:.0} pods/s), RSS +{:.0} MiB",
        took.as_secs_f64(),
        nodes as f64 / took.as_secs_f64(),
        rss_mib() - rss_before_ds
    );
    println!(
        "total RSS of the cluster: {:.0} MiB, HTTP requests served: {}",
        rss_mib() - before,
        cluster.metrics().total()
    );
    cluster.shutdown().await;
}

fn main() {
    let nodes = arg("--nodes", 1_000).max(1);
    // The store's event history (the watch cache): the default keeps 10,000 events, which a
    // thousand nodes overrun; informers then relist, as real ones do after a 410.
    let history = arg("--history", 10_000);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(nodes, history));
}
