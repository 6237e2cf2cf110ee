//! Self-hosted DaemonSets built from control-plane pod specs.
//!
//! kubeadm's `BuildDaemonSet` mutated the caller's PodSpec in place and its mutators appended
//! without de-duplicating. Here every step takes an owned value and returns a new one, and
//! applying a mutator twice gives the same result as applying it once.

mod certs;
mod leader_election;
mod mutators;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub use certs::{CertSecret, CertsError, certificate_secrets, kubeconfig_secrets};
pub use leader_election::{
    LEADER_ELECT_LEASE_DURATION, LEADER_ELECT_RENEW_DEADLINE, LEADER_ELECT_RETRY_PERIOD,
    LEADER_ELECTION_FLAGS, elect_promptly,
};
pub use mutators::{
    APISERVER_GRACE_SECONDS, CONTROL_PLANE_NODE_LABEL, LEGACY_MASTER_LABEL, SHUTDOWN_DELAY,
    advertise_host_ip, bind_host_ip, select_control_plane_nodes, shut_down_gracefully,
    tolerate_control_plane_taints, use_host_network_dns,
};

use crate::component::{APP_LABEL, Component, NAMESPACE};

/// Pod template annotations that describe one node and must not be copied to every node.
const NODE_SPECIFIC_ANNOTATIONS: &[&str] = &[
    "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint",
    "kubernetes.io/config.hash",
    "kubernetes.io/config.mirror",
    "kubernetes.io/config.seen",
    "kubernetes.io/config.source",
];

/// Choices that shape the DaemonSets beyond the pod spec itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DaemonSetOptions {
    /// Mount certificates and kubeconfigs from Secrets instead of host paths, so that a
    /// control-plane node needs nothing on disk but the kubelet's own credentials.
    pub certs_in_secrets: bool,
}

/// Labels of the self-hosted DaemonSet, its selector and its pods: `k8s-app=self-hosted-<c>`.
pub fn self_hosted_labels(component: Component) -> BTreeMap<String, String> {
    BTreeMap::from([(APP_LABEL.to_string(), component.app_label_value())])
}

/// The pod spec a self-hosted component runs with: the static pod's spec with the node
/// selector, tolerations, DNS policy and (for the apiserver) per-node advertise address that
/// running on every control-plane node requires, the graceful shutdown (apiserver) or prompt
/// leader election (controller-manager, scheduler) that hand-overs need, optionally with
/// certificates from Secrets.
pub fn self_hosted_pod_spec(
    component: Component,
    spec: PodSpec,
    options: &DaemonSetOptions,
) -> Result<PodSpec, CertsError> {
    let mut spec = spec;
    // A static pod read back from a mirror pod is bound to its node; a template must not be.
    spec.node_name = None;
    let spec = select_control_plane_nodes(spec);
    let spec = tolerate_control_plane_taints(spec);
    let spec = use_host_network_dns(spec);
    let spec = bind_host_ip(spec);
    let spec = match component {
        Component::ApiServer => shut_down_gracefully(advertise_host_ip(spec)),
        Component::ControllerManager | Component::Scheduler => elect_promptly(spec),
    };
    if options.certs_in_secrets {
        certs::mount_from_secrets(component, spec)
    } else {
        Ok(spec)
    }
}

/// Builds the self-hosted DaemonSet `kube-system/self-hosted-<c>` from a control-plane pod
/// (as rendered for a static pod, or read from a static pod manifest).
///
/// The pod's labels are kept on the template next to `k8s-app` (tools select on
/// `component=kube-apiserver`); the selector is `k8s-app` alone, as kubeadm's, so that
/// DaemonSets kubeadm created keep working. Node-specific annotations are dropped.
pub fn build_daemonset(
    component: Component,
    pod: &Pod,
    options: &DaemonSetOptions,
) -> Result<DaemonSet, CertsError> {
    let spec = self_hosted_pod_spec(component, pod.spec.clone().unwrap_or_default(), options)?;
    let mut template_labels = pod.metadata.labels.clone().unwrap_or_default();
    template_labels.extend(self_hosted_labels(component));
    let template_annotations: BTreeMap<String, String> = pod
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| !NODE_SPECIFIC_ANNOTATIONS.contains(&key.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();

    Ok(DaemonSet {
        metadata: ObjectMeta {
            name: Some(component.daemonset_name()),
            namespace: Some(NAMESPACE.to_string()),
            labels: Some(self_hosted_labels(component)),
            ..ObjectMeta::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(self_hosted_labels(component)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(template_labels),
                    annotations: (!template_annotations.is_empty()).then_some(template_annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(spec),
            },
            // Written out rather than left to server defaults, so that the template we
            // render and the one we read back compare equal.
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".to_string()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString::Int(1)),
                    max_surge: Some(IntOrString::Int(0)),
                }),
            }),
            revision_history_limit: Some(10),
            min_ready_seconds: None,
        }),
        status: None,
    })
}

#[cfg(test)]
pub(crate) mod tests;
