//! The actions only `convert to-static` takes: writing the static manifest from the
//! DaemonSet's template, with the files it used to read from Secrets written to the host where
//! they are missing.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Api;
use selfhost_core::Component;
use selfhost_core::component::NAMESPACE;
use selfhost_core::conversion::{secret_files, static_pod_from_template};
use selfhost_core::front::{FrontLayout, out_of_front};

use super::{ConvertError, ConvertRequest};
use crate::node_files::{NodeFiles, write_secret_file};
use crate::retry::with_retries;

/// The static manifest of `component` written from its DaemonSet `ds`. A kube-apiserver
/// behind the node's API front listens where kubeadm's manifest, kept in the backup
/// directory, listened: the front goes, and the static pod takes the node's API address back.
pub(super) fn static_manifest(
    component: Component,
    ds: &DaemonSet,
    files: &NodeFiles,
) -> Result<Pod, ConvertError> {
    let template = ds.spec.clone().unwrap_or_default().template;
    let mut pod = static_pod_from_template(component, &template)?;
    let behind_front = FrontLayout::of_daemonset(ds)
        .map_err(|e| ConvertError::FrontLayout(e.to_string()))?
        .is_some();
    if component == Component::ApiServer && behind_front {
        let original = files.backup(component)?;
        pod.spec = pod
            .spec
            .map(|spec| out_of_front(spec, original.as_ref().and_then(|p| p.spec.as_ref())));
    }
    Ok(pod)
}

/// Writes the static manifest of `component` from `ds`; returns the files written from
/// Secrets (paths only). With `--dry-run` nothing is written, and the files that would be are
/// returned.
pub(super) async fn write_manifest(
    client: &kube::Client,
    request: &ConvertRequest,
    files: &NodeFiles,
    component: Component,
    ds: &DaemonSet,
) -> Result<Vec<String>, ConvertError> {
    let template = ds.spec.clone().unwrap_or_default().template;
    let pod = static_manifest(component, ds, files)?;
    let needed = template.spec.as_ref().map(secret_files).unwrap_or_default();
    let api: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let mut secrets: BTreeMap<String, Secret> = BTreeMap::new();
    let mut written = Vec::new();
    for file in needed {
        if request
            .host_root
            .join(file.path.trim_start_matches('/'))
            .exists()
        {
            continue;
        }
        if !secrets.contains_key(&file.secret) {
            let secret = with_retries(
                &format!("get Secret kube-system/{}", file.secret),
                &request.retry,
                || api.get(&file.secret),
            )
            .await?;
            secrets.insert(file.secret.clone(), secret);
        }
        let content = secrets
            .get(&file.secret)
            .and_then(|s| s.data.as_ref())
            .and_then(|d| d.get(&file.key))
            .ok_or_else(|| ConvertError::MissingSecretData {
                secret: file.secret.clone(),
                key: file.key.clone(),
                path: file.path.clone(),
            })?;
        if request.dry_run
            || write_secret_file(&request.host_root, &file.path, &content.0, file.mode)?
        {
            written.push(file.path.clone());
        }
    }
    if !request.dry_run {
        files.write_manifest(component, &pod)?;
    }
    Ok(written)
}
