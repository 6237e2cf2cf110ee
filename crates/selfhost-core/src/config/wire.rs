//! Wire types that v1beta3 and v1beta4 share, and the version-neutral draft both convert into.
//!
//! Wire types mirror kubeadm's Go structs field by field, with `deny_unknown_fields` so a typo
//! is an error. Values that are validated later are `Spanned`, so a semantic problem can still
//! point at its line and column. Subtrees selfhost does not use (bootstrap tokens, taints,
//! patches, ...) are accepted as `IgnoredAny`: kubeadm validates those, we never read them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::EnvVar;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_saphyr::Spanned;

use super::error::Position;
use super::{ApiVersion, ExtraArg};

/// A value and the place in the whole text it came from.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Located<T> {
    pub value: T,
    pub at: Position,
}

/// Converts parser locations (relative to one document) into positions in the whole text.
#[derive(Debug, Clone, Copy)]
pub(super) struct Locator {
    /// Number of lines before the document's first line.
    pub line_offset: usize,
    /// Where the document starts, used when the parser has no better location.
    pub start: Position,
}

impl Locator {
    pub fn position(&self, location: serde_saphyr::Location) -> Position {
        if location.line() == 0 {
            return self.start;
        }
        Position::new(
            self.line_offset + to_usize(location.line()),
            to_usize(location.column()),
        )
    }

    pub fn locate<T>(&self, spanned: Spanned<T>) -> Located<T> {
        Located {
            at: self.position(spanned.referenced),
            value: spanned.value,
        }
    }

    pub fn locate_opt<T>(&self, spanned: Option<Spanned<T>>) -> Option<Located<T>> {
        spanned.map(|s| self.locate(s))
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// `networking` (identical in v1beta3 and v1beta4).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Networking {
    pub service_subnet: Option<Spanned<String>>,
    pub pod_subnet: Option<Spanned<String>>,
    pub dns_domain: Option<Spanned<String>>,
}

/// `etcd.external` (identical in v1beta3 and v1beta4).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ExternalEtcd {
    pub endpoints: Option<Spanned<Vec<String>>>,
    pub ca_file: Option<Spanned<String>>,
    pub cert_file: Option<Spanned<String>>,
    pub key_file: Option<Spanned<String>>,
}

/// `localAPIEndpoint` (identical in v1beta3 and v1beta4).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct ApiEndpoint {
    pub advertise_address: Option<Spanned<String>>,
    pub bind_port: Option<Spanned<i64>>,
}

/// One entry of `extraVolumes` (identical in v1beta3 and v1beta4).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct HostPathMount {
    pub name: Option<String>,
    pub host_path: Option<String>,
    pub mount_path: Option<String>,
    pub read_only: Option<bool>,
    pub path_type: Option<String>,
}

/// `dns` in v1beta3 (v1beta4 adds `disabled`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code, reason = "accepted for strictness, never read")]
pub(super) struct ImageMeta {
    pub image_repository: Option<IgnoredAny>,
    pub image_tag: Option<IgnoredAny>,
}

/// The map form of extra arguments (v1beta3). Values may be empty (`name:`), which kubeadm
/// reads as the empty string.
pub(super) type ArgMap = Spanned<BTreeMap<String, Option<String>>>;

/// Turns a v1beta3 map into arguments sorted by name (the map's order), all located at the
/// map itself since the parser does not locate keys.
pub(super) fn args_from_map(map: Option<ArgMap>, locator: &Locator) -> Vec<Located<ExtraArg>> {
    let Some(map) = map else { return Vec::new() };
    let at = locator.position(map.referenced);
    map.value
        .into_iter()
        .map(|(name, value)| Located {
            value: ExtraArg::new(name, value.unwrap_or_default()),
            at,
        })
        .collect()
}

/// One element of the list form of extra arguments (v1beta4).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Arg {
    pub name: Option<String>,
    pub value: Option<String>,
}

/// Turns a v1beta4 list into arguments in the file's order.
pub(super) fn args_from_list(
    list: Option<Vec<Spanned<Arg>>>,
    locator: &Locator,
) -> Vec<Located<ExtraArg>> {
    list.unwrap_or_default()
        .into_iter()
        .map(|item| Located {
            at: locator.position(item.referenced),
            value: ExtraArg::new(
                item.value.name.unwrap_or_default(),
                item.value.value.unwrap_or_default(),
            ),
        })
        .collect()
}

/// Locates each `extraVolumes` entry.
pub(super) fn volumes(
    list: Option<Vec<Spanned<HostPathMount>>>,
    locator: &Locator,
) -> Vec<Located<HostPathMount>> {
    list.unwrap_or_default()
        .into_iter()
        .map(|v| locator.locate(v))
        .collect()
}

/// One component's settings, version-neutral.
#[derive(Debug, Default)]
pub(super) struct DraftComponent {
    pub extra_args: Vec<Located<ExtraArg>>,
    pub extra_volumes: Vec<Located<HostPathMount>>,
    pub extra_envs: Vec<Located<EnvVar>>,
}

/// `etcd.local`, version-neutral.
#[derive(Debug, Default)]
pub(super) struct DraftLocalEtcd {
    pub data_dir: Option<Located<String>>,
    pub extra_args: Vec<Located<ExtraArg>>,
}

/// `etcd.external`, version-neutral.
#[derive(Debug)]
pub(super) struct DraftExternalEtcd {
    pub at: Position,
    pub endpoints: Option<Located<Vec<String>>>,
    pub ca_file: Option<Located<String>>,
    pub cert_file: Option<Located<String>>,
    pub key_file: Option<Located<String>>,
}

impl DraftExternalEtcd {
    pub fn from_wire(at: Position, wire: ExternalEtcd, locator: &Locator) -> Self {
        DraftExternalEtcd {
            at,
            endpoints: locator.locate_opt(wire.endpoints),
            ca_file: locator.locate_opt(wire.ca_file),
            cert_file: locator.locate_opt(wire.cert_file),
            key_file: locator.locate_opt(wire.key_file),
        }
    }
}

/// A ClusterConfiguration in either API version, not yet validated or defaulted.
#[derive(Debug)]
pub(super) struct Draft {
    pub api_version: ApiVersion,
    pub kubernetes_version: Option<Located<String>>,
    pub control_plane_endpoint: Option<Located<String>>,
    pub image_repository: Option<Located<String>>,
    pub service_subnet: Option<Located<String>>,
    pub pod_subnet: Option<Located<String>>,
    pub dns_domain: Option<Located<String>>,
    pub certificates_dir: Option<Located<String>>,
    pub etcd_local: Option<DraftLocalEtcd>,
    pub etcd_external: Option<DraftExternalEtcd>,
    pub api_server: DraftComponent,
    pub controller_manager: DraftComponent,
    pub scheduler: DraftComponent,
    pub cert_sans: Vec<String>,
    pub feature_gates: BTreeMap<String, bool>,
    pub cluster_name: Option<Located<String>>,
    /// v1beta3 `apiServer.timeoutForControlPlane`.
    pub health_check_timeout: Option<Located<String>>,
}

impl Draft {
    /// A ClusterConfiguration with nothing set, as when only an InitConfiguration was given.
    pub fn empty(api_version: ApiVersion) -> Self {
        Draft {
            api_version,
            kubernetes_version: None,
            control_plane_endpoint: None,
            image_repository: None,
            service_subnet: None,
            pod_subnet: None,
            dns_domain: None,
            certificates_dir: None,
            etcd_local: None,
            etcd_external: None,
            api_server: DraftComponent::default(),
            controller_manager: DraftComponent::default(),
            scheduler: DraftComponent::default(),
            cert_sans: Vec::new(),
            feature_gates: BTreeMap::new(),
            cluster_name: None,
            health_check_timeout: None,
        }
    }
}

/// The parts of an InitConfiguration that shape the control plane, version-neutral.
#[derive(Debug)]
pub(super) struct DraftInit {
    pub api_version: ApiVersion,
    pub advertise_address: Option<Located<String>>,
    pub bind_port: Option<Located<i64>>,
    pub node_name: Option<Located<String>>,
    /// v1beta4 `timeouts.controlPlaneComponentHealthCheck`.
    pub health_check_timeout: Option<Located<String>>,
}
