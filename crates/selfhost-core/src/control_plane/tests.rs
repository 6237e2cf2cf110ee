//! Rendered control-plane pods: snapshots for two versions and both config API versions, and
//! the properties a user relies on (determinism, overrides, port sharing, addresses).

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Container, Pod, Probe};

use super::*;
use crate::config::ExtraArg;

/// A v1beta3 file: map extraArgs (deliberately unsorted), extra volumes, pod network.
pub(crate) const V1BETA3_FILE: &str = include_str!("../../tests/fixtures/kubeadm-v1beta3.yaml");

/// A v1beta4 file: list extraArgs with a repeated name, extraEnvs, a private registry, a
/// custom certificates directory and port, IPv6 advertise address.
pub(crate) const V1BETA4_FILE: &str = include_str!("../../tests/fixtures/kubeadm-v1beta4.yaml");

/// External etcd with certificates outside the usual directories; no advertise address.
pub(crate) const EXTERNAL_ETCD_FILE: &str =
    include_str!("../../tests/fixtures/kubeadm-external-etcd.yaml");

pub(crate) fn config(text: &str) -> ClusterConfig {
    match ClusterConfig::from_yaml(text) {
        Ok(parsed) => parsed.config,
        Err(e) => panic!("{e}"),
    }
}

fn v(text: &str) -> KubeVersion {
    KubeVersion::parse(text).unwrap()
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn pods(config: &ClusterConfig, node: &NodeContext, version: &str) -> Vec<Pod> {
    static_pods(config, node, &v(version))
        .into_iter()
        .map(|(_, pod)| pod)
        .collect()
}

fn container(pod: &Pod) -> &Container {
    &pod.spec.as_ref().unwrap().containers[0]
}

fn flags(pod: &Pod) -> Vec<&str> {
    container(pod).command.as_ref().unwrap()[1..]
        .iter()
        .map(String::as_str)
        .collect()
}

fn flag_values<'a>(pod: &'a Pod, name: &str) -> Vec<&'a str> {
    let prefix = format!("--{name}=");
    flags(pod)
        .into_iter()
        .filter_map(|f| f.strip_prefix(prefix.as_str()))
        .collect()
}

fn probe_host(probe: &Option<Probe>) -> Option<&str> {
    probe.as_ref()?.http_get.as_ref()?.host.as_deref()
}

#[test]
fn snapshot_default_cluster_v1_33() {
    let config = ClusterConfig::default_for(&v("v1.33.1"));
    let node = NodeContext::for_node(ip("10.0.0.10"));
    insta::assert_yaml_snapshot!("default_v1_33_1", pods(&config, &node, "v1.33.1"));
}

#[test]
fn snapshot_v1beta3_file_v1_32() {
    let config = config(V1BETA3_FILE);
    insta::assert_yaml_snapshot!(
        "v1beta3_v1_32_4",
        pods(&config, &NodeContext::default(), "v1.32.4")
    );
}

#[test]
fn snapshot_v1beta4_file_v1_33() {
    let config = config(V1BETA4_FILE);
    insta::assert_yaml_snapshot!(
        "v1beta4_v1_33_1",
        pods(&config, &NodeContext::default(), "v1.33.1")
    );
}

#[test]
fn snapshot_external_etcd_without_advertise_address() {
    let config = config(EXTERNAL_ETCD_FILE);
    let apiserver = static_pod(
        Component::ApiServer,
        &config,
        &NodeContext::default(),
        &v("v1.32.4"),
    );
    insta::assert_yaml_snapshot!("external_etcd_host_ip_apiserver", apiserver);
}

#[test]
fn rendering_is_deterministic() {
    for text in [V1BETA3_FILE, V1BETA4_FILE, EXTERNAL_ETCD_FILE] {
        let first = serde_json::to_string(&pods(&config(text), &NodeContext::default(), "v1.33.1"));
        let second =
            serde_json::to_string(&pods(&config(text), &NodeContext::default(), "v1.33.1"));
        assert_eq!(first.unwrap(), second.unwrap());
    }
}

#[test]
fn v1beta3_argument_order_does_not_change_the_pods() {
    let reordered = V1BETA3_FILE.replace(
        "    audit-log-path: /var/log/kubernetes/audit.log\n    authorization-mode: Node,RBAC,Webhook\n    audit-log-maxage: \"30\"\n",
        "    audit-log-maxage: \"30\"\n    authorization-mode: Node,RBAC,Webhook\n    audit-log-path: /var/log/kubernetes/audit.log\n",
    );
    assert_ne!(reordered, V1BETA3_FILE);
    let node = NodeContext::default();
    assert_eq!(
        pods(&config(V1BETA3_FILE), &node, "v1.32.4"),
        pods(&config(&reordered), &node, "v1.32.4")
    );
}

#[test]
fn commands_are_the_binary_then_flags_sorted_by_name() {
    for pod in pods(&config(V1BETA4_FILE), &NodeContext::default(), "v1.33.1") {
        let command = container(&pod).command.clone().unwrap();
        assert_eq!(Some(&command[0]), pod.metadata.name.as_ref());
        let names: Vec<&str> = command[1..]
            .iter()
            .map(|f| f.trim_start_matches("--").split('=').next().unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }
}

#[test]
fn extra_args_override_defaults_of_the_same_name() {
    let mut config = ClusterConfig::default_for(&v("v1.33.1"));
    config.api_server.extra_args = vec![
        ExtraArg::new("authorization-mode", "Node,RBAC,Webhook"),
        ExtraArg::new("permit-port-sharing", "false"),
        ExtraArg::new("secure-port", "7443"),
    ];
    config.scheduler.extra_args = vec![ExtraArg::new("bind-address", "192.168.1.5")];
    let node = NodeContext::for_node(ip("10.0.0.10"));
    let apiserver = static_pod(Component::ApiServer, &config, &node, &v("v1.33.1"));
    assert_eq!(
        flag_values(&apiserver, "authorization-mode"),
        ["Node,RBAC,Webhook"]
    );
    assert_eq!(flag_values(&apiserver, "permit-port-sharing"), ["false"]);
    assert_eq!(flag_values(&apiserver, "secure-port"), ["7443"]);
    let scheduler = static_pod(Component::Scheduler, &config, &node, &v("v1.33.1"));
    assert_eq!(flag_values(&scheduler, "bind-address"), ["192.168.1.5"]);
    // The probes follow the scheduler to the address it binds.
    assert_eq!(
        probe_host(&container(&scheduler).liveness_probe),
        Some("192.168.1.5")
    );
}

#[test]
fn repeated_v1beta4_arguments_keep_their_order() {
    let apiserver = static_pod(
        Component::ApiServer,
        &config(V1BETA4_FILE),
        &NodeContext::default(),
        &v("v1.33.1"),
    );
    assert_eq!(
        flag_values(&apiserver, "service-account-issuer"),
        [
            "https://issuer.example.com",
            "https://kubernetes.default.svc.lab.local"
        ]
    );
}

#[test]
fn every_component_permits_port_sharing_since_1_19() {
    let config = ClusterConfig::default_for(&v("v1.33.1"));
    let node = NodeContext::default();
    for pod in pods(&config, &node, "v1.29.0") {
        assert_eq!(flag_values(&pod, PERMIT_PORT_SHARING), ["true"]);
    }
    for pod in pods(&config, &node, "v1.18.20") {
        assert_eq!(flag_values(&pod, PERMIT_PORT_SHARING), Vec::<&str>::new());
    }
}

#[test]
fn structured_authorization_replaces_the_modes_flag() {
    let mut config = ClusterConfig::default_for(&v("v1.33.1"));
    config.api_server.extra_args = vec![ExtraArg::new(
        "authorization-config",
        "/etc/kubernetes/authz.yaml",
    )];
    let apiserver = static_pod(
        Component::ApiServer,
        &config,
        &NodeContext::default(),
        &v("v1.33.1"),
    );
    assert!(flag_values(&apiserver, "authorization-mode").is_empty());
    assert_eq!(
        flag_values(&apiserver, "authorization-config"),
        ["/etc/kubernetes/authz.yaml"]
    );
}

#[test]
fn images_come_from_the_repository_with_the_version_tag() {
    let mut config = ClusterConfig::default_for(&v("v1.33.1"));
    assert_eq!(
        image(Component::ApiServer, &config, &v("v1.33.1")),
        "registry.k8s.io/kube-apiserver:v1.33.1"
    );
    config.image_repository = "registry.example.com:5000/k8s".into();
    assert_eq!(
        image(Component::Scheduler, &config, &v("1.32.4")),
        "registry.example.com:5000/k8s/kube-scheduler:v1.32.4"
    );
    assert_eq!(
        image(Component::ControllerManager, &config, &v("v1.33.2+k3s1")),
        "registry.example.com:5000/k8s/kube-controller-manager:v1.33.2_k3s1"
    );
}

#[test]
fn advertise_address_precedence_is_node_then_config_then_host_ip() {
    let mut config = ClusterConfig::default_for(&v("v1.33.1"));
    let from_config = ip("10.0.0.10");
    let from_node = ip("10.0.0.11");
    assert_eq!(
        NodeContext::default().advertise_address(&config),
        AdvertiseAddress::HostIp
    );
    config.local_api_endpoint.advertise_address = Some(from_config);
    assert_eq!(
        NodeContext::default().advertise_address(&config),
        AdvertiseAddress::Ip(from_config)
    );
    assert_eq!(
        NodeContext::for_node(from_node).advertise_address(&config),
        AdvertiseAddress::Ip(from_node)
    );
    assert_eq!(
        NodeContext::for_node(ip("0.0.0.0")).advertise_address(&config),
        AdvertiseAddress::Ip(from_config),
        "an unspecified address is no address"
    );
}

#[test]
fn unknown_advertise_address_uses_the_downward_api() {
    let config = ClusterConfig::default_for(&v("v1.33.1"));
    let apiserver = static_pod(
        Component::ApiServer,
        &config,
        &NodeContext::default(),
        &v("v1.33.1"),
    );
    assert_eq!(flag_values(&apiserver, "advertise-address"), ["$(HOST_IP)"]);
    let env = container(&apiserver).env.clone().unwrap();
    assert_eq!(env[0].name, HOST_IP_ENV);
    let field = env[0]
        .value_from
        .as_ref()
        .and_then(|s| s.field_ref.as_ref());
    assert_eq!(field.map(|f| f.field_path.as_str()), Some("status.hostIP"));
    assert_eq!(
        probe_host(&container(&apiserver).readiness_probe),
        Some("127.0.0.1")
    );
    assert_eq!(apiserver.metadata.annotations, None);
}

#[test]
fn ipv6_advertise_address_brackets_the_endpoint_and_uses_ipv6_loopback() {
    let config = ClusterConfig::default_for(&v("v1.33.1"));
    let node = NodeContext::for_node(ip("fd00::10"));
    let apiserver = static_pod(Component::ApiServer, &config, &node, &v("v1.33.1"));
    let annotations = apiserver.metadata.annotations.clone().unwrap();
    assert_eq!(annotations[ADVERTISE_ADDRESS_ANNOTATION], "[fd00::10]:6443");
    assert_eq!(
        flag_values(&apiserver, "etcd-servers"),
        ["https://[::1]:2379"]
    );
    assert_eq!(
        probe_host(&container(&apiserver).liveness_probe),
        Some("fd00::10")
    );
}

#[test]
fn startup_probes_cover_the_health_check_timeout() {
    let default = ClusterConfig::default_for(&v("v1.33.1"));
    let slow = config(V1BETA4_FILE); // 5m0s
    for (config, failures) in [(default, 24), (slow, 30)] {
        for pod in pods(&config, &NodeContext::default(), "v1.33.1") {
            let startup = container(&pod).startup_probe.clone().unwrap();
            assert_eq!(startup.failure_threshold, Some(failures));
            assert_eq!(startup.period_seconds, Some(10));
        }
    }
}

#[test]
fn volumes_and_mounts_are_sorted_and_paired() {
    for text in [V1BETA3_FILE, V1BETA4_FILE, EXTERNAL_ETCD_FILE] {
        for pod in pods(&config(text), &NodeContext::default(), "v1.33.1") {
            let volumes: Vec<String> = pod
                .spec
                .as_ref()
                .unwrap()
                .volumes
                .iter()
                .flatten()
                .map(|v| v.name.clone())
                .collect();
            let mounts: Vec<String> = container(&pod)
                .volume_mounts
                .iter()
                .flatten()
                .map(|m| m.name.clone())
                .collect();
            let mut sorted = volumes.clone();
            sorted.sort();
            assert_eq!(volumes, sorted);
            assert_eq!(volumes, mounts);
        }
    }
}

#[test]
fn certs_and_kubeconfig_volumes_carry_the_public_names() {
    let config = ClusterConfig::default_for(&v("v1.33.1"));
    let names = |pod: &Pod| -> Vec<String> {
        pod.spec
            .as_ref()
            .unwrap()
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.clone())
            .collect()
    };
    let pods = pods(&config, &NodeContext::default(), "v1.33.1");
    assert!(names(&pods[0]).contains(&K8S_CERTS_VOLUME.to_string()));
    assert!(names(&pods[1]).contains(&K8S_CERTS_VOLUME.to_string()));
    assert!(names(&pods[1]).contains(&KUBECONFIG_VOLUME.to_string()));
    assert!(names(&pods[2]).contains(&KUBECONFIG_VOLUME.to_string()));
}

#[test]
fn an_extra_volume_replaces_kubeadms_of_the_same_name() {
    let mut config = ClusterConfig::default_for(&v("v1.33.1"));
    config.api_server.extra_volumes = vec![crate::config::HostPathMount {
        name: CA_CERTS_VOLUME.into(),
        host_path: "/etc/pki/tls/certs".into(),
        mount_path: "/etc/ssl/certs".into(),
        read_only: true,
        path_type: None,
    }];
    let apiserver = static_pod(
        Component::ApiServer,
        &config,
        &NodeContext::default(),
        &v("v1.33.1"),
    );
    let volumes = apiserver.spec.unwrap().volumes.unwrap();
    let ca: Vec<_> = volumes
        .iter()
        .filter(|v| v.name == CA_CERTS_VOLUME)
        .collect();
    assert_eq!(ca.len(), 1);
    assert_eq!(
        ca[0].host_path.as_ref().map(|h| h.path.as_str()),
        Some("/etc/pki/tls/certs")
    );
}

#[test]
fn node_context_chooses_the_ca_trust_mounts() {
    let config = ClusterConfig::default_for(&v("v1.33.1"));
    let rhel = NodeContext {
        ca_trust_dirs: vec!["/etc/pki/ca-trust".into(), "/etc/pki/tls/certs".into()],
        ..NodeContext::default()
    };
    let cm = static_pod(Component::ControllerManager, &config, &rhel, &v("v1.33.1"));
    let names: Vec<String> = cm
        .spec
        .unwrap()
        .volumes
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(
        names,
        [
            "ca-certs",
            "etc-pki-ca-trust",
            "etc-pki-tls-certs",
            "flexvolume-dir",
            "k8s-certs",
            "kubeconfig"
        ]
    );
}

#[test]
fn external_ca_leaves_the_signing_files_empty() {
    let config = ClusterConfig::default_for(&v("v1.33.1"));
    let node = NodeContext {
        external_ca: true,
        ..NodeContext::default()
    };
    let cm = static_pod(Component::ControllerManager, &config, &node, &v("v1.33.1"));
    assert_eq!(flag_values(&cm, "cluster-signing-cert-file"), [""]);
    assert_eq!(flag_values(&cm, "cluster-signing-key-file"), [""]);
}
