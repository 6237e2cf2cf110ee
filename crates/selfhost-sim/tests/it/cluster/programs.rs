//! Real programs in simulated containers: an image that holds an executable runs it while the
//! modelled process runs, with its host paths mapped beneath the node's directory; the
//! program's own exit ends the process (the kubelet restarts it), and the process's end (the
//! pod removed, a power cut) ends the program.

use std::path::{Path, PathBuf};
use std::time::Duration;

use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::NodeManifest;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use tokio::time::Instant;

use super::*;

const SLEEPER: &str = "example.com/sleeper:1";
const TOUCHER: &str = "example.com/toucher:1";

/// A static pod of `image` running `command`, with the host's `/data` mounted at `/mnt/data`.
fn static_pod(name: &str, image: &str, command: &[&str]) -> String {
    let command: Vec<String> = command.iter().map(|c| format!("{c:?}")).collect();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: kube-system\n\
         spec:\n  containers:\n  - name: main\n    image: {image}\n    command: [{}]\n    \
         volumeMounts:\n    - name: data\n      mountPath: /mnt/data\n  volumes:\n  - name: data\n    \
         hostPath:\n      path: /data\n      type: DirectoryOrCreate\n",
        command.join(", ")
    )
}

fn program(name: &str) -> ImageBehaviour {
    ImageBehaviour {
        program: Some(PathBuf::from(name)),
        ..ImageBehaviour::default()
    }
}

/// The pids of running processes whose command line is exactly `argv`.
fn running(argv: &[&str]) -> Vec<String> {
    let wanted = argv.join("\0") + "\0";
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read(e.path().join("cmdline")).is_ok_and(|c| c == wanted.as_bytes())
                })
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_program_runs_while_its_process_runs_and_its_exit_restarts_the_container() {
    // A unique duration names this test's sleeper among the machine's processes.
    let nap = format!("3599.{}", std::process::id());
    let sleeper = ["/bin/sleep", nap.as_str()];
    let cluster = start(
        SimCluster::builder()
            .control_plane_nodes(1)
            .mode(BootstrapMode::Static)
            .image(SLEEPER, program("/bin/sleep"))
            .image(TOUCHER, program("/usr/bin/touch"))
            .control_plane_static_pod(
                "sleeper.yaml",
                NodeManifest::new({
                    let nap = nap.clone();
                    move |_| static_pod("sleeper", SLEEPER, &["sleep", &nap])
                }),
            )
            .control_plane_static_pod(
                "toucher.yaml",
                NodeManifest::new(|_| {
                    static_pod("toucher", TOUCHER, &["touch", "/mnt/data/touched"])
                }),
            ),
    )
    .await;
    let root = cluster.node_root("cp-1").expect("cp-1 has a directory");
    until("the sleeper running", || running(&sleeper).len() == 1).await;

    // The toucher's path is mapped beneath the node; it exits at once, every time, and each
    // exit ends its process: the kubelet restarts the container.
    let touched: &Path = &root.join("data/touched");
    until("the toucher's file on the node", || touched.is_file()).await;
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "kube-system");
    let restarts = async || {
        pods.get("toucher-cp-1")
            .await
            .ok()
            .and_then(|p| {
                p.status?
                    .container_statuses?
                    .first()
                    .map(|c| c.restart_count)
            })
            .unwrap_or(0)
    };
    let deadline = Instant::now() + DEADLINE;
    while restarts().await < 1 {
        assert!(Instant::now() < deadline, "the toucher's exit restarts it");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A power cut ends every process on the node, the program with it; the node boots and
    // the kubelet starts its static pods again, the program too.
    let before = running(&sleeper);
    cluster.power_cycle(Duration::from_millis(300)).await;
    until("a new sleeper after the power cut", || {
        let now = running(&sleeper);
        now.len() == 1 && now != before
    })
    .await;

    // Its static pod removed, the process ends and the program with it.
    std::fs::remove_file(root.join("etc/kubernetes/manifests/sleeper.yaml")).expect("removed");
    until("no sleeper", || running(&sleeper).is_empty()).await;
    cluster.shutdown().await;
}
