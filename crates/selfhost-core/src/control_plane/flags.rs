//! Command lines of the control-plane components, as current kubeadm (v1.31–v1.33) builds them,
//! plus `--permit-port-sharing`.
//!
//! Determinism is the point: defaults are overridden by extra arguments of the same name and
//! the result is sorted by flag name, so rendering the same configuration twice (or from a
//! v1beta3 map in any order) yields the same command and never triggers a rollout by itself.

use std::collections::BTreeSet;

use crate::component::Component;
use crate::config::{ClusterConfig, ComponentConfig, Etcd, ExtraArg};
use crate::version::KubeVersion;

use super::node::{AdvertiseAddress, NodeContext};

/// kubeadm's configuration directory on every control-plane node.
pub const KUBERNETES_DIR: &str = "/etc/kubernetes";
/// kubeconfig of the controller-manager, mounted from the host.
pub const CONTROLLER_MANAGER_KUBECONFIG: &str = "/etc/kubernetes/controller-manager.conf";
/// kubeconfig of the scheduler, mounted from the host.
pub const SCHEDULER_KUBECONFIG: &str = "/etc/kubernetes/scheduler.conf";

/// Our one addition to kubeadm's flags.
///
/// During the pivot the backup DaemonSet's pod and the real DaemonSet's pod run side by side
/// on the same node with `hostNetwork`, listening on the same host port. Without
/// `SO_REUSEPORT` the newcomer fails to bind and crash-loops until the other one is gone —
/// exactly the downtime the pivot exists to avoid. `--permit-port-sharing=true` makes all
/// three components open their secure port with `SO_REUSEPORT`, so both processes can serve
/// during the hand-over. The flag exists since Kubernetes 1.19 (kubernetes/kubernetes#88893).
pub const PERMIT_PORT_SHARING: &str = "permit-port-sharing";

/// First Kubernetes minor version (of 1.x) whose components know `--permit-port-sharing`.
pub const PORT_SHARING_SINCE_MINOR: u64 = 19;

/// kubeadm's default authorization modes of the API server.
const DEFAULT_AUTHORIZATION_MODES: &str = "Node,RBAC";

fn cert(config: &ClusterConfig, file: &str) -> String {
    format!("{}/{file}", config.certificates_dir)
}

/// Whether the control plane talks IPv6 on loopback (kubeadm follows the advertise address;
/// without one, the primary Service family is the best sign of the cluster's family).
fn ipv6_primary(config: &ClusterConfig, advertise: &AdvertiseAddress) -> bool {
    match advertise {
        AdvertiseAddress::Ip(ip) => ip.is_ipv6(),
        AdvertiseAddress::HostIp => config
            .networking
            .service_subnet
            .split(',')
            .next()
            .is_some_and(|cidr| cidr.contains(':')),
    }
}

/// Whether the control-plane components of `version` know `--permit-port-sharing`.
pub fn supports_port_sharing(version: &KubeVersion) -> bool {
    version.major() > 1 || version.minor() >= PORT_SHARING_SINCE_MINOR
}

/// kube-apiserver's flag answering requests that arrive during its shutdown with 429 and
/// `Retry-After`, so clients retry elsewhere.
pub const SHUTDOWN_SEND_RETRY_AFTER: &str = "shutdown-send-retry-after";

/// First Kubernetes minor version (of 1.x) whose kube-apiserver knows
/// `--shutdown-send-retry-after`; an older one refuses to start with it ("unknown flag").
pub const SEND_RETRY_AFTER_SINCE_MINOR: u64 = 22;

/// Whether the kube-apiserver of `version` knows `--shutdown-send-retry-after`.
pub fn supports_send_retry_after(version: &KubeVersion) -> bool {
    version.major() > 1 || version.minor() >= SEND_RETRY_AFTER_SINCE_MINOR
}

/// kubeadm's default flags for `component`, as `(name, value)` with unique names.
fn defaults(
    component: Component,
    config: &ClusterConfig,
    node: &NodeContext,
    version: &KubeVersion,
) -> Vec<(&'static str, String)> {
    let mut flags = match component {
        Component::ApiServer => api_server_defaults(config, node),
        Component::ControllerManager => controller_manager_defaults(config, node),
        Component::Scheduler => vec![
            (
                "authentication-kubeconfig",
                SCHEDULER_KUBECONFIG.to_string(),
            ),
            ("authorization-kubeconfig", SCHEDULER_KUBECONFIG.to_string()),
            ("bind-address", "127.0.0.1".to_string()),
            ("kubeconfig", SCHEDULER_KUBECONFIG.to_string()),
            ("leader-elect", "true".to_string()),
        ],
    };
    if supports_port_sharing(version) {
        flags.push((PERMIT_PORT_SHARING, "true".to_string()));
    }
    flags
}

fn api_server_defaults(config: &ClusterConfig, node: &NodeContext) -> Vec<(&'static str, String)> {
    let advertise = node.advertise_address(config);
    let mut flags = vec![
        ("advertise-address", advertise.to_string()),
        ("allow-privileged", "true".to_string()),
        ("client-ca-file", cert(config, "ca.crt")),
        ("enable-admission-plugins", "NodeRestriction".to_string()),
        ("enable-bootstrap-token-auth", "true".to_string()),
        (
            "kubelet-client-certificate",
            cert(config, "apiserver-kubelet-client.crt"),
        ),
        (
            "kubelet-client-key",
            cert(config, "apiserver-kubelet-client.key"),
        ),
        (
            "kubelet-preferred-address-types",
            "InternalIP,ExternalIP,Hostname".to_string(),
        ),
        (
            "proxy-client-cert-file",
            cert(config, "front-proxy-client.crt"),
        ),
        (
            "proxy-client-key-file",
            cert(config, "front-proxy-client.key"),
        ),
        (
            "requestheader-allowed-names",
            "front-proxy-client".to_string(),
        ),
        (
            "requestheader-client-ca-file",
            cert(config, "front-proxy-ca.crt"),
        ),
        (
            "requestheader-extra-headers-prefix",
            "X-Remote-Extra-".to_string(),
        ),
        ("requestheader-group-headers", "X-Remote-Group".to_string()),
        (
            "requestheader-username-headers",
            "X-Remote-User".to_string(),
        ),
        (
            "secure-port",
            config.local_api_endpoint.bind_port.to_string(),
        ),
        (
            "service-account-issuer",
            format!(
                "https://kubernetes.default.svc.{}",
                config.networking.dns_domain
            ),
        ),
        ("service-account-key-file", cert(config, "sa.pub")),
        ("service-account-signing-key-file", cert(config, "sa.key")),
        (
            "service-cluster-ip-range",
            config.networking.service_subnet.clone(),
        ),
        ("tls-cert-file", cert(config, "apiserver.crt")),
        ("tls-private-key-file", cert(config, "apiserver.key")),
    ];
    match &config.etcd {
        Etcd::External {
            endpoints,
            ca_file,
            cert_file,
            key_file,
        } => {
            flags.push(("etcd-servers", endpoints.join(",")));
            if let Some(ca) = ca_file {
                flags.push(("etcd-cafile", ca.clone()));
            }
            // kubeadm passes the client pair only when both halves are given.
            if let (Some(cert_file), Some(key_file)) = (cert_file, key_file) {
                flags.push(("etcd-certfile", cert_file.clone()));
                flags.push(("etcd-keyfile", key_file.clone()));
            }
        }
        Etcd::Local { extra_args, .. } => {
            let loopback = if ipv6_primary(config, &advertise) {
                "[::1]"
            } else {
                "127.0.0.1"
            };
            // etcd's own advertised client URLs win, as in kubeadm.
            let servers = last_value(extra_args, "advertise-client-urls")
                .map_or_else(|| format!("https://{loopback}:2379"), str::to_string);
            flags.push(("etcd-servers", servers));
            flags.push(("etcd-cafile", cert(config, "etcd/ca.crt")));
            flags.push(("etcd-certfile", cert(config, "apiserver-etcd-client.crt")));
            flags.push(("etcd-keyfile", cert(config, "apiserver-etcd-client.key")));
        }
    }
    // Structured authorization configuration replaces the modes flag altogether.
    if config
        .api_server
        .extra_arg("authorization-config")
        .is_none()
    {
        flags.push((
            "authorization-mode",
            DEFAULT_AUTHORIZATION_MODES.to_string(),
        ));
    }
    flags
}

fn controller_manager_defaults(
    config: &ClusterConfig,
    node: &NodeContext,
) -> Vec<(&'static str, String)> {
    let kubeconfig = CONTROLLER_MANAGER_KUBECONFIG.to_string();
    // With an external CA there is no ca.key on the node; kubeadm then passes empty signing
    // files so that the CSR signer stays off instead of failing.
    let (signing_cert, signing_key) = if node.external_ca {
        (String::new(), String::new())
    } else {
        (cert(config, "ca.crt"), cert(config, "ca.key"))
    };
    let mut flags = vec![
        ("authentication-kubeconfig", kubeconfig.clone()),
        ("authorization-kubeconfig", kubeconfig.clone()),
        ("bind-address", "127.0.0.1".to_string()),
        ("client-ca-file", cert(config, "ca.crt")),
        ("cluster-name", config.cluster_name.clone()),
        ("cluster-signing-cert-file", signing_cert),
        ("cluster-signing-key-file", signing_key),
        ("controllers", "*,bootstrapsigner,tokencleaner".to_string()),
        ("kubeconfig", kubeconfig),
        ("leader-elect", "true".to_string()),
        (
            "requestheader-client-ca-file",
            cert(config, "front-proxy-ca.crt"),
        ),
        ("root-ca-file", cert(config, "ca.crt")),
        ("service-account-private-key-file", cert(config, "sa.key")),
        ("use-service-account-credentials", "true".to_string()),
    ];
    if let Some(pod_subnet) = &config.networking.pod_subnet {
        flags.push(("allocate-node-cidrs", "true".to_string()));
        flags.push(("cluster-cidr", pod_subnet.clone()));
        flags.push((
            "service-cluster-ip-range",
            config.networking.service_subnet.clone(),
        ));
    }
    flags
}

fn last_value<'a>(args: &'a [ExtraArg], name: &str) -> Option<&'a str> {
    args.iter()
        .rev()
        .find(|a| a.name == name)
        .map(|a| a.value.as_str())
}

/// Merges defaults and extra arguments into sorted `--name=value` flags.
///
/// An extra argument replaces every default of the same name. Repeated extra names (allowed in
/// v1beta4) are all kept in the order the user gave them: the sort is stable and by name only.
/// (kubeadm sorts repeated names by value; their order can matter to the component, so we keep
/// the user's.)
pub(super) fn merge(defaults: Vec<(&'static str, String)>, extra: &[ExtraArg]) -> Vec<String> {
    let overridden: BTreeSet<&str> = extra.iter().map(|a| a.name.as_str()).collect();
    let mut flags: Vec<(&str, &str)> = extra
        .iter()
        .map(|a| (a.name.as_str(), a.value.as_str()))
        .chain(
            defaults
                .iter()
                .filter(|(name, _)| !overridden.contains(name))
                .map(|(name, value)| (*name, value.as_str())),
        )
        .collect();
    flags.sort_by_key(|(name, _)| *name);
    flags
        .into_iter()
        .map(|(name, value)| format!("--{name}={value}"))
        .collect()
}

/// The full command of `component`: its binary, then its sorted flags.
pub fn command(
    component: Component,
    config: &ClusterConfig,
    node: &NodeContext,
    version: &KubeVersion,
) -> Vec<String> {
    let settings: &ComponentConfig = config.component(component);
    std::iter::once(component.name().to_string())
        .chain(merge(
            defaults(component, config, node, version),
            &settings.extra_args,
        ))
        .collect()
}
