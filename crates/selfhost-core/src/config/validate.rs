//! Checks of single values, each returning a message that says what would be right.
//!
//! The rules are kubeadm's (and the API server's, where a bad value would only fail later
//! when the pod is created): CIDRs, ports, versions, endpoints, paths and names.

use std::net::IpAddr;
use std::time::Duration;

use crate::version::KubeVersion;

/// The `hostPath.type` values Kubernetes accepts (the empty string means "no check").
pub(super) const PATH_TYPES: [&str; 8] = [
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
];

/// An exact Kubernetes version; kubeadm's release labels need the network to resolve, so they
/// are refused with a hint.
pub(super) fn kubernetes_version(s: &str) -> Result<KubeVersion, String> {
    let label = s.strip_prefix("ci/").unwrap_or(s);
    if s.starts_with("ci/") || label.starts_with("stable") || label.starts_with("latest") {
        return Err(format!(
            "{s:?} is a release label that kubeadm resolves over the network; write an exact version such as v1.33.2"
        ));
    }
    KubeVersion::parse(s).map_err(|e| e.to_string())
}

/// One CIDR, `address/prefix`. Host bits may be set, as Go's `net.ParseCIDR` allows.
fn cidr(s: &str) -> Result<IpAddr, String> {
    let Some((address, prefix)) = s.split_once('/') else {
        return Err(format!(
            "{s:?} is not a CIDR; write it as address/prefix, e.g. 10.96.0.0/12"
        ));
    };
    let ip: IpAddr = address
        .parse()
        .map_err(|_| format!("{s:?} is not a CIDR: {address:?} is not an IP address"))?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    match prefix.parse::<u8>() {
        Ok(p) if p <= max => Ok(ip),
        _ => Err(format!(
            "{s:?} is not a CIDR: the prefix length must be a number from 0 to {max}"
        )),
    }
}

/// One CIDR, or two separated by a comma for dual-stack (one IPv4 and one IPv6).
pub(super) fn cidrs(s: &str) -> Result<(), String> {
    let parts: Vec<&str> = s.split(',').collect();
    if parts.len() > 2 {
        return Err(format!(
            "{s:?} has {} CIDRs; give one, or two for dual-stack (one IPv4 and one IPv6)",
            parts.len()
        ));
    }
    let ips = parts
        .iter()
        .map(|part| cidr(part))
        .collect::<Result<Vec<_>, _>>()?;
    if let [a, b] = ips.as_slice()
        && a.is_ipv4() == b.is_ipv4()
    {
        return Err(format!(
            "{s:?} has two CIDRs of the same IP family; dual-stack needs one IPv4 and one IPv6 CIDR"
        ));
    }
    Ok(())
}

/// A TCP port from 1 to 65535.
pub(super) fn port(n: i64) -> Result<u16, String> {
    match u16::try_from(n) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("{n} is not a port; use a number from 1 to 65535")),
    }
}

fn port_text(s: &str) -> Result<u16, String> {
    let n: i64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a port; use a number from 1 to 65535"))?;
    port(n)
}

/// A DNS subdomain as Kubernetes defines it (RFC 1123): lowercase labels of letters, digits
/// and `-`, joined by dots, at most 253 characters.
pub(super) fn dns_subdomain(s: &str) -> Result<(), String> {
    let ok = !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not a DNS name: use lowercase letters, digits, '-' and '.', starting and ending each part with a letter or digit"
        ))
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS label (RFC 1123), as volume names must be.
pub(super) fn dns_label(s: &str) -> Result<(), String> {
    if is_dns_label(s) {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not a valid volume name: use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
        ))
    }
}

/// `host` or `host:port`, where host is an IP address (IPv6 in brackets when a port follows)
/// or a DNS name.
pub(super) fn host_port(s: &str) -> Result<(), String> {
    let hint = "write it as host or host:port, e.g. cp.example.com:6443 or [fd00::1]:6443";
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(format!("{s:?} has an unclosed '['; {hint}"));
        };
        if host.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("{s:?}: {host:?} is not an IPv6 address; {hint}"));
        }
        match after.strip_prefix(':') {
            Some(port) => (None, Some(port)),
            None if after.is_empty() => (None, None),
            None => return Err(format!("{s:?} has text after ']'; {hint}")),
        }
    } else if s.matches(':').count() > 1 {
        // A bare IPv6 address cannot carry a port without brackets.
        (Some(s), None)
    } else {
        match s.split_once(':') {
            Some((host, port)) => (Some(host), Some(port)),
            None => (Some(s), None),
        }
    };
    if let Some(host) = host
        && host.parse::<IpAddr>().is_err()
        && dns_subdomain(host).is_err()
    {
        return Err(format!(
            "{s:?}: {host:?} is neither an IP address nor a DNS name; {hint}"
        ));
    }
    if let Some(port) = port {
        port_text(port)?;
    }
    Ok(())
}

/// A client URL of an etcd member: `http(s)://host[:port][/path]`; `https` is required when
/// client certificates are configured.
pub(super) fn etcd_url(s: &str, require_https: bool) -> Result<(), String> {
    let Some((scheme, rest)) = s.split_once("://") else {
        return Err(format!(
            "{s:?} is not a URL; write it as https://host:port, e.g. https://10.0.0.5:2379"
        ));
    };
    match scheme {
        "https" => {}
        "http" if !require_https => {}
        "http" => {
            return Err(format!(
                "{s:?} uses http, but caFile/certFile/keyFile are set; use https"
            ));
        }
        _ => {
            return Err(format!(
                "{s:?} has scheme {scheme:?}; etcd client URLs use http or https"
            ));
        }
    }
    let authority = rest.split('/').next().unwrap_or_default();
    host_port(authority)
}

/// An absolute path on a Linux node.
pub(super) fn absolute_path(s: &str) -> Result<(), String> {
    if s.starts_with('/') {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not an absolute path; it must start with '/'"
        ))
    }
}

/// A container image repository such as `registry.k8s.io` or `registry.example.com:5000/k8s`.
pub(super) fn image_repository(s: &str) -> Result<(), String> {
    if s.chars().any(char::is_whitespace) {
        return Err(format!("{s:?} contains whitespace"));
    }
    if s.contains("://") {
        return Err(format!(
            "{s:?} has a URL scheme; write the registry without it, e.g. registry.example.com/k8s"
        ));
    }
    if s.ends_with('/') {
        return Err(format!("{s:?} ends with '/'; drop it"));
    }
    Ok(())
}

/// The name of an extra flag, written as kubeadm wants it: without dashes and without a value.
pub(super) fn flag_name(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("a flag name is empty".to_string());
    }
    if s.starts_with('-') {
        let bare = s.trim_start_matches('-');
        return Err(format!(
            "{s:?}: write flag names without the leading dashes, e.g. {bare:?}"
        ));
    }
    if s.contains('=') || s.chars().any(char::is_whitespace) {
        return Err(format!(
            "{s:?} is not a flag name; names cannot contain '=' or whitespace (the value goes in its own field)"
        ));
    }
    Ok(())
}

/// A Go duration such as `4m0s`, `240s` or `1h30m`, which must be positive.
pub(crate) fn go_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("{s:?} is not a duration; write it as Go does, e.g. 4m0s, 90s or 1h30m");
    let mut rest = s;
    let mut nanos = 0f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        let value: f64 = number.parse().map_err(|_| bad())?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" if s == "0" => 0.0,
            _ => return Err(bad()),
        };
        nanos += value * scale;
        rest = after;
    }
    if nanos <= 0.0 || !nanos.is_finite() {
        return Err(format!("{s:?} must be a positive duration, e.g. 4m0s"));
    }
    Ok(Duration::from_secs_f64(nanos / 1e9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidrs_accept_single_and_dual_stack() {
        for ok in [
            "10.96.0.0/12",
            "fd00::/108",
            "10.244.0.0/16,fd00:10:244::/56",
            "fd00::/108,10.96.0.0/12",
            "10.96.0.1/12",
        ] {
            assert_eq!(cidrs(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn cidrs_reject_with_reason() {
        let rows = [
            ("10.96.0.0", "address/prefix"),
            ("10.96.0.0/33", "from 0 to 32"),
            ("fd00::/129", "from 0 to 128"),
            ("300.1.1.1/8", "not an IP address"),
            ("10.0.0.0/8,10.1.0.0/16", "same IP family"),
            ("10.0.0.0/8,fd00::/8,fd01::/8", "has 3 CIDRs"),
            ("10.0.0.0/8, fd00::/8", "not an IP address"),
            ("", "address/prefix"),
        ];
        for (input, reason) in rows {
            let err = cidrs(input).unwrap_err();
            assert!(err.contains(reason), "{input}: {err}");
        }
    }

    #[test]
    fn ports_are_1_to_65535() {
        assert_eq!(port(1), Ok(1));
        assert_eq!(port(65535), Ok(65535));
        for bad in [0, -1, 65536, i64::MAX] {
            assert!(port(bad).unwrap_err().contains("from 1 to 65535"), "{bad}");
        }
    }

    #[test]
    fn host_port_forms() {
        for ok in [
            "cp.example.com",
            "cp.example.com:6443",
            "10.0.0.1",
            "10.0.0.1:443",
            "fd00::1",
            "[fd00::1]",
            "[fd00::1]:6443",
        ] {
            assert_eq!(host_port(ok), Ok(()), "{ok}");
        }
        let rows = [
            ("cp.example.com:0", "from 1 to 65535"),
            ("cp.example.com:http", "not a port"),
            ("Bad_Host:6443", "neither an IP address nor a DNS name"),
            ("[fd00::1:6443", "unclosed"),
            ("[10.0.0.1]:6443", "not an IPv6 address"),
            ("", "neither an IP address nor a DNS name"),
        ];
        for (input, reason) in rows {
            let err = host_port(input).unwrap_err();
            assert!(err.contains(reason), "{input}: {err}");
        }
    }

    #[test]
    fn durations_follow_go() {
        let rows = [
            ("4m0s", 240.0),
            ("240s", 240.0),
            ("1h30m", 5400.0),
            ("1.5s", 1.5),
            ("500ms", 0.5),
        ];
        for (input, secs) in rows {
            assert_eq!(
                go_duration(input),
                Ok(Duration::from_secs_f64(secs)),
                "{input}"
            );
        }
        for bad in ["", "4", "4 m", "m", "-1s", "0s", "1d"] {
            assert!(go_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_refuse_labels() {
        assert_eq!(
            kubernetes_version("v1.33.2").map(|v| v.to_string()),
            Ok("v1.33.2".to_string())
        );
        for label in ["stable-1", "stable", "latest-1.33", "ci/latest"] {
            assert!(
                kubernetes_version(label)
                    .unwrap_err()
                    .contains("release label"),
                "{label}"
            );
        }
        assert!(kubernetes_version("1.33").is_err());
    }

    #[test]
    fn flag_names_without_dashes() {
        assert_eq!(flag_name("audit-log-path"), Ok(()));
        assert!(
            flag_name("--audit-log-path")
                .unwrap_err()
                .contains("\"audit-log-path\"")
        );
        assert!(flag_name("v=2").unwrap_err().contains("'='"));
        assert!(flag_name("").unwrap_err().contains("empty"));
    }

    #[test]
    fn names_and_paths() {
        assert_eq!(dns_subdomain("cluster.local"), Ok(()));
        assert!(dns_subdomain("Cluster.Local").is_err());
        assert!(dns_subdomain("a..b").is_err());
        assert_eq!(dns_label("audit-logs"), Ok(()));
        assert!(dns_label("audit.logs").is_err());
        assert_eq!(absolute_path("/var/log"), Ok(()));
        assert!(
            absolute_path("var/log")
                .unwrap_err()
                .contains("start with '/'")
        );
        assert_eq!(image_repository("registry.example.com:5000/k8s"), Ok(()));
        assert!(image_repository("https://registry.example.com").is_err());
        assert!(image_repository("registry.example.com/").is_err());
        assert_eq!(etcd_url("https://10.0.0.5:2379", true), Ok(()));
        assert_eq!(etcd_url("http://etcd-1:2379", false), Ok(()));
        assert!(
            etcd_url("http://etcd-1:2379", true)
                .unwrap_err()
                .contains("use https")
        );
        assert!(
            etcd_url("etcd-1:2379", false)
                .unwrap_err()
                .contains("not a URL")
        );
    }
}
