//! Talking to an API that may be down: every request has a deadline, failures are logged once
//! per outage rather than on every retry, and nothing here ever ends the kubelet.

use std::future::Future;
use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::json;

use super::config::timing;
use super::error::KubeletError;

/// An API client from a kubeconfig file, with a connect timeout and without kube's own
/// retries (every loop here retries on its next tick).
pub(crate) async fn client(kubeconfig: &Path) -> Result<Client, KubeletError> {
    let load_error = |source| KubeletError::Kubeconfig {
        path: kubeconfig.to_path_buf(),
        source: Box::new(source),
    };
    let file = Kubeconfig::read_from(kubeconfig).map_err(load_error)?;
    let mut config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .map_err(load_error)?;
    config.connect_timeout = Some(timing::API_CONNECT_TIMEOUT);
    config.default_retry = false;
    Client::try_from(config).map_err(|e| KubeletError::Client(Box::new(e)))
}

/// Runs one request with the kubelet's deadline.
pub(crate) async fn call<T>(
    what: impl Into<String>,
    request: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, KubeletError> {
    let what = what.into();
    match tokio::time::timeout(timing::API_CALL_TIMEOUT, request).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(KubeletError::api(what, e)),
        Err(_) => Err(KubeletError::ApiTimeout {
            what,
            timeout: timing::API_CALL_TIMEOUT,
        }),
    }
}

/// Logs a failure once while it repeats, and its recovery.
#[derive(Debug, Default)]
pub(crate) struct Outage {
    /// The last failure, while failing.
    failing: Option<String>,
}

impl Outage {
    /// A failure: logged as a warning when it differs from the last one (the API down, then
    /// refusing, are two things to see), at debug level while it repeats.
    pub(crate) fn failed(&mut self, error: &dyn std::fmt::Display) {
        let text = error.to_string();
        if self.failing.as_deref() == Some(text.as_str()) {
            tracing::debug!(error = %text, "still failing");
        } else {
            tracing::warn!(error = %text, "API request failed; retrying");
        }
        self.failing = Some(text);
    }

    /// A success: logs the recovery after failures.
    pub(crate) fn succeeded(&mut self, what: &str) {
        if self.failing.take().is_some() {
            tracing::info!("{what}: the API answers again");
        }
    }
}

/// Which pod a status write goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PodTarget {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl PodTarget {
    pub(crate) fn of(pod: &Pod) -> Self {
        PodTarget {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

impl std::fmt::Display for PodTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Writes a pod's whole status with a JSON merge patch. The patch carries the uid, which
/// the apiserver refuses to change: a write never lands on a newer pod of the same name.
pub(crate) async fn write_status(
    client: &Client,
    target: &PodTarget,
    status: &PodStatus,
) -> Result<(), KubeletError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &target.namespace);
    let patch = json!({"metadata": {"uid": target.uid}, "status": status});
    call(
        format!("write the status of pod {target}"),
        pods.patch_status(&target.name, &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
    .map(|_| ())
}

/// Deletes a pod at once, only if it still has `target.uid`. A pod that is gone already
/// counts as deleted.
pub(crate) async fn delete_pod(client: &Client, target: &PodTarget) -> Result<(), KubeletError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &target.namespace);
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(target.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match call(
        format!("delete pod {target}"),
        pods.delete(&target.name, &params),
    )
    .await
    {
        Ok(_) => Ok(()),
        // Gone, or already replaced by another pod of that name.
        Err(e) if matches!(e.api_status(), Some(404 | 409)) => Ok(()),
        Err(e) => Err(e),
    }
}
