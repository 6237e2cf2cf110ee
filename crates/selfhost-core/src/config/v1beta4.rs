//! `kubeadm.k8s.io/v1beta4` (kubeadm 1.31 and later): `extraArgs` are name/value lists in
//! which a name may repeat, components take `extraEnvs`, and timeouts moved to
//! `InitConfiguration.timeouts`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use super::ApiVersion;
use super::wire::{
    self, ApiEndpoint, Arg, Draft, DraftComponent, DraftExternalEtcd, DraftInit, DraftLocalEtcd,
    ExternalEtcd, HostPathMount, Locator, Networking,
};

type ArgList = Vec<Spanned<Arg>>;

/// v1beta4 `ClusterConfiguration`.
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
    dns: Option<Dns>,
    proxy: Option<Proxy>,
    certificates_dir: Option<Spanned<String>>,
    image_repository: Option<Spanned<String>>,
    feature_gates: Option<BTreeMap<String, bool>>,
    cluster_name: Option<Spanned<String>>,
    encryption_algorithm: Option<IgnoredAny>,
    certificate_validity_period: Option<IgnoredAny>,
    ca_certificate_validity_period: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ControlPlaneComponent {
    extra_args: Option<ArgList>,
    extra_volumes: Option<Vec<Spanned<HostPathMount>>>,
    extra_envs: Option<Vec<Spanned<EnvVar>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ApiServer {
    extra_args: Option<ArgList>,
    extra_volumes: Option<Vec<Spanned<HostPathMount>>>,
    extra_envs: Option<Vec<Spanned<EnvVar>>>,
    #[serde(rename = "certSANs")]
    cert_sans: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "fields kubeadm has but selfhost does not use are accepted, never read"
)]
struct Dns {
    image_repository: Option<IgnoredAny>,
    image_tag: Option<IgnoredAny>,
    disabled: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "fields kubeadm has but selfhost does not use are accepted, never read"
)]
struct Proxy {
    disabled: Option<bool>,
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
    extra_args: Option<ArgList>,
    extra_envs: Option<IgnoredAny>,
    #[serde(rename = "serverCertSANs")]
    server_cert_sans: Option<IgnoredAny>,
    #[serde(rename = "peerCertSANs")]
    peer_cert_sans: Option<IgnoredAny>,
}

/// v1beta4 `InitConfiguration`.
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
    dry_run: Option<bool>,
    node_registration: Option<NodeRegistration>,
    #[serde(rename = "localAPIEndpoint")]
    local_api_endpoint: Option<ApiEndpoint>,
    certificate_key: Option<IgnoredAny>,
    skip_phases: Option<IgnoredAny>,
    patches: Option<IgnoredAny>,
    timeouts: Option<Timeouts>,
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
    image_pull_serial: Option<IgnoredAny>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(
    dead_code,
    reason = "fields kubeadm has but selfhost does not use are accepted, never read"
)]
struct Timeouts {
    control_plane_component_health_check: Option<Spanned<String>>,
    kubelet_health_check: Option<IgnoredAny>,
    #[serde(rename = "kubernetesAPICall")]
    kubernetes_api_call: Option<IgnoredAny>,
    #[serde(rename = "etcdAPICall")]
    etcd_api_call: Option<IgnoredAny>,
    tls_bootstrap: Option<IgnoredAny>,
    discovery: Option<IgnoredAny>,
    upgrade_manifests: Option<IgnoredAny>,
}

fn component(
    extra_args: Option<ArgList>,
    extra_volumes: Option<Vec<Spanned<HostPathMount>>>,
    extra_envs: Option<Vec<Spanned<EnvVar>>>,
    locator: &Locator,
) -> DraftComponent {
    DraftComponent {
        extra_args: wire::args_from_list(extra_args, locator),
        extra_volumes: wire::volumes(extra_volumes, locator),
        extra_envs: extra_envs
            .unwrap_or_default()
            .into_iter()
            .map(|e| locator.locate(e))
            .collect(),
    }
}

impl ClusterConfiguration {
    /// The version-neutral draft of this document.
    pub fn into_draft(self, locator: &Locator) -> Draft {
        let mut draft = Draft::empty(ApiVersion::V1Beta4);
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
                extra_args: wire::args_from_list(local.extra_args, locator),
            });
            draft.etcd_external = etcd.external.map(|external| {
                let at = locator.position(external.referenced);
                DraftExternalEtcd::from_wire(at, external.value, locator)
            });
        }
        if let Some(api) = self.api_server {
            draft.api_server =
                component(api.extra_args, api.extra_volumes, api.extra_envs, locator);
            draft.cert_sans = api.cert_sans.unwrap_or_default();
        }
        if let Some(cm) = self.controller_manager {
            draft.controller_manager =
                component(cm.extra_args, cm.extra_volumes, cm.extra_envs, locator);
        }
        if let Some(s) = self.scheduler {
            draft.scheduler = component(s.extra_args, s.extra_volumes, s.extra_envs, locator);
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
            api_version: ApiVersion::V1Beta4,
            advertise_address: locator.locate_opt(endpoint.advertise_address),
            bind_port: locator.locate_opt(endpoint.bind_port),
            node_name: self
                .node_registration
                .and_then(|n| locator.locate_opt(n.name)),
            health_check_timeout: self
                .timeouts
                .and_then(|t| locator.locate_opt(t.control_plane_component_health_check)),
        }
    }
}
