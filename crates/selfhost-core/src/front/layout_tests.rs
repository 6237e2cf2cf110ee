//! Where the front and the kube-apiservers listen, and the front's static pod.

use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use proptest::prelude::*;

use super::*;
use crate::command_line;
use crate::component::Component;
use crate::config::ClusterConfig;
use crate::control_plane::{NodeContext, static_pod};
use crate::daemonset::{DaemonSetOptions, build_daemonset};
use crate::version::KubeVersion;

fn ip(text: &str) -> IpAddr {
    text.parse().expect("address")
}

fn kubeadm_apiserver() -> Pod {
    let version = KubeVersion::parse("v1.33.1").expect("version");
    let config = ClusterConfig::default_for(&version);
    static_pod(
        Component::ApiServer,
        &config,
        &NodeContext::for_node(ip("10.0.0.11")),
        &version,
    )
}

fn command(spec: &PodSpec) -> Vec<String> {
    spec.containers[0].command.clone().unwrap_or_default()
}

fn probe_hosts(spec: &PodSpec) -> Vec<Option<String>> {
    let c = &spec.containers[0];
    [&c.liveness_probe, &c.readiness_probe, &c.startup_probe]
        .into_iter()
        .flatten()
        .filter_map(|p| p.http_get.as_ref().map(|h| h.host.clone()))
        .collect()
}

#[test]
fn layouts_read_back_what_they_write_and_refuse_what_cannot_work() {
    let layout = FrontLayout::default();
    assert_eq!(layout.to_annotation(), "127.0.0.1,127.0.0.2");
    assert_eq!(FrontLayout::parse(&layout.to_annotation()), Ok(layout));
    let cases: [(&str, &str); 5] = [
        ("127.0.0.1", "not two IP addresses"),
        ("127.0.0.1,localhost", "not two IP addresses"),
        ("127.0.0.1,127.0.0.1", "cannot both listen on 127.0.0.1"),
        ("0.0.0.0,127.0.0.2", "wildcard"),
        ("127.0.0.1,::", "wildcard"),
    ];
    for (value, said) in cases {
        let error = FrontLayout::parse(value).expect_err(value).to_string();
        assert!(error.contains(said), "{value}: {error}");
    }
    assert_eq!(
        FrontLayout::parse(" 127.0.1.201 , 127.0.1.202 ").map(|l| l.backup),
        Ok(ip("127.0.1.202"))
    );
}

#[test]
fn a_daemonset_says_whether_its_pods_listen_behind_a_front() {
    let mut ds = DaemonSet::default();
    assert_eq!(FrontLayout::of_daemonset(&ds), Ok(None));
    FrontLayout::default().annotate(&mut ds);
    assert_eq!(
        FrontLayout::of_daemonset(&ds),
        Ok(Some(FrontLayout::default()))
    );
    ds.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(FRONT_ANNOTATION.to_string(), "nonsense".to_string());
    assert!(FrontLayout::of_daemonset(&ds).is_err());

    let mut ds = build_daemonset(
        Component::ApiServer,
        &kubeadm_apiserver(),
        &DaemonSetOptions::default(),
    )
    .expect("daemonset");
    FrontLayout::default().put_behind(&mut ds);
    assert_eq!(
        FrontLayout::of_daemonset(&ds),
        Ok(Some(FrontLayout::default()))
    );
    let template = ds.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(bound_address(&template), Some(ip("127.0.0.1")));
}

#[test]
fn behind_a_front_the_apiserver_listens_and_is_probed_on_its_own_address_only() {
    let pod = kubeadm_apiserver();
    let ds = build_daemonset(Component::ApiServer, &pod, &DaemonSetOptions::default())
        .expect("daemonset");
    let template = ds.spec.expect("spec").template.spec.expect("pod spec");
    assert_eq!(bound_address(&template), None, "kubeadm binds the wildcard");

    for address in [ip("127.0.0.1"), ip("127.0.0.2")] {
        let spec = listening_on(template.clone(), address);
        assert_eq!(bound_address(&spec), Some(address));
        let hosts = probe_hosts(&spec);
        assert!(!hosts.is_empty(), "kubeadm's apiserver has probes");
        assert!(
            hosts
                .iter()
                .all(|h| h.as_deref() == Some(&*address.to_string())),
            "{hosts:?}"
        );
        // The port and the advertised address are what they were: the Endpoints of the
        // kubernetes Service keep naming the node's address and port, where the front is.
        for flag in ["secure-port", "advertise-address"] {
            assert_eq!(
                command_line::flag_value(&command(&spec), flag),
                command_line::flag_value(&command(&template), flag),
                "{flag}"
            );
        }
    }
}

#[test]
fn the_front_listens_where_kubeadm_advertises_the_api() {
    let pod = kubeadm_apiserver();
    let spec = pod.spec.as_ref().expect("spec");
    assert_eq!(
        api_address(spec, None),
        Some("10.0.0.11:6443".parse::<SocketAddr>().expect("addr"))
    );
    let mut other_port = spec.clone();
    other_port.containers[0].command = Some(command_line::set_flag(
        &command(spec),
        "secure-port",
        "7443",
    ));
    assert_eq!(api_address(&other_port, None).map(|a| a.port()), Some(7443));
    // A template's per-node variable is the node's IP, when known.
    let template = build_daemonset(Component::ApiServer, &pod, &DaemonSetOptions::default())
        .expect("daemonset")
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec");
    assert_eq!(api_address(&template, None), None);
    assert_eq!(
        api_address(&template, Some(ip("10.0.0.12"))),
        Some("10.0.0.12:6443".parse::<SocketAddr>().expect("addr"))
    );
}

#[test]
fn out_of_the_front_the_apiserver_listens_and_is_probed_as_before() {
    let kubeadm = kubeadm_apiserver();
    let original = kubeadm.spec.as_ref().expect("spec");
    let template = build_daemonset(Component::ApiServer, &kubeadm, &DaemonSetOptions::default())
        .expect("daemonset")
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec");
    let behind = listening_on(template.clone(), ip("127.0.0.1"));

    let back = out_of_front(behind.clone(), Some(original));
    assert_eq!(bound_address(&back), None, "kubeadm's wildcard again");
    assert_eq!(probe_hosts(&back), probe_hosts(original));

    let mut bound = original.clone();
    bound.containers[0].command = Some(command_line::set_flag(
        &command(original),
        "bind-address",
        "10.0.0.11",
    ));
    let back = out_of_front(behind.clone(), Some(&bound));
    assert_eq!(bound_address(&back), Some(ip("10.0.0.11")));

    let back = out_of_front(behind, None);
    assert_eq!(bound_address(&back), None);
    assert!(
        probe_hosts(&back)
            .iter()
            .all(|h| h.as_deref() == Some("127.0.0.1")),
        "{:?}",
        probe_hosts(&back)
    );
}

#[test]
fn the_front_pod_runs_the_front_between_the_nodes_address_and_both_loopback_backends() {
    let front = FrontPod {
        image: "ghcr.io/example/selfhost:v0.1.0".into(),
        listen: "10.0.0.11:6443".parse().expect("addr"),
        layout: FrontLayout::default(),
        ca_file: CLUSTER_CA_FILE.into(),
        tuning: None,
    };
    let pod = front.render();
    assert!(is_front(&pod));
    assert_eq!(pod.metadata.name.as_deref(), Some(FRONT_NAME));
    let spec = pod.spec.as_ref().expect("spec");
    let args = spec.containers[0].args.clone().expect("args").join(" ");
    assert_eq!(
        args,
        "front --listen 10.0.0.11:6443 --backend 127.0.0.1:6443 --backend 127.0.0.2:6443 \
         --ca-file /etc/kubernetes/pki/ca.crt --check-server-name kubernetes \
         --handover-socket /run/selfhost-front/handover.sock"
    );
    assert_eq!(spec.host_network, Some(true), "it listens on the node");
    assert_eq!(
        spec.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    assert_eq!(
        spec.termination_grace_period_seconds,
        Some(30),
        "its 25 s drain fits"
    );
    let mounts = spec.containers[0].volume_mounts.clone().expect("mounts");
    assert_eq!(mounts.len(), 2);
    assert_eq!(mounts[0].mount_path, "/etc/kubernetes/pki");
    assert_eq!(mounts[0].read_only, Some(true), "it only reads the CA");
    // The hand-over socket's directory, on the host: the next front's pod reaches it there.
    assert_eq!(mounts[1].mount_path, "/run/selfhost-front");
    assert_ne!(mounts[1].read_only, Some(true), "it binds its socket there");
    let volumes = spec.volumes.clone().expect("volumes");
    let handover = volumes
        .iter()
        .find(|v| v.name == mounts[1].name)
        .and_then(|v| v.host_path.clone())
        .expect("a host path");
    assert_eq!(handover.path, "/run/selfhost-front");
    assert_eq!(
        handover.type_.as_deref(),
        Some("DirectoryOrCreate"),
        "/run is emptied at boot"
    );
    assert!(HANDOVER_SOCKET.starts_with(&handover.path));

    let tuned = FrontPod {
        tuning: Some(FrontTuning {
            check_interval: std::time::Duration::from_millis(40),
            hold: std::time::Duration::from_millis(400),
            drain: std::time::Duration::from_secs(5),
        }),
        ..front
    }
    .render();
    let spec = tuned.spec.expect("spec");
    let args = spec.containers[0].args.clone().expect("args").join(" ");
    assert!(
        args.ends_with("--check-interval 40ms --hold 400ms --drain-timeout 5000ms"),
        "{args}"
    );
    assert_eq!(spec.termination_grace_period_seconds, Some(10));
}

proptest! {
    /// Any two distinct specific addresses make a layout, and its annotation reads back as
    /// the same layout.
    #[test]
    fn every_layout_survives_its_annotation(a in any::<[u8; 4]>(), b in any::<[u8; 4]>()) {
        let (a, b) = (IpAddr::from(a), IpAddr::from(b));
        match FrontLayout::new(a, b) {
            Ok(layout) => prop_assert_eq!(FrontLayout::parse(&layout.to_annotation()), Ok(layout)),
            Err(_) => prop_assert!(a == b || a.is_unspecified() || b.is_unspecified()),
        }
    }
}
