//! Graceful deletion: SIGTERM, the grace period, SIGKILL, the final delete.

use super::*;

#[test]
fn a_deleted_pod_stops_after_its_stop_delay_and_is_then_finally_deleted() {
    let mut h = Harness::new();
    let uid = h.create(pod("web", APISERVER_V1));
    h.run_to(10.0);
    h.delete(&uid, None);
    h.run_to(10.5);
    assert!(h.api.contains_key(&uid));
    assert_eq!(
        h.condition(&uid, "Ready").map(|c| c.0),
        Some("False".into()),
        "not ready while stopping"
    );
    assert_eq!(h.state(&uid), "Running", "the process still runs");
    h.run_to(11.0);
    assert_eq!(
        h.deleted,
        std::slice::from_ref(&uid),
        "stopped at 11 (stop delay 1 s) and deleted at once"
    );
    assert!(h.event_reasons(&uid).contains(&"Killing"));
}

#[test]
fn a_process_that_ignores_sigterm_is_killed_when_the_grace_period_ends() {
    let cases: [(Option<i64>, f64); 3] = [(None, 40.0), (Some(5), 15.0), (Some(0), 10.0)];
    for (grace, killed_at) in cases {
        let mut h = Harness::new();
        h.registry
            .set_behaviour(
                APISERVER_V1,
                ImageBehaviour {
                    ignores_sigterm: true,
                    ..ImageBehaviour::default()
                },
            )
            .unwrap();
        let uid = h.create(pod("stubborn", APISERVER_V1));
        h.run_to(10.0);
        h.delete(&uid, grace);
        if killed_at > 10.0 {
            h.run_to(killed_at - 0.01);
            assert!(h.deleted.is_empty(), "grace {grace:?}");
        }
        // Advance straight to the kill: the final status and the deletion come in one report.
        let report = h.kubelet.advance(
            &h.registry,
            clock::after(t(0), Duration::from_secs_f64(killed_at)),
        );
        assert_eq!(report.finished_deletions.len(), 1, "grace {grace:?}");
        let statuses: Vec<PodStatus> = report
            .status_updates
            .iter()
            .map(|u| u.status.clone())
            .collect();
        let last = statuses.last().unwrap();
        let terminated = last.container_statuses.clone().unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap();
        assert_eq!(terminated.exit_code, SIGKILL_EXIT_CODE, "grace {grace:?}");
        assert_eq!(
            ms(terminated.finished_at.unwrap().0) as f64 / 1000.0,
            killed_at,
            "grace {grace:?}"
        );
        assert_eq!(
            last.phase.as_deref(),
            Some("Failed"),
            "killed: not all exits were 0"
        );
    }
}

#[test]
fn a_second_delete_can_shorten_the_grace_period() {
    let mut h = Harness::new();
    h.registry
        .set_behaviour(
            APISERVER_V1,
            ImageBehaviour {
                ignores_sigterm: true,
                ..ImageBehaviour::default()
            },
        )
        .unwrap();
    let uid = h.create(pod("stubborn", APISERVER_V1));
    h.run_to(10.0);
    h.delete(&uid, Some(30));
    h.run_to(12.0);
    h.delete(&uid, Some(1));
    h.run_to(12.99);
    assert!(h.deleted.is_empty());
    h.run_to(13.0);
    assert_eq!(h.deleted, [uid]);
}

#[test]
fn a_graceful_exit_ends_in_succeeded_and_a_pod_deleted_before_it_ran_goes_at_once() {
    let mut h = Harness::new();
    let uid = h.create(pod("web", APISERVER_V1));
    h.run_to(10.0);
    h.delete(&uid, None);
    let report = h
        .kubelet
        .advance(&h.registry, clock::after(t(0), Duration::from_secs(11)));
    let last = report.status_updates.last().unwrap();
    assert_eq!(last.status.phase.as_deref(), Some("Succeeded"));
    let terminated = last.status.container_statuses.clone().unwrap()[0]
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(
        (terminated.exit_code, terminated.reason.as_deref()),
        (0, Some("Completed"))
    );
    assert_eq!(report.finished_deletions.len(), 1);

    let mut h = Harness::new();
    let mut early = pod("early", APISERVER_V1);
    early.metadata.deletion_timestamp = Some(Time(t(0)));
    early.metadata.deletion_grace_period_seconds = Some(30);
    let uid = h.create(early);
    h.run_to(0.0);
    assert_eq!(h.deleted, std::slice::from_ref(&uid));
    assert!(h.event_reasons(&uid).is_empty(), "nothing was started");
}

#[test]
fn a_pod_removed_from_the_api_keeps_its_process_until_it_exits() {
    let mut h = Harness::new();
    h.registry
        .set_behaviour(
            APISERVER_V1,
            ImageBehaviour {
                ignores_sigterm: true,
                ..ImageBehaviour::default()
            },
        )
        .unwrap();
    let uid = h.create(apiserver("forced", APISERVER_V1, false));
    h.run_to(10.0);
    // `kubectl delete --force --grace-period=0`: gone from the API at once.
    h.api.remove(&uid);
    h.kubelet.pod_removed(&uid, h.now);
    h.run_to(39.0);
    assert_eq!(
        h.kubelet.ports().holders(HostPort::tcp(6443)).len(),
        1,
        "the process lingers"
    );
    assert!(
        h.last.status_updates.is_empty(),
        "nothing is reported for a pod the API forgot"
    );
    h.run_to(40.0);
    assert!(h.kubelet.ports().holders(HostPort::tcp(6443)).is_empty());
    assert_eq!(h.kubelet.pod_uids().count(), 0);
}
