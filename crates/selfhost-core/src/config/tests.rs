//! Reading whole kubeadm files: both API versions, multi-document files, defaults.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};

use super::*;

/// A realistic v1beta3 file as `kubeadm config print` and an operator would write it.
pub(crate) const V1BETA3_FULL: &str = r#"# written by hand for a production cluster
apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
kubernetesVersion: v1.32.4
clusterName: prod
controlPlaneEndpoint: cp.example.com:6443
imageRepository: registry.example.com/k8s
certificatesDir: /etc/kubernetes/pki/
networking:
  serviceSubnet: 10.96.0.0/12,fd00:10:96::/108
  podSubnet: 10.244.0.0/16,fd00:10:244::/56
  dnsDomain: cluster.local
etcd:
  local:
    dataDir: /var/lib/etcd
    extraArgs:
      listen-metrics-urls: http://0.0.0.0:2381
    serverCertSANs: [etcd.example.com]
apiServer:
  certSANs:
  - cp.example.com
  - 10.0.0.10
  timeoutForControlPlane: 5m0s
  extraArgs:
    event-ttl: 2h0m0s
    audit-log-path: /var/log/kubernetes/audit.log
  extraVolumes:
  - name: audit-logs
    hostPath: /var/log/kubernetes
    mountPath: /var/log/kubernetes
    pathType: DirectoryOrCreate
controllerManager:
  extraArgs:
    bind-address: 0.0.0.0
scheduler:
  extraArgs:
    bind-address: 0.0.0.0
  extraVolumes:
  - name: scheduler-config
    hostPath: /etc/kubernetes/scheduler-config.yaml
    mountPath: /etc/kubernetes/scheduler-config.yaml
    readOnly: true
    pathType: File
dns: {}
featureGates:
  EtcdLearnerMode: true
"#;

/// The same cluster in v1beta4, extra args in the order v1beta3's map would sort them.
pub(crate) const V1BETA4_FULL: &str = r#"apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.32.4
clusterName: prod
controlPlaneEndpoint: cp.example.com:6443
imageRepository: registry.example.com/k8s
certificatesDir: /etc/kubernetes/pki/
encryptionAlgorithm: RSA-2048
certificateValidityPeriod: 8760h0m0s
caCertificateValidityPeriod: 87600h0m0s
networking:
  serviceSubnet: 10.96.0.0/12,fd00:10:96::/108
  podSubnet: 10.244.0.0/16,fd00:10:244::/56
  dnsDomain: cluster.local
etcd:
  local:
    dataDir: /var/lib/etcd
    extraArgs:
    - name: listen-metrics-urls
      value: http://0.0.0.0:2381
    serverCertSANs: [etcd.example.com]
apiServer:
  certSANs:
  - cp.example.com
  - 10.0.0.10
  extraArgs:
  - name: audit-log-path
    value: /var/log/kubernetes/audit.log
  - name: event-ttl
    value: 2h0m0s
  extraVolumes:
  - name: audit-logs
    hostPath: /var/log/kubernetes
    mountPath: /var/log/kubernetes
    pathType: DirectoryOrCreate
controllerManager:
  extraArgs:
  - name: bind-address
    value: 0.0.0.0
scheduler:
  extraArgs:
  - name: bind-address
    value: 0.0.0.0
  extraVolumes:
  - name: scheduler-config
    hostPath: /etc/kubernetes/scheduler-config.yaml
    mountPath: /etc/kubernetes/scheduler-config.yaml
    readOnly: true
    pathType: File
dns:
  disabled: false
proxy:
  disabled: true
featureGates:
  EtcdLearnerMode: true
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
timeouts:
  controlPlaneComponentHealthCheck: 5m0s
"#;

fn parse(text: &str) -> ParsedConfig {
    match ClusterConfig::from_yaml(text) {
        Ok(parsed) => parsed,
        Err(e) => panic!("{e}"),
    }
}

fn expected_full() -> ClusterConfig {
    let mut c = ClusterConfig::default_for(&KubeVersion::new(1, 32, 4));
    c.cluster_name = "prod".into();
    c.control_plane_endpoint = Some("cp.example.com:6443".into());
    c.image_repository = "registry.example.com/k8s".into();
    c.networking = Networking {
        service_subnet: "10.96.0.0/12,fd00:10:96::/108".into(),
        pod_subnet: Some("10.244.0.0/16,fd00:10:244::/56".into()),
        dns_domain: "cluster.local".into(),
    };
    c.etcd = Etcd::Local {
        data_dir: "/var/lib/etcd".into(),
        extra_args: vec![ExtraArg::new("listen-metrics-urls", "http://0.0.0.0:2381")],
    };
    c.api_server_cert_sans = vec!["cp.example.com".into(), "10.0.0.10".into()];
    c.api_server.extra_args = vec![
        ExtraArg::new("audit-log-path", "/var/log/kubernetes/audit.log"),
        ExtraArg::new("event-ttl", "2h0m0s"),
    ];
    c.api_server.extra_volumes = vec![HostPathMount {
        name: "audit-logs".into(),
        host_path: "/var/log/kubernetes".into(),
        mount_path: "/var/log/kubernetes".into(),
        read_only: false,
        path_type: Some("DirectoryOrCreate".into()),
    }];
    c.controller_manager.extra_args = vec![ExtraArg::new("bind-address", "0.0.0.0")];
    c.scheduler.extra_args = vec![ExtraArg::new("bind-address", "0.0.0.0")];
    c.scheduler.extra_volumes = vec![HostPathMount {
        name: "scheduler-config".into(),
        host_path: "/etc/kubernetes/scheduler-config.yaml".into(),
        mount_path: "/etc/kubernetes/scheduler-config.yaml".into(),
        read_only: true,
        path_type: Some("File".into()),
    }];
    c.feature_gates = BTreeMap::from([("EtcdLearnerMode".to_string(), true)]);
    c.health_check_timeout_seconds = 300;
    c
}

#[test]
fn full_v1beta3_file_is_read_with_every_field() {
    let parsed = parse(V1BETA3_FULL);
    assert_eq!(parsed.api_version, ApiVersion::V1Beta3);
    assert_eq!(parsed.notices, vec![]);
    assert_eq!(parsed.config, expected_full());
}

#[test]
fn full_v1beta4_file_is_read_with_every_field() {
    let parsed = parse(V1BETA4_FULL);
    assert_eq!(parsed.api_version, ApiVersion::V1Beta4);
    assert_eq!(parsed.notices, vec![]);
    assert_eq!(parsed.config, expected_full());
}

#[test]
fn empty_cluster_configuration_gets_kubeadm_defaults() {
    for version in ACCEPTED_API_VERSIONS {
        let text = format!("apiVersion: {version}\nkind: ClusterConfiguration\n");
        let config = parse(&text).config;
        assert_eq!(config.kubernetes_version, None);
        assert_eq!(config.image_repository, "registry.k8s.io");
        assert_eq!(config.networking.service_subnet, "10.96.0.0/12");
        assert_eq!(config.networking.pod_subnet, None);
        assert_eq!(config.networking.dns_domain, "cluster.local");
        assert_eq!(config.certificates_dir, "/etc/kubernetes/pki");
        assert_eq!(config.cluster_name, "kubernetes");
        assert_eq!(config.local_api_endpoint.bind_port, 6443);
        assert_eq!(config.local_api_endpoint.advertise_address, None);
        assert_eq!(config.health_check_timeout_seconds, 240);
        assert_eq!(
            config.etcd,
            Etcd::Local {
                data_dir: "/var/lib/etcd".into(),
                extra_args: vec![]
            }
        );
        let version = KubeVersion::new(1, 33, 1);
        assert_eq!(
            ClusterConfig {
                kubernetes_version: Some(version.clone()),
                ..config
            },
            ClusterConfig::default_for(&version)
        );
    }
}

#[test]
fn empty_strings_count_as_unset_like_kubeadm() {
    let text = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nimageRepository: \"\"\nclusterName: \"\"\nnetworking:\n  serviceSubnet: \"\"\n";
    let config = parse(text).config;
    assert_eq!(config.image_repository, "registry.k8s.io");
    assert_eq!(config.cluster_name, "kubernetes");
    assert_eq!(config.networking.service_subnet, "10.96.0.0/12");
}

const MULTI_DOCUMENT: &str = r#"---
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: abcdef.0123456789abcdef
  ttl: 24h0m0s
nodeRegistration:
  name: cp-1
  criSocket: unix:///run/containerd/containerd.sock
  taints: []
  kubeletExtraArgs:
  - name: node-ip
    value: 10.0.0.10
localAPIEndpoint:
  advertiseAddress: 10.0.0.10
  bindPort: 8443
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.33.1
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
---
# kube-proxy in IPVS mode
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: ipvs
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    token: abcdef.0123456789abcdef
"#;

#[test]
fn multi_document_file_uses_init_and_cluster_and_names_what_it_ignored() {
    let parsed = parse(MULTI_DOCUMENT);
    let config = parsed.config;
    assert_eq!(config.kubernetes_version, Some(KubeVersion::new(1, 33, 1)));
    assert_eq!(
        config.local_api_endpoint,
        LocalApiEndpoint {
            advertise_address: Some("10.0.0.10".parse::<IpAddr>().unwrap()),
            bind_port: 8443,
        }
    );
    assert_eq!(config.node_name.as_deref(), Some("cp-1"));
    assert_eq!(
        parsed.notices,
        vec![
            Notice::IgnoredDocument {
                document: 3,
                line: 22,
                api_version: "kubelet.config.k8s.io/v1beta1".into(),
                kind: "KubeletConfiguration".into(),
            },
            Notice::IgnoredDocument {
                document: 4,
                line: 27,
                api_version: "kubeproxy.config.k8s.io/v1alpha1".into(),
                kind: "KubeProxyConfiguration".into(),
            },
            Notice::IgnoredDocument {
                document: 5,
                line: 31,
                api_version: "kubeadm.k8s.io/v1beta4".into(),
                kind: "JoinConfiguration".into(),
            },
        ]
    );
    assert_eq!(
        parsed.notices[0].to_string(),
        "document 3 (line 22, KubeletConfiguration kubelet.config.k8s.io/v1beta1) ignored: only ClusterConfiguration and InitConfiguration shape the control plane"
    );
}

#[test]
fn init_configuration_alone_defaults_the_cluster() {
    let text = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\nlocalAPIEndpoint:\n  advertiseAddress: \"fd00::10\"\n";
    let parsed = parse(text);
    assert_eq!(parsed.api_version, ApiVersion::V1Beta3);
    assert_eq!(
        parsed.config.local_api_endpoint.advertise_address,
        Some("fd00::10".parse().unwrap())
    );
    assert_eq!(parsed.config.image_repository, "registry.k8s.io");
}

#[test]
fn unspecified_advertise_address_means_the_nodes_own() {
    let text = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nlocalAPIEndpoint:\n  advertiseAddress: 0.0.0.0\n  bindPort: 0\n";
    let endpoint = parse(text).config.local_api_endpoint;
    assert_eq!(endpoint.advertise_address, None);
    assert_eq!(
        endpoint.bind_port, 6443,
        "0 means the default, as in kubeadm"
    );
}

#[test]
fn v1beta4_keeps_repeated_arguments_in_file_order() {
    let text = r#"apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
apiServer:
  extraArgs:
  - name: service-account-issuer
    value: https://new.example.com
  - name: admission-control-config-file
    value: /etc/kubernetes/admission.yaml
  - name: service-account-issuer
    value: https://kubernetes.default.svc.cluster.local
"#;
    let config = parse(text).config;
    let names: Vec<(&str, &str)> = config
        .api_server
        .extra_args
        .iter()
        .map(|a| (a.name.as_str(), a.value.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            ("service-account-issuer", "https://new.example.com"),
            (
                "admission-control-config-file",
                "/etc/kubernetes/admission.yaml"
            ),
            (
                "service-account-issuer",
                "https://kubernetes.default.svc.cluster.local"
            ),
        ]
    );
    assert_eq!(
        config.api_server.extra_arg("service-account-issuer"),
        Some("https://kubernetes.default.svc.cluster.local")
    );
}

#[test]
fn v1beta3_argument_order_in_the_file_does_not_matter() {
    let a = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n    v: \"2\"\n    audit-log-maxage: \"30\"\n    event-ttl: 2h0m0s\n";
    let b = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n    event-ttl: 2h0m0s\n    v: \"2\"\n    audit-log-maxage: \"30\"\n";
    assert_eq!(parse(a).config, parse(b).config);
    let names: Vec<String> = parse(a)
        .config
        .api_server
        .extra_args
        .into_iter()
        .map(|a| a.name)
        .collect();
    assert_eq!(names, ["audit-log-maxage", "event-ttl", "v"]);
}

#[test]
fn yaml_1_1_booleans_and_numbers_stay_text_in_extra_args() {
    let text = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n    a: on\n    b: yes\n    c: 0755\n    d: 1.10\n    e:\n";
    let args = parse(text).config.api_server.extra_args;
    let values: Vec<&str> = args.iter().map(|a| a.value.as_str()).collect();
    assert_eq!(values, ["on", "yes", "0755", "1.10", ""]);
}

#[test]
fn v1beta4_extra_envs_are_kept() {
    let text = r#"apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
controllerManager:
  extraEnvs:
  - name: HTTPS_PROXY
    value: http://proxy.example.com:3128
  - name: NODE_NAME
    valueFrom:
      fieldRef:
        fieldPath: spec.nodeName
"#;
    let envs = parse(text).config.controller_manager.extra_envs;
    assert_eq!(
        envs,
        vec![
            EnvVar {
                name: "HTTPS_PROXY".into(),
                value: Some("http://proxy.example.com:3128".into()),
                ..EnvVar::default()
            },
            EnvVar {
                name: "NODE_NAME".into(),
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        field_path: "spec.nodeName".into(),
                        ..ObjectFieldSelector::default()
                    }),
                    ..EnvVarSource::default()
                }),
                ..EnvVar::default()
            },
        ]
    );
}

#[test]
fn external_etcd_is_read() {
    let text = r#"apiVersion: kubeadm.k8s.io/v1beta3
kind: ClusterConfiguration
etcd:
  external:
    endpoints:
    - https://10.0.0.5:2379
    - https://10.0.0.6:2379
    caFile: /etc/etcd/pki/ca.crt
    certFile: /etc/etcd/pki/apiserver-etcd-client.crt
    keyFile: /etc/etcd/pki/apiserver-etcd-client.key
"#;
    assert_eq!(
        parse(text).config.etcd,
        Etcd::External {
            endpoints: vec![
                "https://10.0.0.5:2379".into(),
                "https://10.0.0.6:2379".into()
            ],
            ca_file: Some("/etc/etcd/pki/ca.crt".into()),
            cert_file: Some("/etc/etcd/pki/apiserver-etcd-client.crt".into()),
            key_file: Some("/etc/etcd/pki/apiserver-etcd-client.key".into()),
        }
    );
}

#[test]
fn configmap_data_with_one_cluster_configuration_is_read() {
    // What kubeadm 1.33 stores in kube-system/kubeadm-config.
    let data = "apiServer: {}\napiVersion: kubeadm.k8s.io/v1beta4\ncaCertificateValidityPeriod: 87600h0m0s\ncertificateValidityPeriod: 8760h0m0s\ncertificatesDir: /etc/kubernetes/pki\nclusterName: kubernetes\ncontrollerManager: {}\ndns: {}\nencryptionAlgorithm: RSA-2048\netcd:\n  local:\n    dataDir: /var/lib/etcd\nimageRepository: registry.k8s.io\nkind: ClusterConfiguration\nkubernetesVersion: v1.33.1\nnetworking:\n  dnsDomain: cluster.local\n  podSubnet: 10.244.0.0/16\n  serviceSubnet: 10.96.0.0/12\nproxy: {}\nscheduler: {}\n";
    let parsed = ClusterConfig::from_configmap_data(data).unwrap();
    let mut expected = ClusterConfig::default_for(&KubeVersion::new(1, 33, 1));
    expected.networking.pod_subnet = Some("10.244.0.0/16".into());
    assert_eq!(parsed.config, expected);
    assert_eq!(parsed.api_version, ApiVersion::V1Beta4);
}

#[test]
fn rootless_control_plane_gate_is_noticed() {
    let text = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nfeatureGates:\n  RootlessControlPlane: true\n  EtcdLearnerMode: false\n";
    let parsed = parse(text);
    assert_eq!(
        parsed.notices,
        vec![Notice::FeatureGateNotRendered {
            gate: "RootlessControlPlane".into()
        }]
    );
}

#[test]
fn documents_split_at_markers_only() {
    let text = "# comment\n---\n---\napiVersion: a\n--- # second\nkind: b\n...\n";
    assert_eq!(ClusterConfig::document_starts(text), vec![4, 6]);
    assert_eq!(ClusterConfig::document_starts("a: 1\n"), vec![1]);
    assert_eq!(
        ClusterConfig::document_starts("# only a comment\n"),
        Vec::<usize>::new()
    );
}

#[test]
fn parsed_config_serialises_in_kubeadm_words() {
    let json = serde_json::to_value(parse(V1BETA4_FULL)).unwrap();
    assert_eq!(json["apiVersion"], "kubeadm.k8s.io/v1beta4");
    assert_eq!(json["config"]["kubernetesVersion"], "v1.32.4");
    assert_eq!(json["config"]["etcd"]["local"]["dataDir"], "/var/lib/etcd");
    assert_eq!(
        json["config"]["apiServer"]["extraArgs"][0]["name"],
        "audit-log-path"
    );
}
