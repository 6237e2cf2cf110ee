//! Reading the certificates the control-plane templates mount, for the `certificates`
//! preflight check: from their Secrets through the API, or from the node's disk where this
//! run is on the node (`convert`). Only the key holding the certificate is looked at; a
//! Secret's other keys (its private key) are dropped unread, and nothing read is logged.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::path::Path;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use selfhost_core::Component;
use selfhost_core::certificates::{
    CertificateContent, CertificateFile, CertificateReading, CertificateSource,
    CertificatesObserved, FileKind, certificate_files, merge_readers, read_certificates,
    read_kubeconfig_certificates,
};
use selfhost_core::component::NAMESPACE;

use crate::api_call::FailureKind;
use crate::retry::{RetryPolicy, with_retries};

/// The certificate files of each component's pod spec, each file once.
fn files_of<'a>(specs: impl IntoIterator<Item = (&'a str, &'a PodSpec)>) -> Vec<CertificateFile> {
    merge_readers(
        specs
            .into_iter()
            .flat_map(|(program, spec)| certificate_files(spec, program, program))
            .collect(),
    )
}

/// Where this run can read certificate files from.
#[derive(Clone, Copy)]
pub struct Sources<'a> {
    /// The API, for files kept in Secrets.
    pub client: &'a kube::Client,
    /// This node's `/` when the run is on a control-plane node (`convert`); `None`: files on
    /// the nodes' disks are not readable from here.
    pub host_root: Option<&'a Path>,
    /// Retries of the Secret reads.
    pub policy: &'a RetryPolicy,
}

/// The certificate files of the templates, read through the API (those on the nodes' disks
/// are reported as such).
pub async fn read_templates(
    sources: Sources<'_>,
    templates: &BTreeMap<Component, PodTemplateSpec>,
) -> CertificatesObserved {
    read(
        sources,
        templates
            .iter()
            .filter_map(|(c, t)| t.spec.as_ref().map(|s| (c.name(), s))),
    )
    .await
}

/// The certificate files of the pod specs (program name, spec), each read where it is kept.
pub async fn read<'a>(
    sources: Sources<'_>,
    specs: impl IntoIterator<Item = (&'a str, &'a PodSpec)>,
) -> CertificatesObserved {
    let secrets: Api<Secret> = Api::namespaced(sources.client.clone(), NAMESPACE);
    // One read per Secret: its certificate keys, the rest dropped.
    let mut read: BTreeMap<String, Result<BTreeMap<String, Vec<u8>>, String>> = BTreeMap::new();
    let mut readings = Vec::new();
    for file in files_of(specs) {
        let content = match &file.source {
            CertificateSource::HostFile { path } => match sources.host_root {
                None => CertificateContent::OnNodes,
                Some(root) => {
                    let on_disk = root.join(path.trim_start_matches('/'));
                    match std::fs::read(&on_disk) {
                        Ok(bytes) => parse(file.kind, &bytes),
                        Err(e) => CertificateContent::Unreadable {
                            reason: format!("cannot read {}: {e}", on_disk.display()),
                        },
                    }
                }
            },
            CertificateSource::Unmounted => unmounted(),
            CertificateSource::Secret { name, key } => {
                let data = match read.entry(name.clone()) {
                    Entry::Occupied(known) => known.into_mut(),
                    Entry::Vacant(first) => {
                        first.insert(fetch(&secrets, name, sources.policy).await)
                    }
                };
                match data {
                    Ok(data) => match data.get(key) {
                        Some(bytes) => parse(file.kind, bytes),
                        None => CertificateContent::Unreadable {
                            reason: format!("Secret kube-system/{name} has no key {key}"),
                        },
                    },
                    Err(reason) => CertificateContent::Unreadable {
                        reason: reason.clone(),
                    },
                }
            }
        };
        readings.push(CertificateReading { file, content });
    }
    CertificatesObserved {
        at: Timestamp::now(),
        readings,
    }
}

fn unmounted() -> CertificateContent {
    CertificateContent::Unreadable {
        reason: "the path is on no volume the pod mounts".into(),
    }
}

fn parse(kind: FileKind, bytes: &[u8]) -> CertificateContent {
    let read = match kind {
        FileKind::Certificates => read_certificates(bytes),
        FileKind::Kubeconfig => read_kubeconfig_certificates(bytes),
    };
    match read {
        Ok(certificates) => CertificateContent::Read { certificates },
        Err(reason) => CertificateContent::Unreadable { reason },
    }
}

/// Whether a Secret's key may hold a certificate: any but a private key's.
fn may_hold_certificate(key: &str) -> bool {
    !key.ends_with(".key") && key != "tls.key"
}

/// The Secret's keys that may hold a certificate; the others are dropped as it is read.
async fn fetch(
    secrets: &Api<Secret>,
    name: &str,
    policy: &RetryPolicy,
) -> Result<BTreeMap<String, Vec<u8>>, String> {
    match with_retries(&format!("get Secret kube-system/{name}"), policy, || {
        secrets.get(name)
    })
    .await
    {
        Ok(secret) => Ok(secret
            .data
            .unwrap_or_default()
            .into_iter()
            .filter(|(key, _)| may_hold_certificate(key))
            .map(|(key, value)| (key, value.0))
            .collect()),
        Err(e) if e.kind == FailureKind::NotFound => {
            Err(format!("Secret kube-system/{name} does not exist"))
        }
        Err(e) if e.kind == FailureKind::Forbidden => Err(format!(
            "this account may not get Secret kube-system/{name}: it holds a private key, and \
             deploy/rbac.yaml grants it to selfhost-upgrader only (its selfhost-converter Role)"
        )),
        Err(e) => Err(e.to_string()),
    }
}
