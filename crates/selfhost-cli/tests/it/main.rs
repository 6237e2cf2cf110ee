//! Black-box tests of the `selfhost` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is a failed test

mod budget;
mod campaign;
mod certificates;
mod chain;
mod checkpoint;
mod checkpoint_grant;
mod checkpointed;
mod convert;
mod demo;
mod etcd;
mod front;
mod front_install;
mod hostile;
mod kubectl_apply;
mod layout;
mod manifests;
mod power_cuts;
mod preflight;
mod prepull;
mod progress;
mod rbac;
mod reboot;
mod recover;
mod report;
mod resume;
mod signals;
mod sim_command;
mod sim_fidelity;
mod summary;
mod terminals;
mod usage;

use std::time::Duration;

use assert_cmd::Command;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::{SimCluster, SimTimings};

/// The binary under test, with a clean environment for the things it reads.
pub fn selfhost() -> Command {
    let mut cmd = Command::cargo_bin("selfhost").expect("binary is built");
    cmd.env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1");
    cmd
}

/// Runs `selfhost --kubeconfig <kubeconfig> <args...>` from a blocking thread, so a simulator
/// in this process keeps serving meanwhile; killed past `timeout`.
pub async fn run_selfhost<I, A>(
    kubeconfig: &std::path::Path,
    args: I,
    timeout: Duration,
) -> std::process::Output
where
    I: IntoIterator<Item = A>,
    A: Into<std::ffi::OsString>,
{
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    tokio::task::spawn_blocking(move || {
        selfhost()
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(&args)
            .timeout(timeout)
            .output()
    })
    .await
    .expect("joined")
    .expect("runs")
}

/// What a run printed: stdout, then stderr.
pub fn printed(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A fixture file shared with the core crate's tests.
pub fn fixture(name: &str) -> String {
    format!(
        "{}/../selfhost-core/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Runs `selfhost --kubeconfig <kubeconfig> <args...> -o json` with stdin closed, reading its
/// JSON events as they come; kills it with SIGKILL right after the first event for which
/// `kill_after` says so. Returns the events it printed and its exit code (`None` if killed).
pub async fn run_json_events(
    kubeconfig: std::path::PathBuf,
    args: Vec<std::ffi::OsString>,
    kill_after: impl Fn(&serde_json::Value) -> bool + Send + 'static,
) -> (Vec<serde_json::Value>, Option<i32>) {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    tokio::task::spawn_blocking(move || {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(&args)
            .args(["-o", "json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("selfhost runs");
        let stdout = child.stdout.take().expect("stdout");
        let mut events = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let event: serde_json::Value =
                serde_json::from_str(&line).expect("every line is one JSON event");
            let hit = kill_after(&event);
            events.push(event);
            if hit {
                child.kill().expect("SIGKILL");
                break;
            }
        }
        let status = child.wait().expect("exits");
        (events, status.code())
    })
    .await
    .expect("joined")
}

/// Whether `event` is the `kind` event (`step`, `action`) of `step` for `component`.
pub fn is_event(event: &serde_json::Value, kind: &str, component: &str, step: &str) -> bool {
    event["event"] == kind && event["component"] == component && event["step"] == step
}

/// The backup and prepull DaemonSets left in kube-system (none after a finished run).
pub async fn backups_left(sim: &selfhost_sim::SimCluster) -> Vec<String> {
    let daemonsets: kube::Api<k8s_openapi::api::apps::v1::DaemonSet> =
        kube::Api::namespaced(sim.client(), "kube-system");
    daemonsets
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .filter(|n| n.starts_with("temp-upgrade-") || n.starts_with("upgrade-prepull-"))
        .collect()
}

/// One self-hosted control-plane node at a hundredth of real pod latencies: each step lasts
/// long enough to be interrupted in, and the machine is not overloaded by the simulation.
pub async fn one_self_hosted_node() -> SimCluster {
    self_hosted_nodes(1).await
}

/// `nodes` self-hosted control-plane nodes at a hundredth of real pod latencies.
pub async fn self_hosted_nodes(nodes: usize) -> SimCluster {
    SimCluster::builder()
        .control_plane_nodes(nodes)
        .version("v1.33.1")
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(100))
        .start()
        .await
        .expect("cluster starts")
}

/// Returns `sim` once every kube-apiserver process in it has run for two seconds. Nobody
/// converts a cluster in the second it boots; the kubelet's start times are whole seconds, so
/// a DaemonSet apiserver started in the same second could not be told apart.
pub async fn settled(sim: SimCluster) -> SimCluster {
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let list = pods
            .list(&ListParams::default().labels("component=kube-apiserver"))
            .await
            .expect("list");
        let settled = list.items.iter().all(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.as_ref())
                .is_some_and(|t| Timestamp::now().duration_since(t.0).as_secs() >= 2)
        });
        if settled && !list.items.is_empty() {
            return sim;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cluster settles"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
