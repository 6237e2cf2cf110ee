//! Reading API objects into observations.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::backup::{BackupOrigin, derive_backup};
use crate::version::KubeVersion;

fn at(text: &str) -> Timestamp {
    text.parse().expect("timestamp")
}

fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("valid object")
}

fn daemonset() -> DaemonSet {
    object(json!({
        "metadata": {
            "name": "self-hosted-kube-apiserver", "uid": "u1", "resourceVersion": "42", "generation": 3,
            "annotations": {"deprecated.daemonset.template.generation": "3"},
            "creationTimestamp": "2026-01-01T00:00:00Z"
        },
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "self-hosted-kube-apiserver"}},
            "template": {
                "metadata": {"labels": {"k8s-app": "self-hosted-kube-apiserver"}},
                "spec": {"containers": [{"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.33.1"}]}
            },
            "updateStrategy": {"type": "OnDelete"}
        },
        "status": {
            "observedGeneration": 2, "desiredNumberScheduled": 3, "currentNumberScheduled": 3,
            "updatedNumberScheduled": 1, "numberReady": 2, "numberAvailable": 2, "numberUnavailable": 1,
            "numberMisscheduled": 0
        }
    }))
}

fn pod() -> Pod {
    object(json!({
        "metadata": {
            "name": "self-hosted-kube-apiserver-abcde", "uid": "p1",
            "labels": {"pod-template-generation": "3", "controller-revision-hash": "7c9f"},
            "creationTimestamp": "2026-01-01T00:01:00Z",
            "deletionTimestamp": "2026-01-01T00:05:00Z", "deletionGracePeriodSeconds": 30
        },
        "spec": {
            "nodeName": "cp-1", "terminationGracePeriodSeconds": 30,
            "containers": [
                {"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.33.1"},
                {"name": "sidecar", "image": "busybox"}
            ]
        },
        "status": {
            "phase": "Running", "startTime": "2026-01-01T00:01:01Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:04Z"}],
            "containerStatuses": [
                {"name": "sidecar", "image": "busybox", "imageID": "", "ready": false, "restartCount": 4,
                 "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                 "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}},
                {"name": "kube-apiserver", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"running": {"startedAt": "2026-01-01T00:01:02Z"}}}
            ]
        }
    }))
}

#[test]
fn a_daemonset_is_read_with_its_template_generation_counters_and_pods() {
    let ds = DaemonSetObservation::from_daemonset(&daemonset(), &[pod()]);
    assert_eq!(ds.name, "self-hosted-kube-apiserver");
    assert_eq!(ds.resource_version.as_deref(), Some("42"));
    assert_eq!((ds.generation, ds.template_generation), (Some(3), Some(3)));
    assert_eq!(
        ds.status,
        DaemonSetCounters {
            observed_generation: Some(2),
            desired: 3,
            current: 3,
            updated: 1,
            ready: 2,
            available: 2,
            unavailable: 1,
            misscheduled: 0,
        }
    );
    assert!(ds.is_on_delete());
    assert_eq!(ds.max_unavailable(), None);
    assert_eq!(ds.nodes(), vec!["cp-1"]);
    assert!(
        ds.is_current(&ds.pods[0]),
        "pod-template-generation 3 is current"
    );
}

#[test]
fn a_pod_is_read_with_readiness_states_and_termination() {
    let pod = PodObservation::from_pod(&pod());
    assert_eq!(pod.node.as_deref(), Some("cp-1"));
    assert_eq!(pod.template_generation, Some(3));
    assert_eq!(pod.revision_hash.as_deref(), Some("7c9f"));
    assert!(pod.ready);
    assert_eq!(pod.ready_since, Some(at("2026-01-01T00:01:04Z")));
    assert!(pod.is_terminating());
    assert_eq!(pod.deletion_grace_seconds, Some(30));
    // Statuses are matched to containers by name, not by position.
    assert_eq!(
        pod.process_started_at("kube-apiserver"),
        Some(at("2026-01-01T00:01:02Z"))
    );
    let sidecar = &pod.containers[1];
    assert_eq!(sidecar.state.waiting_reason(), Some("CrashLoopBackOff"));
    assert_eq!(sidecar.restart_count, 4);
    assert_eq!(sidecar.last_termination.as_deref(), Some("Error"));
    assert!(!pod.processes_stopped());
}

#[test]
fn a_pod_without_status_has_unknown_containers() {
    let pod: Pod =
        object(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}));
    let pod = PodObservation::from_pod(&pod);
    assert!(!pod.ready);
    assert_eq!(pod.node, None);
    assert_eq!(pod.containers[0].state, ContainerState::Unknown);
    assert!(!pod.is_running("c"));
}

#[test]
fn node_readiness_reads_true_false_and_unknown() {
    let node = |status: &str| -> Node {
        object(json!({
            "metadata": {"name": "cp-1", "labels": {"kubernetes.io/hostname": "cp-1.example"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": status, "reason": "KubeletNotReady"}]}
        }))
    };
    let ready = NodeObservation::from_node(&node("True"));
    assert_eq!(ready.ready, NodeReadiness::Ready);
    assert_eq!(ready.hostname.as_deref(), Some("cp-1.example"));
    assert!(ready.unschedulable);
    assert_eq!(
        NodeObservation::from_node(&node("False")).ready,
        NodeReadiness::NotReady {
            reason: Some("KubeletNotReady".into())
        }
    );
    assert_eq!(
        NodeObservation::from_node(&node("Unknown")).ready,
        NodeReadiness::Unknown
    );
}

fn lease(name: &str, labels: serde_json::Value, holder: &str) -> Lease {
    object(json!({
        "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-01-01T00:00:10Z", "resourceVersion": "9"},
        "spec": {"holderIdentity": holder, "renewTime": "2026-01-01T00:00:20.500000Z", "leaseDurationSeconds": 15,
                 "acquireTime": "2026-01-01T00:00:10.000000Z"}
    }))
}

#[test]
fn identity_leases_tell_when_their_holder_is_known_to_have_started() {
    let identity = json!({"apiserver.kubernetes.io/identity": "kube-apiserver", "kubernetes.io/hostname": "cp-1"});
    // Named after its holder (one Lease per process): created by that process.
    let own = IdentitySighting::from_lease(&lease("apiserver-x", identity.clone(), "apiserver-x"))
        .expect("identity");
    assert_eq!(own.holder_since, Some(at("2026-01-01T00:00:10Z")));
    assert_eq!(own.hostname.as_deref(), Some("cp-1"));
    assert_eq!(own.last_renewed, Some(at("2026-01-01T00:00:20.5Z")));
    // Named after the host: every process on it takes the Lease over; the creation time says
    // nothing about the current holder.
    let shared =
        IdentitySighting::from_lease(&lease("apiserver-h", identity.clone(), "apiserver-h_uuid"))
            .expect("identity");
    assert_eq!(shared.holder_since, None);
    assert!(IdentitySighting::from_lease(&lease("kube-scheduler", json!({}), "cp-1_u")).is_none());
    assert!(IdentitySighting::from_lease(&lease("apiserver-e", identity, "")).is_none());
    assert!(own.is_fresh(at("2026-01-01T00:00:50Z")));
    assert!(!own.is_fresh(at("2026-01-01T00:00:51Z")));
}

#[test]
fn a_leader_lease_names_its_holders_host_and_expiry() {
    let leader =
        LeaderLease::from_lease(&lease("kube-scheduler", json!({}), "cp-2.example_4b1e-9f"));
    assert_eq!(leader.holder_hostname(), Some("cp-2.example"));
    assert_eq!(leader.expires_at(), Some(at("2026-01-01T00:00:35.5Z")));
    assert!(leader.is_held_at(at("2026-01-01T00:00:35Z")));
    assert!(!leader.is_held_at(at("2026-01-01T00:00:35.5Z")));
    let released = LeaderLease::from_lease(&lease("kube-scheduler", json!({}), ""));
    assert_eq!(released.holder(), None);
    assert!(!released.is_held_at(at("2026-01-01T00:00:11Z")));
}

#[test]
fn a_backup_is_read_with_its_record_and_serialised_without_failing() {
    let backup = derive_backup(
        &daemonset(),
        crate::component::Component::ApiServer,
        &KubeVersion::parse("v1.34.0").expect("version"),
    )
    .expect("backup");
    let observed =
        BackupObservation::from_daemonset(&backup, &[], crate::component::Component::ApiServer);
    let record = observed.record.as_ref().expect("readable");
    assert!(
        matches!(&record.origin, BackupOrigin::Selfhost { target } if target.to_string() == "v1.34.0")
    );
    let json = serde_json::to_value(&observed).expect("serialises");
    assert_eq!(json["record"]["origin"], "selfhost");
    assert_eq!(json["record"]["target"], "v1.34.0");
}

/// An observation of `nodes` (name, `kubernetes.io/hostname` label) and nothing else.
fn with_nodes(nodes: &[(&str, Option<&str>)]) -> Observation {
    Observation {
        component: crate::component::Component::Scheduler,
        now: at("2026-01-01T00:00:00Z"),
        real: None,
        backup: None,
        nodes: nodes
            .iter()
            .map(|(name, hostname)| NodeObservation {
                name: (*name).into(),
                hostname: hostname.map(Into::into),
                ready: NodeReadiness::Ready,
                ready_since: None,
                unschedulable: false,
                labels: Default::default(),
                taints: Vec::new(),
            })
            .collect(),
        api: ApiHealth::default(),
        identity_leases: vec![],
        leader_lease: None,
        known_starts: Vec::new(),
        stopped: Vec::new(),
        handed_over: Vec::new(),
        availability: Default::default(),
    }
}

/// Control-plane nodes: name and `kubernetes.io/hostname` label.
type Nodes<'a> = &'a [(&'a str, Option<&'a str>)];

/// (case, nodes, host a process names) → the node it runs on (`None`: any of them).
#[test]
fn a_host_is_placed_on_the_one_node_it_names_and_otherwise_on_any() {
    let two = [("cp-1", Some("host-a")), ("cp-2", None)];
    let cases: [(&str, Nodes, &str, Option<&str>); 9] = [
        ("the hostname label", &two, "host-a", Some("cp-1")),
        (
            "the node's name, without a label",
            &two,
            "cp-2",
            Some("cp-2"),
        ),
        (
            "the kubelet lowercases: CP-2 is cp-2",
            &two,
            "CP-2",
            Some("cp-2"),
        ),
        ("a host no node names", &two, "elsewhere", None),
        (
            "a label shared by two nodes (machines of a test bed share a hostname)",
            &[("cp-1", Some("bed")), ("cp-2", Some("bed"))],
            "bed",
            None,
        ),
        (
            "the label wins over another node's name",
            &[("cp-1", Some("cp-2")), ("cp-2", Some("vm-2"))],
            "cp-2",
            Some("cp-1"),
        ),
        (
            "one control-plane node: a machine hostname apart from the node's name is still it",
            &[("cp-1", Some("cp-1"))],
            "vm_abc",
            Some("cp-1"),
        ),
        (
            "several nodes, a machine hostname apart from every name",
            &[("cp-1", Some("cp-1")), ("cp-2", Some("cp-2"))],
            "vm_abc",
            None,
        ),
        ("no node at all", &[], "cp-1", None),
    ];
    for (case, nodes, host, expected) in cases {
        let obs = with_nodes(nodes);
        let placed = match obs.place_host(host) {
            HostPlacement::Node(node) => Some(node.name.as_str()),
            HostPlacement::AnyNode => None,
        };
        assert_eq!(placed, expected, "{case}");
        for node in &obs.nodes {
            assert_eq!(
                obs.host_may_be(host, &node.name),
                expected.is_none_or(|placed| placed == node.name),
                "{case}: may it be {}?",
                node.name
            );
        }
    }
}

#[test]
fn times_round_trip_and_ages_never_go_negative() {
    let now = at("2026-01-01T00:00:10.25Z");
    assert_eq!(time::parse(&time::format(now)), Some(now));
    assert_eq!(time::parse("yesterday"), None);
    assert_eq!(time::age(now, at("2026-01-01T00:00:20Z")), Duration::ZERO);
    assert_eq!(
        time::age(now, at("2026-01-01T00:00:00.25Z")),
        Duration::from_secs(10)
    );
    assert_eq!(
        time::after(Timestamp::MAX, Duration::from_secs(1)),
        Timestamp::MAX
    );
}

/// A DaemonSet restored to an earlier template, before any pod was replaced: the pods keep
/// their old generation label and the original revision's hash.
fn restored(observed: i64, updated: i32, hashes: &[&str]) -> DaemonSetObservation {
    let mut ds = DaemonSetObservation::from_daemonset(&daemonset(), &[]);
    ds.generation = Some(5);
    ds.template_generation = Some(5);
    ds.status.observed_generation = Some(observed);
    ds.status.desired = 3;
    ds.status.updated = updated;
    ds.pods = hashes
        .iter()
        .map(|hash| {
            let mut pod = PodObservation::from_pod(&pod());
            pod.template_generation = Some(1);
            pod.revision_hash = Some((*hash).to_string());
            pod.deleting_since = None;
            pod
        })
        .collect();
    ds
}

#[test]
fn pods_the_controller_counts_as_updated_are_current_without_the_current_generation() {
    let rows: &[(&str, DaemonSetObservation, bool)] = &[
        (
            "observed, every pod updated, one hash",
            restored(5, 3, &["h0", "h0", "h0"]),
            true,
        ),
        (
            "the controller has not observed the restore",
            restored(4, 3, &["h0", "h0", "h0"]),
            false,
        ),
        (
            "the controller counts pods still to replace",
            restored(5, 2, &["h0", "h0", "h0"]),
            false,
        ),
        (
            "pods of two revisions",
            restored(5, 3, &["h0", "h1", "h0"]),
            false,
        ),
    ];
    for (name, ds, current) in rows {
        assert_eq!(ds.is_current(&ds.pods[0]), *current, "{name}");
    }
}
