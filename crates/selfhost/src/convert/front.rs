//! The node's API front in a conversion (see `docs/design.md`, "Node-local API front"): to
//! self-hosted, the kube-apiserver DaemonSet is created to listen behind it and the front's
//! static pod is written before the static kube-apiserver leaves; to static pods, the front
//! goes once the static kube-apiserver serves again.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use selfhost_core::Component;
use selfhost_core::command_line;
use selfhost_core::conversion::decide::{Direction, NodeFront};
use selfhost_core::front::{
    CLUSTER_CA_FILE, FrontLayout, FrontPod, FrontTuning, api_address, is_front,
};
use selfhost_core::observation::PodObservation;

use super::{ConvertError, ConvertRequest};
use crate::node_files::NodeFiles;

/// The front a conversion to self-hosted puts before the node's kube-apiserver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontRequest {
    /// The image with the `selfhost` binary.
    pub image: String,
    /// Where the kube-apiservers listen behind it.
    pub layout: FrontLayout,
    /// Its timing, when not its own defaults (a simulated cluster on a faster clock).
    pub tuning: Option<FrontTuning>,
}

/// The layout the kube-apiserver DaemonSet `ds` says it listens behind, if any.
fn layout_of(ds: &DaemonSet) -> Result<Option<FrontLayout>, ConvertError> {
    FrontLayout::of_daemonset(ds).map_err(|e| ConvertError::FrontLayout(e.to_string()))
}

/// The DaemonSet a conversion to self-hosted creates for `component`: the kube-apiserver's
/// listens behind the front when one is asked for.
pub(super) fn behind_front(request: &ConvertRequest, component: Component, ds: &mut DaemonSet) {
    if let (Component::ApiServer, Direction::ToSelfHosted, Some(front)) =
        (component, request.direction, &request.front)
    {
        front.layout.put_behind(ds);
    }
}

/// Why the request cannot go on with the node's front as it is, before anything changes.
pub(super) fn refusal(
    request: &ConvertRequest,
    live: Option<&DaemonSet>,
    node_ip: Option<IpAddr>,
    files: &NodeFiles,
) -> Result<Option<String>, ConvertError> {
    if request.direction != Direction::ToSelfHosted {
        return Ok(None);
    }
    let live_layout = live.map(layout_of).transpose()?.flatten();
    match (&request.front, live_layout) {
        (None, Some(layout)) => Ok(Some(format!(
            "the kube-apiserver DaemonSet listens behind the nodes' API fronts (on {}): without \
             a front, nothing would listen on this node's API address once its static pod \
             leaves; run without --no-front",
            layout.backend
        ))),
        (Some(_), None) if live.is_some() => Ok(None),
        (Some(_), _) => match static_apiserver(files)? {
            Some(pod) if listen_address(&pod, node_ip).is_none() => Ok(Some(format!(
                "the static kube-apiserver manifest {} has no --advertise-address, so the \
                 node's API address to put the front on is unknown; set one in the manifest, \
                 or pass --no-front",
                files.manifest_path(Component::ApiServer).display()
            ))),
            _ => Ok(None),
        },
        (None, None) => Ok(None),
    }
}

/// The kube-apiserver's static manifest: in the manifests directory, else moved aside.
fn static_apiserver(files: &NodeFiles) -> Result<Option<Pod>, ConvertError> {
    Ok(match files.manifest(Component::ApiServer)? {
        Some(pod) => Some(pod),
        None => files.backup(Component::ApiServer)?,
    })
}

fn listen_address(pod: &Pod, node_ip: Option<IpAddr>) -> Option<SocketAddr> {
    pod.spec.as_ref().and_then(|s| api_address(s, node_ip))
}

/// The front's static pod for this node: it listens where the static kube-apiserver
/// advertises the API and trusts the CA that kube-apiserver trusts its clients by.
pub(super) fn front_pod(
    request: &ConvertRequest,
    live: Option<&DaemonSet>,
    node_ip: Option<IpAddr>,
    files: &NodeFiles,
) -> Result<Pod, ConvertError> {
    let layout = match live.map(layout_of).transpose()?.flatten() {
        Some(layout) => layout,
        None => request.front.as_ref().map(|f| f.layout).unwrap_or_default(),
    };
    let pod = static_apiserver(files)?;
    let listen = pod
        .as_ref()
        .and_then(|p| listen_address(p, node_ip))
        .ok_or_else(|| ConvertError::NoApiAddress {
            path: files.manifest_path(Component::ApiServer),
        })?;
    let ca_file = pod
        .as_ref()
        .and_then(|p| p.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| {
            let line: Vec<String> = c
                .command
                .iter()
                .flatten()
                .chain(c.args.iter().flatten())
                .cloned()
                .collect();
            command_line::flag_value(&line, "client-ca-file").map(str::to_string)
        })
        .unwrap_or_else(|| CLUSTER_CA_FILE.to_string());
    let (image, tuning) = match &request.front {
        Some(front) => (front.image.clone(), front.tuning),
        None => (crate::DEFAULT_IMAGE.to_string(), None),
    };
    Ok(FrontPod {
        image,
        listen,
        layout,
        ca_file,
        tuning,
    }
    .render())
}

/// The node's front as the kube-apiserver's conversion reads it (`None` for the other
/// components, and where none is wanted or there).
pub(super) fn observe(
    request: &ConvertRequest,
    component: Component,
    live: Option<&DaemonSet>,
    mirror: Option<&Pod>,
    files: &NodeFiles,
) -> Result<Option<NodeFront>, ConvertError> {
    if component != Component::ApiServer {
        return Ok(None);
    }
    let wanted = match live {
        Some(ds) => layout_of(ds)?.is_some(),
        None => request.direction == Direction::ToSelfHosted && request.front.is_some(),
    };
    let manifest_on_disk = files.front()?.is_some();
    if !wanted && !manifest_on_disk {
        return Ok(None);
    }
    let mirror = mirror.filter(|p| is_front(p)).map(PodObservation::from_pod);
    let running = match &mirror {
        None => Err(format!("{}: no mirror pod of the front yet", request.node)),
        Some(pod) if pod.ready => Ok(()),
        Some(pod) => Err(format!("{}: pod {} is not Ready", request.node, pod.name)),
    };
    Ok(Some(NodeFront {
        wanted,
        manifest_on_disk,
        mirror,
        running,
    }))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use selfhost_core::conversion::self_hosted_daemonset;
    use selfhost_core::daemonset::DaemonSetOptions;

    use super::*;

    /// A node with kubeadm's static kube-apiserver (advertising 10.0.0.11), and its files.
    fn node() -> (tempfile::TempDir, NodeFiles) {
        let root = tempfile::tempdir().expect("scratch");
        let manifests = root.path().join("manifests");
        std::fs::create_dir(&manifests).expect("dir");
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../selfhost-core/tests/fixtures/kube-apiserver.yaml");
        std::fs::copy(fixture, manifests.join("kube-apiserver.yaml")).expect("copy");
        let files = NodeFiles::open(&manifests).expect("open");
        (root, files)
    }

    fn request(front: bool) -> ConvertRequest {
        let mut request = ConvertRequest::new(Direction::ToSelfHosted, "cp-1", "/unused");
        request.front = front.then(|| FrontRequest {
            image: "example/selfhost:v1".into(),
            layout: FrontLayout::default(),
            tuning: None,
        });
        request
    }

    fn daemonset(files: &NodeFiles, request: &ConvertRequest) -> DaemonSet {
        let pod = files
            .manifest(Component::ApiServer)
            .expect("read")
            .expect("there");
        let mut ds =
            self_hosted_daemonset(Component::ApiServer, &pod, &DaemonSetOptions::default())
                .expect("daemonset");
        behind_front(request, Component::ApiServer, &mut ds);
        ds
    }

    #[test]
    fn the_front_listens_where_the_static_apiserver_advertises_and_trusts_its_client_ca() {
        let (_root, files) = node();
        let request = request(true);
        let ds = daemonset(&files, &request);
        assert_eq!(
            FrontLayout::of_daemonset(&ds).expect("readable"),
            Some(FrontLayout::default())
        );
        let pod = front_pod(&request, Some(&ds), None, &files).expect("front");
        assert!(is_front(&pod));
        let args = pod.spec.expect("spec").containers[0]
            .args
            .clone()
            .expect("args")
            .join(" ");
        assert!(
            args.starts_with(
                "front --listen 10.0.0.11:6443 --backend 127.0.0.1:6443 --backend 127.0.0.2:6443 \
                 --ca-file /etc/kubernetes/pki/ca.crt"
            ),
            "{args}"
        );
    }

    #[test]
    fn a_front_is_wanted_where_the_daemonset_listens_behind_one_and_refused_to_be_left_out() {
        let (_root, files) = node();
        let with = request(true);
        let without = request(false);
        let behind = daemonset(&files, &with);
        let plain = daemonset(&files, &without);

        let cases: [(&ConvertRequest, Option<&DaemonSet>, bool, bool); 5] = [
            // (request, live DaemonSet, front wanted, refused)
            (&with, None, true, false),
            (&without, None, false, false),
            (&with, Some(&behind), true, false),
            // A DaemonSet made without a front keeps going without one.
            (&with, Some(&plain), false, false),
            // One behind fronts cannot have a node without: nothing would take its address.
            (&without, Some(&behind), true, true),
        ];
        for (i, (request, live, wanted, refused)) in cases.into_iter().enumerate() {
            let front =
                observe(request, Component::ApiServer, live, None, &files).expect("observe");
            assert_eq!(front.map(|f| f.wanted).unwrap_or(false), wanted, "case {i}");
            let refusal = refusal(request, live, None, &files).expect("checks");
            assert_eq!(refusal.is_some(), refused, "case {i}: {refusal:?}");
        }
        assert_eq!(
            observe(&with, Component::Scheduler, None, None, &files).expect("observe"),
            None,
            "only the kube-apiserver has a front"
        );
    }
}
