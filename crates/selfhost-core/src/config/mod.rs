//! kubeadm's `ClusterConfiguration` (and the parts of `InitConfiguration` that shape the
//! control plane), read from `kubeadm.k8s.io/v1beta3` or `v1beta4` into one model.
//!
//! Both API versions normalise into [`ClusterConfig`], with kubeadm's defaults applied, so the
//! rest of selfhost never sees the difference between v1beta3's `extraArgs` map and v1beta4's
//! name/value list. Reading is strict: an unknown field is an error that names the fields
//! allowed at that place, and every error points at a line and column. No file is read here:
//! the caller hands in the text.

mod build;
mod document;
mod error;
mod v1beta3;
mod v1beta4;
mod validate;
mod wire;

pub(crate) use validate::go_duration;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_errors;

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::EnvVar;
use serde::Serialize;

use crate::component::Component;
use crate::version::KubeVersion;

pub use error::{ACCEPTED_API_VERSIONS, ConfigError, Position, Problem};

/// kubeadm's default image registry.
pub const DEFAULT_IMAGE_REPOSITORY: &str = "registry.k8s.io";
/// kubeadm's default Service network.
pub const DEFAULT_SERVICE_SUBNET: &str = "10.96.0.0/12";
/// kubeadm's default cluster DNS domain.
pub const DEFAULT_DNS_DOMAIN: &str = "cluster.local";
/// kubeadm's default directory of the cluster's certificates on each control-plane node.
pub const DEFAULT_CERTIFICATES_DIR: &str = "/etc/kubernetes/pki";
/// kubeadm's default secure port of the API server.
pub const DEFAULT_BIND_PORT: u16 = 6443;
/// kubeadm's default cluster name.
pub const DEFAULT_CLUSTER_NAME: &str = "kubernetes";
/// kubeadm's default data directory of a local (stacked) etcd.
pub const DEFAULT_ETCD_DATA_DIR: &str = "/var/lib/etcd";
/// kubeadm's default time a control-plane component has to become healthy (4 minutes); it
/// sizes the startup probes.
pub const DEFAULT_HEALTH_CHECK_TIMEOUT_SECONDS: u64 = 240;
/// Data key of the `kube-system/kubeadm-config` ConfigMap that holds the ClusterConfiguration.
pub const CONFIGMAP_KEY: &str = "ClusterConfiguration";
/// Name of the ConfigMap in `kube-system` where kubeadm stores the ClusterConfiguration.
pub const CONFIGMAP_NAME: &str = "kubeadm-config";

/// The kubeadm configuration API version a document was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum ApiVersion {
    /// `kubeadm.k8s.io/v1beta3` (kubeadm 1.22 and later): `extraArgs` is a map.
    #[serde(rename = "kubeadm.k8s.io/v1beta3")]
    V1Beta3,
    /// `kubeadm.k8s.io/v1beta4` (kubeadm 1.31 and later): `extraArgs` is a name/value list.
    #[serde(rename = "kubeadm.k8s.io/v1beta4")]
    V1Beta4,
}

impl ApiVersion {
    /// The `apiVersion` string, e.g. `kubeadm.k8s.io/v1beta4`.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiVersion::V1Beta3 => ACCEPTED_API_VERSIONS[0],
            ApiVersion::V1Beta4 => ACCEPTED_API_VERSIONS[1],
        }
    }
}

impl fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One command-line flag a user adds to a component, without the leading dashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExtraArg {
    /// Flag name, e.g. `audit-log-path`.
    pub name: String,
    /// Flag value; may be empty.
    pub value: String,
}

impl ExtraArg {
    /// An argument from its name and value.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Self {
        ExtraArg {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// A directory or file of the host mounted into a component (`extraVolumes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HostPathMount {
    /// Volume name in the pod (a DNS label).
    pub name: String,
    /// Absolute path on the node.
    pub host_path: String,
    /// Absolute path in the container.
    pub mount_path: String,
    /// Whether the container may only read it.
    pub read_only: bool,
    /// Kubernetes `hostPath.type` (e.g. `DirectoryOrCreate`); `None` means no check.
    pub path_type: Option<String>,
}

/// What the user configured for one control-plane component.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ComponentConfig {
    /// Flags that override or add to kubeadm's defaults. From v1beta3 (a map) they are sorted
    /// by name; from v1beta4 (a list, where a name may repeat) they keep the file's order.
    pub extra_args: Vec<ExtraArg>,
    /// Host paths mounted in addition to kubeadm's (a same-named one replaces kubeadm's).
    pub extra_volumes: Vec<HostPathMount>,
    /// Environment variables (v1beta4 `extraEnvs`).
    pub extra_envs: Vec<EnvVar>,
}

impl ComponentConfig {
    /// The value the component would honour for `--name`: the last one given, as Go's flag
    /// package keeps the last occurrence.
    pub fn extra_arg(&self, name: &str) -> Option<&str> {
        self.extra_args
            .iter()
            .rev()
            .find(|a| a.name == name)
            .map(|a| a.value.as_str())
    }
}

/// The cluster's networks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Networking {
    /// Service CIDR(s), comma-separated when dual-stack.
    pub service_subnet: String,
    /// Pod CIDR(s), comma-separated when dual-stack; `None` lets the network plugin decide.
    pub pod_subnet: Option<String>,
    /// Cluster DNS domain.
    pub dns_domain: String,
}

/// Where the API server finds etcd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Etcd {
    /// kubeadm's stacked etcd on each control-plane node, reached on localhost with kubeadm's
    /// client certificates under the certificates directory.
    Local {
        /// etcd's data directory.
        #[serde(rename = "dataDir")]
        data_dir: String,
        /// etcd's extra flags; `advertise-client-urls` also becomes the API server's
        /// `--etcd-servers`, as kubeadm does.
        #[serde(rename = "extraArgs")]
        extra_args: Vec<ExtraArg>,
    },
    /// An etcd cluster kubeadm does not manage.
    External {
        /// Client URLs of the members.
        endpoints: Vec<String>,
        /// CA bundle to verify etcd's serving certificates.
        #[serde(rename = "caFile")]
        ca_file: Option<String>,
        /// Client certificate.
        #[serde(rename = "certFile")]
        cert_file: Option<String>,
        /// Client key.
        #[serde(rename = "keyFile")]
        key_file: Option<String>,
    },
}

/// The API server endpoint of one control-plane node (InitConfiguration `localAPIEndpoint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LocalApiEndpoint {
    /// The IP the API server advertises; `None` when the file does not say (or says
    /// `0.0.0.0`/`::`, which kubeadm replaces with the node's address).
    pub advertise_address: Option<IpAddr>,
    /// The API server's secure port.
    pub bind_port: u16,
}

/// kubeadm's cluster configuration, normalised from either API version and defaulted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterConfig {
    /// The version the file names, if any (the version to render is chosen by the caller).
    #[serde(serialize_with = "serialize_version")]
    pub kubernetes_version: Option<KubeVersion>,
    /// Stable address of the API (`host` or `host:port`), used by kubeconfigs, not by the pods.
    pub control_plane_endpoint: Option<String>,
    /// Registry the component images come from.
    pub image_repository: String,
    /// The cluster's networks.
    pub networking: Networking,
    /// Directory of the cluster certificates on the nodes.
    pub certificates_dir: String,
    /// Where etcd is.
    pub etcd: Etcd,
    /// kube-apiserver settings.
    pub api_server: ComponentConfig,
    /// Extra names for the API server's certificate (accepted, not used to render pods).
    pub api_server_cert_sans: Vec<String>,
    /// kube-controller-manager settings.
    pub controller_manager: ComponentConfig,
    /// kube-scheduler settings.
    pub scheduler: ComponentConfig,
    /// kubeadm's own feature gates (not passed to the components).
    pub feature_gates: BTreeMap<String, bool>,
    /// The cluster's name (`--cluster-name` of the controller-manager).
    pub cluster_name: String,
    /// This node's API endpoint, from an InitConfiguration when one was given.
    pub local_api_endpoint: LocalApiEndpoint,
    /// This node's name, from an InitConfiguration's `nodeRegistration.name`.
    pub node_name: Option<String>,
    /// How long a component may take to become healthy; sizes the startup probes.
    pub health_check_timeout_seconds: u64,
}

fn serialize_version<S: serde::Serializer>(
    version: &Option<KubeVersion>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match version {
        Some(v) => serializer.collect_str(v),
        None => serializer.serialize_none(),
    }
}

/// Something in the input that was accepted but has no effect on what selfhost renders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "notice", rename_all = "camelCase")]
pub enum Notice {
    /// A document of another kind (KubeletConfiguration, KubeProxyConfiguration,
    /// JoinConfiguration, ...) was skipped.
    IgnoredDocument {
        /// 1-based index of the document in the stream.
        document: usize,
        /// Line where it starts.
        line: usize,
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
    },
    /// A kubeadm feature gate that changes kubeadm's manifests in a way selfhost does not
    /// reproduce.
    FeatureGateNotRendered {
        /// The gate, e.g. `RootlessControlPlane`.
        gate: String,
    },
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::IgnoredDocument {
                document,
                line,
                api_version,
                kind,
            } => write!(
                f,
                "document {document} (line {line}, {kind} {api_version}) ignored: only ClusterConfiguration and InitConfiguration shape the control plane"
            ),
            Notice::FeatureGateNotRendered { gate } => write!(
                f,
                "kubeadm feature gate {gate} is enabled, but selfhost renders the manifests without it"
            ),
        }
    }
}

/// The result of reading a configuration: the model, the API version it was written in, and
/// what was accepted but ignored.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ParsedConfig {
    /// The normalised, defaulted configuration.
    pub config: ClusterConfig,
    /// The API version of the ClusterConfiguration (or of the InitConfiguration when the file
    /// has no ClusterConfiguration).
    pub api_version: ApiVersion,
    /// Documents and settings that were accepted but have no effect.
    pub notices: Vec<Notice>,
}

impl ClusterConfig {
    /// Reads a kubeadm configuration file's text: one or more YAML documents, of which one
    /// ClusterConfiguration and/or one InitConfiguration are used and other kinds (kubelet,
    /// kube-proxy, join, ...) are skipped with a [`Notice`].
    pub fn from_yaml(text: &str) -> Result<ParsedConfig, ConfigError> {
        document::parse_stream(text)
    }

    /// Reads the `ClusterConfiguration` data key of the `kube-system/kubeadm-config`
    /// ConfigMap, which holds exactly one ClusterConfiguration document.
    pub fn from_configmap_data(text: &str) -> Result<ParsedConfig, ConfigError> {
        document::parse_configmap(text)
    }

    /// kubeadm's defaults, for clusters that have no configuration to read.
    pub fn default_for(version: &KubeVersion) -> ClusterConfig {
        ClusterConfig {
            kubernetes_version: Some(version.clone()),
            ..ClusterConfig::kubeadm_defaults()
        }
    }

    /// kubeadm's defaults with no version: the base every parsed file is laid over.
    fn kubeadm_defaults() -> ClusterConfig {
        ClusterConfig {
            kubernetes_version: None,
            control_plane_endpoint: None,
            image_repository: DEFAULT_IMAGE_REPOSITORY.to_string(),
            networking: Networking {
                service_subnet: DEFAULT_SERVICE_SUBNET.to_string(),
                pod_subnet: None,
                dns_domain: DEFAULT_DNS_DOMAIN.to_string(),
            },
            certificates_dir: DEFAULT_CERTIFICATES_DIR.to_string(),
            etcd: Etcd::Local {
                data_dir: DEFAULT_ETCD_DATA_DIR.to_string(),
                extra_args: Vec::new(),
            },
            api_server: ComponentConfig::default(),
            api_server_cert_sans: Vec::new(),
            controller_manager: ComponentConfig::default(),
            scheduler: ComponentConfig::default(),
            feature_gates: BTreeMap::new(),
            cluster_name: DEFAULT_CLUSTER_NAME.to_string(),
            local_api_endpoint: LocalApiEndpoint {
                advertise_address: None,
                bind_port: DEFAULT_BIND_PORT,
            },
            node_name: None,
            health_check_timeout_seconds: DEFAULT_HEALTH_CHECK_TIMEOUT_SECONDS,
        }
    }

    /// The settings of one component.
    pub fn component(&self, component: Component) -> &ComponentConfig {
        match component {
            Component::ApiServer => &self.api_server,
            Component::ControllerManager => &self.controller_manager,
            Component::Scheduler => &self.scheduler,
        }
    }
}
