//! Static pods from manifest files and their mirror pods in the API.

use super::*;

const MANIFEST: &str = "
apiVersion: v1
kind: Pod
metadata: {name: kube-apiserver, namespace: kube-system}
spec:
  hostNetwork: true
  containers:
  - name: kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.32.0
    command: [kube-apiserver, --secure-port=6443]
";
const FILE: &str = "/etc/kubernetes/manifests/kube-apiserver.yaml";

fn static_apiserver(h: &Harness, manifest: &str) -> Pod {
    let parsed = parse_manifest(manifest.as_bytes(), FILE).unwrap();
    static_pod(&parsed, FILE, "cp-1", h.now)
}

fn node() -> k8s_openapi::api::core::v1::Node {
    let mut node = registration(
        &KubeletConfig::new("cp-1", "10.0.0.11", 1),
        &BTreeMap::new(),
        t(0),
    );
    node.metadata.uid = Some("node-uid".into());
    node
}

/// The API creates the mirror the kubelet asked for, with a uid of its own.
fn accept_mirrors(h: &mut Harness) -> Vec<String> {
    let mut uids = Vec::new();
    for mut mirror in h.last.mirror_pods_to_create.clone() {
        let uid = format!("mirror-uid-{}", h.api.len());
        mirror.metadata.uid = Some(uid.clone());
        h.kubelet.observe_pod(&mirror, h.now);
        h.api.insert(uid.clone(), mirror);
        uids.push(uid);
    }
    for gone in h.last.mirror_pods_to_delete.clone() {
        h.api.remove(&gone.uid);
        h.kubelet.pod_removed(&gone.uid, h.now);
    }
    uids
}

#[test]
fn a_static_pod_runs_without_the_api_and_reports_through_its_mirror() {
    let mut h = Harness::new();
    let pod = static_apiserver(&h, MANIFEST);
    h.kubelet.set_static_pods(std::slice::from_ref(&pod), h.now);
    h.run_to(10.0);
    assert_eq!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).len(),
        1,
        "runs before any mirror exists"
    );
    assert!(
        h.last.mirror_pods_to_create.is_empty(),
        "no mirror until the node's uid is known"
    );

    h.kubelet.observe_node(&node());
    h.run_to(11.0);
    assert_eq!(h.last.mirror_pods_to_create.len(), 1);
    let mirror = &h.last.mirror_pods_to_create[0];
    assert_eq!(mirror.metadata.name.as_deref(), Some("kube-apiserver-cp-1"));
    assert_eq!(mirror_hash(mirror), config_hash(&pod));
    let uids = accept_mirrors(&mut h);
    h.run_to(12.0);
    assert!(
        h.last.mirror_pods_to_create.is_empty(),
        "created once it is observed"
    );
    let status = h.status(&uids[0]);
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert!(status.container_statuses.unwrap()[0].ready);
}

#[test]
fn a_mirror_deleted_through_the_api_is_removed_for_good_and_recreated() {
    let mut h = Harness::new();
    h.kubelet.observe_node(&node());
    let pod = static_apiserver(&h, MANIFEST);
    h.kubelet.set_static_pods(&[pod], h.now);
    h.run_to(1.0);
    let first = accept_mirrors(&mut h)[0].clone();
    h.run_to(2.0);
    let mut deleted = h.api[&first].clone();
    deleted.metadata.deletion_timestamp = Some(clock::time(h.now));
    h.kubelet.observe_pod(&deleted, h.now);
    h.run_to(2.5);
    let asked: Vec<&str> = h
        .last
        .mirror_pods_to_delete
        .iter()
        .map(|m| m.uid.as_str())
        .collect();
    assert_eq!(
        asked,
        [first.as_str()],
        "the Terminating mirror goes at once"
    );
    accept_mirrors(&mut h);
    h.run_to(3.0);
    assert_eq!(
        h.last.mirror_pods_to_create.len(),
        1,
        "and a new one replaces it"
    );
    accept_mirrors(&mut h);
    h.run_to(10.0);
    assert_eq!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).len(),
        1,
        "the static pod itself runs on"
    );
}

#[test]
fn removing_the_manifest_stops_the_pod_and_deletes_its_mirror() {
    let mut h = Harness::new();
    h.kubelet.observe_node(&node());
    let pod = static_apiserver(&h, MANIFEST);
    h.kubelet.set_static_pods(&[pod], h.now);
    h.run_to(1.0);
    let mirror = accept_mirrors(&mut h)[0].clone();
    h.run_to(10.0);
    h.kubelet.set_static_pods(&[], h.now);
    h.run_to(10.5);
    assert!(
        h.last.mirror_pods_to_delete.is_empty(),
        "the mirror stays while the pod stops"
    );
    h.run_to(11.0);
    assert_eq!(
        h.last
            .mirror_pods_to_delete
            .iter()
            .map(|m| m.uid.as_str())
            .collect::<Vec<_>>(),
        [mirror.as_str()]
    );
    accept_mirrors(&mut h);
    assert!(h.kubelet.ports().holders(HostPort::tcp(6443)).is_empty());
    assert_eq!(h.kubelet.pod_uids().count(), 0);
}

#[test]
fn an_edited_manifest_replaces_the_pod_only_after_the_old_one_stopped() {
    let mut h = Harness::new();
    h.kubelet.observe_node(&node());
    let old = static_apiserver(&h, MANIFEST);
    h.kubelet.set_static_pods(std::slice::from_ref(&old), h.now);
    h.run_to(1.0);
    accept_mirrors(&mut h);
    h.run_to(10.0);
    let new = static_apiserver(&h, &MANIFEST.replace("v1.32.0", "v1.33.0"));
    assert_ne!(config_hash(&old), config_hash(&new));
    h.kubelet.set_static_pods(std::slice::from_ref(&new), h.now);
    h.run_to(10.9);
    let holders = h.kubelet.ports().holders(HostPort::tcp(6443));
    assert_eq!(
        holders.len(),
        1,
        "the old process still holds the port; the new pod waits"
    );
    h.run_to(11.0);
    let deleted: Vec<_> = h.last.mirror_pods_to_delete.clone();
    assert_eq!(deleted.len(), 1, "old mirror goes when the old pod stopped");
    accept_mirrors(&mut h);
    h.run_to(11.5);
    assert_eq!(h.last.mirror_pods_to_create.len(), 1);
    assert_eq!(
        mirror_hash(&h.last.mirror_pods_to_create[0]),
        config_hash(&new)
    );
    let uids = accept_mirrors(&mut h);
    // New pod: admitted at 11, sandbox 12, pull 12-14, create 14-15, Ready 18.
    h.run_to(18.0);
    let c = h.status(&uids[0]).container_statuses.unwrap()[0].clone();
    assert_eq!((c.image.as_str(), c.ready), (APISERVER_V2, true));
}

#[test]
fn a_manifest_written_back_while_its_pod_stops_starts_it_again_once_stopped() {
    let mut h = Harness::new();
    h.kubelet.observe_node(&node());
    let pod = static_apiserver(&h, MANIFEST);
    h.kubelet.set_static_pods(std::slice::from_ref(&pod), h.now);
    h.run_to(1.0);
    let mirror = accept_mirrors(&mut h)[0].clone();
    h.run_to(10.0);
    h.kubelet.set_static_pods(&[], h.now);
    h.run_to(10.5);
    // The same manifest again, while the pod of the same UID still stops.
    let again = static_apiserver(&h, MANIFEST);
    assert_eq!(config_hash(&pod), config_hash(&again));
    h.kubelet
        .set_static_pods(std::slice::from_ref(&again), h.now);
    h.run_to(11.5);
    assert_eq!(h.kubelet.pod_uids().count(), 1, "a pod of it, afresh");
    let starting = h.status(&mirror).container_statuses.unwrap_or_default();
    assert!(
        starting.iter().all(|c| !c.ready),
        "the old process stopped, the new one is not up yet: {starting:?}"
    );
    // Admitted at 11: sandbox 12, pull 12-14, create 14-15, Ready 18, reported through the
    // same mirror, whose hash it shares.
    h.run_to(18.0);
    let c = h.status(&mirror).container_statuses.unwrap()[0].clone();
    assert!(c.ready, "it runs again: {c:?}");
    assert!(h.last.mirror_pods_to_delete.is_empty());
}

#[test]
fn a_mirror_deleted_by_someone_is_created_again() {
    let mut h = Harness::new();
    h.kubelet.observe_node(&node());
    let pod = static_apiserver(&h, MANIFEST);
    h.kubelet.set_static_pods(&[pod], h.now);
    h.run_to(1.0);
    let mirror = accept_mirrors(&mut h)[0].clone();
    h.api.remove(&mirror);
    h.kubelet.pod_removed(&mirror, h.now);
    h.run_to(2.0);
    assert_eq!(h.last.mirror_pods_to_create.len(), 1);
    assert_eq!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).len(),
        0,
        "not started yet at 2 s"
    );
    h.run_to(10.0);
    assert_eq!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).len(),
        1,
        "the static pod itself never stopped"
    );
}

#[test]
fn a_rebooted_node_starts_its_static_pods_from_disk_without_the_api() {
    let mut h = Harness::new();
    let pod = static_apiserver(&h, MANIFEST);
    h.kubelet.set_static_pods(std::slice::from_ref(&pod), h.now);
    h.run_to(10.0);
    h.kubelet.set_node_state(NodeState::Down, h.now);
    assert!(h.kubelet.ports().holders(HostPort::tcp(6443)).is_empty());
    h.kubelet.set_node_state(NodeState::Up, t(20));
    h.run_to(40.0);
    assert_eq!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).len(),
        1,
        "back from its manifest, with no API to list from"
    );
}
