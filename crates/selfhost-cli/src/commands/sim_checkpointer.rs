//! The checkpointer in simulated clusters: `selfhost sim --mode self-hosted` and `selfhost
//! demo` build what `convert to-self-hosted` builds, the checkpointer's static pod on every
//! control-plane node. Its image holds the `selfhost` binary, which the simulated kubelets run
//! for real while the pod runs.
//!
//! The file stands alone (it names nothing else of the binary's) so that the binary's tests
//! and benchmarks build their simulated clusters with it too.

use std::path::PathBuf;
use std::time::Duration;

use selfhost::{
    CHECKPOINTER_MANIFEST, CheckpointPolicy, CheckpointTuning, CheckpointerPod, KUBELET_KUBECONFIG,
    checkpointer_manifest,
};
use selfhost_sim::cluster::{NodeManifest, SimClusterBuilder};
use selfhost_sim::controllers::kubelet::ImageBehaviour;

/// The shortest interval between two reads of the node.
const MIN_INTERVAL: Duration = Duration::from_millis(20);

/// Where kubeadm's kubelets read static pods, as the checkpointer's pod sees the host.
const MANIFESTS_DIR: &str = "/etc/kubernetes/manifests";

/// `builder` with the checkpointer on every control-plane node: its image `image`, run as
/// `program` (a `selfhost` binary), its clock `speed` times faster than a real one's, as the
/// cluster's pods are (`1`: the agent's own defaults).
///
/// # Errors
/// The manifest cannot be rendered.
pub fn with_checkpointer(
    builder: SimClusterBuilder,
    image: &str,
    program: PathBuf,
    speed: u32,
) -> Result<SimClusterBuilder, selfhost::Error> {
    let tuning = (speed > 1).then(|| CheckpointTuning {
        policy: CheckpointPolicy::scaled(speed),
        // Each read is a probe and a list: no more often than the simulator can bear.
        interval: (Duration::from_secs(1) / speed).max(MIN_INTERVAL),
    });
    with_tuned_checkpointer(builder, image, program, tuning)
}

/// [`with_checkpointer`] with the agent's policy and reading interval given (`None`: its own
/// defaults).
///
/// # Errors
/// The manifest cannot be rendered.
pub fn with_tuned_checkpointer(
    builder: SimClusterBuilder,
    image: &str,
    program: PathBuf,
    tuning: Option<CheckpointTuning>,
) -> Result<SimClusterBuilder, selfhost::Error> {
    let pod = {
        let image = image.to_string();
        move |node: &str| CheckpointerPod {
            image: image.clone(),
            node: node.to_string(),
            manifests_dir: MANIFESTS_DIR.to_string(),
            kubeconfig: KUBELET_KUBECONFIG.to_string(),
            tuning,
        }
    };
    // Every node's manifest differs only in names and renders as this one does.
    checkpointer_manifest(&pod("cp-1"))?;
    let manifest =
        NodeManifest::new(move |node| checkpointer_manifest(&pod(node)).unwrap_or_default());
    Ok(builder
        .image(
            image,
            ImageBehaviour {
                program: Some(program),
                ..ImageBehaviour::default()
            },
        )
        .control_plane_static_pod(CHECKPOINTER_MANIFEST, manifest))
}
