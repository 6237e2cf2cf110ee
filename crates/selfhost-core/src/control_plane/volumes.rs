//! Host-path volumes and mounts of the control-plane pods, named as kubeadm names them.
//!
//! kubeadm probes the host's filesystem to decide which CA trust directories to mount; we do
//! not read the host. The directories come from [`NodeContext::ca_trust_dirs`] instead, which
//! defaults to the Debian/Ubuntu set, so the result is the same on every run.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{HostPathVolumeSource, Volume, VolumeMount};

use crate::component::Component;
use crate::config::{ClusterConfig, Etcd, HostPathMount};

use super::flags::{CONTROLLER_MANAGER_KUBECONFIG, SCHEDULER_KUBECONFIG};
use super::node::{KUBEADM_CA_TRUST_DIRS, NodeContext};

/// Volume of the certificates directory (kubeadm's `KubeCertificatesVolumeName`); the
/// certificates-in-Secrets rewrite replaces it.
pub const K8S_CERTS_VOLUME: &str = "k8s-certs";
/// Volume of the component's kubeconfig file (kubeadm's `KubeConfigVolumeName`); the
/// certificates-in-Secrets rewrite replaces it.
pub const KUBECONFIG_VOLUME: &str = "kubeconfig";
/// Volume of the host's CA bundle directory.
pub const CA_CERTS_VOLUME: &str = "ca-certs";
/// Volume of the flexvolume plugin directory of the controller-manager.
pub const FLEXVOLUME_VOLUME: &str = "flexvolume-dir";

const CA_CERTS_PATH: &str = "/etc/ssl/certs";
const DEFAULT_FLEXVOLUME_DIR: &str = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec";
const DIRECTORY_OR_CREATE: &str = "DirectoryOrCreate";
const FILE_OR_CREATE: &str = "FileOrCreate";

/// kubeadm's volume name for a directory: its path with `/` turned into `-`, e.g.
/// `usr-share-ca-certificates`.
pub fn volume_name_for_dir(dir: &str) -> String {
    dir.trim_start_matches('/').replace('/', "-")
}

/// Volumes and mounts keyed by name: sorted, and a later entry replaces an earlier one, as a
/// user's extra volume replaces kubeadm's of the same name.
#[derive(Default)]
struct Mounts(BTreeMap<String, (Volume, VolumeMount)>);

impl Mounts {
    fn add(
        &mut self,
        name: &str,
        host_path: &str,
        mount_path: &str,
        read_only: bool,
        path_type: Option<&str>,
    ) {
        let volume = Volume {
            name: name.to_string(),
            host_path: Some(HostPathVolumeSource {
                path: host_path.to_string(),
                type_: path_type.map(str::to_string),
            }),
            ..Volume::default()
        };
        let mount = VolumeMount {
            name: name.to_string(),
            mount_path: mount_path.to_string(),
            read_only: read_only.then_some(true),
            ..VolumeMount::default()
        };
        self.0.insert(name.to_string(), (volume, mount));
    }

    fn add_same_path(&mut self, name: &str, path: &str, read_only: bool, path_type: &str) {
        self.add(name, path, path, read_only, Some(path_type));
    }

    fn add_extra(&mut self, extra: &[HostPathMount]) {
        for m in extra {
            self.add(
                &m.name,
                &m.host_path,
                &m.mount_path,
                m.read_only,
                m.path_type.as_deref(),
            );
        }
    }

    fn into_parts(self) -> (Vec<Volume>, Vec<VolumeMount>) {
        self.0.into_values().unzip()
    }
}

/// Whether `path` is `base` or lies below it (by path components, unlike kubeadm's plain
/// string prefix, which would take `/etc/kubernetes/pki-etcd` to be inside
/// `/etc/kubernetes/pki` and leave it unmounted).
fn is_within(path: &str, base: &str) -> bool {
    let base = base.trim_end_matches('/');
    path == base
        || path
            .strip_prefix(base)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Directories holding an external etcd's client files that no other volume covers, with
/// nested ones folded into their parent: `etcd-certs-0`, `etcd-certs-1`, ... in path order.
fn etcd_cert_dirs(files: [Option<&str>; 3], certificates_dir: &str) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    for file in files.into_iter().flatten() {
        let Some((dir, _)) = file.rsplit_once('/') else {
            continue;
        };
        let dir = if dir.is_empty() { "/" } else { dir };
        let covered = is_within(dir, CA_CERTS_PATH)
            || is_within(dir, certificates_dir)
            || KUBEADM_CA_TRUST_DIRS.iter().any(|d| is_within(dir, d));
        if covered || dirs.iter().any(|d| is_within(dir, d)) {
            continue;
        }
        dirs.retain(|d| !is_within(d, dir));
        dirs.push(dir.to_string());
    }
    dirs.sort();
    dirs
}

/// The volumes and mounts of `component`, each sorted by name.
pub(super) fn volumes(
    component: Component,
    config: &ClusterConfig,
    node: &NodeContext,
) -> (Vec<Volume>, Vec<VolumeMount>) {
    let mut mounts = Mounts::default();
    let certs = config.certificates_dir.as_str();
    let add_ca_trust = |mounts: &mut Mounts| {
        mounts.add_same_path(CA_CERTS_VOLUME, CA_CERTS_PATH, true, DIRECTORY_OR_CREATE);
        for dir in &node.ca_trust_dirs {
            mounts.add_same_path(&volume_name_for_dir(dir), dir, true, DIRECTORY_OR_CREATE);
        }
    };
    match component {
        Component::ApiServer => {
            mounts.add_same_path(K8S_CERTS_VOLUME, certs, true, DIRECTORY_OR_CREATE);
            add_ca_trust(&mut mounts);
            if let Etcd::External {
                ca_file,
                cert_file,
                key_file,
                ..
            } = &config.etcd
            {
                let files = [ca_file, cert_file, key_file].map(Option::as_deref);
                for (i, dir) in etcd_cert_dirs(files, certs).iter().enumerate() {
                    let name = format!("etcd-certs-{i}");
                    mounts.add_same_path(&name, dir, true, DIRECTORY_OR_CREATE);
                }
            }
        }
        Component::ControllerManager => {
            mounts.add_same_path(K8S_CERTS_VOLUME, certs, true, DIRECTORY_OR_CREATE);
            add_ca_trust(&mut mounts);
            mounts.add_same_path(
                KUBECONFIG_VOLUME,
                CONTROLLER_MANAGER_KUBECONFIG,
                true,
                FILE_OR_CREATE,
            );
            // Writable: flexvolume drivers talk to their storage back-ends through sockets here.
            let flexvolume = config
                .controller_manager
                .extra_arg("flex-volume-plugin-dir")
                .unwrap_or(DEFAULT_FLEXVOLUME_DIR);
            mounts.add_same_path(FLEXVOLUME_VOLUME, flexvolume, false, DIRECTORY_OR_CREATE);
        }
        Component::Scheduler => {
            mounts.add_same_path(
                KUBECONFIG_VOLUME,
                SCHEDULER_KUBECONFIG,
                true,
                FILE_OR_CREATE,
            );
        }
    }
    mounts.add_extra(&config.component(component).extra_volumes);
    mounts.into_parts()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_names_follow_kubeadm() {
        let names: Vec<String> = KUBEADM_CA_TRUST_DIRS
            .iter()
            .map(|d| volume_name_for_dir(d))
            .collect();
        assert_eq!(
            names,
            [
                "etc-pki-ca-trust",
                "etc-pki-tls-certs",
                "etc-ca-certificates",
                "usr-share-ca-certificates",
                "usr-local-share-ca-certificates"
            ]
        );
    }

    #[test]
    fn etcd_cert_dirs_skip_covered_and_fold_nested() {
        let pki = "/etc/kubernetes/pki";
        let rows: [([Option<&str>; 3], Vec<&str>); 5] = [
            (
                [
                    Some("/etc/etcd/pki/ca.crt"),
                    Some("/etc/etcd/pki/client/c.crt"),
                    Some("/etc/etcd/pki/client/c.key"),
                ],
                vec!["/etc/etcd/pki"],
            ),
            (
                [
                    Some("/etc/kubernetes/pki/etcd/ca.crt"),
                    Some("/etc/ssl/certs/c.crt"),
                    Some("/etc/pki/tls/certs/c.key"),
                ],
                vec![],
            ),
            (
                [
                    Some("/etc/kubernetes/pki-etcd/ca.crt"),
                    Some("/srv/b/c.crt"),
                    Some("/srv/a/c.key"),
                ],
                vec!["/etc/kubernetes/pki-etcd", "/srv/a", "/srv/b"],
            ),
            (
                [Some("/srv/x/y/ca.crt"), Some("/srv/x/c.crt"), None],
                vec!["/srv/x"],
            ),
            ([None, Some("relative.crt"), None], vec![]),
        ];
        for (files, expected) in rows {
            assert_eq!(etcd_cert_dirs(files, pki), expected, "{files:?}");
        }
    }
}
