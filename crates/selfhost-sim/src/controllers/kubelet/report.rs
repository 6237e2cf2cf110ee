//! What a kubelet tells the wiring after advancing: status writes, finished deletions, mirror
//! pods, events, node heartbeats, and when to wake it next.

use k8s_openapi::api::core::v1::{NodeStatus, Pod, PodStatus};
use k8s_openapi::jiff::Timestamp;

/// Names an API pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid (a precondition for writes, so a recreated pod of the same name is safe).
    pub uid: String,
}

impl PodRef {
    /// The reference of an API pod.
    pub fn of(pod: &Pod) -> Self {
        PodRef {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

/// An event the kubelet records on a pod (`source.component: kubelet`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletEvent {
    /// The pod.
    pub pod: PodRef,
    /// `Warning` rather than `Normal`.
    pub warning: bool,
    /// `Pulling`, `Pulled`, `Failed`, `BackOff`, `Created`, `Started`, `Killing`, …
    pub reason: &'static str,
    /// The message, worded as the kubelet words it.
    pub message: String,
    /// When it happened.
    pub at: Timestamp,
}

/// A pod status to write (`pods/status`), for an API pod or a static pod's mirror.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusUpdate {
    /// The pod to write to.
    pub pod: PodRef,
    /// The whole status.
    pub status: PodStatus,
}

/// The outcome of advancing a kubelet.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KubeletReport {
    /// Statuses that differ from what was last acknowledged as written.
    pub status_updates: Vec<StatusUpdate>,
    /// Pods whose containers have all stopped after a graceful deletion: delete them with
    /// grace period 0 (and their uid as precondition).
    pub finished_deletions: Vec<PodRef>,
    /// Mirror pods to create for running static pods.
    pub mirror_pods_to_create: Vec<Pod>,
    /// Mirror pods to delete (their static pod is gone or changed).
    pub mirror_pods_to_delete: Vec<PodRef>,
    /// Events that happened.
    pub events: Vec<KubeletEvent>,
    /// The node Lease is due for renewal: write `spec.renewTime` = this time.
    pub lease_renewal: Option<Timestamp>,
    /// Node status to post (changed, or due for the periodic report).
    pub node_status: Option<NodeStatus>,
    /// Advance again at this time even if nothing is observed.
    pub next_wakeup: Option<Timestamp>,
}

/// One container as the node runs it right now: what the self-hosting model asks ("is a
/// kube-apiserver Ready somewhere?") and what leader election needs (the process identity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerView {
    /// Its pod (for a static pod, the uid is the config hash).
    pub pod: PodRef,
    /// The container's name.
    pub container: String,
    /// The binary it runs (`kube-apiserver`), when known.
    pub binary: Option<String>,
    /// The image it runs (`registry.k8s.io/kube-apiserver:v1.33.2`): which version serves.
    pub image: Option<String>,
    /// Its command followed by its args, as its processes are started with (flags such as
    /// `--leader-elect-retry-period` shape how the process behaves).
    pub command_line: Vec<String>,
    /// Its current process, while one runs.
    pub process: Option<super::process::ProcessId>,
    /// That process's identity (`<hostname>_<uuid>`), as leader election names holders.
    pub identity: Option<String>,
    /// When that process started.
    pub started_at: Option<Timestamp>,
    /// When that process opened its ports (its start, for a process with none to open).
    pub listening_since: Option<Timestamp>,
    /// Whether that process was told to stop (SIGTERM) and is winding down.
    pub stopping: bool,
    /// Whether its pod is being stopped (deleted, or its manifest gone): a process of it that
    /// ends now was told to.
    pub terminating: bool,
    /// Whether its readiness probe passes.
    pub ready: bool,
    /// Its hostPath mounts: where it sees each host directory.
    pub host_mounts: Vec<HostMount>,
}

/// A host directory a container mounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMount {
    /// Where the container sees it.
    pub mount_path: String,
    /// The directory on the host.
    pub host_path: String,
    /// Whether the kubelet creates it when missing (`DirectoryOrCreate`).
    pub create: bool,
}

/// The hostPath mounts of `container` in `pod`.
pub fn host_mounts(pod: &Pod, container: &k8s_openapi::api::core::v1::Container) -> Vec<HostMount> {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    container
        .volume_mounts
        .iter()
        .flatten()
        .filter_map(|mount| {
            let volume = volumes?.iter().find(|v| v.name == mount.name)?;
            let host = volume.host_path.as_ref()?;
            Some(HostMount {
                mount_path: mount.mount_path.clone(),
                host_path: host.path.clone(),
                create: host.type_.as_deref() == Some("DirectoryOrCreate"),
            })
        })
        .collect()
}
