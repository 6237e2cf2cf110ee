//! selfhost next to kubeadm's algorithm on real Kubernetes processes: on a fresh bed each, the
//! same upgrade (v1.20.2 → v1.20.3) by `selfhost apply` behind the node's API front (one node
//! only), by `selfhost apply` without it, and by the project's reference implementation of
//! kubeadm's self-hosted upgrade, with two probers running (a new
//! connection per request, and keep-alive connections; reads every 20 ms, writes every
//! 100 ms). Prints one line per run and the ratios kubeadm ÷ selfhost.
//!
//! ```text
//! cargo bench -p selfhost-e2e --bench real            # one node and three
//! cargo bench -p selfhost-e2e --bench real -- 1       # one node only
//! ```
//!
//! Needs what the real suite needs: `crates/selfhost-e2e/scripts/build-kubernetes.sh`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a benchmark, not library code

#[path = "../../selfhost/tests/reference/kubeadm.rs"]
mod kubeadm;
#[path = "../tests/real/scenarios.rs"]
#[allow(dead_code)]
mod scenarios;
#[path = "../tests/real/support.rs"]
#[allow(dead_code)]
mod support;

use std::time::Instant;

use k8s_openapi::api::apps::v1::DaemonSet;
use selfhost_e2e::bed::TestBed;
use selfhost_e2e::binaries::{FROM_TAG, TO_TAG};

use kubeadm::{KubeadmTarget, KubeadmTimings, kubeadm_template};
use support::{Figures, LeaderWatch, Probers};

const COMPONENTS: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// kubeadm's algorithm on a converted bed: each real DaemonSet's template with the image moved
/// to the target and the graceful-shutdown flags kubeadm's templates never had removed.
async fn kubeadm_upgrade(bed: &TestBed) -> Figures {
    let client = bed.client().await.expect("client");
    let daemonsets: kube::Api<DaemonSet> = kube::Api::namespaced(client.clone(), "kube-system");
    let mut targets = Vec::new();
    for component in COMPONENTS {
        let live = daemonsets
            .get(&format!("self-hosted-{component}"))
            .await
            .expect("the converted DaemonSet");
        let mut template = live.spec.expect("spec").template;
        for container in template
            .spec
            .iter_mut()
            .flat_map(|s| s.containers.iter_mut())
        {
            container.image = container
                .image
                .as_ref()
                .map(|i| i.replace(&format!(":{FROM_TAG}"), &format!(":{TO_TAG}")));
        }
        targets.push(KubeadmTarget {
            component: component.to_string(),
            template: kubeadm_template(&template),
        });
    }
    let leaders = LeaderWatch::start(bed).await;
    let probers = Probers::start(bed).await;
    let started = Instant::now();
    let result = kubeadm::upgrade(&client, &targets, &KubeadmTimings::real()).await;
    let wall = started.elapsed();
    let availability = probers.stop().await;
    let leader_changes = leaders.stop().await;
    if let Err(e) = result {
        panic!("kubeadm's algorithm did not finish: {e}");
    }
    // The reference's requests are not counted: it is not the tool.
    Figures {
        wall,
        availability,
        leader_changes,
        api_requests: None,
    }
}

fn failed(f: &Figures) -> usize {
    let a = &f.availability;
    a.new_connections.reads.failures()
        + a.new_connections.writes.failures()
        + a.keep_alive.reads.failures()
        + a.keep_alive.writes.failures()
}

fn leaderless(f: &Figures) -> f64 {
    f.leader_changes
        .iter()
        .map(|c| c.leaderless.as_secs_f64())
        .sum()
}

fn ratio(kubeadm: f64, selfhost: f64) -> String {
    if selfhost == 0.0 {
        if kubeadm == 0.0 {
            "1.00".into()
        } else {
            "∞".into()
        }
    } else {
        format!("{:.2}", kubeadm / selfhost)
    }
}

async fn side_by_side(nodes: usize) {
    if nodes == 1 {
        // The nodes' API fronts fit a bed of one node only: its nodes share one network
        // namespace.
        let (bed, _) = support::bed(nodes).await;
        scenarios::convert_to_self_hosted_with(&bed, scenarios::Fronts::Behind).await;
        let behind = scenarios::upgrade_probed(&bed, TO_TAG).await;
        bed.stop().await;
        println!("{}", behind.line("selfhost apply behind the front", nodes));
        for line in behind.failure_lines() {
            println!("  failed probes, {line}");
        }
    }
    let (bed, _) = support::bed(nodes).await;
    scenarios::convert_to_self_hosted(&bed).await;
    let ours = scenarios::upgrade_probed(&bed, TO_TAG).await;
    bed.stop().await;
    println!("{}", ours.line("selfhost apply", nodes));
    for line in ours.failure_lines() {
        println!("  failed probes, {line}");
    }

    let (bed, _) = support::bed(nodes).await;
    scenarios::convert_to_self_hosted(&bed).await;
    let theirs = kubeadm_upgrade(&bed).await;
    bed.stop().await;
    println!("{}", theirs.line("kubeadm's algorithm", nodes));
    for line in theirs.failure_lines() {
        println!("  failed probes, {line}");
    }

    println!(
        "ratios kubeadm ÷ selfhost on {nodes} node(s): wall {}, failed probes {}, leaderless {}",
        ratio(theirs.wall.as_secs_f64(), ours.wall.as_secs_f64()),
        ratio(failed(&theirs) as f64, failed(&ours) as f64),
        ratio(leaderless(&theirs), leaderless(&ours)),
    );
}

fn main() {
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let counts = if counts.is_empty() {
        vec![1, 3]
    } else {
        counts
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    for nodes in counts {
        runtime.block_on(side_by_side(nodes));
    }
}
