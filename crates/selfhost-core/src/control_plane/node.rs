//! What a node contributes to its control-plane pods: the facts kubeadm reads from the host
//! when it writes static pods, supplied by the caller instead.

use std::fmt;
use std::net::IpAddr;

use crate::config::ClusterConfig;

/// Environment variable that carries the node's IP (downward API `status.hostIP`) when the
/// advertise address is not known in advance.
pub const HOST_IP_ENV: &str = "HOST_IP";

/// Every CA trust directory kubeadm mounts when it exists on the host (files in
/// `/etc/ssl/certs` often link into them).
pub const KUBEADM_CA_TRUST_DIRS: [&str; 5] = [
    "/etc/pki/ca-trust",
    "/etc/pki/tls/certs",
    "/etc/ca-certificates",
    "/usr/share/ca-certificates",
    "/usr/local/share/ca-certificates",
];

/// The CA trust directories kubeadm finds on Debian and Ubuntu hosts, the most common
/// kubeadm hosts: the default of [`NodeContext::ca_trust_dirs`].
pub const DEFAULT_CA_TRUST_DIRS: [&str; 3] = [
    "/etc/ca-certificates",
    "/usr/share/ca-certificates",
    "/usr/local/share/ca-certificates",
];

/// What selfhost would otherwise have to look up on the node: the facts kubeadm reads from the
/// host when it writes static pods. The caller supplies them; nothing here reads the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeContext {
    /// The node's IP for the API server to advertise. When set it wins over the
    /// configuration's `localAPIEndpoint.advertiseAddress` (which describes only the node
    /// `kubeadm init` ran on). When neither is known the pod advertises `$(HOST_IP)`, filled
    /// in by the kubelet from the downward API.
    pub advertise_address: Option<IpAddr>,
    /// CA trust directories of the host to mount into the API server and controller-manager
    /// (kubeadm mounts those of [`KUBEADM_CA_TRUST_DIRS`] that exist). Defaults to
    /// [`DEFAULT_CA_TRUST_DIRS`]; pass the set the live manifests mount to render them
    /// unchanged.
    pub ca_trust_dirs: Vec<String>,
    /// Whether the cluster CA's private key is kept off the nodes (kubeadm's "external CA"
    /// mode); the controller-manager then gets empty signing files, as kubeadm does.
    pub external_ca: bool,
}

impl Default for NodeContext {
    fn default() -> Self {
        NodeContext {
            advertise_address: None,
            ca_trust_dirs: DEFAULT_CA_TRUST_DIRS.map(String::from).to_vec(),
            external_ca: false,
        }
    }
}

impl NodeContext {
    /// The context of a node with this IP, otherwise defaulted.
    pub fn for_node(ip: IpAddr) -> Self {
        NodeContext {
            advertise_address: Some(ip),
            ..NodeContext::default()
        }
    }

    /// The address the API server advertises on this node: ours, else the configuration's,
    /// else the node's IP from the downward API.
    pub fn advertise_address(&self, config: &ClusterConfig) -> AdvertiseAddress {
        let known = |ip: &IpAddr| !ip.is_unspecified();
        self.advertise_address
            .filter(known)
            .or(config.local_api_endpoint.advertise_address.filter(known))
            .map_or(AdvertiseAddress::HostIp, AdvertiseAddress::Ip)
    }
}

/// The address an API server advertises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvertiseAddress {
    /// A known IP.
    Ip(IpAddr),
    /// `$(HOST_IP)`: the node's IP, expanded by the kubelet from the [`HOST_IP_ENV`] variable.
    HostIp,
}

impl fmt::Display for AdvertiseAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AdvertiseAddress::Ip(ip) => write!(f, "{ip}"),
            AdvertiseAddress::HostIp => write!(f, "$({HOST_IP_ENV})"),
        }
    }
}
