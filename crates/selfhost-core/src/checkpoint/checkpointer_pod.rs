//! The checkpointer's own static pod: what `convert to-self-hosted` and `checkpoint install`
//! write into a control-plane node's manifests directory.
//!
//! It is a static pod, not a DaemonSet, because it must run when the API it protects does
//! not. It reaches the API with the kubelet's own credentials (the node authorizer lets a node
//! read its pods and the Secrets they mount, which is all it reads), and mounts the host's
//! `/etc/kubernetes`, where it finds the manifests directory, keeps its checkpoints and writes
//! the files a checkpoint reads from Secrets, at the paths the host sees.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, HostPathVolumeSource, Pod, PodSpec, ResourceRequirements, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use std::time::Duration;

use super::policy::CheckpointPolicy;
use crate::component::NAMESPACE;

/// The static pod's name; its mirror pod is `selfhost-checkpointer-<node>`.
pub const CHECKPOINTER_NAME: &str = "selfhost-checkpointer";
/// Its file in the manifests directory.
pub const CHECKPOINTER_MANIFEST: &str = "selfhost-checkpointer.yaml";
/// Where it keeps checkpoints on the host.
pub const CHECKPOINT_DIR: &str = "/etc/kubernetes/selfhost-checkpoints";
/// The kubeconfig it reads by default: the kubelet's.
pub const KUBELET_KUBECONFIG: &str = "/etc/kubernetes/kubelet.conf";
/// The label that marks it, for `status`.
pub const CHECKPOINTER_LABEL: (&str, &str) = ("app.kubernetes.io/name", CHECKPOINTER_NAME);

/// The host directories it mounts at the same paths: `/etc/kubernetes` (manifests,
/// checkpoints, kubeconfigs, certificates) and the kubelet's client certificates, which the
/// kubelet's kubeconfig names by absolute path.
const HOST_DIRS: [(&str, &str, bool); 2] = [
    ("etc-kubernetes", "/etc/kubernetes", false),
    ("kubelet-pki", "/var/lib/kubelet/pki", true),
];

/// What makes one node's checkpointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointerPod {
    /// The image with the `selfhost` binary.
    pub image: String,
    /// The node it runs on.
    pub node: String,
    /// The kubelet's static pod directory, as the host sees it.
    pub manifests_dir: String,
    /// The kubeconfig it reaches the API with, as the host sees it.
    pub kubeconfig: String,
    /// Its policy and how often it reads the node, when not the agent's defaults (a simulated
    /// cluster on a faster clock).
    pub tuning: Option<CheckpointTuning>,
}

/// A checkpointer's policy and reading interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointTuning {
    /// Its soak and grace.
    pub policy: CheckpointPolicy,
    /// How often it reads the node.
    pub interval: Duration,
}

/// A duration as the agent's flags take it, in milliseconds.
fn millis(duration: Duration) -> String {
    format!("{}ms", duration.as_millis())
}

impl CheckpointerPod {
    /// The static pod.
    pub fn render(&self) -> Pod {
        let args = [
            "checkpoint",
            "--kubeconfig",
            &self.kubeconfig,
            "--node",
            &self.node,
            "--manifests-dir",
            &self.manifests_dir,
            "--checkpoint-dir",
            CHECKPOINT_DIR,
            "--host-root",
            "/",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        if let Some(tuning) = &self.tuning {
            args.extend([
                "--soak".to_string(),
                millis(tuning.policy.soak),
                "--api-grace".to_string(),
                millis(tuning.policy.api_grace),
                "--interval".to_string(),
                millis(tuning.interval),
            ]);
        }
        let mut dirs: Vec<(String, String, bool)> = HOST_DIRS
            .iter()
            .map(|(name, path, read_only)| (name.to_string(), path.to_string(), *read_only))
            .collect();
        // A kubelet configured with another static pod directory, or a kubeconfig kept
        // elsewhere: mount those too.
        let kubeconfig_dir = parent(&self.kubeconfig);
        for (name, path, read_only) in [
            ("manifests", self.manifests_dir.as_str(), false),
            ("kubeconfig", kubeconfig_dir, true),
        ] {
            if !dirs.iter().any(|(_, dir, _)| is_within(path, dir)) {
                dirs.push((name.to_string(), path.to_string(), read_only));
            }
        }
        let mut volumes = Vec::new();
        let mut mounts = Vec::new();
        for (name, path, read_only) in dirs {
            volumes.push(Volume {
                name: name.clone(),
                host_path: Some(HostPathVolumeSource {
                    path: path.clone(),
                    type_: Some("DirectoryOrCreate".to_string()),
                }),
                ..Volume::default()
            });
            mounts.push(VolumeMount {
                name,
                mount_path: path,
                read_only: read_only.then_some(true),
                ..VolumeMount::default()
            });
        }
        let requests = BTreeMap::from([
            ("cpu".to_string(), Quantity("10m".to_string())),
            ("memory".to_string(), Quantity("32Mi".to_string())),
        ]);
        Pod {
            metadata: ObjectMeta {
                name: Some(CHECKPOINTER_NAME.to_string()),
                namespace: Some(NAMESPACE.to_string()),
                labels: Some(BTreeMap::from([(
                    CHECKPOINTER_LABEL.0.to_string(),
                    CHECKPOINTER_LABEL.1.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "checkpointer".to_string(),
                    image: Some(self.image.clone()),
                    image_pull_policy: Some("IfNotPresent".to_string()),
                    command: Some(vec!["selfhost".to_string()]),
                    args: Some(args),
                    resources: Some(ResourceRequirements {
                        requests: Some(requests),
                        ..ResourceRequirements::default()
                    }),
                    volume_mounts: Some(mounts),
                    ..Container::default()
                }],
                host_network: Some(true),
                priority_class_name: Some("system-node-critical".to_string()),
                // It only reads and writes files between rounds: nothing to drain.
                termination_grace_period_seconds: Some(5),
                volumes: Some(volumes),
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

/// Whether `path` is `dir` or beneath it.
fn is_within(path: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    path == dir || path.starts_with(&format!("{dir}/"))
}

/// Whether `pod` is a checkpointer's (its static pod, or the mirror pod the kubelet makes).
pub fn is_checkpointer(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CHECKPOINTER_LABEL.0))
        .is_some_and(|v| v == CHECKPOINTER_LABEL.1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn pod() -> Pod {
        CheckpointerPod {
            image: "ghcr.io/example/selfhost:v0.1.0".into(),
            node: "cp-1".into(),
            manifests_dir: "/etc/kubernetes/manifests".into(),
            kubeconfig: KUBELET_KUBECONFIG.into(),
            tuning: None,
        }
        .render()
    }

    #[test]
    fn it_runs_the_agent_for_its_node_with_the_kubelets_credentials() {
        let pod = pod();
        let container = &pod.spec.as_ref().unwrap().containers[0];
        let args = container.args.clone().unwrap().join(" ");
        assert_eq!(
            container.command.as_deref(),
            Some(&["selfhost".to_string()][..])
        );
        assert!(args.starts_with("checkpoint "), "{args}");
        for expected in [
            "--node cp-1",
            "--kubeconfig /etc/kubernetes/kubelet.conf",
            "--manifests-dir /etc/kubernetes/manifests",
            "--checkpoint-dir /etc/kubernetes/selfhost-checkpoints",
        ] {
            assert!(args.contains(expected), "{expected} in {args}");
        }
        assert!(is_checkpointer(&pod));
    }

    #[test]
    fn a_kubelet_with_its_own_static_pod_directory_gets_it_mounted() {
        let pod = CheckpointerPod {
            image: "selfhost".into(),
            node: "n".into(),
            manifests_dir: "/srv/manifests".into(),
            kubeconfig: "/var/lib/kubelet/kubeconfig".into(),
            tuning: Some(CheckpointTuning {
                policy: CheckpointPolicy::scaled(100),
                interval: Duration::from_millis(10),
            }),
        }
        .render();
        let mounts = pod.spec.unwrap().containers[0]
            .volume_mounts
            .clone()
            .unwrap();
        let paths: Vec<(&str, Option<bool>)> = mounts
            .iter()
            .map(|m| (m.mount_path.as_str(), m.read_only))
            .collect();
        assert!(paths.contains(&("/srv/manifests", None)), "{paths:?}");
        assert!(
            paths.contains(&("/var/lib/kubelet", Some(true))),
            "{paths:?}"
        );
    }

    #[test]
    fn every_path_it_reads_or_writes_is_mounted_from_the_host() {
        let pod = pod();
        let spec = pod.spec.as_ref().unwrap();
        let mounts = spec.containers[0].volume_mounts.clone().unwrap();
        let mounted = |path: &str| {
            mounts
                .iter()
                .any(|m| path.starts_with(&m.mount_path) && m.read_only != Some(true))
        };
        for path in [
            "/etc/kubernetes/manifests",
            CHECKPOINT_DIR,
            KUBELET_KUBECONFIG,
            "/etc/kubernetes/pki",
        ] {
            assert!(mounted(path), "{path} is mounted writable");
        }
        assert_eq!(spec.host_network, Some(true), "it needs no pod network");
        assert_eq!(
            spec.volumes.as_ref().unwrap().len(),
            2,
            "nothing mounted twice"
        );
        assert_eq!(
            spec.priority_class_name.as_deref(),
            Some("system-node-critical")
        );
    }
}
