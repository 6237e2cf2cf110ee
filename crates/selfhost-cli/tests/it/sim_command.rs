//! `selfhost sim` as a user runs it: a foreground process that prints how to reach the
//! cluster, answers kubectl, and stops cleanly on Ctrl-C.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn kubectl(
    kubeconfig: &std::path::Path,
    home: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .arg("--request-timeout=20s")
        .args(args)
        .env("HOME", home)
        .output()
        .expect("kubectl runs")
}

#[test]
fn sim_serves_kubectl_and_stops_on_sigint() {
    if Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_err()
    {
        eprintln!("skipping sim_serves_kubectl_and_stops_on_sigint: kubectl is not on the PATH");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
        .args([
            "sim",
            "--fast",
            "--control-plane-nodes",
            "2",
            "--workers",
            "1",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("selfhost sim starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut printed = String::new();
    for line in lines.by_ref() {
        let line = line.expect("line");
        printed.push_str(&line);
        printed.push('\n');
        if line.contains("Press Ctrl-C to stop") || Instant::now() > deadline {
            break;
        }
    }
    assert!(
        printed.contains(&format!("export KUBECONFIG={}", kubeconfig.display())),
        "{printed}"
    );

    let nodes = kubectl(&kubeconfig, dir.path(), &["get", "nodes"]);
    let text = String::from_utf8_lossy(&nodes.stdout);
    assert!(
        nodes.status.success(),
        "{}",
        String::from_utf8_lossy(&nodes.stderr)
    );
    for node in ["cp-1", "cp-2", "worker-1"] {
        assert!(text.contains(node), "{text}");
    }
    let ds = kubectl(&kubeconfig, dir.path(), &["get", "ds", "-n", "kube-system"]);
    assert!(String::from_utf8_lossy(&ds.stdout).contains("self-hosted-kube-apiserver"));
    let rollout = kubectl(
        &kubeconfig,
        dir.path(),
        &[
            "rollout",
            "status",
            "ds/self-hosted-kube-apiserver",
            "-n",
            "kube-system",
            "--timeout=30s",
        ],
    );
    assert!(
        String::from_utf8_lossy(&rollout.stdout).contains("successfully rolled out"),
        "{}{}",
        String::from_utf8_lossy(&rollout.stdout),
        String::from_utf8_lossy(&rollout.stderr)
    );

    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(interrupted.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "selfhost sim did not stop within 30 s of SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
}
