//! Black-box tests of the `selfhost` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is a failed test

mod campaign;
mod convert;
mod demo;
mod hostile;
mod kubectl_apply;
mod manifests;
mod preflight;
mod prepull;
mod progress;
mod rbac;
mod report;
mod resume;
mod signals;
mod sim_command;
mod sim_fidelity;
mod summary;
mod terminals;
mod usage;

use assert_cmd::Command;

/// The binary under test, with a clean environment for the things it reads.
pub fn selfhost() -> Command {
    let mut cmd = Command::cargo_bin("selfhost").expect("binary is built");
    cmd.env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1");
    cmd
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
