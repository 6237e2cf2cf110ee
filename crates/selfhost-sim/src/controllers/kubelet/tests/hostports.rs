//! Two processes binding the same host port: SO_REUSEPORT only when everyone asks for it.

use super::*;

fn bind_message(h: &Harness, uid: &str) -> Option<String> {
    h.container(uid).last_state?.terminated?.message
}

#[test]
fn a_second_binder_crash_loops_unless_every_holder_permits_sharing() {
    let cases = [
        (false, false, false),
        (true, false, false),
        (false, true, false),
        (true, true, true),
    ];
    for (old_sharing, new_sharing, both_ready) in cases {
        let mut h = Harness::new();
        let old = h.create(apiserver("old", APISERVER_V1, old_sharing));
        h.run_to(10.0);
        assert!(h.container(&old).ready);
        let new = h.create(apiserver("new", APISERVER_V2, new_sharing));
        h.run_to(60.0);
        let label = format!("old sharing={old_sharing}, new sharing={new_sharing}");
        assert!(h.container(&old).ready, "{label}: the holder keeps running");
        assert_eq!(h.container(&new).ready, both_ready, "{label}");
        if both_ready {
            assert_eq!(h.container(&new).restart_count, 0, "{label}");
            assert_eq!(h.kubelet.ports().holders(HostPort::tcp(6443)).len(), 2);
        } else {
            assert!(h.container(&new).restart_count >= 2, "{label}");
            assert_eq!(
                bind_message(&h, &new).as_deref(),
                Some(
                    "failed to create listener: failed to listen on 0.0.0.0:6443: listen tcp \
                     0.0.0.0:6443: bind: address already in use"
                ),
                "{label}"
            );
            assert_eq!(h.kubelet.ports().holders(HostPort::tcp(6443)).len(), 1);
        }
    }
}

#[test]
fn a_terminating_pods_process_holds_its_port_until_it_exits() {
    let mut h = Harness::new();
    let mut old = apiserver("old", APISERVER_V1, false);
    old.spec.as_mut().unwrap().termination_grace_period_seconds = Some(30);
    h.registry
        .set_behaviour(
            APISERVER_V1,
            ImageBehaviour {
                ignores_sigterm: true,
                ..ImageBehaviour::default()
            },
        )
        .unwrap();
    let old = h.create(old);
    h.run_to(10.0);
    h.delete(&old, None);
    let new = h.create(apiserver("new", APISERVER_V2, false));
    h.run_to(20.0);
    // New: sandbox 11, pull 11-13, create 13-14, bind fails at 14.
    assert!(h.api.contains_key(&old), "still Terminating");
    assert!(!h.container(&new).ready);
    assert!(bind_message(&h, &new).is_some_and(|m| m.contains("address already in use")));
    h.run_to(40.0);
    assert!(
        h.deleted.contains(&old),
        "killed at the end of the 30 s grace period, then deleted"
    );
    h.run_to(200.0);
    assert!(
        h.container(&new).ready,
        "binds once a restart comes after the old process exited"
    );
    assert_eq!(h.kubelet.ports().holders(HostPort::tcp(6443)).len(), 1);
}
