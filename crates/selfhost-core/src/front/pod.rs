//! The front's own static pod: what `convert to-self-hosted` writes into a control-plane
//! node's manifests directory.
//!
//! It is a static pod, not a DaemonSet, because it must run when the API it fronts does not;
//! it needs no credentials (it checks `/readyz` anonymously), reads only the cluster CA and
//! writes only its hand-over socket.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, Pod, PodSpec, ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::layout::FrontLayout;
use crate::command_line;
use crate::component::NAMESPACE;

/// The static pod's name; its mirror pod is `selfhost-front-<node>`.
pub const FRONT_NAME: &str = "selfhost-front";
/// Its file in the manifests directory.
pub const FRONT_MANIFEST: &str = "selfhost-front.yaml";
/// The label that marks it, for `status` and the conversion.
pub const FRONT_LABEL: (&str, &str) = ("app.kubernetes.io/name", FRONT_NAME);
/// The cluster CA it verifies the kube-apiservers' certificates with (kubeadm's path).
pub const CLUSTER_CA_FILE: &str = "/etc/kubernetes/pki/ca.crt";
/// The name its checks verify: every kube-apiserver serving certificate kubeadm issues
/// carries it, whatever the address the process listens on.
pub const CHECK_SERVER_NAME: &str = "kubernetes";
/// The secure port a kube-apiserver listens on when its flags do not say.
pub const DEFAULT_SECURE_PORT: u16 = 6443;
/// The Unix socket where the node's front serves its listening socket to the next front, on
/// the host. Its directory is the pod's only writable host path: a front in another pod (the
/// next version's) reaches it there.
pub const HANDOVER_SOCKET: &str = "/run/selfhost-front/handover.sock";
/// How long the front drains its open connections once told to stop (its own default).
const DRAIN: Duration = Duration::from_secs(25);

/// The front's timing, when not its own defaults (a simulated cluster on a faster clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrontTuning {
    /// How often each backend's `/readyz` is checked.
    pub check_interval: Duration,
    /// How long a new connection waits for a healthy backend.
    pub hold: Duration,
    /// How long open connections may finish once it is told to stop.
    pub drain: Duration,
}

/// What makes one node's front.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontPod {
    /// The image with the `selfhost` binary.
    pub image: String,
    /// The node's API address: where clients connect.
    pub listen: SocketAddr,
    /// Where the node's kube-apiservers listen.
    pub layout: FrontLayout,
    /// The cluster CA file, as the host sees it.
    pub ca_file: String,
    /// Its timing, when not its own defaults.
    pub tuning: Option<FrontTuning>,
}

/// A duration as the front's flags take it, in milliseconds.
fn millis(duration: Duration) -> String {
    format!("{}ms", duration.as_millis())
}

impl FrontPod {
    /// The backends: both kube-apiservers of the layout, on the listening port.
    pub fn backends(&self) -> [SocketAddr; 2] {
        let port = self.listen.port();
        [
            SocketAddr::new(self.layout.backend, port),
            SocketAddr::new(self.layout.backup, port),
        ]
    }

    /// The static pod.
    pub fn render(&self) -> Pod {
        let mut args = vec![
            "front".to_string(),
            "--listen".to_string(),
            self.listen.to_string(),
        ];
        for backend in self.backends() {
            args.extend(["--backend".to_string(), backend.to_string()]);
        }
        args.extend([
            "--ca-file".to_string(),
            self.ca_file.clone(),
            "--check-server-name".to_string(),
            CHECK_SERVER_NAME.to_string(),
            "--handover-socket".to_string(),
            HANDOVER_SOCKET.to_string(),
        ]);
        let drain = self.tuning.map_or(DRAIN, |t| t.drain);
        if let Some(tuning) = &self.tuning {
            args.extend([
                "--check-interval".to_string(),
                millis(tuning.check_interval),
                "--hold".to_string(),
                millis(tuning.hold),
                "--drain-timeout".to_string(),
                millis(tuning.drain),
            ]);
        }
        let ca_dir = parent(&self.ca_file).to_string();
        let handover_dir = parent(HANDOVER_SOCKET).to_string();
        let requests = BTreeMap::from([
            ("cpu".to_string(), Quantity("20m".to_string())),
            ("memory".to_string(), Quantity("32Mi".to_string())),
        ]);
        Pod {
            metadata: ObjectMeta {
                name: Some(FRONT_NAME.to_string()),
                namespace: Some(NAMESPACE.to_string()),
                labels: Some(BTreeMap::from([(
                    FRONT_LABEL.0.to_string(),
                    FRONT_LABEL.1.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "front".to_string(),
                    image: Some(self.image.clone()),
                    image_pull_policy: Some("IfNotPresent".to_string()),
                    command: Some(vec!["selfhost".to_string()]),
                    args: Some(args),
                    resources: Some(ResourceRequirements {
                        requests: Some(requests),
                        ..ResourceRequirements::default()
                    }),
                    volume_mounts: Some(vec![
                        VolumeMount {
                            name: "ca".to_string(),
                            mount_path: ca_dir.clone(),
                            read_only: Some(true),
                            ..VolumeMount::default()
                        },
                        VolumeMount {
                            name: "handover".to_string(),
                            mount_path: handover_dir.clone(),
                            ..VolumeMount::default()
                        },
                    ]),
                    ..Container::default()
                }],
                host_network: Some(true),
                priority_class_name: Some("system-node-critical".to_string()),
                // Its drain, and a few seconds to exit after it.
                termination_grace_period_seconds: Some(
                    i64::try_from(drain.as_secs())
                        .unwrap_or(i64::MAX)
                        .saturating_add(5),
                ),
                volumes: Some(vec![
                    Volume {
                        name: "ca".to_string(),
                        host_path: Some(HostPathVolumeSource {
                            path: ca_dir,
                            type_: Some("Directory".to_string()),
                        }),
                        ..Volume::default()
                    },
                    // `/run` is emptied at boot: the first front after it makes the directory.
                    Volume {
                        name: "handover".to_string(),
                        host_path: Some(HostPathVolumeSource {
                            path: handover_dir,
                            type_: Some("DirectoryOrCreate".to_string()),
                        }),
                        ..Volume::default()
                    },
                ]),
                ..PodSpec::default()
            }),
            status: None,
        }
    }
}

/// The directory of a file's path (`/` for one at the root).
fn parent(path: &str) -> &str {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some(("", _)) | None => "/",
        Some((dir, _)) => dir,
    }
}

/// Whether `pod` is a front's (its static pod, or the mirror pod the kubelet makes).
pub fn is_front(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(FRONT_LABEL.0))
        .is_some_and(|v| v == FRONT_LABEL.1)
}

/// The address clients reach a node's kube-apiserver at, from its static pod spec: its
/// `--advertise-address` and its `--secure-port`. An advertise address of `$(HOST_IP)` (a
/// manifest written from a self-hosted template) is the node's IP, `node_ip`.
pub fn api_address(spec: &PodSpec, node_ip: Option<IpAddr>) -> Option<SocketAddr> {
    let container = spec.containers.first()?;
    let command: Vec<String> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .cloned()
        .collect();
    let address = match command_line::flag_value(&command, "advertise-address")? {
        "$(HOST_IP)" => node_ip?,
        literal => literal.parse().ok()?,
    };
    let port = match command_line::flag_value(&command, "secure-port") {
        Some(port) => port.parse().ok()?,
        None => DEFAULT_SECURE_PORT,
    };
    Some(SocketAddr::new(address, port))
}
