//! Where a component's process takes connections on its own node, read from its pod's flags:
//! the checkpointer asks there whether the component still runs on the node before it starts
//! a copy, since an unreachable API (a load balancer's outage, a partition) does not mean
//! that nothing runs here.

use k8s_openapi::api::core::v1::{Container, PodSpec};

use crate::command_line::flag_value;
use crate::component::Component;

/// A host and port on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalEndpoint {
    /// An address of the node (a loopback one when the process binds every address).
    pub host: String,
    /// The component's secure port.
    pub port: u16,
}

impl std::fmt::Display for LocalEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// The secure port each component listens on without `--secure-port`.
fn default_port(component: Component) -> u16 {
    match component {
        Component::ApiServer => 6443,
        Component::ControllerManager => 10257,
        Component::Scheduler => 10259,
    }
}

/// Where `component`, run from `spec`, takes connections on its node: `--bind-address` (a
/// wildcard address read as the loopback one of its family) and `--secure-port` (its default
/// when absent), with `$(NAME)` references expanded as the kubelet expands them — `host_ip`
/// standing for the node's IP, which a self-hosted template binds to as `$(HOST_IP)`. `None`
/// when the secure port is off (`0`) or not a port, or an address cannot be expanded.
pub fn local_endpoint(
    component: Component,
    spec: &PodSpec,
    host_ip: Option<&str>,
) -> Option<LocalEndpoint> {
    let container = spec.containers.first()?;
    let mut line = container.command.clone().unwrap_or_default();
    line.extend(container.args.clone().unwrap_or_default());
    let port = match flag_value(&line, "secure-port") {
        None => default_port(component),
        Some(text) => expand(text, container, host_ip)?
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)?,
    };
    let host = match flag_value(&line, "bind-address").map(|a| expand(a, container, host_ip)) {
        None => "127.0.0.1".to_string(),
        Some(None) => return None,
        Some(Some(address)) => match address.as_str() {
            "" | "0.0.0.0" => "127.0.0.1".to_string(),
            "::" | "[::]" => "::1".to_string(),
            _ => address.trim_matches(['[', ']']).to_string(),
        },
    };
    Some(LocalEndpoint { host, port })
}

/// `value` with each `$(NAME)` replaced by the container's variable `NAME`: its literal value,
/// or, from the downward API, the node's IP (`status.hostIP`, and `status.podIP`, the same for
/// a host-network pod). `None` when a reference cannot be expanded.
fn expand(value: &str, container: &Container, host_ip: Option<&str>) -> Option<String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("$(") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find(')')?;
        let name = &after[..end];
        let var = container.env.iter().flatten().find(|v| v.name == name)?;
        let resolved = match (&var.value, &var.value_from) {
            (Some(literal), _) => literal.clone(),
            (None, Some(source)) => match source.field_ref.as_ref()?.field_path.as_str() {
                "status.hostIP" | "status.podIP" => host_ip?.to_string(),
                _ => return None,
            },
            (None, None) => String::new(),
        };
        out.push_str(&resolved);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};

    use super::*;

    fn spec(command: &[&str], args: &[&str]) -> PodSpec {
        PodSpec {
            containers: vec![Container {
                name: "c".into(),
                command: Some(command.iter().map(|s| s.to_string()).collect()),
                args: (!args.is_empty()).then(|| args.iter().map(|s| s.to_string()).collect()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }
    }

    #[test]
    fn endpoints_from_flags() {
        use Component::{ApiServer, ControllerManager, Scheduler};
        let rows: Vec<(&str, Component, PodSpec, Option<&str>)> = vec![
            (
                "kubeadm's kube-apiserver binds every address: probed on loopback",
                ApiServer,
                spec(
                    &[
                        "kube-apiserver",
                        "--advertise-address=10.0.0.5",
                        "--secure-port=6443",
                    ],
                    &[],
                ),
                Some("127.0.0.1:6443"),
            ),
            (
                "no --secure-port: the component's default",
                ControllerManager,
                spec(
                    &["kube-controller-manager", "--bind-address=127.0.0.1"],
                    &[],
                ),
                Some("127.0.0.1:10257"),
            ),
            (
                "bound to the node's own address",
                Scheduler,
                spec(&["kube-scheduler", "--bind-address=127.0.1.2"], &[]),
                Some("127.0.1.2:10259"),
            ),
            (
                "flags in args, the last one wins, as for the binary",
                ApiServer,
                spec(
                    &["kube-apiserver"],
                    &["--secure-port=6443", "--secure-port=8443"],
                ),
                Some("127.0.0.1:8443"),
            ),
            (
                "an IPv6 wildcard: IPv6 loopback",
                ApiServer,
                spec(&["kube-apiserver", "--bind-address=::"], &[]),
                Some("[::1]:6443"),
            ),
            (
                "an IPv6 address",
                ApiServer,
                spec(&["kube-apiserver", "--bind-address=fd00::5"], &[]),
                Some("[fd00::5]:6443"),
            ),
            (
                "the secure port off: nothing to ask",
                ControllerManager,
                spec(&["kube-controller-manager", "--secure-port=0"], &[]),
                None,
            ),
            (
                "a port that is not one: nothing to ask",
                Scheduler,
                spec(&["kube-scheduler", "--secure-port=http"], &[]),
                None,
            ),
        ];
        for (case, component, spec, expected) in rows {
            let found = local_endpoint(component, &spec, None).map(|e| e.to_string());
            assert_eq!(found.as_deref(), expected, "{case}");
        }
    }

    /// A self-hosted template's container: `HOST_IP` from the downward API, `PORT` literal.
    fn self_hosted(flags: &[&str]) -> PodSpec {
        let mut spec = spec(flags, &[]);
        spec.containers[0].env = Some(vec![
            EnvVar {
                name: "HOST_IP".into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "status.hostIP".into(),
                        api_version: Some("v1".into()),
                    }),
                    ..EnvVarSource::default()
                }),
                value: None,
            },
            EnvVar {
                name: "PORT".into(),
                value: Some("10300".into()),
                value_from: None,
            },
        ]);
        spec
    }

    #[test]
    fn references_are_expanded_as_the_kubelet_expands_them() {
        use Component::{ControllerManager, Scheduler};
        let rows: Vec<(&str, PodSpec, Option<&str>, Option<&str>)> = vec![
            (
                "bound to $(HOST_IP): the node's IP kept with the checkpoint",
                self_hosted(&["kube-scheduler", "--bind-address=$(HOST_IP)"]),
                Some("127.0.1.2"),
                Some("127.0.1.2:10259"),
            ),
            (
                "a literal variable in the port",
                self_hosted(&["kube-scheduler", "--secure-port=$(PORT)"]),
                Some("127.0.1.2"),
                Some("127.0.0.1:10300"),
            ),
            (
                "the node's IP unknown: nothing to ask rather than a wrong address",
                self_hosted(&["kube-scheduler", "--bind-address=$(HOST_IP)"]),
                None,
                None,
            ),
            (
                "a variable the container does not have",
                self_hosted(&["kube-scheduler", "--bind-address=$(NODE_IP)"]),
                Some("127.0.1.2"),
                None,
            ),
        ];
        for (case, spec, host_ip, expected) in rows {
            let found = local_endpoint(Scheduler, &spec, host_ip).map(|e| e.to_string());
            assert_eq!(found.as_deref(), expected, "{case}");
        }
        let kcm = self_hosted(&["kube-controller-manager", "--bind-address=$(HOST_IP)"]);
        assert_eq!(
            local_endpoint(ControllerManager, &kcm, Some("10.0.0.7")).map(|e| e.to_string()),
            Some("10.0.0.7:10257".to_string())
        );
    }

    #[test]
    fn a_pod_without_containers_has_no_endpoint() {
        assert_eq!(
            local_endpoint(Component::ApiServer, &PodSpec::default(), None),
            None
        );
    }
}
