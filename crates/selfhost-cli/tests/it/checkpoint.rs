//! `selfhost checkpoint` on a simulated self-hosted control plane: the node agent keeps each
//! component's pod once it has served, brings the control plane back after a power cut of
//! every node (which kills it for good without the agent), and retires its static copies once
//! the DaemonSet pods serve again.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use selfhost_sim::SimCluster;
use tokio::time::Instant;

const DEADLINE: Duration = Duration::from_secs(60);

/// The agent process, stopped when the test ends however it ends; what it said so far.
struct Agent {
    child: Child,
    said: Arc<Mutex<Vec<String>>>,
}

impl Agent {
    fn said(&self) -> Vec<String> {
        self.said.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The agent as the kubelet would run it on `node`, with periods fitting the simulator's
/// hundredfold clock.
fn agent(sim: &SimCluster, node: &str, checkpoints: &Path, host: &Path) -> Agent {
    let manifests = sim.manifests_dir(node).expect("a manifests directory");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["checkpoint", "--node", node, "--manifests-dir"])
        .arg(manifests)
        .arg("--checkpoint-dir")
        .arg(checkpoints)
        .arg("--host-root")
        .arg(host)
        .args([
            "--soak",
            "300ms",
            "--api-grace",
            "1s",
            "--interval",
            "100ms",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("the agent starts");
    let stderr = child.stderr.take().expect("stderr");
    let said = Arc::new(Mutex::new(Vec::new()));
    let heard = Arc::clone(&said);
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Ok(mut heard) = heard.lock() {
                heard.push(line);
            }
        }
    });
    Agent { child, said }
}

async fn until(agent: &Agent, what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !check().await {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; the agent said: {:#?}",
            agent.said()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn active_copies(manifests: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(manifests)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("selfhost-checkpoint-"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Whether every self-hosted DaemonSet pod on the node is Ready, as the API shows it.
async fn daemonset_pods_ready(sim: &SimCluster) -> bool {
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let Ok(list) = pods.list(&Default::default()).await else {
        return false;
    };
    let ready = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    let owned: Vec<&Pod> = list
        .items
        .iter()
        .filter(|p| {
            p.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.name.starts_with("self-hosted-"))
        })
        .collect();
    owned.len() == 3 && owned.iter().all(|p| ready(p))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpointed_control_plane_comes_back_from_a_power_cut_and_hands_back() {
    let sim = crate::one_self_hosted_node().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (checkpoints, host) = (dir.path().join("checkpoints"), dir.path().join("host"));
    let manifests = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let agent = agent(&sim, "cp-1", &checkpoints, &host);
    until(&agent, "a checkpoint of every component", async || {
        [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
        ]
        .iter()
        .all(|c| checkpoints.join(c).join("checkpoint.json").is_file())
    })
    .await;
    let pod = std::fs::read_to_string(checkpoints.join("kube-apiserver/pod.yaml")).expect("kept");
    assert!(pod.contains("--permit-port-sharing=true"), "{pod}");
    // What admission added for the ServiceAccount (the API keeps it on the pod) would keep
    // the static copy from starting without the API: it is not kept.
    assert!(
        !pod.contains("kube-api-access") && !pod.contains("serviceAccount"),
        "{pod}"
    );
    assert!(
        active_copies(&manifests).is_empty(),
        "nothing active while the API serves"
    );

    sim.power_cycle(Duration::from_millis(300)).await;
    until(&agent, "the API serving again", async || sim.is_api_up()).await;
    assert!(
        active_copies(&manifests).contains(&"selfhost-checkpoint-kube-apiserver.yaml".to_string()),
        "it came back on the checkpoint: {:?}",
        active_copies(&manifests)
    );
    until(
        &agent,
        "the DaemonSet pods Ready and the copies retired",
        async || active_copies(&manifests).is_empty() && daemonset_pods_ready(&sim).await,
    )
    .await;
    assert!(sim.is_api_up(), "the API serves on the DaemonSet pod");

    let lines = agent.said();
    for step in [
        "keep a checkpoint",
        "activate the checkpoint",
        "retire the static copy",
    ] {
        assert!(
            lines.iter().any(|l| l.contains(step)),
            "the agent says it: {step:?} in {lines:#?}"
        );
    }
    sim.shutdown().await;
}

/// Runs `selfhost checkpoint install` for cp-1 of `sim` with `args`, off the async runtime.
async fn install(sim: &SimCluster, args: &[&str]) -> std::process::Output {
    let manifests = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let mut command = crate::selfhost();
    command
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["checkpoint", "install", "--node", "cp-1", "--manifests-dir"])
        .arg(manifests)
        .args(args);
    tokio::task::spawn_blocking(move || command.output().expect("selfhost runs"))
        .await
        .expect("joined")
}

/// The verdict and message of `selfhost plan`'s `checkpointers` check.
async fn plan_check(sim: &SimCluster) -> (String, String) {
    let mut command = crate::selfhost();
    command
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["-o", "json", "plan", "v1.34.0"]);
    let out = tokio::task::spawn_blocking(move || command.output().expect("selfhost runs"))
        .await
        .expect("joined");
    assert_eq!(out.status.code(), Some(0), "a warning never refuses");
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON plan");
    let check = plan["preflight"]["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["id"] == "checkpointers"))
        .cloned()
        .unwrap_or_default();
    (
        check["verdict"].as_str().unwrap_or_default().to_string(),
        check["message"].as_str().unwrap_or_default().to_string(),
    )
}

/// `selfhost status`'s line for cp-1's checkpointer.
async fn status_line(sim: &SimCluster) -> String {
    let mut command = crate::selfhost();
    command
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .arg("status");
    let out = tokio::task::spawn_blocking(move || command.output().expect("selfhost runs"))
        .await
        .expect("joined");
    assert_eq!(out.status.code(), Some(0));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("cp-1 "))
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_install_writes_the_static_pod_and_status_shows_it_running() {
    const IMAGE: &str = "registry.example/selfhost:test";
    let sim = crate::one_self_hosted_node().await;
    let manifests = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let manifest = manifests.join("selfhost-checkpointer.yaml");
    // What it says goes to stderr; stdout is for `-o json` results.
    let stderr = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        status_line(&sim).await.contains("none: a power cut"),
        "status says the node has none"
    );
    let (verdict, message) = plan_check(&sim).await;
    assert_eq!(verdict, "warn", "{message}");
    assert!(message.starts_with("cp-1: none;"), "{message}");

    let out = install(&sim, &["--checkpointer-image", IMAGE, "--dry-run"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("would write the checkpointer"),
        "{}",
        stderr(&out)
    );
    assert!(!manifest.exists(), "a dry run writes nothing");

    // An image the registry does not have: the manifest stays, the command says why.
    let out = install(
        &sim,
        &[
            "--checkpointer-image",
            "registry.example/missing:v1",
            "--timeout",
            "2s",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not run"), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("ErrImagePull") || stderr(&out).contains("ImagePullBackOff"),
        "{}",
        stderr(&out)
    );
    assert!(status_line(&sim).await.contains("NOT running"));
    let (verdict, message) = plan_check(&sim).await;
    assert_eq!(verdict, "warn", "{message}");
    assert!(message.starts_with("cp-1: NOT running"), "{message}");

    sim.registry().add_image(IMAGE).expect("a valid image name");
    let out = install(&sim, &["--checkpointer-image", IMAGE]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the checkpointer runs (wrote"),
        "{}",
        stderr(&out)
    );
    let written = std::fs::read_to_string(&manifest).expect("written");
    assert!(
        written.contains(IMAGE) && written.contains("--node"),
        "{written}"
    );
    assert!(
        status_line(&sim).await.ends_with("running"),
        "status shows it running"
    );
    assert_eq!(plan_check(&sim).await.0, "pass");

    let out = install(&sim, &["--checkpointer-image", IMAGE]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unchanged"),
        "a re-run changes nothing: {}",
        stderr(&out)
    );

    let missing = manifests.join("not-here");
    let mut command = crate::selfhost();
    command
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["checkpoint", "install", "--node", "cp-1", "--manifests-dir"])
        .arg(&missing);
    let out = tokio::task::spawn_blocking(move || command.output().expect("runs"))
        .await
        .expect("joined");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
    sim.shutdown().await;
}
