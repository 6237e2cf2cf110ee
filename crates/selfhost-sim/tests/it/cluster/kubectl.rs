//! kubectl follows rollouts on a running cluster as on a real one: `kubectl set image` and
//! `kubectl rollout status` on a workload and on the self-hosted control plane. Skipped, with
//! a message, when kubectl is not on the PATH; kubectl runs with a private HOME.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use selfhost_sim::SimTimings;
use selfhost_sim::bootstrap::BootstrapMode;
use serde_json::json;

use super::*;

fn kubectl_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
}

/// Runs kubectl against the cluster; (success, stdout, stderr).
async fn kubectl(program: &PathBuf, cluster: &SimCluster, args: &[&str]) -> (bool, String, String) {
    let home = tempfile::tempdir().expect("a HOME for kubectl");
    let output = tokio::process::Command::new(program)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .arg("--cache-dir")
        .arg(home.path().join("cache"))
        .args(args)
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(90), output)
        .await
        .expect("kubectl finishes")
        .expect("kubectl runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn kubectl_rollout_status_follows_a_daemonset_rollout() {
    let Some(program) = kubectl_on_path() else {
        eprintln!("skipping: kubectl is not on the PATH");
        return;
    };
    let cluster = start(workload_cluster(3).timings(SimTimings::scaled(100))).await;
    let api = create_daemonset(&cluster, &app_daemonset("web", APP_V1, json!({}))).await;
    wait_for_daemonset(&api, "web", "created", |d| rolled_out(d, 3)).await;
    let (ok, _, err) = kubectl(
        &program,
        &cluster,
        &["set", "image", "ds/web", &format!("app={APP_V2}")],
    )
    .await;
    assert!(ok, "{err}");
    let (ok, out, err) = kubectl(
        &program,
        &cluster,
        &["rollout", "status", "ds/web", "--timeout=60s"],
    )
    .await;
    assert!(ok, "{out}{err}");
    assert!(
        out.contains("daemon set \"web\" successfully rolled out"),
        "{out}"
    );
    let done = api.get("web").await.unwrap();
    assert!(rolled_out(&done, 3));
    cluster.shutdown().await;
}

#[tokio::test]
async fn kubectl_rolls_the_control_plane_of_three_nodes() {
    let Some(program) = kubectl_on_path() else {
        eprintln!("skipping: kubectl is not on the PATH");
        return;
    };
    let cluster = start(
        SimCluster::builder()
            .control_plane_nodes(3)
            .mode(BootstrapMode::SelfHosted)
            .timings(SimTimings::scaled(100)),
    )
    .await;
    let since = tokio::time::Instant::now();
    let image = "kube-apiserver=registry.k8s.io/kube-apiserver:v1.34.0";
    let (ok, _, err) = kubectl(
        &program,
        &cluster,
        &[
            "-n",
            "kube-system",
            "set",
            "image",
            "ds/self-hosted-kube-apiserver",
            image,
        ],
    )
    .await;
    assert!(ok, "{err}");
    let (ok, out, err) = kubectl(
        &program,
        &cluster,
        &[
            "-n",
            "kube-system",
            "rollout",
            "status",
            "ds/self-hosted-kube-apiserver",
            "--timeout=60s",
        ],
    )
    .await;
    assert!(ok, "{out}{err}");
    assert!(out.contains("successfully rolled out"), "{out}");
    assert!(
        !cluster
            .recorder()
            .was_down(since, tokio::time::Instant::now())
    );
    let (ok, out, _) = kubectl(&program, &cluster, &["version", "-o", "json"]).await;
    assert!(ok && out.contains("\"gitVersion\": \"v1.34.0\""), "{out}");
    cluster.shutdown().await;
}
