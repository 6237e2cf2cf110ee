//! What preflight sees of etcd: the kube-apiserver's own `/readyz/etcd`, the endpoints its
//! template names, etcd's static pods, and, with etcd's client certificate, each member's
//! `/health` and `/version`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kube::Api;
use kube::api::ListParams;
use selfhost_core::Component;
use selfhost_core::command_line::template_flag;
use selfhost_core::component::NAMESPACE;
use selfhost_core::preflight::{ApiserverEtcd, EtcdMember, EtcdObservation, EtcdPod};

use crate::etcd_client::{EtcdAccess, EtcdAccessError, endpoints};
use crate::retry::{RetryPolicy, with_retries};

/// kubeadm's label on etcd's static pod.
const ETCD_PODS: &str = "component=etcd";

/// The endpoints the kube-apiserver's template names (`--etcd-servers`), in order.
pub fn etcd_servers(templates: &BTreeMap<Component, PodTemplateSpec>) -> Vec<String> {
    templates
        .get(&Component::ApiServer)
        .and_then(|t| template_flag(t, Component::ApiServer.name(), "etcd-servers"))
        .map(|servers| {
            servers
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the kube-apiserver answered with a failed check (5xx), not a refusal of the
/// request.
fn is_server_error(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code >= 500)
}

/// Observes etcd; `access`: ask each member directly. Fails only on bad `access` input.
pub async fn observe(
    client: &kube::Client,
    templates: &BTreeMap<Component, PodTemplateSpec>,
    access: Option<&EtcdAccess>,
    policy: &RetryPolicy,
) -> Result<EtcdObservation, EtcdAccessError> {
    let members = match access {
        None => None,
        Some(access) => {
            let mut members = Vec::new();
            for endpoint in endpoints(access).await? {
                let health = endpoint.health().await;
                let version = endpoint.version().await.ok().filter(|v| !v.is_empty());
                members.push(EtcdMember {
                    endpoint: endpoint.endpoint,
                    health,
                    version,
                });
            }
            Some(members)
        }
    };
    let apiserver = match http::Request::get("/readyz/etcd").body(Vec::new()) {
        Err(e) => ApiserverEtcd::Unknown { why: e.to_string() },
        Ok(request) => match client.request_text(request).await {
            Ok(_) => ApiserverEtcd::Ready,
            Err(e @ kube::Error::Api(_)) if is_server_error(&e) => ApiserverEtcd::NotReady {
                said: crate::api_call::describe(&e),
            },
            Err(e) => ApiserverEtcd::Unknown {
                why: crate::api_call::describe(&e),
            },
        },
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let labelled = ListParams::default().labels(ETCD_PODS);
    let pods = match with_retries("list etcd pods", policy, || pods.list(&labelled)).await {
        Ok(list) => list
            .items
            .into_iter()
            .filter_map(|pod| {
                let node = pod.spec.as_ref()?.node_name.clone()?;
                let image = pod.spec?.containers.first()?.image.clone()?;
                Some(EtcdPod { node, image })
            })
            .collect(),
        // Without them the version comes from the members, or is said to be unknown.
        Err(e) => {
            tracing::debug!(error = %e, "cannot list etcd's pods");
            Vec::new()
        }
    };
    Ok(EtcdObservation {
        apiserver,
        servers: etcd_servers(templates),
        members,
        pods,
    })
}
