//! `--prepull` through the binary: `plan` lists the check as not run without it; with it, a
//! node that cannot pull is a preflight refusal (exit 3) naming image and node, and nothing is
//! left behind or changed.

use std::collections::BTreeMap;
use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::{SimCluster, SimTimings};

/// The pause image the prepull pods of a v1.34 target run.
const PAUSE: &str = "registry.k8s.io/pause:3.10.1";

/// A self-hosted cluster; without `with_pause` its registry lacks the `pause` images (which
/// real registries, and the simulator's by default, have).
pub async fn cluster(nodes: usize, with_pause: bool) -> SimCluster {
    SimCluster::builder()
        .control_plane_nodes(nodes)
        .version("v1.33.1")
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::fast())
        .pause_images(with_pause)
        .start()
        .await
        .expect("cluster starts")
}

async fn selfhost(sim: &SimCluster, args: &[&str]) -> Output {
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        crate::selfhost()
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(&args)
            .timeout(Duration::from_secs(120))
            .output()
    })
    .await
    .expect("joined")
    .expect("runs")
}

/// The control-plane DaemonSets' uid and spec generation: an upgrade would move them.
async fn control_plane(sim: &SimCluster) -> BTreeMap<String, String> {
    Api::<DaemonSet>::namespaced(sim.client(), "kube-system")
        .list(&ListParams::default())
        .await
        .expect("list")
        .into_iter()
        .map(|d| {
            (
                d.metadata.name.unwrap_or_default(),
                format!(
                    "{}/{}",
                    d.metadata.uid.unwrap_or_default(),
                    d.metadata.generation.unwrap_or_default()
                ),
            )
        })
        .collect()
}

pub async fn leftovers(sim: &SimCluster) -> Vec<String> {
    let mut left: Vec<String> = Api::<DaemonSet>::namespaced(sim.client(), "kube-system")
        .list(&ListParams::default())
        .await
        .expect("list")
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .filter(|n| n.starts_with("upgrade-prepull-"))
        .collect();
    left.extend(
        Api::<Pod>::namespaced(sim.client(), "kube-system")
            .list(&ListParams::default().labels("selfhost.dev/prepull"))
            .await
            .expect("list")
            .into_iter()
            .filter_map(|p| p.metadata.name),
    );
    left
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_lists_the_check_as_not_run_and_says_how_to_run_it() {
    let sim = cluster(1, false).await;
    let out = selfhost(&sim, &["plan", "v1.34.0"]).await;
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains(
            "SKIP  images-pullable: not run: --prepull has every control-plane node pull"
        ),
        "{stdout}"
    );
    assert_eq!(leftovers(&sim).await, Vec::<String>::new());

    let out = selfhost(&sim, &["-o", "json", "plan", "v1.34.0"]).await;
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let check = plan["preflight"]["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["id"] == "images-pullable")
        .expect("the check is listed");
    assert_eq!(check["verdict"], "not-run");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_with_prepull_passes_when_every_node_pulls_and_leaves_nothing_behind() {
    let sim = cluster(2, true).await;
    let before = control_plane(&sim).await;
    let out = selfhost(&sim, &["plan", "v1.34.0", "--prepull"]).await;
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("PASS  images-pullable: registry.k8s.io/kube-apiserver:v1.34.0"),
        "{stdout}"
    );
    assert!(stdout.contains("runs on 2 node(s)"), "{stdout}");
    // Progress on stderr, as plain lines: stderr is a pipe here.
    assert!(
        stderr.contains("prepull: pulling registry.k8s.io/kube-apiserver:v1.34.0"),
        "{stderr}"
    );
    assert!(
        stderr.contains("prepull:   removed the prepull DaemonSets and their pods"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\r') && !stderr.contains('\x1b'),
        "no terminal control codes in a pipe: {stderr:?}"
    );
    assert_eq!(leftovers(&sim).await, Vec::<String>::new());
    assert_eq!(control_plane(&sim).await, before);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_with_prepull_refuses_with_exit_3_naming_image_and_node_and_changes_nothing() {
    // The sim's registry has no pause image here, so no node can start a prepull pod.
    let sim = cluster(2, false).await;
    let before = control_plane(&sim).await;
    let out = selfhost(&sim, &["apply", "v1.34.0", "--prepull", "--yes"]).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("preflight refused the upgrade"), "{stderr}");
    assert!(stderr.contains(&format!("cannot pull {PAUSE}")), "{stderr}");
    assert!(
        stderr.contains("nodes cp-1, cp-2 cannot pull")
            || stderr.contains("node cp-1 cannot pull")
            || stderr.contains("node cp-2 cannot pull"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing was changed"), "{stderr}");
    assert_eq!(leftovers(&sim).await, Vec::<String>::new());
    assert_eq!(control_plane(&sim).await, before, "no upgrade started");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_with_prepull_tells_a_script_the_check_passed_before_the_upgrade() {
    let sim = cluster(1, true).await;
    let out = selfhost(
        &sim,
        &["-o", "json", "apply", "v1.34.0", "--prepull", "--yes"],
    )
    .await;
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let first = events.first().expect("events");
    assert_eq!(first["event"], "preflight-check", "{stdout}");
    assert_eq!(first["check"]["id"], "images-pullable");
    assert_eq!(first["check"]["verdict"], "pass");
    assert_eq!(events.last().expect("a result")["outcome"], "done");
    assert_eq!(leftovers(&sim).await, Vec::<String>::new());
    sim.shutdown().await;
}
