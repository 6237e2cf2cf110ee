//! Which certificates a control-plane pod reads, where each one is kept (a file on the node, a
//! key of a Secret), and what their validity dates are: for the `certificates` preflight
//! check, which fails on an expired one and warns of one that expires soon.
//!
//! The files come from the component's own flags, as the kubeadm layout names them; a file
//! is found in the pod's volumes by the longest mount path that holds it. Only certificates
//! and the client certificates embedded in kubeconfigs are read: key material is never
//! parsed, kept or shown.

mod read;
#[cfg(test)]
mod tests;

pub use read::{read_certificates, read_kubeconfig_certificates};

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::jiff::Timestamp;
use serde::Serialize;

use crate::command_line::main_container;

/// What a flag names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileKind {
    /// PEM certificates (a CA bundle may hold several).
    Certificates,
    /// A kubeconfig whose users embed client certificates.
    Kubeconfig,
}

/// The flags of the control-plane components (etcd's included) that name a certificate or a
/// kubeconfig holding one. Private keys and `sa.pub` (a bare public key) are not here.
pub const CERTIFICATE_FLAGS: &[(&str, FileKind)] = &[
    // kube-apiserver
    ("client-ca-file", FileKind::Certificates),
    ("tls-cert-file", FileKind::Certificates),
    ("kubelet-client-certificate", FileKind::Certificates),
    ("kubelet-certificate-authority", FileKind::Certificates),
    ("etcd-cafile", FileKind::Certificates),
    ("etcd-certfile", FileKind::Certificates),
    ("proxy-client-cert-file", FileKind::Certificates),
    ("requestheader-client-ca-file", FileKind::Certificates),
    // kube-controller-manager
    ("cluster-signing-cert-file", FileKind::Certificates),
    ("root-ca-file", FileKind::Certificates),
    // kube-controller-manager and kube-scheduler
    ("kubeconfig", FileKind::Kubeconfig),
    ("authentication-kubeconfig", FileKind::Kubeconfig),
    ("authorization-kubeconfig", FileKind::Kubeconfig),
    // etcd
    ("cert-file", FileKind::Certificates),
    ("trusted-ca-file", FileKind::Certificates),
    ("peer-cert-file", FileKind::Certificates),
    ("peer-trusted-ca-file", FileKind::Certificates),
];

/// Where a certificate file is kept.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CertificateSource {
    /// A file on the node, at this host path.
    HostFile {
        /// The path on the node.
        path: String,
    },
    /// A key of a Secret in kube-system.
    Secret {
        /// The Secret's name.
        name: String,
        /// The key holding the file.
        key: String,
    },
    /// Neither: the path is on no volume the pod mounts (it is in the image).
    Unmounted,
}

impl std::fmt::Display for CertificateSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertificateSource::HostFile { path } => write!(f, "{path} on the node"),
            CertificateSource::Secret { name, key } => {
                write!(f, "Secret kube-system/{name} key {key}")
            }
            CertificateSource::Unmounted => f.write_str("in the container image"),
        }
    }
}

/// One file a pod reads certificates from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertificateFile {
    /// The path as the container sees it.
    pub path: String,
    /// What it holds.
    pub kind: FileKind,
    /// Where it is kept.
    pub source: CertificateSource,
    /// Who reads it, e.g. `kube-apiserver --tls-cert-file`.
    pub used_by: Vec<String>,
}

/// The files the main container `container` of a pod reads certificates from, by its flags,
/// in flag-table order; `program` names the reader in [`CertificateFile::used_by`].
pub fn certificate_files(spec: &PodSpec, container: &str, program: &str) -> Vec<CertificateFile> {
    let Some(main) = main_container(spec, container) else {
        return Vec::new();
    };
    let mut line = main.command.clone().unwrap_or_default();
    line.extend(main.args.clone().unwrap_or_default());
    let mut files: Vec<CertificateFile> = Vec::new();
    for (flag, kind) in CERTIFICATE_FLAGS {
        let Some(path) = crate::command_line::flag_value(&line, flag) else {
            continue;
        };
        let used_by = format!("{program} --{flag}");
        if let Some(known) = files.iter_mut().find(|f| f.path == path) {
            known.used_by.push(used_by);
            continue;
        }
        files.push(CertificateFile {
            path: path.to_string(),
            kind: *kind,
            source: source_of(spec, main, path),
            used_by: vec![used_by],
        });
    }
    files
}

/// Where the file at `path` in `container` comes from: the volume of the longest mount path
/// that holds it.
fn source_of(
    spec: &PodSpec,
    container: &k8s_openapi::api::core::v1::Container,
    path: &str,
) -> CertificateSource {
    let mount = container
        .volume_mounts
        .iter()
        .flatten()
        .filter_map(|m| {
            let dir = m.mount_path.trim_end_matches('/');
            let rest = path.strip_prefix(dir)?;
            let rest = if rest.is_empty() {
                // The mount is the file itself (a subPath or a file hostPath).
                ""
            } else {
                rest.strip_prefix('/')?
            };
            Some((m, dir.len(), rest))
        })
        .max_by_key(|(_, len, _)| *len);
    let Some((mount, _, rest)) = mount else {
        return CertificateSource::Unmounted;
    };
    let Some(volume) = spec.volumes.iter().flatten().find(|v| v.name == mount.name) else {
        return CertificateSource::Unmounted;
    };
    let rest = match mount.sub_path.as_deref().filter(|s| !s.is_empty()) {
        Some(sub) if rest.is_empty() => sub.to_string(),
        Some(sub) => format!("{sub}/{rest}"),
        None => rest.to_string(),
    };
    if let Some(host) = &volume.host_path {
        let base = host.path.trim_end_matches('/');
        let path = if rest.is_empty() {
            base.to_string()
        } else {
            format!("{base}/{rest}")
        };
        return CertificateSource::HostFile { path };
    }
    let secret_key = |name: &str, items: Option<&Vec<k8s_openapi::api::core::v1::KeyToPath>>| {
        match items {
            // With items, only the listed keys are projected, each at its path.
            Some(items) => {
                items
                    .iter()
                    .find(|i| i.path == rest)
                    .map(|i| CertificateSource::Secret {
                        name: name.to_string(),
                        key: i.key.clone(),
                    })
            }
            None => Some(CertificateSource::Secret {
                name: name.to_string(),
                key: rest.clone(),
            }),
        }
    };
    if let Some(secret) = &volume.secret
        && let Some(name) = &secret.secret_name
    {
        return secret_key(name, secret.items.as_ref()).unwrap_or(CertificateSource::Unmounted);
    }
    if let Some(projected) = &volume.projected {
        return projected
            .sources
            .iter()
            .flatten()
            .filter_map(|s| s.secret.as_ref())
            .find_map(|s| secret_key(&s.name, s.items.as_ref()))
            .unwrap_or(CertificateSource::Unmounted);
    }
    CertificateSource::Unmounted
}

/// The dates of one certificate, and what it is. Nothing here is secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertificateDates {
    /// The subject, e.g. `CN=kube-apiserver`.
    pub subject: String,
    /// Whether it is a CA (kubeadm renews leaf certificates only).
    pub ca: bool,
    /// Valid from.
    pub not_before: Timestamp,
    /// Valid until.
    pub not_after: Timestamp,
}

/// What reading a file found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CertificateContent {
    /// Its certificates.
    Read {
        /// In file order.
        certificates: Vec<CertificateDates>,
    },
    /// It could not be read or parsed; why.
    Unreadable {
        /// Why, with no content of the file.
        reason: String,
    },
    /// It is a file on the nodes and this run reads through the API only.
    OnNodes,
}

/// One file and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertificateReading {
    /// The file.
    pub file: CertificateFile,
    /// What was found.
    pub content: CertificateContent,
}

/// Every certificate file read, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertificatesObserved {
    /// When they were read: expiry is judged from here.
    pub at: Timestamp,
    /// One per file, each file once.
    pub readings: Vec<CertificateReading>,
}

/// The files merged by where they are kept: one file read by two components (at the same or
/// different container paths) is one file naming both. Order is first appearance.
pub fn merge_readers(files: Vec<CertificateFile>) -> Vec<CertificateFile> {
    let same = |a: &CertificateFile, b: &CertificateFile| match (&a.source, &b.source) {
        (CertificateSource::Unmounted, CertificateSource::Unmounted) => a.path == b.path,
        (a, b) => a == b,
    };
    let mut merged: Vec<CertificateFile> = Vec::new();
    for file in files {
        match merged.iter_mut().find(|m| same(m, &file)) {
            Some(known) => known.used_by.extend(file.used_by),
            None => merged.push(file),
        }
    }
    merged
}
