//! Host ports: which ports a container's process binds on its node, and whether it lets
//! others bind them too (`port_table` keeps the node's table of who holds what).
//!
//! A hostNetwork control-plane process binds the port its flags name (`--secure-port`, by
//! default 6443 for kube-apiserver, 10257 for kube-controller-manager, 10259 for
//! kube-scheduler) plus any declared `hostPort`, on the address its `--bind-address` names
//! (every address when it names none), and shares them (SO_REUSEPORT) when it runs with
//! `--permit-port-sharing=true`. A node-local API front (`selfhost front`) binds its
//! `--listen` address and always shares it.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::front_command::FrontCommand;
use super::images::ImageRef;

/// A transport protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    fn parse(s: Option<&str>) -> Self {
        match s {
            Some("UDP") => Protocol::Udp,
            Some("SCTP") => Protocol::Sctp,
            _ => Protocol::Tcp,
        }
    }

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

/// One port on the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostPort {
    /// Its protocol.
    pub protocol: Protocol,
    /// Its number.
    pub port: u16,
}

impl HostPort {
    /// A TCP port.
    pub fn tcp(port: u16) -> Self {
        HostPort {
            protocol: Protocol::Tcp,
            port,
        }
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} 0.0.0.0:{}", self.protocol.as_str(), self.port)
    }
}

/// The ports a process will bind, the address it binds them on, and whether it sets
/// SO_REUSEPORT.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortClaim {
    /// Ports, sorted, without duplicates.
    pub ports: Vec<HostPort>,
    /// `--permit-port-sharing=true` (a front: always).
    pub permit_sharing: bool,
    /// The one address it binds them on (`--bind-address`, a front's `--listen`); `None`:
    /// the wildcard, every address of the node (no such flag, or `0.0.0.0`, `::`).
    pub address: Option<IpAddr>,
}

/// How Go's net package writes a listening address in its errors: `0.0.0.0:6443` for the
/// wildcard, `127.0.0.1:6443`, `[fd00::1]:6443`.
pub fn listen_text(address: Option<IpAddr>, port: u16) -> String {
    match address {
        Some(ip) => SocketAddr::new(ip, port).to_string(),
        None => format!("0.0.0.0:{port}"),
    }
}

/// The secure port a control-plane binary listens on when its flags do not say.
pub fn default_secure_port(binary: &str) -> Option<u16> {
    match binary {
        "kube-apiserver" => Some(6443),
        "kube-controller-manager" => Some(10257),
        "kube-scheduler" => Some(10259),
        _ => None,
    }
}

/// The binary a container runs: the base name of `command[0]`, else the image's name.
pub fn binary_name(container: &Container) -> Option<String> {
    if let Some(first) = container.command.as_deref().and_then(|c| c.first()) {
        return first.rsplit('/').next().map(str::to_string);
    }
    let image = container.image.as_deref()?;
    ImageRef::parse(image).ok().map(|r| r.name().to_string())
}

fn command_line(container: &Container) -> Vec<&String> {
    container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .collect()
}

/// The value of `--name=value` or `--name value` in the container's command and args. The
/// last occurrence wins, as with pflag.
pub fn flag_value(container: &Container, name: &str) -> Option<String> {
    let words = command_line(container);
    let long = format!("--{name}");
    let mut value = None;
    for (i, word) in words.iter().enumerate() {
        if let Some(v) = word
            .strip_prefix(&long)
            .and_then(|rest| rest.strip_prefix('='))
        {
            value = Some(v.to_string());
        } else if **word == long {
            value = words.get(i + 1).map(|next| (*next).clone());
        }
    }
    value
}

/// A boolean flag: `--name` or `--name=true` is true, `--name=false` false; a bool flag never
/// takes the next word as its value.
pub fn bool_flag(container: &Container, name: &str) -> Option<bool> {
    let long = format!("--{name}");
    let mut value = None;
    for word in command_line(container) {
        if *word == long {
            value = Some(true);
        } else if let Some(v) = word
            .strip_prefix(&long)
            .and_then(|rest| rest.strip_prefix('='))
        {
            value = Some(matches!(v, "true" | "1" | "t" | "T" | "TRUE" | "True"));
        }
    }
    value
}

/// A specific address, or `None` for the wildcard.
fn specific(address: IpAddr) -> Option<IpAddr> {
    (!address.is_unspecified()).then_some(address)
}

/// The ports the container's process binds on the node (only hostNetwork pods bind host
/// ports themselves; a `hostPort` of a pod-network container is the scheduler's concern).
///
/// A control-plane binary binds them on its `--bind-address` (a literal address; anything
/// else counts as the wildcard); a front binds its `--listen` address and sets SO_REUSEPORT.
pub fn port_claim(spec: &PodSpec, container: &Container) -> PortClaim {
    if spec.host_network != Some(true) {
        return PortClaim::default();
    }
    let mut ports = Vec::new();
    let mut address = None;
    let front = FrontCommand::of(container);
    if let Some(front) = &front {
        ports.push(HostPort::tcp(front.listen.port()));
        address = specific(front.listen.ip());
    } else if let Some(binary) = binary_name(container)
        && let Some(default) = default_secure_port(&binary)
    {
        address = flag_value(container, "bind-address")
            .and_then(|v| v.parse::<IpAddr>().ok())
            .and_then(specific);
        let port = match flag_value(container, "secure-port") {
            Some(v) => v.parse::<u16>().unwrap_or(default),
            None => default,
        };
        // `--secure-port=0` turns serving off.
        if port != 0 {
            ports.push(HostPort::tcp(port));
        }
    }
    for declared in container.ports.iter().flatten() {
        let number = declared
            .host_port
            .filter(|p| *p > 0)
            .unwrap_or(declared.container_port);
        if let Ok(port) = u16::try_from(number)
            && port > 0
        {
            ports.push(HostPort {
                protocol: Protocol::parse(declared.protocol.as_deref()),
                port,
            });
        }
    }
    ports.sort();
    ports.dedup();
    PortClaim {
        ports,
        // The front always sets SO_REUSEPORT on its socket.
        permit_sharing: front.is_some()
            || bool_flag(container, "permit-port-sharing") == Some(true),
        address,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ContainerPort;

    fn container(command: &[&str], image: &str) -> Container {
        Container {
            name: "c".into(),
            image: Some(image.into()),
            command: (!command.is_empty()).then(|| command.iter().map(|s| s.to_string()).collect()),
            ..Container::default()
        }
    }

    fn host_network() -> PodSpec {
        PodSpec {
            host_network: Some(true),
            ..PodSpec::default()
        }
    }

    #[test]
    fn control_plane_binaries_bind_their_secure_port() {
        let cases = [
            (
                vec!["kube-apiserver", "--advertise-address=10.0.0.1"],
                "registry.k8s.io/kube-apiserver:v1.33.0",
                vec![6443],
                false,
            ),
            (
                vec!["kube-apiserver", "--secure-port=8443"],
                "x/y",
                vec![8443],
                false,
            ),
            (
                vec![
                    "/usr/local/bin/kube-controller-manager",
                    "--secure-port",
                    "10300",
                ],
                "x/y",
                vec![10300],
                false,
            ),
            (
                vec![],
                "registry.k8s.io/kube-scheduler:v1.33.0",
                vec![10259],
                false,
            ),
            (
                vec!["kube-scheduler", "--permit-port-sharing=true"],
                "x/y",
                vec![10259],
                true,
            ),
            (
                vec!["kube-scheduler", "--permit-port-sharing"],
                "x/y",
                vec![10259],
                true,
            ),
            (
                vec!["kube-scheduler", "--permit-port-sharing=false"],
                "x/y",
                vec![10259],
                false,
            ),
            (
                vec!["kube-apiserver", "--secure-port=0"],
                "x/y",
                vec![],
                false,
            ),
            (vec!["sleep", "3600"], "busybox", vec![], false),
        ];
        for (command, image, ports, sharing) in cases {
            let claim = port_claim(&host_network(), &container(&command, image));
            let numbers: Vec<u16> = claim.ports.iter().map(|p| p.port).collect();
            assert_eq!(
                (numbers, claim.permit_sharing),
                (ports, sharing),
                "{command:?} {image}"
            );
        }
    }

    #[test]
    fn declared_ports_count_only_on_the_host_network() {
        let mut c = container(&["server"], "example.com/server");
        c.ports = Some(vec![ContainerPort {
            container_port: 8080,
            protocol: Some("UDP".into()),
            ..ContainerPort::default()
        }]);
        let claim = port_claim(&host_network(), &c);
        assert_eq!(
            claim.ports,
            [HostPort {
                protocol: Protocol::Udp,
                port: 8080
            }]
        );
        assert!(port_claim(&PodSpec::default(), &c).ports.is_empty());
    }

    #[test]
    fn a_claim_binds_the_address_its_flags_name() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let cases = [
            (vec!["kube-apiserver"], None, false),
            (
                vec!["kube-apiserver", "--bind-address=127.0.0.2"],
                ip("127.0.0.2"),
                false,
            ),
            (
                vec!["kube-scheduler", "--bind-address", "127.0.0.1"],
                ip("127.0.0.1"),
                false,
            ),
            (
                vec!["kube-apiserver", "--bind-address=0.0.0.0"],
                None,
                false,
            ),
            (vec!["kube-apiserver", "--bind-address=::"], None, false),
            (
                vec!["kube-apiserver", "--bind-address=$(HOST_IP)"],
                None,
                false,
            ),
            // Not a control-plane binary: its flags mean nothing known.
            (vec!["server", "--bind-address=127.0.0.1"], None, false),
            (
                vec!["selfhost", "front", "--listen", "10.0.0.11:6443"],
                ip("10.0.0.11"),
                true,
            ),
            (
                vec!["selfhost", "front", "--listen=0.0.0.0:7443"],
                None,
                true,
            ),
        ];
        for (command, address, sharing) in cases {
            let claim = port_claim(&host_network(), &container(&command, "x/y"));
            assert_eq!(
                (claim.address, claim.permit_sharing),
                (address, sharing),
                "{command:?}"
            );
        }
        let front = port_claim(
            &host_network(),
            &container(&["selfhost", "front", "--listen=0.0.0.0:7443"], "x/y"),
        );
        assert_eq!(front.ports, [HostPort::tcp(7443)]);
        assert_eq!(listen_text(None, 6443), "0.0.0.0:6443");
        assert_eq!(listen_text(ip("127.0.0.2"), 6443), "127.0.0.2:6443");
        assert_eq!(listen_text(ip("fd00::1"), 6443), "[fd00::1]:6443");
    }
}
