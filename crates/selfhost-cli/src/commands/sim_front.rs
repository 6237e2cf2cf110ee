//! The node-local API front in simulated clusters: `selfhost sim --mode self-hosted` and
//! `selfhost demo` build what `convert to-self-hosted` builds, a front on every control-plane
//! node's API address before kube-apiservers that listen on loopback addresses of their own.
//! The front's static pod is the engine's, rendered for each node's address as the simulator
//! knows it. Its image holds no program: the simulated kubelets model the front (the
//! simulator routes every connection to a node's API address through it) rather than run the
//! `selfhost` binary.
//!
//! The file stands alone (it names nothing else of the binary's) so that the binary's tests
//! and benchmarks build their simulated clusters with it too.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use selfhost::{
    DEFAULT_FRONT_CA_FILE, DEFAULT_FRONT_CHECK_INTERVAL, DEFAULT_FRONT_DRAIN, DEFAULT_FRONT_HOLD,
    FRONT_MANIFEST, FrontLayout, FrontPod, FrontTuning, front_manifest,
};
use selfhost_sim::bootstrap::{FrontLayout as SimFrontLayout, NodeSpec, node_specs};
use selfhost_sim::cluster::{NodeManifest, SimClusterBuilder};
use selfhost_sim::controllers::kubelet::ImageBehaviour;

/// The simulated front's image. A real node runs the front from the same image as the
/// checkpointer; here it is named apart, because an image holds one behaviour for all its
/// containers and the checkpointer's runs the binary.
pub const SIM_FRONT_IMAGE: &str = concat!(
    "ghcr.io/selfhost-dev/selfhost-front-modelled:v",
    env!("CARGO_PKG_VERSION")
);

/// The simulated kube-apiservers' secure port: the port of every node's API address.
const API_PORT: u16 = 6443;

/// The shortest interval between two checks of a backend: a faster clock checks no more
/// often than the simulator can bear.
const MIN_CHECK_INTERVAL: Duration = Duration::from_millis(5);

/// `builder` with a front on every control-plane node, as `convert to-self-hosted` installs
/// it, and the kube-apiserver DaemonSet listening behind it; its clock `speed` times faster
/// than a real one's, as the cluster's pods are (`1`: the front's own defaults).
///
/// # Errors
/// The manifest cannot be rendered.
pub fn with_front(
    builder: SimClusterBuilder,
    speed: u32,
) -> Result<SimClusterBuilder, selfhost::Error> {
    let tuning = (speed > 1).then(|| FrontTuning {
        check_interval: (DEFAULT_FRONT_CHECK_INTERVAL / speed).max(MIN_CHECK_INTERVAL),
        hold: DEFAULT_FRONT_HOLD / speed,
        drain: DEFAULT_FRONT_DRAIN / speed,
    });
    let layout = FrontLayout::default();
    let pod = move |node: &NodeSpec| FrontPod {
        image: SIM_FRONT_IMAGE.to_string(),
        // The simulator renders node addresses itself, always literal.
        listen: SocketAddr::new(
            node.ip.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED)),
            API_PORT,
        ),
        layout,
        ca_file: DEFAULT_FRONT_CA_FILE.to_string(),
        tuning,
    };
    // Every node's manifest differs only in its address and renders as this one does.
    if let Some(first) = node_specs(1, 0).first() {
        front_manifest(&pod(first))?;
    }
    let manifest =
        NodeManifest::for_node(move |node| front_manifest(&pod(node)).unwrap_or_default());
    Ok(builder
        .api_front(SimFrontLayout {
            backend: layout.backend,
            backup: layout.backup,
        })
        .image(SIM_FRONT_IMAGE, ImageBehaviour::default())
        .control_plane_static_pod(FRONT_MANIFEST, manifest))
}
