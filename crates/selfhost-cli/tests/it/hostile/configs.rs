//! `--config FILE` that is not a kubeadm configuration: not YAML, not text, the wrong kind,
//! unknown fields, bad CIDRs and ports, too large, not a file. `plan` reads the file before it
//! connects, so most run against the shared cluster and prove it is left alone.

use super::{Case, On};

/// `plan v1.34.0 --config {file}` against the shared cluster, with `content` as the file.
fn plan_with(content: &str) -> Case {
    Case::new(&["plan", "v1.34.0", "--config", "{file}"])
        .on(On::Sim)
        .file(content)
        .exits(2)
}

const HEAD: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n";

crate::hostile_cases! {
    config_not_yaml => plan_with("{{{ not: [yaml").says(&["line 1", "unclosed bracket"]),
    config_wrong_kind => plan_with("apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n")
        .says(&["no ClusterConfiguration", "found only: Pod", "kind: ClusterConfiguration"]),
    config_old_api_version => plan_with("apiVersion: kubeadm.k8s.io/v1beta1\nkind: ClusterConfiguration\n")
        .says(&["v1beta1", "kubeadm config migrate"]),
    config_unknown_field => plan_with(&format!("{HEAD}bogusField: 1\n"))
        .says(&["line 3", "unknown field `bogusField`", "allowed at this place"]),
    config_bad_service_cidr => plan_with(&format!("{HEAD}networking:\n  serviceSubnet: 10.96.0.0/99\n"))
        .says(&["networking.serviceSubnet", "not a CIDR", "prefix length"]),
    config_pod_cidr_not_an_address => plan_with(&format!("{HEAD}networking:\n  podSubnet: banana\n"))
        .says(&["networking.podSubnet", "not a CIDR", "address/prefix"]),
    config_bind_port_out_of_range => plan_with(&format!(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n  bindPort: 70000\n---\n{HEAD}"))
        .says(&["bindPort: 70000 is not a port", "1 to 65535"]),
    config_endpoint_port_out_of_range => plan_with(&format!("{HEAD}controlPlaneEndpoint: \"cp.example:99999\"\n"))
        .says(&["controlPlaneEndpoint", "not a port"]),
    config_dns_domain_invalid => plan_with(&format!("{HEAD}networking:\n  dnsDomain: \"bad domain!\"\n"))
        .says(&["dnsDomain", "not a DNS name"]),
    config_empty_file => plan_with("").says(&["no ClusterConfiguration", "expected a document"]),
    config_recursive_alias => plan_with("a: &a [*a]\n").says(&["line 1", "recursive"]),
    config_deeply_nested => plan_with(&format!("a: {}", "[".repeat(100_000))).says(&["recursion limit"]),
    config_binary_file => Case::new(&["plan", "v1.34.0", "--config", "{file}"])
        .on(On::Sim)
        .file(b"\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00\x80\x81".repeat(300))
        .exits(2)
        .says(&["not UTF-8 text", "pass a kubeadm ClusterConfiguration"]),
    config_huge_file => Case::new(&["plan", "v1.34.0", "--config", "{file}"])
        .on(On::Sim)
        .huge_file(50 * 1024 * 1024)
        .exits(2)
        .says(&["52428800 bytes", "is this the right file"]),
    config_is_a_directory => Case::new(&["manifests", "v1.34.0", "--config", "{dir}"])
        .exits(2)
        .says(&["not a regular file", "pass a kubeadm ClusterConfiguration"]),
    config_missing_for_apply => Case::new(&["apply", "v1.34.0", "--yes", "--config", "{dir}/nope.yaml"])
        .on(On::Sim)
        .exits(2)
        .says(&["cannot read the configuration file", "nope.yaml"]),
}
