//! `selfhost front install` on a self-hosted cluster converted without fronts: the front runs
//! beside the kube-apiserver on the wildcard address, the DaemonSet is marked to listen
//! behind the fronts once every node runs one, and the next `apply` moves it there; `front
//! remove` is then refused, and before the install, a cluster that is not self-hosted or a
//! kube-apiserver that holds the node's port alone is refused with the fix, nothing changed.

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::{SimCluster, SimTimings};

/// The front's image in the simulated registry: the simulator models the process.
const FRONT_IMAGE: &str = "registry.example/selfhost:front";

async fn cluster(mode: BootstrapMode, port_sharing: bool) -> SimCluster {
    let sim = SimCluster::builder()
        .control_plane_nodes(1)
        .version("v1.33.1")
        .mode(mode)
        .port_sharing(port_sharing)
        .timings(SimTimings::scaled(20))
        .image(FRONT_IMAGE, ImageBehaviour::default())
        .start()
        .await
        .expect("cluster starts");
    crate::settled(sim).await
}

fn front(sim: &SimCluster, args: &[&str]) -> std::process::Output {
    let dir = sim.manifests_dir("cp-1").expect("dir");
    crate::selfhost()
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["front"])
        .args(args)
        .args(["--node", "cp-1", "--manifests-dir"])
        .arg(dir)
        .output()
        .expect("runs")
}

async fn apiserver(sim: &SimCluster) -> DaemonSet {
    Api::<DaemonSet>::namespaced(sim.client(), "kube-system")
        .get("self-hosted-kube-apiserver")
        .await
        .expect("the kube-apiserver DaemonSet")
}

fn bind_address(ds: &DaemonSet) -> Option<String> {
    let template = &ds.spec.as_ref()?.template;
    let container = template.spec.as_ref()?.containers.first()?;
    container
        .command
        .iter()
        .flatten()
        .find_map(|a| a.strip_prefix("--bind-address=").map(str::to_string))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_installed_on_a_self_hosted_node_takes_the_kube_apiserver_behind_it_at_the_next_apply()
 {
    let sim = cluster(BootstrapMode::SelfHosted, true).await;
    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    assert_eq!(
        bind_address(&apiserver(&sim).await),
        None,
        "on the wildcard"
    );

    let dry = front(
        &sim,
        &["install", "--front-image", FRONT_IMAGE, "--dry-run"],
    );
    let said = String::from_utf8_lossy(&dry.stderr);
    assert_eq!(dry.status.code(), Some(0), "{said}");
    assert!(said.contains("would write the API front"), "{said}");
    assert!(
        !dir.join("selfhost-front.yaml").exists(),
        "a dry run writes nothing"
    );

    let out = front(&sim, &["install", "--front-image", FRONT_IMAGE]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("the API front runs on"), "{said}");
    assert!(
        said.contains("the kube-apiserver DaemonSet is marked to listen behind them"),
        "{said}"
    );
    let ds = apiserver(&sim).await;
    assert_eq!(
        selfhost::FrontLayout::of_daemonset(&ds),
        Ok(Some(selfhost::FrontLayout::default()))
    );
    assert_eq!(bind_address(&ds), None, "marked only: nothing rolled yet");

    let out = front(&sim, &["remove"]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(said.contains("listens behind the nodes' fronts"), "{said}");
    assert!(
        dir.join("selfhost-front.yaml").exists(),
        "nothing was changed"
    );

    let apply = crate::selfhost()
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["apply", "v1.34.0", "--yes"])
        .output()
        .expect("runs");
    let said = String::from_utf8_lossy(&apply.stderr);
    assert_eq!(apply.status.code(), Some(0), "{said}");
    assert_eq!(
        bind_address(&apiserver(&sim).await).as_deref(),
        Some("127.0.0.1"),
        "the pivot moved it behind the front: {said}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_control_plane_is_refused_and_nothing_is_written() {
    let sim = cluster(BootstrapMode::Static, true).await;
    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let out = front(&sim, &["install", "--front-image", FRONT_IMAGE]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(said.contains("selfhost convert to-self-hosted"), "{said}");
    assert!(!dir.join("selfhost-front.yaml").exists(), "{said}");

    let out = front(&sim, &["install", "--front-addresses", "127.0.0.1"]);
    assert_eq!(out.status.code(), Some(2));
    let out = crate::selfhost()
        .args([
            "front",
            "install",
            "--node",
            "cp-1",
            "--manifests-dir",
            "/nowhere/at/all",
        ])
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .output()
        .expect("runs");
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    sim.shutdown().await;
}

/// A kube-apiserver on every address without port sharing holds the port alone: the kernel
/// would refuse the front its socket, so the install says how to roll the flag in first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_apiserver_that_shares_no_port_is_refused_with_the_way_to_roll_the_flag_in() {
    let sim = cluster(BootstrapMode::SelfHosted, false).await;
    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let before = apiserver(&sim).await.metadata.resource_version;
    let out = front(&sim, &["install", "--front-image", FRONT_IMAGE]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(said.contains("--permit-port-sharing=true"), "{said}");
    assert!(said.contains("selfhost apply"), "{said}");
    assert!(!dir.join("selfhost-front.yaml").exists(), "{said}");
    assert_eq!(apiserver(&sim).await.metadata.resource_version, before);
    sim.shutdown().await;
}
