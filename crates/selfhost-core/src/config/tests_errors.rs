//! Every kind of configuration error, with the message a user sees and where it points.

use super::*;

const V3: &str = "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\n";
const V4: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n";
const INIT4: &str = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n";

fn error_of(text: &str) -> ConfigError {
    match ClusterConfig::from_yaml(text) {
        Ok(parsed) => panic!("expected an error, got {parsed:?}"),
        Err(e) => e,
    }
}

#[test]
fn structural_errors_name_the_place_and_the_fix() {
    let rows: [(String, &str); 16] = [
        (
            format!("{V4}imageRepositry: foo\n"),
            "line 3, column 1: unknown field `imageRepositry` (in ClusterConfiguration); allowed at this place: apiVersion, kind, etcd, networking, kubernetesVersion, controlPlaneEndpoint, apiServer, controllerManager, scheduler, dns, proxy, certificatesDir, imageRepository, featureGates, clusterName, encryptionAlgorithm, certificateValidityPeriod, caCertificateValidityPeriod",
        ),
        (
            format!("{V4}apiServer:\n  extraArgs:\n  - name: a\n    valu: b\n"),
            "line 6, column 5: unknown field `valu` (in ClusterConfiguration); allowed at this place: name, value",
        ),
        (
            format!("{V4}apiServer:\n  timeoutForControlPlane: 4m0s\n"),
            "line 4, column 3: unknown field `timeoutForControlPlane` (in ClusterConfiguration); allowed at this place: extraArgs, extraVolumes, extraEnvs, certSANs",
        ),
        (
            format!("{V3}apiServer:\n  extraArgs:\n  - name: a\n"),
            "line 5, column 5: expected a mapping (`key: value` lines); in kubeadm.k8s.io/v1beta3 extraArgs is a map of `flag: value` lines (the list of name/value entries is v1beta4)",
        ),
        (
            format!("{V4}scheduler:\n  extraArgs:\n    a: b\n"),
            "line 5, column 5: expected a list (`- item` lines); in kubeadm.k8s.io/v1beta4 extraArgs is a list of `- name: flag` / `value: value` entries (the map is v1beta3)",
        ),
        (
            format!("{V4}networking:\n  serviceSubnet: [a]\n"),
            "line 4, column 18: expected a single value",
        ),
        (
            format!("{V4}featureGates:\n  Foo: yes\n"),
            "line 4, column 8: invalid boolean (true or false expected)",
        ),
        (
            format!("{INIT4}localAPIEndpoint:\n  bindPort: abc\n"),
            "line 4, column 13: expected an integer",
        ),
        (
            format!("{V4}kind: ClusterConfiguration\n"),
            "line 3, column 1: duplicate mapping key `kind` is not allowed here",
        ),
        (
            format!("{V4}networking: {{\n"),
            "line 3, column 13: unclosed bracket '{'",
        ),
        (
            "apiVersion: kubeadm.k8s.io/v1beta2\nkind: ClusterConfiguration\n".into(),
            "line 1, column 1: ClusterConfiguration has apiVersion kubeadm.k8s.io/v1beta2, which selfhost does not read; accepted: kubeadm.k8s.io/v1beta3, kubeadm.k8s.io/v1beta4. Convert older files with `kubeadm config migrate`",
        ),
        (
            "# cluster\n\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfig\n".into(),
            "line 3, column 1: unknown kind ClusterConfig in kubeadm.k8s.io/v1beta4; accepted kinds: ClusterConfiguration, InitConfiguration, JoinConfiguration, ResetConfiguration, UpgradeConfiguration",
        ),
        (
            "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ResetConfiguration\n".into(),
            "line 1, column 1: unknown kind ResetConfiguration in kubeadm.k8s.io/v1beta3; accepted kinds: ClusterConfiguration, InitConfiguration, JoinConfiguration",
        ),
        (
            format!("{V4}---\nkind: ClusterConfiguration\n"),
            "line 4, column 1: document 2 has no `apiVersion`; every kubeadm document starts with `apiVersion: kubeadm.k8s.io/v1beta4` (or v1beta3) and a `kind`",
        ),
        (
            format!("{V4}---\n{V4}"),
            "line 4, column 1: a second ClusterConfiguration document; the first one starts at line 1. Keep one",
        ),
        (
            format!("{V4}---\napiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\n"),
            "line 4, column 1: InitConfiguration is kubeadm.k8s.io/v1beta3 but ClusterConfiguration is kubeadm.k8s.io/v1beta4; use one API version for both (`kubeadm config migrate` converts)",
        ),
    ];
    for (text, message) in rows {
        let err = error_of(&text);
        assert_eq!(err.to_string(), message, "for:\n{text}");
        assert!(err.position().is_some(), "{err:?}");
    }
}

#[test]
fn unknown_field_is_structured_for_callers() {
    let err = error_of(&format!("{V3}apiServer:\n  extraArgz: {{}}\n"));
    assert_eq!(
        err,
        ConfigError::UnknownField {
            at: Position::new(4, 3),
            kind: "ClusterConfiguration".into(),
            field: "extraArgz".into(),
            allowed: [
                "extraArgs",
                "extraVolumes",
                "certSANs",
                "timeoutForControlPlane"
            ]
            .map(String::from)
            .to_vec(),
        }
    );
}

#[test]
fn files_without_a_kubeadm_configuration_are_refused() {
    assert_eq!(
        error_of("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
            .to_string(),
        "no ClusterConfiguration or InitConfiguration document found (found only: KubeletConfiguration kubelet.config.k8s.io/v1beta1 at line 1); expected a document with `apiVersion: kubeadm.k8s.io/v1beta4` (or v1beta3) and `kind: ClusterConfiguration`"
    );
    assert_eq!(
        error_of("# nothing here\n"),
        ConfigError::NoConfiguration { found: vec![] }
    );
    assert_eq!(
        error_of("just a string\n").to_string(),
        "line 1, column 1: expected a mapping (`key: value` lines)"
    );
}

#[test]
fn semantic_problems_are_all_reported_in_reading_order() {
    let text = format!(
        "{V4}kubernetesVersion: stable-1\ncontrolPlaneEndpoint: \"cp:99999\"\nimageRepository: https://r.example.com\nnetworking:\n  serviceSubnet: 10.96.0.0/33\n  podSubnet: 10.0.0.0/8,10.1.0.0/16\n  dnsDomain: Cluster.Local\ncertificatesDir: etc/pki\netcd:\n  local:\n    dataDir: var/lib/etcd\n    extraArgs:\n    - name: --x\n      value: y\napiServer:\n  extraArgs:\n  - name: \"\"\n    value: y\n  extraVolumes:\n  - name: Bad_Name\n    hostPath: relative\n    mountPath: /ok\n    pathType: Dir\n  extraEnvs:\n  - value: x\n"
    );
    let expected = "invalid configuration:
  - line 3, column 20: kubernetesVersion: \"stable-1\" is a release label that kubeadm resolves over the network; write an exact version such as v1.33.2
  - line 4, column 23: controlPlaneEndpoint: 99999 is not a port; use a number from 1 to 65535
  - line 5, column 18: imageRepository: \"https://r.example.com\" has a URL scheme; write the registry without it, e.g. registry.example.com/k8s
  - line 7, column 18: networking.serviceSubnet: \"10.96.0.0/33\" is not a CIDR: the prefix length must be a number from 0 to 32
  - line 8, column 14: networking.podSubnet: \"10.0.0.0/8,10.1.0.0/16\" has two CIDRs of the same IP family; dual-stack needs one IPv4 and one IPv6 CIDR
  - line 9, column 14: networking.dnsDomain: \"Cluster.Local\" is not a DNS name: use lowercase letters, digits, '-' and '.', starting and ending each part with a letter or digit
  - line 10, column 18: certificatesDir: \"etc/pki\" is not an absolute path; it must start with '/'
  - line 13, column 14: etcd.local.dataDir: \"var/lib/etcd\" is not an absolute path; it must start with '/'
  - line 15, column 7: etcd.local.extraArgs: \"--x\": write flag names without the leading dashes, e.g. \"x\"
  - line 19, column 5: apiServer.extraArgs: a flag name is empty
  - line 22, column 5: apiServer.extraVolumes[Bad_Name].name: \"Bad_Name\" is not a valid volume name: use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit
  - line 22, column 5: apiServer.extraVolumes[Bad_Name].hostPath: \"relative\" is not an absolute path; it must start with '/'
  - line 22, column 5: apiServer.extraVolumes[Bad_Name].pathType: \"Dir\" is not a hostPath type; use one of DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice
  - line 27, column 5: apiServer.extraEnvs: an environment variable has no name";
    let err = error_of(&text);
    assert_eq!(err.to_string(), expected);
    assert_eq!(err.position(), Some(Position::new(3, 20)));
}

/// One semantic rule per row: (document tail, field, message fragment, line).
#[test]
fn validation_table() {
    let rows: [(&str, &str, &str, &str, usize); 12] = [
        (
            V3,
            "etcd:\n  local: {}\n  external:\n    endpoints: [https://e:2379]\n",
            "etcd",
            "mutually exclusive",
            6,
        ),
        (
            V3,
            "etcd:\n  external:\n    endpoints: [http://e:2379]\n    caFile: /ca.crt\n    certFile: /c.crt\n    keyFile: /c.key\n",
            "etcd.external.endpoints",
            "uses http, but caFile/certFile/keyFile are set",
            5,
        ),
        (
            V3,
            "etcd:\n  external:\n    endpoints: [https://e:2379]\n    caFile: /ca.crt\n",
            "etcd.external.certFile",
            "all three are needed",
            5,
        ),
        (
            V3,
            "etcd:\n  external:\n    caFile: ca.crt\n    certFile: /c\n    keyFile: /k\n",
            "etcd.external.endpoints",
            "at least one client URL",
            5,
        ),
        (
            V3,
            "etcd:\n  external:\n    endpoints: [etcd-1:2379]\n",
            "etcd.external.endpoints",
            "is not a URL",
            5,
        ),
        (
            V3,
            "apiServer:\n  timeoutForControlPlane: soon\n",
            "apiServer.timeoutForControlPlane",
            "not a duration",
            4,
        ),
        (
            INIT4,
            "timeouts:\n  controlPlaneComponentHealthCheck: -4m\n",
            "timeouts.controlPlaneComponentHealthCheck",
            "not a duration",
            4,
        ),
        (
            INIT4,
            "localAPIEndpoint:\n  bindPort: 70000\n",
            "localAPIEndpoint.bindPort",
            "from 1 to 65535",
            4,
        ),
        (
            INIT4,
            "localAPIEndpoint:\n  advertiseAddress: cp-1\n",
            "localAPIEndpoint.advertiseAddress",
            "not an IP address",
            4,
        ),
        (
            INIT4,
            "nodeRegistration:\n  name: CP_1\n",
            "nodeRegistration.name",
            "not a DNS name",
            4,
        ),
        (
            V4,
            "controllerManager:\n  extraVolumes:\n  - hostPath: /a\n    mountPath: /a\n",
            "controllerManager.extraVolumes[].name",
            "not a valid volume name",
            5,
        ),
        (
            V4,
            "scheduler:\n  extraVolumes:\n  - name: cfg\n    hostPath: /a\n",
            "scheduler.extraVolumes[cfg].mountPath",
            "not an absolute path",
            5,
        ),
    ];
    for (head, tail, field, fragment, line) in rows {
        let text = format!("{head}{tail}");
        let ConfigError::Invalid(problems) = error_of(&text) else {
            panic!("not a validation error for:\n{text}");
        };
        let problem = problems
            .iter()
            .find(|p| p.field == field)
            .unwrap_or_else(|| panic!("no problem on {field} in {problems:?}"));
        assert!(
            problem.message.contains(fragment),
            "{field}: {}",
            problem.message
        );
        assert_eq!(problem.at.map(|at| at.line), Some(line), "{field}");
    }
}

#[test]
fn valid_edge_values_pass() {
    let text = format!(
        "{V4}controlPlaneEndpoint: \"[fd00::1]:6443\"\nnetworking:\n  serviceSubnet: fd00:10:96::/108\n  dnsDomain: corp.example\netcd:\n  external:\n    endpoints: [\"http://10.0.0.5:2379\"]\n---\n{INIT4}localAPIEndpoint:\n  bindPort: 65535\n"
    );
    let config = ClusterConfig::from_yaml(&text).map(|p| p.config);
    assert!(config.is_ok(), "{config:?}");
}

#[test]
fn configmap_data_must_be_one_cluster_configuration() {
    let rows = [
        (format!("{V4}---\n{V4}"), "holds 2 documents"),
        (INIT4.to_string(), "holds kind InitConfiguration"),
        (String::new(), "holds no document"),
        (
            "apiVersion: v1\nkind: ConfigMap\n".to_string(),
            "holds kind ConfigMap (v1)",
        ),
    ];
    for (text, fragment) in rows {
        let err = ClusterConfig::from_configmap_data(&text).unwrap_err();
        assert!(
            err.to_string().starts_with(&format!(
                "the kubeadm-config ConfigMap's ClusterConfiguration {fragment}; expected exactly one"
            )),
            "{err}"
        );
    }
    // An old API version keeps its specific message.
    let old = "apiVersion: kubeadm.k8s.io/v1beta2\nkind: ClusterConfiguration\n";
    assert!(matches!(
        ClusterConfig::from_configmap_data(old),
        Err(ConfigError::UnsupportedApiVersion { .. })
    ));
}
