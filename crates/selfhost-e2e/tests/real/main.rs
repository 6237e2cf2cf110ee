//! selfhost end to end on real Kubernetes processes (the bed of `selfhost-e2e`): every command
//! run as a user runs it, against kube-apiserver, kube-controller-manager and kube-scheduler
//! v1.20 started by a kubelet from kubeadm-style static pods, with kubectl as an independent
//! client.
//!
//! These tests need the binaries that `crates/selfhost-e2e/scripts/build-kubernetes.sh`
//! builds, etcd and HAProxy; they are ignored by a plain `cargo test` and run by `.ci/run`
//! (or by hand: `cargo test -p selfhost-e2e --test real -- --ignored --test-threads 1`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is a failed test

mod scenarios;
mod support;

use selfhost_e2e::binaries::TO_TAG;

/// One node, every command in turn: convert (the checkpointer installed), a power cut of the
/// node survived on the checkpoints, the upgrade killed inside each component's pivot
/// and run again until it finishes, the same command again, two failed targets rolled back,
/// a power cut with no checkpoint brought back by `selfhost recover` from etcd, convert back. (The upgrade's figures without kills come from `benches/real.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-process bed: crates/selfhost-e2e/scripts/build-kubernetes.sh"]
async fn one_node_lifecycle() {
    let (mut bed, binaries) = support::bed(1).await;
    scenarios::convert_to_self_hosted(&bed).await;
    scenarios::power_cut_comes_back(&mut bed).await;
    scenarios::killed_runs_resume(&bed).await;
    scenarios::nothing_to_do(&bed, TO_TAG).await;
    scenarios::failed_targets_roll_back(&bed, &binaries, TO_TAG).await;
    scenarios::recover_without_checkpoints(&mut bed).await;
    scenarios::convert_to_static(&bed).await;
    bed.stop().await;
}

/// One node behind its API front, as `convert` builds it by default: the upgrade with both
/// kinds of client probing (reads every 20 ms, writes every 100 ms) fails none of their
/// requests, and converting back takes the front away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-process bed: crates/selfhost-e2e/scripts/build-kubernetes.sh"]
async fn one_node_behind_its_api_front() {
    let (bed, _) = support::bed(1).await;
    scenarios::convert_to_self_hosted_with(&bed, scenarios::Fronts::Behind).await;
    let figures = scenarios::upgrade_probed(&bed, TO_TAG).await;
    println!("{}", figures.line("selfhost apply behind the front", 1));
    let failures = figures.failure_lines();
    assert!(
        failures.is_empty(),
        "behind the front no probe fails: {failures:?}"
    );
    scenarios::convert_to_static(&bed).await;
    bed.stop().await;
}

/// Three nodes behind HAProxy: convert, a power cut of every node survived on the
/// checkpoints, an outage of HAProxy that starts no copy, the upgrade killed in each pivot
/// and resumed, the
/// same command again, a target that cannot be pulled rolled back, convert back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the real-process bed: crates/selfhost-e2e/scripts/build-kubernetes.sh"]
async fn three_nodes_lifecycle() {
    let (mut bed, _) = support::bed(3).await;
    scenarios::convert_to_self_hosted(&bed).await;
    scenarios::power_cut_comes_back(&mut bed).await;
    scenarios::balancer_outage_starts_no_copy(&mut bed).await;
    scenarios::killed_runs_resume(&bed).await;
    scenarios::nothing_to_do(&bed, TO_TAG).await;
    scenarios::rolled_back(&bed, "v1.20.4", TO_TAG).await;
    scenarios::convert_to_static(&bed).await;
    bed.stop().await;
}
