//! Throughput and latency of the simulated API server, measured through kube-rs over HTTP.
//!
//! Run: `cargo bench -p selfhost-sim --bench apiserver --profile dev` (add `-- --pods N`
//! or `-- --watchers N` to change the sizes). Prints one line per figure; the figures are
//! recorded in `docs/benchmarks.md`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{ListParams, PostParams, WatchEvent, WatchParams};
use selfhost_sim::store::{StoreOptions, WriteOptions};
use selfhost_sim::{SimServer, SimServerOptions, resources};
use serde_json::{Value, json};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pod_json(i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": format!("pod-{i:05}"), "labels": { "app": "bench", "shard": (i % 10).to_string() } },
        "spec": {
            "nodeName": format!("node-{}", i % 50),
            "containers": [{ "name": "main", "image": "registry.k8s.io/pause:3.10",
                             "resources": { "requests": { "cpu": "10m", "memory": "16Mi" } } }],
        },
    })
}

/// Resident memory of this process, from `/proc/self/status` (0 where unavailable).
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn create_and_list(pods: usize) {
    let sim = SimServer::start(SimServerOptions {
        store: StoreOptions {
            history_limit: pods + 1_000,
        },
        ..SimServerOptions::default()
    })
    .await
    .unwrap();
    let api: Api<Pod> = Api::namespaced(sim.client(), "default");
    let objects: Vec<Pod> = (0..pods)
        .map(|i| serde_json::from_value(pod_json(i)).unwrap())
        .collect();

    let started = Instant::now();
    stream::iter(objects.iter())
        .map(|p| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), p).await.unwrap() }
        })
        .buffer_unordered(16)
        .for_each(|_| async {})
        .await;
    let took = started.elapsed();
    println!(
        "create {pods} pods over HTTP (16 in flight): {:.0} objects/s ({:.2} s)",
        pods as f64 / took.as_secs_f64(),
        took.as_secs_f64()
    );

    let started = Instant::now();
    let list = api.list(&ListParams::default()).await.unwrap();
    let took = started.elapsed();
    assert_eq!(list.items.len(), pods);
    println!(
        "list {pods} pods in one request: {:.0} objects/s ({:.3} s)",
        pods as f64 / took.as_secs_f64(),
        took.as_secs_f64()
    );

    let started = Instant::now();
    let mut seen = 0;
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.unwrap();
        seen += page.items.len();
        token = page.metadata.continue_;
        if token.is_none() {
            break;
        }
    }
    let took = started.elapsed();
    assert_eq!(seen, pods);
    println!(
        "list {pods} pods in pages of 500: {:.0} objects/s ({:.3} s)",
        pods as f64 / took.as_secs_f64(),
        took.as_secs_f64()
    );

    let started = Instant::now();
    let selected = api
        .list(&ListParams::default().fields("spec.nodeName=node-7"))
        .await
        .unwrap();
    println!(
        "list {pods} pods with fieldSelector spec.nodeName (a kubelet's view, {} match): {:.3} s",
        selected.items.len(),
        started.elapsed().as_secs_f64()
    );
    sim.shutdown().await;
}

async fn memory(pods: usize) {
    let sim = SimServer::start(SimServerOptions::default()).await.unwrap();
    let before = rss_kib();
    for i in 0..pods {
        sim.store()
            .create(
                &resources::PODS,
                "default",
                pod_json(i),
                &WriteOptions::manager("bench"),
            )
            .unwrap();
    }
    let after = rss_kib();
    println!(
        "memory for {pods} pods in the store (history of 10000 events included): {:.1} MiB RSS ({:.1} KiB per pod)",
        (after.saturating_sub(before)) as f64 / 1024.0,
        (after.saturating_sub(before)) as f64 / pods as f64
    );
    sim.shutdown().await;
}

async fn fan_out(watchers: usize, writes: usize) {
    let sim = SimServer::start(SimServerOptions::default()).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        // Each watcher has its own connection, as separate clients would.
        let client = sim.client_with(|_| {}).await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        let mut events = api
            .watch(&WatchParams::default(), &rv)
            .await
            .unwrap()
            .boxed();
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            while let Ok(Some(event)) = events.try_next().await {
                if let WatchEvent::Added(cm) = event {
                    let n: usize = cm.data.unwrap()["n"].parse().unwrap();
                    let _ = tx.send((n, Instant::now()));
                }
            }
        }));
    }
    drop(tx);
    let mut latencies = Vec::with_capacity(watchers * writes);
    for n in 0..writes {
        let cm: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": format!("cm-{n}") }, "data": { "n": n.to_string() },
        }))
        .unwrap();
        let sent = Instant::now();
        api.create(&PostParams::default(), &cm).await.unwrap();
        let mut got = 0;
        while got < watchers {
            let (m, at) = rx.recv().await.unwrap();
            assert_eq!(m, n, "events arrive in order");
            latencies.push(at - sent);
            got += 1;
        }
    }
    latencies.sort();
    println!(
        "watch fan-out to {watchers} watchers, {writes} writes: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (from the create call to each watcher's event)",
        percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
        percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1000.0
    );
    for t in tasks {
        t.abort();
    }
    sim.shutdown().await;
}

fn main() {
    let pods = arg("--pods", 10_000);
    let watchers = arg("--watchers", 50);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        memory(pods).await;
        create_and_list(pods).await;
        fan_out(watchers, 200).await;
    });
}
