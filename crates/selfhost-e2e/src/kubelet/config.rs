//! The kubelet's command line, the layout of a node's private filesystem root, and every
//! interval and back-off it keeps.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// Intervals and back-offs, as a kubelet 1.20 keeps them unless said otherwise.
pub mod timing {
    use std::time::Duration;

    /// Delay before restarting a container that exited again soon after its last restart;
    /// doubles up to [`CRASH_LOOP_MAX`] (`CrashLoopBackOff`).
    pub const CRASH_LOOP_INITIAL: Duration = Duration::from_secs(10);
    /// Upper bound of the crash-loop back-off.
    pub const CRASH_LOOP_MAX: Duration = Duration::from_secs(300);
    /// Delay before pulling an image again after a failed pull; doubles up to
    /// [`IMAGE_PULL_MAX`] (`ImagePullBackOff`).
    pub const IMAGE_PULL_INITIAL: Duration = Duration::from_secs(10);
    /// Upper bound of the image pull back-off.
    pub const IMAGE_PULL_MAX: Duration = Duration::from_secs(300);
    /// A failed pull shows `ErrImagePull` this long before `ImagePullBackOff` (the kubelet
    /// shows the error until its next pod sync).
    pub const PULL_ERROR_SHOWN_FOR: Duration = Duration::from_secs(2);
    /// The kubelet never gives a container less than this between SIGTERM and SIGKILL, even
    /// on a deletion with grace period 0.
    pub const MINIMUM_GRACE: Duration = Duration::from_secs(2);
    /// Grace period of a pod that says nothing (`terminationGracePeriodSeconds` default).
    pub const DEFAULT_GRACE_SECONDS: i64 = 30;
    /// How often the node status is posted (`nodeStatusUpdateFrequency`).
    pub const NODE_STATUS_INTERVAL: Duration = Duration::from_secs(10);
    /// How often the node Lease is renewed.
    pub const LEASE_RENEW_INTERVAL: Duration = Duration::from_secs(10);
    /// The node Lease's `leaseDurationSeconds`.
    pub const LEASE_DURATION_SECONDS: i32 = 40;
    /// Registration, and a node status or Lease write that failed, is retried this often.
    pub const REGISTRATION_RETRY: Duration = Duration::from_secs(1);
    /// How often the manifests directory is read.
    pub const MANIFEST_RESCAN: Duration = Duration::from_secs(1);
    /// How often mirror pods and pod bookkeeping are reconciled without any news.
    pub const HOUSEKEEPING: Duration = Duration::from_secs(1);
    /// A failed status write or deletion is retried after this.
    pub const API_RETRY: Duration = Duration::from_secs(1);
    /// Longest wait for one API request (watches excepted).
    pub const API_CALL_TIMEOUT: Duration = Duration::from_secs(10);
    /// Longest wait for a TCP connection to the API.
    pub const API_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
    /// First delay before re-listing after a failed watch; doubles up to
    /// [`WATCH_RETRY_MAX`]. Shorter than client-go's reflector so pods are learned soon after
    /// the node's own apiserver comes back.
    pub const WATCH_RETRY_INITIAL: Duration = Duration::from_millis(250);
    /// Upper bound of the watch retry delay.
    pub const WATCH_RETRY_MAX: Duration = Duration::from_secs(1);
    /// A create or delete of a mirror pod that the watch has not reflected yet is not repeated
    /// before this.
    pub const MIRROR_OPERATION_SETTLE: Duration = Duration::from_secs(5);
    /// How often a process this kubelet did not start (adopted after a restart) is checked.
    pub const ADOPTED_PROCESS_POLL: Duration = Duration::from_millis(100);
    /// A volume that could not be set up is tried again after this.
    pub const VOLUME_RETRY: Duration = Duration::from_secs(2);
    /// Secret and ConfigMap volumes are refreshed this often.
    pub const VOLUME_REFRESH: Duration = Duration::from_secs(60);
}

/// What a kubelet is told on its command line.
#[derive(Debug, Clone, PartialEq, Eq, clap::Parser)]
#[command(
    name = "selfhost-e2e-kubelet",
    about = "A node agent that runs Kubernetes pods as real processes (test bed only)"
)]
pub struct KubeletConfig {
    /// The Node this kubelet registers and whose pods it runs.
    #[arg(long)]
    pub node_name: String,
    /// The node's InternalIP, also every pod's IP (pods share the host network).
    #[arg(long)]
    pub node_ip: String,
    /// Kubeconfig to reach the API (the node's own apiserver or a load balancer).
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// Directory of static pod manifests.
    #[arg(long)]
    pub manifests_dir: PathBuf,
    /// This node's private filesystem root: hostPath `P` is `<root>/P`.
    #[arg(long)]
    pub root: PathBuf,
    /// Directory of executables: image `…/<component>:<tag>` is `<images>/<tag>/<component>`.
    #[arg(long)]
    pub images: PathBuf,
    /// The version the Node reports (`nodeInfo.kubeletVersion`), as the kubelet binary of a
    /// real node would; default: the newest tag under `--images`.
    #[arg(long)]
    pub kubelet_version: Option<String>,
    /// Log filter (`info`, `debug`, or a tracing directive such as `selfhost_e2e=debug`).
    #[arg(long, default_value = "info")]
    pub log_level: String,
}

impl KubeletConfig {
    /// The command-line arguments that give this configuration (for starting the binary).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args = Vec::new();
        let mut push = |flag: &str, value: &std::ffi::OsStr| {
            args.push(OsString::from(flag));
            args.push(value.to_os_string());
        };
        push("--node-name", self.node_name.as_ref());
        push("--node-ip", self.node_ip.as_ref());
        push("--kubeconfig", self.kubeconfig.as_os_str());
        push("--manifests-dir", self.manifests_dir.as_os_str());
        push("--root", self.root.as_os_str());
        push("--images", self.images.as_os_str());
        if let Some(version) = &self.kubelet_version {
            push("--kubelet-version", version.as_ref());
        }
        push("--log-level", self.log_level.as_ref());
        args
    }
}

/// Where things live under a node's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The layout under `root`.
    pub fn new(root: &Path) -> Self {
        Layout {
            root: root.to_path_buf(),
        }
    }

    /// The node's root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the node's path `path` (absolute on the node) is on this machine. `..` never
    /// leaves the root.
    pub fn host_path(&self, path: &str) -> PathBuf {
        let mut inside = PathBuf::new();
        for component in Path::new(path).components() {
            match component {
                Component::Normal(part) => inside.push(part),
                Component::ParentDir => {
                    inside.pop();
                }
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        self.root.join(inside)
    }

    /// The runtime state directory (`<root>/run`), cleared on a reboot.
    pub fn run_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    /// Where the kubelet records the containers it runs.
    pub fn records_dir(&self) -> PathBuf {
        self.run_dir()
            .join("selfhost-e2e-kubelet")
            .join("containers")
    }

    /// The per-pod directory (volumes, working directory).
    pub fn pod_dir(&self, pod_uid: &str) -> PathBuf {
        self.root
            .join("var/lib/kubelet/pods")
            .join(safe_component(pod_uid))
    }

    /// The directory of one volume of a pod, by volume plugin (`kubernetes.io~secret`, …).
    pub fn volume_dir(&self, pod_uid: &str, plugin: &str, volume: &str) -> PathBuf {
        self.pod_dir(pod_uid)
            .join("volumes")
            .join(plugin)
            .join(safe_component(volume))
    }

    /// The log file of one container instance:
    /// `var/log/pods/<namespace>_<pod>_<uid>/<container>/<restartCount>.log`.
    pub fn log_path(
        &self,
        namespace: &str,
        pod: &str,
        pod_uid: &str,
        container: &str,
        restart_count: i32,
    ) -> PathBuf {
        self.root
            .join("var/log/pods")
            .join(safe_component(&format!("{namespace}_{pod}_{pod_uid}")))
            .join(safe_component(container))
            .join(format!("{restart_count}.log"))
    }
}

/// A name from the API made safe as one path component.
fn safe_component(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| if c == '/' || c == '\0' { '_' } else { c })
        .collect();
    match cleaned.as_str() {
        "" | "." | ".." => format!("_{cleaned}"),
        _ => cleaned,
    }
}

/// Whole seconds from a pod spec, as a duration (negative counts as zero).
pub(crate) fn seconds(value: i64) -> Duration {
    Duration::from_secs(u64::try_from(value).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn node_paths_stay_under_the_root() {
        let layout = Layout::new(Path::new("/tmp/n1"));
        let cases = [
            ("/etc/kubernetes/pki", "/tmp/n1/etc/kubernetes/pki"),
            ("etc/x", "/tmp/n1/etc/x"),
            ("/../../etc/passwd", "/tmp/n1/etc/passwd"),
            ("/a/./b/../c", "/tmp/n1/a/c"),
            ("/", "/tmp/n1"),
        ];
        for (path, expected) in cases {
            assert_eq!(layout.host_path(path), PathBuf::from(expected), "{path}");
        }
        assert_eq!(
            layout.log_path("kube-system", "api-n1", "abc", "kube-apiserver", 2),
            PathBuf::from("/tmp/n1/var/log/pods/kube-system_api-n1_abc/kube-apiserver/2.log")
        );
        assert_eq!(
            layout.volume_dir("..", "kubernetes.io~secret", "a/b"),
            PathBuf::from("/tmp/n1/var/lib/kubelet/pods/_../volumes/kubernetes.io~secret/a_b")
        );
    }

    #[test]
    fn the_command_line_round_trips() {
        let config = KubeletConfig {
            node_name: "n1".into(),
            node_ip: "127.0.1.1".into(),
            kubeconfig: "/k/kubelet.conf".into(),
            manifests_dir: "/k/manifests".into(),
            root: "/n1".into(),
            images: "/images".into(),
            kubelet_version: Some("v1.20.2".into()),
            log_level: "debug".into(),
        };
        let mut args = vec![OsString::from("selfhost-e2e-kubelet")];
        args.extend(config.to_args());
        assert_eq!(KubeletConfig::try_parse_from(args).unwrap(), config);
    }
}
