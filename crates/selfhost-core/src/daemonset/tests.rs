use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, Volume};

use super::*;
use crate::command_line::flag_value;

pub(crate) fn fixture(component: Component) -> Pod {
    let yaml = match component {
        Component::ApiServer => include_str!("../../tests/fixtures/kube-apiserver.yaml"),
        Component::ControllerManager => {
            include_str!("../../tests/fixtures/kube-controller-manager.yaml")
        }
        Component::Scheduler => include_str!("../../tests/fixtures/kube-scheduler.yaml"),
    };
    serde_saphyr::from_str(yaml).expect("fixture parses")
}

fn build(component: Component, certs_in_secrets: bool) -> DaemonSet {
    build_daemonset(
        component,
        &fixture(component),
        &DaemonSetOptions { certs_in_secrets },
    )
    .expect("builds")
}

fn pod_spec(ds: &DaemonSet) -> &PodSpec {
    ds.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("template spec")
}

fn command(ds: &DaemonSet) -> &[String] {
    pod_spec(ds).containers[0]
        .command
        .as_deref()
        .expect("command")
}

fn volume<'a>(ds: &'a DaemonSet, name: &str) -> &'a Volume {
    pod_spec(ds)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == name)
        .expect("volume")
}

#[test]
fn every_component_gets_kubeadms_names_selector_and_placement() {
    for component in Component::ALL {
        let ds = build(component, false);
        let name = component.daemonset_name();
        assert_eq!(ds.metadata.name.as_deref(), Some(name.as_str()));
        assert_eq!(ds.metadata.namespace.as_deref(), Some("kube-system"));
        let spec = ds.spec.as_ref().expect("spec");
        let selector = spec.selector.match_labels.as_ref().expect("selector");
        assert_eq!(selector.get("k8s-app"), Some(&name));
        // The selector must match the template labels, or the API server rejects the DaemonSet.
        let labels = spec
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref())
            .expect("labels");
        assert!(selector.iter().all(|(k, v)| labels.get(k) == Some(v)));
        assert_eq!(
            labels.get("component").map(String::as_str),
            Some(component.name())
        );
        assert_eq!(
            spec.update_strategy
                .as_ref()
                .and_then(|s| s.type_.as_deref()),
            Some("RollingUpdate")
        );

        let pod = pod_spec(&ds);
        assert_eq!(
            pod.node_selector
                .as_ref()
                .and_then(|s| s.get(CONTROL_PLANE_NODE_LABEL)),
            Some(&String::new())
        );
        let keys: Vec<_> = pod
            .tolerations
            .iter()
            .flatten()
            .filter_map(|t| t.key.as_deref())
            .collect();
        assert_eq!(keys, [CONTROL_PLANE_NODE_LABEL, LEGACY_MASTER_LABEL]);
        assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
        assert_eq!(pod.host_network, Some(true));
        assert_eq!(
            pod.priority_class_name.as_deref(),
            Some("system-node-critical")
        );
    }
}

#[test]
fn apiserver_advertises_its_own_node_ip_and_probes_itself() {
    let ds = build(Component::ApiServer, false);
    assert_eq!(
        flag_value(command(&ds), "advertise-address"),
        Some("$(HOST_IP)")
    );
    let container = &pod_spec(&ds).containers[0];
    let env = container.env.as_ref().expect("env");
    assert_eq!(env[0].name, crate::control_plane::HOST_IP_ENV);
    let field = env[0]
        .value_from
        .as_ref()
        .and_then(|v| v.field_ref.as_ref())
        .expect("fieldRef");
    assert_eq!(field.field_path, "status.hostIP");
    for probe in [
        &container.liveness_probe,
        &container.readiness_probe,
        &container.startup_probe,
    ] {
        let http = probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .expect("http probe");
        assert_eq!(
            http.host.as_deref(),
            Some("127.0.0.1"),
            "a probe must not target the node the manifest came from"
        );
    }
    // The advertise endpoint annotation describes one node only.
    let annotations = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref());
    assert!(annotations.is_none_or(|a| !a.keys().any(|k| k.contains("advertise-address"))));
}

#[test]
fn a_node_specific_bind_address_becomes_the_running_nodes_own() {
    use k8s_openapi::api::core::v1::{HTTPGetAction, Probe};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    // (bind address, what the template binds, the probe's host afterwards)
    for (bind, expected_bind, expected_host) in [
        ("10.0.0.5", "$(HOST_IP)", None),
        ("127.0.1.2", "$(HOST_IP)", None),
        ("fd00::5", "$(HOST_IP)", None),
        ("127.0.0.1", "127.0.0.1", Some("127.0.0.1")),
        ("0.0.0.0", "0.0.0.0", Some("0.0.0.0")),
        ("::", "::", Some("::")),
        ("$(HOST_IP)", "$(HOST_IP)", Some("$(HOST_IP)")),
    ] {
        let probe = Probe {
            http_get: Some(HTTPGetAction {
                host: Some(bind.to_string()),
                port: IntOrString::Int(10257),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        };
        let spec = PodSpec {
            containers: vec![Container {
                name: "kube-controller-manager".into(),
                command: Some(vec![
                    "kube-controller-manager".into(),
                    format!("--bind-address={bind}"),
                ]),
                liveness_probe: Some(probe),
                ..Container::default()
            }],
            ..PodSpec::default()
        };
        let once = super::bind_host_ip(spec);
        assert_eq!(
            once,
            super::bind_host_ip(once.clone()),
            "idempotent for {bind}"
        );
        let container = &once.containers[0];
        let command = container.command.clone().unwrap_or_default();
        assert_eq!(
            flag_value(&command, "bind-address"),
            Some(expected_bind),
            "{bind}"
        );
        let host = container
            .liveness_probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .and_then(|h| h.host.as_deref());
        assert_eq!(host, expected_host, "{bind}");
        let has_env = container.env.iter().flatten().any(|e| e.name == "HOST_IP");
        assert_eq!(
            has_env,
            expected_bind == "$(HOST_IP)" && bind != "$(HOST_IP)",
            "{bind}"
        );
    }
}

#[test]
fn the_retry_after_flag_is_added_only_where_the_apiserver_knows_it() {
    // An apiserver older than v1.22 refuses to start on the unknown flag.
    for (image, expected) in [
        ("registry.k8s.io/kube-apiserver:v1.33.1", Some("true")),
        ("registry.k8s.io/kube-apiserver:v1.22.0", Some("true")),
        ("k8s.gcr.io/kube-apiserver:v1.21.14", None),
        ("k8s.gcr.io/kube-apiserver:v1.20.2", None),
        ("registry.example/kube-apiserver:custom", None),
    ] {
        let spec = PodSpec {
            containers: vec![Container {
                name: "kube-apiserver".into(),
                image: Some(image.into()),
                command: Some(vec!["kube-apiserver".into()]),
                ..Container::default()
            }],
            ..PodSpec::default()
        };
        let spec = super::shut_down_gracefully(spec);
        let command = spec.containers[0].command.clone().unwrap_or_default();
        assert_eq!(
            flag_value(&command, "shutdown-send-retry-after"),
            expected,
            "{image}"
        );
        assert_eq!(
            flag_value(&command, "shutdown-delay-duration"),
            Some("5s"),
            "{image}"
        );
    }
}

#[test]
fn apiserver_shuts_down_gracefully() {
    let ds = build(Component::ApiServer, false);
    assert_eq!(
        flag_value(command(&ds), "shutdown-delay-duration"),
        Some("5s")
    );
    assert_eq!(
        flag_value(command(&ds), "shutdown-send-retry-after"),
        Some("true")
    );
    assert_eq!(pod_spec(&ds).termination_grace_period_seconds, Some(30));
    for component in [Component::ControllerManager, Component::Scheduler] {
        assert_eq!(
            flag_value(command(&build(component, false)), "shutdown-delay-duration"),
            None
        );
    }
}

#[test]
fn controller_manager_and_scheduler_keep_their_loopback_probes() {
    for component in [Component::ControllerManager, Component::Scheduler] {
        let ds = build(component, false);
        let container = &pod_spec(&ds).containers[0];
        let host = container
            .liveness_probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .and_then(|h| h.host.as_deref());
        assert_eq!(host, Some("127.0.0.1"));
        assert!(container.env.is_none(), "{component} needs no HOST_IP");
    }
}

#[test]
fn mutators_are_idempotent() {
    for component in Component::ALL {
        let options = DaemonSetOptions::default();
        let once =
            self_hosted_pod_spec(component, fixture(component).spec.expect("spec"), &options)
                .expect("once");
        let twice = self_hosted_pod_spec(component, once.clone(), &options).expect("twice");
        assert_eq!(once, twice, "{component}");
    }
}

#[test]
fn building_is_deterministic_and_leaves_the_input_alone() {
    for component in Component::ALL {
        let pod = fixture(component);
        let before = pod.clone();
        let a = build_daemonset(component, &pod, &DaemonSetOptions::default()).expect("a");
        let b = build_daemonset(component, &pod, &DaemonSetOptions::default()).expect("b");
        assert_eq!(a, b);
        assert_eq!(pod, before);
    }
}

fn projected_files(ds: &DaemonSet) -> Vec<(String, String, String)> {
    let projected = volume(ds, "k8s-certs")
        .projected
        .as_ref()
        .expect("projected volume");
    projected
        .sources
        .iter()
        .flatten()
        .filter_map(|s| s.secret.as_ref())
        .flat_map(|s| {
            s.items
                .iter()
                .flatten()
                .map(|i| (s.name.clone(), i.key.clone(), i.path.clone()))
        })
        .collect()
}

#[test]
fn apiserver_certs_in_secrets_include_the_etcd_client_certificates() {
    let ds = build(Component::ApiServer, true);
    let files = projected_files(&ds);
    for wanted in [
        ("etcd-ca", "tls.crt", "etcd/ca.crt"),
        (
            "apiserver-etcd-client",
            "tls.crt",
            "apiserver-etcd-client.crt",
        ),
        (
            "apiserver-etcd-client",
            "tls.key",
            "apiserver-etcd-client.key",
        ),
        ("sa", "tls.key", "sa.key"),
        ("sa", "tls.crt", "sa.pub"),
        ("front-proxy-ca", "tls.crt", "front-proxy-ca.crt"),
    ] {
        let wanted = (
            wanted.0.to_string(),
            wanted.1.to_string(),
            wanted.2.to_string(),
        );
        assert!(files.contains(&wanted), "missing {wanted:?} in {files:?}");
    }
    // Only what the apiserver's flags name: the CA's private key stays out of its pod.
    assert!(!files.iter().any(|(_, _, path)| path == "ca.key"));
    assert!(volume(&ds, "k8s-certs").host_path.is_none());
    // The flags still point at the same paths, which the projection now serves.
    assert_eq!(
        flag_value(command(&ds), "etcd-cafile"),
        Some("/etc/kubernetes/pki/etcd/ca.crt")
    );
}

#[test]
fn private_keys_are_projected_with_mode_0600() {
    let ds = build(Component::ApiServer, true);
    let projected = volume(&ds, "k8s-certs")
        .projected
        .as_ref()
        .expect("projected");
    for item in projected
        .sources
        .iter()
        .flatten()
        .filter_map(|s| s.secret.as_ref())
        .flat_map(|s| s.items.iter().flatten())
    {
        let want = item.path.ends_with(".key").then_some(0o600);
        assert_eq!(item.mode, want, "{}", item.path);
    }
}

#[test]
fn controller_manager_certs_and_kubeconfig_come_from_secrets() {
    let ds = build(Component::ControllerManager, true);
    let files = projected_files(&ds);
    assert!(files.contains(&("ca".into(), "tls.key".into(), "ca.key".into())));
    assert!(files.contains(&("sa".into(), "tls.key".into(), "sa.key".into())));
    let kubeconfig = volume(&ds, "kubeconfig");
    assert_eq!(
        kubeconfig
            .secret
            .as_ref()
            .and_then(|s| s.secret_name.as_deref()),
        Some("controller-manager.conf")
    );
    assert!(kubeconfig.host_path.is_none());
    for flag in [
        "kubeconfig",
        "authentication-kubeconfig",
        "authorization-kubeconfig",
    ] {
        assert_eq!(
            flag_value(command(&ds), flag),
            Some("/etc/kubernetes/kubeconfig/controller-manager.conf"),
            "--{flag}"
        );
    }
    let mount = pod_spec(&ds).containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "kubeconfig")
        .expect("mount");
    assert_eq!(mount.mount_path, "/etc/kubernetes/kubeconfig");
}

#[test]
fn scheduler_kubeconfig_comes_from_its_secret() {
    let ds = build(Component::Scheduler, true);
    assert_eq!(
        flag_value(command(&ds), "kubeconfig"),
        Some("/etc/kubernetes/kubeconfig/scheduler.conf")
    );
    assert_eq!(
        volume(&ds, "kubeconfig")
            .secret
            .as_ref()
            .and_then(|s| s.secret_name.as_deref()),
        Some("scheduler.conf")
    );
}

#[test]
fn an_unknown_file_in_the_certificates_directory_is_refused_with_the_fix() {
    let mut pod = fixture(Component::ApiServer);
    let container = &mut pod.spec.as_mut().expect("spec").containers[0];
    let command = container.command.take().expect("command");
    container.command = Some(crate::command_line::set_flag(
        &command,
        "audit-policy-file",
        "/etc/kubernetes/pki/audit.yaml",
    ));
    let err = build_daemonset(
        Component::ApiServer,
        &pod,
        &DaemonSetOptions {
            certs_in_secrets: true,
        },
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("--audit-policy-file"), "{text}");
    assert!(text.contains("/etc/kubernetes/pki/audit.yaml"), "{text}");
    assert!(text.contains("without --certs-in-secrets"), "{text}");
}

#[test]
fn every_projected_file_has_an_upload_source() {
    let uploads = certificate_secrets();
    for component in [Component::ApiServer, Component::ControllerManager] {
        for (secret, key, path) in projected_files(&build(component, true)) {
            let found = uploads
                .iter()
                .any(|s| s.name == secret && s.files.contains(&(key.clone(), path.clone())));
            assert!(
                found,
                "{component}: {secret}/{key} ({path}) is projected but never uploaded"
            );
        }
    }
    let names: Vec<_> = kubeconfig_secrets().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["controller-manager.conf", "scheduler.conf"]);
}

#[test]
fn rendered_and_converted_manifests_give_the_same_daemonset() {
    // A cluster converted from static pods that name their node's IP, and one whose
    // DaemonSets are rendered from configuration, must not differ (or every upgrade would
    // roll twice).
    use crate::config::ClusterConfig;
    use crate::control_plane::{NodeContext, static_pod};
    let version = crate::KubeVersion::parse("v1.33.1").expect("version");
    let config = ClusterConfig::default_for(&version);
    for component in Component::ALL {
        let on_node = static_pod(
            component,
            &config,
            &NodeContext::for_node("10.0.0.11".parse().expect("ip")),
            &version,
        );
        let anywhere = static_pod(component, &config, &NodeContext::default(), &version);
        let options = DaemonSetOptions::default();
        assert_eq!(
            build_daemonset(component, &on_node, &options).expect("from node"),
            build_daemonset(component, &anywhere, &options).expect("rendered"),
            "{component}"
        );
    }
}

mod snapshots {
    use super::*;
    use crate::control_plane::tests::{V1BETA3_FILE, V1BETA4_FILE, config};
    use crate::control_plane::{NodeContext, static_pods};

    fn daemonsets(
        config: &crate::config::ClusterConfig,
        version: &str,
        certs_in_secrets: bool,
    ) -> Vec<DaemonSet> {
        let version = crate::KubeVersion::parse(version).expect("version");
        static_pods(config, &NodeContext::default(), &version)
            .into_iter()
            .map(|(c, pod)| {
                build_daemonset(c, &pod, &DaemonSetOptions { certs_in_secrets }).expect("builds")
            })
            .collect()
    }

    #[test]
    fn default_cluster_v1_33() {
        let version = crate::KubeVersion::parse("v1.33.1").expect("version");
        let config = crate::config::ClusterConfig::default_for(&version);
        insta::assert_yaml_snapshot!(daemonsets(&config, "v1.33.1", false));
    }

    #[test]
    fn v1beta3_file_v1_32_with_certs_in_secrets() {
        insta::assert_yaml_snapshot!(daemonsets(&config(V1BETA3_FILE), "v1.32.4", true));
    }

    #[test]
    fn v1beta4_file_v1_33() {
        insta::assert_yaml_snapshot!(daemonsets(&config(V1BETA4_FILE), "v1.33.1", false));
    }
}
