//! Heartbeats, and a node that goes NotReady or down.

use super::*;

#[test]
fn the_lease_is_renewed_on_its_interval_and_status_is_posted_on_change() {
    let mut h = Harness::new();
    let mut renewals = Vec::new();
    let mut posts = Vec::new();
    for second in 0..=35 {
        h.now = t(second);
        let report = h.kubelet.advance(&h.registry, h.now);
        if let Some(at) = report.lease_renewal {
            renewals.push(ms(at) / 1000);
        }
        if report.node_status.is_some() {
            posts.push(second);
        }
    }
    assert_eq!(renewals, [0, 10, 20, 30]);
    assert_eq!(
        posts,
        [0],
        "nothing changed, and the 5 min report is not due"
    );
    h.kubelet.set_node_state(NodeState::NotReady, t(36));
    let report = h.kubelet.advance(&h.registry, t(36));
    let conditions = report.node_status.unwrap().conditions.unwrap();
    let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("KubeletNotReady"))
    );
    assert_eq!(report.next_wakeup, Some(t(40)));
}

#[test]
fn a_not_ready_node_makes_no_progress_until_it_recovers() {
    let mut h = Harness::new();
    let uid = h.create(pod("web", APISERVER_V1));
    h.run_to(2.0);
    h.kubelet.set_node_state(NodeState::NotReady, h.now);
    h.run_to(60.0);
    assert_eq!(h.state(&uid), "ContainerCreating");
    h.kubelet.set_node_state(NodeState::Up, h.now);
    h.run_to(61.0);
    assert_eq!(
        h.state(&uid),
        "Running",
        "the pull and create that were due happen at once"
    );
}

#[test]
fn a_node_that_goes_down_loses_its_processes_and_restarts_them_when_back() {
    let mut h = Harness::new();
    let uid = h.create(apiserver("api", APISERVER_V1, false));
    h.run_to(10.0);
    assert!(h.container(&uid).ready);
    h.kubelet.set_node_state(NodeState::Down, h.now);
    assert!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).is_empty(),
        "processes are gone"
    );
    let renewals_before = h.lease_renewals.len();
    h.run_to(100.0);
    assert!(h.last.status_updates.is_empty(), "a dead node says nothing");
    assert_eq!(
        h.lease_renewals.len(),
        renewals_before,
        "and renews nothing"
    );
    assert!(
        h.container(&uid).ready,
        "the API still shows the last status it got"
    );
    h.kubelet.set_node_state(NodeState::Up, h.now);
    h.relist();
    h.run_to(100.0);
    assert_eq!(
        h.lease_renewals.last(),
        Some(&t(100)),
        "back: renews at once"
    );
    assert!(!h.container(&uid).ready);
    h.run_to(105.0);
    let c = h.container(&uid);
    assert!(c.ready);
    assert_eq!(c.restart_count, 1);
    let last = c.last_state.unwrap().terminated.unwrap();
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (255, Some("Unknown"))
    );
    assert_eq!(ms(last.finished_at.unwrap().0), 10_000);
}

#[test]
fn a_rebooted_node_runs_its_api_pods_only_once_it_has_listed_them() {
    let mut h = Harness::new();
    let uid = h.create(apiserver("api", APISERVER_V1, false));
    h.run_to(10.0);
    assert!(h.container(&uid).ready);
    h.kubelet.set_node_state(NodeState::Down, h.now);
    h.run_to(20.0);
    h.kubelet.set_node_state(NodeState::Up, h.now);
    h.run_to(60.0);
    assert!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).is_empty(),
        "no API to list from: the pod does not run"
    );
    assert!(
        h.last.status_updates.is_empty(),
        "and nothing is said of a pod the kubelet does not know yet"
    );
    h.relist();
    h.run_to(70.0);
    let c = h.container(&uid);
    assert!(c.ready, "listed: it runs again");
    assert_eq!(c.restart_count, 1);
}

#[test]
fn a_pod_deleted_while_its_node_was_off_never_runs_again() {
    let mut h = Harness::new();
    let uid = h.create(apiserver("api", APISERVER_V1, false));
    h.run_to(10.0);
    h.kubelet.set_node_state(NodeState::Down, h.now);
    h.api.remove(&uid);
    h.kubelet.set_node_state(NodeState::Up, t(20));
    h.kubelet.pod_removed(&uid, t(20));
    h.run_to(60.0);
    assert_eq!(h.kubelet.pod_uids().count(), 0);
    assert!(h.kubelet.ports().holders(HostPort::tcp(6443)).is_empty());
}

#[test]
fn a_restarted_kubelet_keeps_its_containers_and_adopts_them_once_listed() {
    let mut h = Harness::new();
    let uid = h.create(apiserver("api", APISERVER_V1, false));
    h.run_to(10.0);
    let holder = h.kubelet.ports().holders(HostPort::tcp(6443)).to_vec();
    assert_eq!(holder.len(), 1);
    h.kubelet.restart();
    h.run_to(30.0);
    assert_eq!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).to_vec(),
        holder,
        "the process runs on while the kubelet cannot list"
    );
    assert!(h.last.status_updates.is_empty(), "nothing said of it yet");
    h.relist();
    h.run_to(31.0);
    assert_eq!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).to_vec(),
        holder,
        "adopted, not restarted"
    );
    let c = h.container(&uid);
    assert!(c.ready);
    assert_eq!(c.restart_count, 0);
}

#[test]
fn a_restarted_kubelet_stops_a_pod_it_finds_gone_when_it_lists() {
    let mut h = Harness::new();
    let uid = h.create(apiserver("api", APISERVER_V1, false));
    h.run_to(10.0);
    h.kubelet.restart();
    h.api.remove(&uid);
    h.kubelet.pod_removed(&uid, h.now);
    h.run_to(60.0);
    assert!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).is_empty(),
        "the orphan is stopped"
    );
}
