//! `selfhost manifests`: the YAML a user would apply, and every way to get it wrong.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use predicates::prelude::*;

use crate::{fixture, selfhost};

fn stdout_of(args: &[&str]) -> String {
    let out = selfhost()
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).expect("utf-8 output")
}

fn command_of(spec: Option<&k8s_openapi::api::core::v1::PodSpec>) -> Vec<String> {
    spec.and_then(|s| s.containers[0].command.clone())
        .unwrap_or_default()
}

#[test]
fn daemonsets_by_default_one_per_component_in_upgrade_order() {
    let text = stdout_of(&["manifests", "v1.33.1"]);
    let docs: Vec<DaemonSet> =
        serde_saphyr::from_multiple(&text).expect("a YAML stream of DaemonSets");
    let names: Vec<_> = docs
        .iter()
        .filter_map(|d| d.metadata.name.as_deref())
        .collect();
    assert_eq!(
        names,
        [
            "self-hosted-kube-apiserver",
            "self-hosted-kube-controller-manager",
            "self-hosted-kube-scheduler"
        ]
    );
    for ds in &docs {
        let spec = ds.spec.as_ref().expect("spec");
        let command = command_of(spec.template.spec.as_ref());
        assert!(
            command.contains(&"--permit-port-sharing=true".to_string()),
            "{command:?}"
        );
        let image = spec
            .template
            .spec
            .as_ref()
            .and_then(|s| s.containers[0].image.clone());
        assert!(
            image
                .is_some_and(|i| i.starts_with("registry.k8s.io/kube-") && i.ends_with(":v1.33.1"))
        );
    }
}

#[test]
fn static_pods_as_kubeadm_writes_them() {
    let text = stdout_of(&["manifests", "1.32.4", "--as", "static-pods"]);
    let pods: Vec<Pod> = serde_saphyr::from_multiple(&text).expect("a YAML stream of Pods");
    let names: Vec<_> = pods
        .iter()
        .filter_map(|p| p.metadata.name.as_deref())
        .collect();
    assert_eq!(
        names,
        [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler"
        ]
    );
    assert!(
        pods.iter()
            .all(|p| p.spec.as_ref().and_then(|s| s.host_network) == Some(true))
    );
}

#[test]
fn json_output_is_one_list() {
    let text = stdout_of(&["manifests", "v1.33.1", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(3));
    assert_eq!(list["items"][0]["kind"], "DaemonSet");
}

#[test]
fn a_kubeadm_config_shapes_the_manifests_and_notices_go_to_stderr() {
    let v1beta4 = fixture("kubeadm-v1beta4.yaml");
    let assert = selfhost()
        .args(["manifests", "v1.33.1", "--config", &v1beta4])
        .assert()
        .success();
    let text = String::from_utf8(assert.get_output().stdout.clone()).expect("utf-8");
    assert!(
        text.contains("registry.example.com/k8s/kube-apiserver:v1.33.1"),
        "private registry"
    );
    assert!(
        text.contains("/srv/kubernetes/pki"),
        "custom certificates directory"
    );

    // A file with documents selfhost does not use: rendered, with a notice on stderr only.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeadm.yaml");
    let mut content = std::fs::read_to_string(fixture("kubeadm-v1beta3.yaml")).expect("fixture");
    content.push_str("---\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n");
    std::fs::write(&path, content).expect("write");
    selfhost()
        .args(["manifests", "v1.33.1", "--config"])
        .arg(&path)
        .assert()
        .success()
        .stdout(predicate::str::contains("KubeletConfiguration").not())
        .stderr(
            predicate::str::contains("KubeletConfiguration")
                .and(predicate::str::contains("ignored")),
        )
        // the file names v1.32.4; the command line wins, and says so
        .stderr(predicate::str::contains(
            "names kubernetesVersion v1.32.4; rendering v1.33.1",
        ));
}

#[test]
fn certs_in_secrets_projects_the_etcd_client_certificates() {
    let text = stdout_of(&["manifests", "v1.33.1", "--certs-in-secrets"]);
    assert!(text.contains("name: apiserver-etcd-client") && text.contains("path: etcd/ca.crt"));
    assert!(text.contains("/etc/kubernetes/kubeconfig/controller-manager.conf"));
}

#[test]
fn bad_input_exits_2_with_what_was_wrong_and_how_to_fix_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        path.display().to_string()
    };
    let not_yaml = write("not-yaml.yaml", b"apiVersion: [unclosed\n");
    let wrong_kind = write(
        "pod.yaml",
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
    );
    let unknown_field = write(
        "unknown.yaml",
        b"apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nnetworking:\n  podSubnett: 10.244.0.0/16\n",
    );
    let bad_cidr = write(
        "cidr.yaml",
        b"apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\nnetworking:\n  serviceSubnet: 10.96.0.0/33\n",
    );
    let binary = write("binary.yaml", &[0xff, 0xfe, 0x00, 0x01, 0x80]);
    let huge = write("huge.yaml", &vec![b'#'; 2 * 1024 * 1024]);
    let directory = dir.path().display().to_string();

    let rows: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["manifests", "latest"],
            vec!["invalid Kubernetes version \"latest\"", "v1.33.2"],
        ),
        (
            vec!["manifests", "v1.33"],
            vec!["no patch number", "v1.33.0"],
        ),
        (
            vec!["manifests", "v1.33.1", "--config", "/does/not/exist.yaml"],
            vec!["cannot read the configuration file /does/not/exist.yaml"],
        ),
        (
            vec!["manifests", "v1.33.1", "--config", &not_yaml],
            vec![&not_yaml, "line 1"],
        ),
        (
            vec!["manifests", "v1.33.1", "--config", &wrong_kind],
            vec!["Pod", "ClusterConfiguration"],
        ),
        (
            vec!["manifests", "v1.33.1", "--config", &unknown_field],
            vec!["line 4, column 3", "podSubnett", "podSubnet"],
        ),
        (
            vec!["manifests", "v1.33.1", "--config", &bad_cidr],
            vec!["10.96.0.0/33"],
        ),
        (
            vec!["manifests", "v1.33.1", "--config", &binary],
            vec!["not UTF-8 text"],
        ),
        (
            vec!["manifests", "v1.33.1", "--config", &huge],
            vec!["is 2097152 bytes", "right file"],
        ),
        (
            vec!["manifests", "v1.33.1", "--config", &directory],
            vec!["not a regular file"],
        ),
        (
            vec![
                "manifests",
                "v1.33.1",
                "--as",
                "static-pods",
                "--certs-in-secrets",
            ],
            vec!["--certs-in-secrets applies to DaemonSets only"],
        ),
    ];
    for (args, says) in rows {
        let assert = selfhost()
            .args(&args)
            .assert()
            .code(2)
            .stdout(predicate::str::is_empty());
        let stderr = String::from_utf8(assert.get_output().stderr.clone()).expect("utf-8");
        for part in says {
            assert!(
                stderr.contains(part),
                "{args:?}: expected {part:?} in {stderr}"
            );
        }
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    use std::process::{Command, Stdio};
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
        .args(["manifests", "v1.33.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Like `| head -0`: close the pipe without reading.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn versions_outside_the_supported_range_render_with_a_warning() {
    selfhost()
        .args(["manifests", "v1.28.3"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "warning: v1.28.3 is outside the versions",
        ));
}

/// A configuration whose extraArgs carry a flag the version removed: nothing is printed to
/// apply, exit 3 names the flag, the release that removed it, its replacement and the file to
/// edit; a feature gate at its locked value is rendered, with a warning.
#[test]
fn a_flag_the_version_refuses_is_named_instead_of_rendered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = |name: &str, api_server_args: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n\
                 kubernetesVersion: v1.33.1\napiServer:\n  extraArgs:\n{api_server_args}"
            ),
        )
        .expect("write");
        path.display().to_string()
    };
    let removed = config(
        "removed.yaml",
        "  - name: insecure-port\n    value: \"0\"\n",
    );
    for form in ["daemonsets", "static-pods"] {
        let out = selfhost()
            .args(["manifests", "v1.33.1", "--as", form, "--config", &removed])
            .assert()
            .code(3)
            .get_output()
            .clone();
        assert!(out.stdout.is_empty(), "nothing to apply is printed");
        let stderr = String::from_utf8_lossy(&out.stderr);
        for expected in [
            "kube-apiserver",
            "--insecure-port",
            "v1.24",
            &removed,
            "extraArgs",
        ] {
            assert!(stderr.contains(expected), "{expected:?} in {stderr}");
        }
    }

    let locked = config(
        "locked.yaml",
        "  - name: feature-gates\n    value: PodSchedulingReadiness=true\n",
    );
    let out = selfhost()
        .args(["manifests", "v1.33.1", "--config", &locked])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("kind: DaemonSet"), "{stdout}");
    assert!(
        stderr.contains("PodSchedulingReadiness") && stderr.contains(&locked),
        "{stderr}"
    );
}
