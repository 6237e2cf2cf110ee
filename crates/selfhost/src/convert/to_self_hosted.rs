//! The actions only `convert to-self-hosted` takes: creating the DaemonSet from the static
//! manifest on disk, after uploading the certificates and kubeconfigs it mounts from Secrets.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::PostParams;
use selfhost_core::Component;
use selfhost_core::component::NAMESPACE;
use selfhost_core::conversion::{secret_files, self_hosted_daemonset};
use selfhost_core::daemonset::{
    CertSecret, DaemonSetOptions, certificate_secrets, kubeconfig_secrets,
};

use super::{ConvertError, ConvertRequest};
use crate::api_call::FailureKind;
use crate::api_write::FIELD_MANAGER;
use crate::node_files::{FilesError, NodeFiles, read_host_file};
use crate::retry::with_retries;

/// The Secrets a self-hosted DaemonSet mounts, read from the host: every Secret one of its
/// volumes projects, whole (a TLS Secret needs its certificate and its key even when the
/// component reads only one of them). `root` prefixes host paths.
pub(super) fn certificate_uploads(ds: &DaemonSet, root: &Path) -> Result<Vec<Secret>, FilesError> {
    let Some(spec) = ds.spec.as_ref().and_then(|s| s.template.spec.as_ref()) else {
        return Ok(Vec::new());
    };
    let known: Vec<CertSecret> = certificate_secrets()
        .into_iter()
        .chain(kubeconfig_secrets())
        .collect();
    let mut secrets: BTreeMap<String, Secret> = BTreeMap::new();
    for file in secret_files(spec) {
        if secrets.contains_key(&file.secret) {
            continue;
        }
        let Some(table) = known.iter().find(|s| s.name == file.secret) else {
            continue;
        };
        // The directory the table's relative paths start from, seen from this file.
        let Some(base) = table
            .files
            .iter()
            .find(|(key, _)| *key == file.key)
            .and_then(|(_, relative)| file.path.strip_suffix(relative.as_str()))
        else {
            continue;
        };
        let mut data = BTreeMap::new();
        for (key, relative) in &table.files {
            let content = read_host_file(root, &format!("{base}{relative}"))?;
            data.insert(key.clone(), ByteString(content));
        }
        secrets.insert(
            file.secret.clone(),
            Secret {
                metadata: ObjectMeta {
                    name: Some(file.secret.clone()),
                    namespace: Some(NAMESPACE.to_string()),
                    ..ObjectMeta::default()
                },
                type_: Some(table.type_.clone()),
                data: Some(data),
                ..Secret::default()
            },
        );
    }
    Ok(secrets.into_values().collect())
}

/// Creates or replaces each Secret (contents are never logged).
async fn upload(
    client: &kube::Client,
    request: &ConvertRequest,
    secrets: Vec<Secret>,
) -> Result<(), ConvertError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let post = PostParams {
        dry_run: request.dry_run,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    for secret in secrets {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let created = with_retries(
            &format!("create Secret kube-system/{name}"),
            &request.retry,
            || api.create(&post, &secret),
        )
        .await;
        match created {
            Ok(_) => {}
            Err(e) if e.kind == FailureKind::AlreadyExists => {
                let live = with_retries(
                    &format!("get Secret kube-system/{name}"),
                    &request.retry,
                    || api.get(&name),
                )
                .await?;
                let mut replacement = secret.clone();
                replacement.metadata.resource_version = live.metadata.resource_version;
                with_retries(
                    &format!("replace Secret kube-system/{name}"),
                    &request.retry,
                    || api.replace(&name, &post, &replacement),
                )
                .await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Creates the DaemonSet of `component` from its static manifest (uploading its Secrets
/// first). A DaemonSet that exists already is not an error: the next decision reads it.
pub(super) async fn create_daemonset(
    client: &kube::Client,
    request: &ConvertRequest,
    files: &NodeFiles,
    component: Component,
) -> Result<(), ConvertError> {
    let path = files.manifest_path(component);
    let Some(pod) = files.manifest(component)? else {
        return Ok(());
    };
    let options = DaemonSetOptions {
        certs_in_secrets: request.certs_in_secrets,
    };
    let mut ds = self_hosted_daemonset(component, &pod, &options)?;
    super::front::behind_front(request, component, &mut ds);
    if request.certs_in_secrets {
        upload(
            client,
            request,
            certificate_uploads(&ds, &request.host_root)?,
        )
        .await?;
    }
    tracing::debug!(manifest = %path.display(), "creating the DaemonSet from the static manifest");
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let post = PostParams {
        dry_run: request.dry_run,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    match with_retries(
        &format!(
            "create DaemonSet kube-system/{}",
            component.daemonset_name()
        ),
        &request.retry,
        || api.create(&post, &ds),
    )
    .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind == FailureKind::AlreadyExists => Ok(()),
        Err(e) => Err(e.into()),
    }
}
