//! A node-local API front (`selfhost front`) as the kubelet runs it: it binds the node's API
//! address beside kube-apiservers bound to loopback addresses of their own, and on SIGTERM
//! stops accepting at once and drains.

use std::net::IpAddr;

use super::*;

const FRONT_IMAGE: &str = "example.com/selfhost-front:v1";

fn ip(text: &str) -> Option<IpAddr> {
    Some(text.parse().unwrap())
}

fn bound(name: &str, address: Option<&str>) -> Pod {
    let mut p = apiserver(name, APISERVER_V1, false);
    if let Some(address) = address {
        let command = p.spec.as_mut().unwrap().containers[0].command.as_mut();
        command.unwrap().push(format!("--bind-address={address}"));
    }
    p
}

fn front_pod(name: &str) -> Pod {
    let mut p = pod(name, FRONT_IMAGE);
    let spec = p.spec.as_mut().unwrap();
    spec.host_network = Some(true);
    spec.termination_grace_period_seconds = Some(30);
    let container = &mut spec.containers[0];
    container.command = Some(vec!["selfhost".into()]);
    container.args = Some(
        "front --listen 10.0.0.11:6443 --backend 127.0.0.1:6443 --backend 127.0.0.2:6443 \
         --drain-timeout 20s"
            .split_whitespace()
            .map(str::to_string)
            .collect(),
    );
    p
}

fn process_of<'a>(h: &'a Harness, uid: &str) -> Option<&'a Process> {
    h.kubelet
        .processes()
        .find(|p| p.pod_uid == uid && p.is_alive())
}

#[test]
fn a_front_binds_the_nodes_address_beside_apiservers_on_their_own() {
    let mut h = Harness::new();
    h.registry
        .set_behaviour(FRONT_IMAGE, ImageBehaviour::default())
        .unwrap();
    let one = h.create(bound("one", Some("127.0.0.1")));
    let two = h.create(bound("two", Some("127.0.0.2")));
    let front = h.create(front_pod("front"));
    h.run_to(10.0);
    for uid in [&one, &two, &front] {
        assert!(h.container(uid).ready, "{uid} runs, no bind conflict");
    }
    let ports = h.kubelet.ports();
    let port = HostPort::tcp(6443);
    assert_eq!(ports.holders(port).len(), 3);
    let front_id = process_of(&h, &front).unwrap().id;
    assert_eq!(ports.reached(port, ip("10.0.0.11")), [front_id]);
    assert_eq!(
        ports.reached(port, ip("127.0.0.2")),
        [process_of(&h, &two).unwrap().id]
    );

    // A kube-apiserver on every address without SO_REUSEPORT overlaps all three.
    let everywhere = h.create(bound("everywhere", None));
    h.run_to(20.0);
    let message = h
        .container(&everywhere)
        .last_state
        .unwrap()
        .terminated
        .unwrap()
        .message;
    assert_eq!(
        message.as_deref(),
        Some(
            "failed to create listener: failed to listen on 0.0.0.0:6443: listen tcp \
             0.0.0.0:6443: bind: address already in use"
        )
    );
}

#[test]
fn a_stopped_front_leaves_its_address_at_once_and_exits_after_its_drain() {
    let mut h = Harness::new();
    h.registry
        .set_behaviour(FRONT_IMAGE, ImageBehaviour::default())
        .unwrap();
    let front = h.create(front_pod("front"));
    h.run_to(10.0);
    let port = HostPort::tcp(6443);
    assert_eq!(h.kubelet.ports().holders(port).len(), 1);
    h.delete(&front, None);
    h.run_to(10.0);
    assert!(
        h.kubelet.ports().holders(port).is_empty(),
        "it stops accepting at SIGTERM"
    );
    h.run_to(29.5);
    assert!(h.api.contains_key(&front), "draining");
    h.run_to(30.5);
    assert!(h.deleted.contains(&front), "its drain of 20 s ran out");

    // A front told it has drained exits then.
    let again = h.create(front_pod("again"));
    h.run_to(40.0);
    h.delete(&again, None);
    h.run_to(41.0);
    let id = process_of(&h, &again).unwrap().id;
    h.kubelet.exit_process(id, 0, "", h.now);
    h.run_to(41.5);
    assert!(h.deleted.contains(&again), "exited once drained");
    assert_eq!(
        h.events
            .iter()
            .filter(|e| e.pod.uid == again && e.warning)
            .count(),
        0
    );
}
