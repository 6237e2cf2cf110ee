//! A chained upgrade on the simulator: `plan v1.36.2` from v1.33.1 plans one hop per minor
//! through the newest patch the release index names; `apply` runs them in order, is killed
//! with SIGKILL inside the second hop, and the same command run again finishes it from where
//! it stopped.

use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use selfhost_sim::SimCluster;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A release index on a local port: `stable-1.NN.txt` for each `(minor, version)`; any
/// other file is 404. Returns its URL.
async fn release_index(versions: &'static [(&'static str, &'static str)]) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut request = vec![0u8; 4096];
                let read = socket.read(&mut request).await.unwrap_or(0);
                let line = String::from_utf8_lossy(&request[..read]).into_owned();
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let found = versions
                    .iter()
                    .find(|(file, _)| path == format!("/release/{file}"));
                let response = match found {
                    Some((_, version)) => format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
                         connection: close\r\n\r\n{version}\n",
                        version.len() + 1
                    ),
                    None => "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: \
                             close\r\n\r\n"
                        .to_string(),
                };
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    format!("http://{address}/release")
}

const INDEX: &[(&str, &str)] = &[
    ("stable-1.34.txt", "v1.34.2"),
    ("stable-1.35.txt", "v1.35.1"),
];

async fn images(sim: &SimCluster) -> Vec<String> {
    let api: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let mut images: Vec<String> = api
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|d| {
            d.spec
                .and_then(|s| s.template.spec)
                .and_then(|s| s.containers.first().and_then(|c| c.image.clone()))
        })
        .collect();
    images.sort();
    images
}

fn text(out: &std::process::Output) -> String {
    crate::printed(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chained_upgrade_across_three_minors_killed_in_its_second_hop_finishes_when_run_again() {
    let sim = crate::one_self_hosted_node().await;
    let index = release_index(INDEX).await;
    let kubeconfig = sim.kubeconfig_path().to_path_buf();

    let plan = crate::run_selfhost(
        &kubeconfig,
        ["plan", "v1.36.2", "--releases-url", &index],
        Duration::from_secs(120),
    )
    .await;
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan));
    let said = text(&plan);
    for line in [
        "A chained upgrade, one minor at a time, in 3 hops; each is planned and checked again \
         when it starts:",
        &format!("  1. v1.33.1 → v1.34.2 (the newest v1.34 patch, {index}/stable-1.34.txt)"),
        &format!("  2. v1.34.2 → v1.35.1 (the newest v1.35 patch, {index}/stable-1.35.txt)"),
        "  3. v1.35.1 → v1.36.2",
        &format!("apply would proceed: selfhost apply v1.36.2 --releases-url {index}"),
    ] {
        assert!(said.lines().any(|l| l == line), "{line:?} in:\n{said}");
    }
    assert!(
        said.contains("Hop 3 of 3: v1.35.1 → v1.36.2; the checks its version decides:")
            && said.contains("PASS  version-skew: moving to v1.36.2"),
        "{said}"
    );

    let args: Vec<OsString> = ["apply", "v1.36.2", "--yes", "--releases-url", &index]
        .iter()
        .map(Into::into)
        .collect();
    // SIGKILL once the second hop has replaced the kube-apiserver's template.
    let in_second = Arc::new(AtomicBool::new(false));
    let seen = in_second.clone();
    let (events, code) = crate::run_json_events(kubeconfig.clone(), args.clone(), move |e| {
        if e["event"] == "hop" && e["hop"] == 2 {
            seen.store(true, Ordering::SeqCst);
        }
        seen.load(Ordering::SeqCst) && crate::is_event(e, "action", "kube-apiserver", "update-real")
    })
    .await;
    assert_eq!(code, None, "killed: {events:?}");
    let hops: Vec<&serde_json::Value> = events.iter().filter(|e| e["event"] == "hop").collect();
    assert_eq!(hops.len(), 2, "{hops:?}");
    assert_eq!(
        (
            hops[1]["from"].as_str(),
            hops[1]["to"].as_str(),
            hops[1]["of"].as_u64()
        ),
        (Some("v1.34.2"), Some("v1.35.1"), Some(3))
    );
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "hop-result" && e["outcome"] == "done"),
        "the first hop finished: {events:?}"
    );

    // The same command again: the chain is worked out from what runs now (the second hop
    // under way), which it resumes, then the last hop.
    let (events, code) = crate::run_json_events(kubeconfig, args, |_| false).await;
    assert_eq!(code, Some(0), "{events:?}");
    let hops: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["event"] == "hop")
        .map(|e| (e["from"].to_string(), e["to"].to_string()))
        .collect();
    assert_eq!(
        hops,
        [
            ("\"v1.34.2\"".to_string(), "\"v1.35.1\"".to_string()),
            ("\"v1.35.1\"".to_string(), "\"v1.36.2\"".to_string())
        ]
    );
    let result = events.last().expect("a result");
    assert_eq!(result["event"], "result", "{result}");
    assert!(
        result["message"].as_str().is_some_and(
            |m| m.starts_with("hop 2 of 2 (v1.35.1 → v1.36.2): the control plane runs v1.36.2")
        ),
        "{result}"
    );
    let images = images(&sim).await;
    assert_eq!(images.len(), 3, "{images:?}");
    assert!(images.iter().all(|i| i.ends_with(":v1.36.2")), "{images:?}");
    assert!(crate::backups_left(&sim).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_whose_patches_cannot_be_learnt_refuses_and_names_via() {
    let sim = crate::one_self_hosted_node().await;
    let index = release_index(&[]).await;
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let before = images(&sim).await;
    let out = crate::run_selfhost(
        &kubeconfig,
        ["apply", "v1.35.0", "--yes", "--releases-url", &index],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("cannot tell the newest v1.34 patch") && text(&out).contains("--via"),
        "{}",
        text(&out)
    );
    assert_eq!(images(&sim).await, before, "nothing changed");

    let out = crate::run_selfhost(
        &kubeconfig,
        ["plan", "v1.35.0", "--via", "v1.36.0"],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--via v1.36.0: not a minor between v1.33.1 and v1.35.0"),
        "{}",
        text(&out)
    );
}

/// How many node lists `selfhost args…` made.
async fn node_lists(sim: &SimCluster, args: &[&str]) -> u64 {
    let lists = |snapshot: std::collections::BTreeMap<(String, String), u64>| {
        snapshot
            .get(&("list".to_string(), "nodes".to_string()))
            .copied()
            .unwrap_or(0)
    };
    let before = lists(sim.metrics().snapshot());
    let out = crate::run_selfhost(sim.kubeconfig_path(), args, Duration::from_secs(120)).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    lists(sim.metrics().snapshot()) - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_reads_every_node_once_in_pages_however_many_hops_it_has() {
    let sim = crate::one_self_hosted_node().await;
    let one_hop = ["plan", "v1.34.0"];
    let three_hops = ["plan", "v1.36.2", "--via", "v1.34.2,v1.35.1"];
    let small = node_lists(&sim, &one_hop).await;
    selfhost_sim::bulk::load(
        sim.store(),
        &selfhost_sim::bulk::BulkLoad {
            nodes: 1_200,
            pods: 0,
            namespaces: 1,
            kubelet_version: "v1.33.1".into(),
        },
    )
    .expect("bulk load");
    // 1,201 nodes are three pages of 500 where one node was one page.
    assert_eq!(node_lists(&sim, &one_hop).await, small + 2);
    assert_eq!(
        node_lists(&sim, &three_hops).await,
        small + 2,
        "working out the hops reads the nodes the plan reads"
    );
}
