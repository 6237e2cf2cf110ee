//! What `selfhost manifests` prints is accepted by a real client against an API server that
//! validates like a real one: `kubectl apply -f -` creates the DaemonSets, and applying the
//! same output again changes nothing.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use selfhost_sim::{SimServer, SimServerOptions};

use crate::selfhost;

fn kubectl_on_path() -> bool {
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs kubectl synchronously: call it from a multi-threaded runtime so the simulator keeps serving.
fn kubectl_apply(sim: &SimServer, home: &std::path::Path, yaml: &[u8]) -> std::process::Output {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .args(["--request-timeout=30s", "apply", "-f", "-"])
        .env("HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(yaml)
        .expect("write manifests");
    child.wait_with_output().expect("kubectl finishes")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_the_daemonsets_selfhost_prints() {
    if !kubectl_on_path() {
        eprintln!(
            "skipping kubectl_applies_the_daemonsets_selfhost_prints: kubectl is not on the PATH"
        );
        return;
    }
    let sim = SimServer::start(SimServerOptions::default())
        .await
        .expect("simulator");
    let home = tempfile::tempdir().expect("HOME for kubectl");
    let yaml = selfhost()
        .args(["manifests", "v1.33.1", "--certs-in-secrets"])
        .output()
        .expect("selfhost runs")
        .stdout;

    let first = kubectl_apply(&sim, home.path(), &yaml);
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    for name in [
        "self-hosted-kube-apiserver",
        "self-hosted-kube-controller-manager",
        "self-hosted-kube-scheduler",
    ] {
        assert!(
            stdout.contains(&format!("daemonset.apps/{name} created")),
            "{stdout}"
        );
    }
    assert!(
        first.stderr.is_empty(),
        "no warnings: {}",
        String::from_utf8_lossy(&first.stderr)
    );

    let second = kubectl_apply(&sim, home.path(), &yaml);
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert_eq!(stdout.matches(" unchanged").count(), 3, "{stdout}");

    // What the server stored is what we rendered (plus server defaults).
    let api: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let stored = tokio::time::timeout(
        Duration::from_secs(10),
        api.get("self-hosted-kube-apiserver"),
    )
    .await
    .expect("answers")
    .expect("exists");
    let command = stored
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers[0].command.clone().unwrap_or_default());
    assert!(command.is_some_and(|c| c.contains(&"--advertise-address=$(HOST_IP)".to_string())));
}
