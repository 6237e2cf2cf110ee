//! `kubeadm.k8s.io/v1beta3` (kubeadm 1.22 and later): `extraArgs` are maps.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use super::ApiVersion;
use super::wire::{
    self, ApiEndpoint, ArgMap, Draft, DraftComponent, DraftExternalEtcd, DraftInit, DraftLocalEtcd,
    ExternalEtcd, HostPathMount, ImageMeta, Locator, Networking,
};

/// v1beta3 `ClusterConfiguration`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "fields kubeadm has but selfhost does not use are accepted, never read"
)]
pub(super) struct ClusterConfiguration {
    api_version: Option<IgnoredAny>,
    kind: Option<IgnoredAny>,
    etcd: Option<Etcd>,
    networking: Option<Networking>,
    kubernetes_version: Option<Spanned<String>>,
    control_plane_endpoint: Option<Spanned<String>>,
    api_server: Option<ApiServer>,
    controller_manager: Option<ControlPlaneComponent>,
    scheduler: Option<ControlPlaneComponent>,
    dns: Option<ImageMeta>,
    certificates_dir: Option<Spanned<String>>,
    image_repository: Option<Spanned<String>>,
    feature_gates: Option<BTreeMap<String, bool>>,
    cluster_name: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ControlPlaneComponent {
    extra_args: Option<ArgMap>,
    extra_volumes: Option<Vec<Spanned<HostPathMount>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ApiServer {
    extra_args: Option<ArgMap>,
    extra_volumes: Option<Vec<Spanned<HostPathMount>>>,
    #[serde(rename = "certSANs")]
    cert_sans: Option<Vec<String>>,
    timeout_for_control_plane: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Etcd {
    local: Option<LocalEtcd>,
    external: Option<Spanned<ExternalEtcd>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "fields kubeadm has but selfhost does not use are accepted, never read"
)]
struct LocalEtcd {
    image_repository: Option<IgnoredAny>,
    image_tag: Option<IgnoredAny>,
    data_dir: Option<Spanned<String>>,
    extra_args: Option<ArgMap>,
    #[serde(rename = "serverCertSANs")]
    server_cert_sans: Option<IgnoredAny>,
    #[serde(rename = "peerCertSANs")]
    peer_cert_sans: Option<IgnoredAny>,
}

/// v1beta3 `InitConfiguration`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "fields kubeadm has but selfhost does not use are accepted, never read"
)]
pub(super) struct InitConfiguration {
    api_version: Option<IgnoredAny>,
    kind: Option<IgnoredAny>,
    bootstrap_tokens: Option<IgnoredAny>,
    node_registration: Option<NodeRegistration>,
    #[serde(rename = "localAPIEndpoint")]
    local_api_endpoint: Option<ApiEndpoint>,
    certificate_key: Option<IgnoredAny>,
    skip_phases: Option<IgnoredAny>,
    patches: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "fields kubeadm has but selfhost does not use are accepted, never read"
)]
struct NodeRegistration {
    name: Option<Spanned<String>>,
    cri_socket: Option<IgnoredAny>,
    taints: Option<IgnoredAny>,
    kubelet_extra_args: Option<IgnoredAny>,
    ignore_preflight_errors: Option<IgnoredAny>,
    image_pull_policy: Option<IgnoredAny>,
}

fn component(
    extra_args: Option<ArgMap>,
    extra_volumes: Option<Vec<Spanned<HostPathMount>>>,
    locator: &Locator,
) -> DraftComponent {
    DraftComponent {
        extra_args: wire::args_from_map(extra_args, locator),
        extra_volumes: wire::volumes(extra_volumes, locator),
        extra_envs: Vec::new(),
    }
}

impl ClusterConfiguration {
    /// The version-neutral draft of this document.
    pub fn into_draft(self, locator: &Locator) -> Draft {
        let mut draft = Draft::empty(ApiVersion::V1Beta3);
        draft.kubernetes_version = locator.locate_opt(self.kubernetes_version);
        draft.control_plane_endpoint = locator.locate_opt(self.control_plane_endpoint);
        draft.image_repository = locator.locate_opt(self.image_repository);
        let networking = self.networking.unwrap_or_default();
        draft.service_subnet = locator.locate_opt(networking.service_subnet);
        draft.pod_subnet = locator.locate_opt(networking.pod_subnet);
        draft.dns_domain = locator.locate_opt(networking.dns_domain);
        draft.certificates_dir = locator.locate_opt(self.certificates_dir);
        if let Some(etcd) = self.etcd {
            draft.etcd_local = etcd.local.map(|local| DraftLocalEtcd {
                data_dir: locator.locate_opt(local.data_dir),
                extra_args: wire::args_from_map(local.extra_args, locator),
            });
            draft.etcd_external = etcd.external.map(|external| {
                let at = locator.position(external.referenced);
                DraftExternalEtcd::from_wire(at, external.value, locator)
            });
        }
        if let Some(api) = self.api_server {
            draft.api_server = component(api.extra_args, api.extra_volumes, locator);
            draft.cert_sans = api.cert_sans.unwrap_or_default();
            draft.health_check_timeout = locator.locate_opt(api.timeout_for_control_plane);
        }
        if let Some(cm) = self.controller_manager {
            draft.controller_manager = component(cm.extra_args, cm.extra_volumes, locator);
        }
        if let Some(s) = self.scheduler {
            draft.scheduler = component(s.extra_args, s.extra_volumes, locator);
        }
        draft.feature_gates = self.feature_gates.unwrap_or_default();
        draft.cluster_name = locator.locate_opt(self.cluster_name);
        draft
    }
}

impl InitConfiguration {
    /// The version-neutral parts of this document that shape the control plane.
    pub fn into_draft(self, locator: &Locator) -> DraftInit {
        let endpoint = self.local_api_endpoint.unwrap_or_default();
        DraftInit {
            api_version: ApiVersion::V1Beta3,
            advertise_address: locator.locate_opt(endpoint.advertise_address),
            bind_port: locator.locate_opt(endpoint.bind_port),
            node_name: self
                .node_registration
                .and_then(|n| locator.locate_opt(n.name)),
            health_check_timeout: None,
        }
    }
}
