//! How a process's sockets live apart from the process: a kube-apiserver closes its listener
//! on SIGTERM (after its `--shutdown-delay-duration`) and lingers; the times it accepts and is
//! ready are recorded for the models of its connections; a readiness model may end a process
//! the moment it binds.

use std::sync::Arc;

use super::*;

/// A kube-apiserver that lingers until killed and closes its listener on SIGTERM.
fn leaving_like_kube_apiserver() -> ImageBehaviour {
    ImageBehaviour {
        ignores_sigterm: true,
        closes_listener_on_sigterm: true,
        ..ImageBehaviour::default()
    }
}

fn with_flag(mut pod: Pod, flag: &str) -> Pod {
    let spec = pod.spec.as_mut().unwrap();
    spec.containers[0]
        .command
        .as_mut()
        .unwrap()
        .push(flag.into());
    spec.termination_grace_period_seconds = Some(30);
    pod
}

fn holders(h: &Harness) -> Vec<String> {
    let ids = h.kubelet.ports().holders(HostPort::tcp(6443));
    ids.iter()
        .filter_map(|id| h.kubelet.processes().find(|p| p.id == *id))
        .map(|p| p.pod_uid.clone())
        .collect()
}

#[test]
fn a_process_that_closes_its_listener_on_sigterm_frees_the_port_while_it_lingers() {
    let mut h = Harness::new();
    h.registry
        .set_behaviour(APISERVER_V1, leaving_like_kube_apiserver())
        .unwrap();
    let old = h.create(with_flag(apiserver("old", APISERVER_V1, false), "--v=2"));
    h.run_to(10.0);
    assert_eq!(holders(&h), [old.as_str()]);
    h.delete(&old, None);
    h.run_to(10.0);
    assert!(
        holders(&h).is_empty(),
        "the socket leaves the port at SIGTERM"
    );
    let new = h.create(apiserver("new", APISERVER_V2, false));
    // New: sandbox 11, pull 11-13, create 13-14, binds at 14, Ready at 17.
    h.run_to(20.0);
    assert_eq!(holders(&h), [new.as_str()]);
    assert!(h.container(&new).ready);
    assert_eq!(h.container(&new).restart_count, 0);
    assert!(h.api.contains_key(&old), "the old pod is still Terminating");
    h.run_to(39.5);
    assert!(
        h.api.contains_key(&old),
        "it lingers for its whole grace period"
    );
    h.run_to(40.5);
    assert!(
        h.deleted.contains(&old),
        "killed at the end of its grace period"
    );
}

#[test]
fn a_shutdown_delay_keeps_the_socket_open_with_readiness_failing() {
    let mut h = Harness::new();
    h.registry
        .set_behaviour(APISERVER_V1, leaving_like_kube_apiserver())
        .unwrap();
    let old = h.create(with_flag(
        apiserver("old", APISERVER_V1, false),
        "--shutdown-delay-duration=8s",
    ));
    h.run_to(10.0);
    h.delete(&old, None);
    let new = h.create(apiserver("new", APISERVER_V2, false));
    h.run_to(10.0);
    assert!(!h.container(&old).ready, "readiness fails from SIGTERM on");
    // New: binds at 14 and fails, restarts at once and fails at 15, then backs off 10 s.
    h.run_to(17.0);
    assert_eq!(
        holders(&h),
        [old.as_str()],
        "still listening during the delay"
    );
    assert!(h.container(&new).restart_count >= 1);
    h.run_to(19.0);
    assert!(
        holders(&h).is_empty(),
        "closed at 18, eight seconds after SIGTERM"
    );
    h.run_to(30.0);
    assert_eq!(
        holders(&h),
        [new.as_str()],
        "the restart after the back-off binds"
    );
    assert!(h.container(&new).ready);
}

#[test]
fn spec_seconds_run_on_the_kubelets_divisor() {
    let mut h = Harness::new();
    let mut config = KubeletConfig::new("cp-1", "10.0.0.11", 1);
    config.timings = Timings {
        spec_seconds_divisor: 10,
        ..timings()
    };
    h.kubelet = Kubelet::new(config);
    h.registry
        .set_behaviour(APISERVER_V1, leaving_like_kube_apiserver())
        .unwrap();
    let old = h.create(with_flag(
        apiserver("old", APISERVER_V1, false),
        "--shutdown-delay-duration=20s",
    ));
    h.run_to(10.0);
    h.delete(&old, None);
    h.run_to(11.9);
    assert_eq!(holders(&h), [old.as_str()]);
    h.run_to(12.1);
    assert!(
        holders(&h).is_empty(),
        "20 s of delay are 2 s on this clock"
    );
    assert!(h.api.contains_key(&old));
    h.run_to(13.1);
    assert!(
        h.deleted.contains(&old),
        "30 s of grace are 3 s on this clock"
    );
}

#[test]
fn processes_record_when_they_accept_and_when_they_are_ready() {
    let cases = [
        (ImageBehaviour::default(), None, Some(3_000)),
        (
            ImageBehaviour {
                listen_delay: Duration::from_millis(200),
                accept_delay: Some(Duration::from_millis(1_700)),
                ready_delay: Some(Duration::from_millis(3_500)),
                ..ImageBehaviour::default()
            },
            Some(1_700),
            Some(3_500),
        ),
        (ImageBehaviour::never_ready(), None, None),
    ];
    for (behaviour, accepts, ready) in cases {
        let mut h = Harness::new();
        h.registry
            .set_behaviour(APISERVER_V1, behaviour.clone())
            .unwrap();
        h.create(apiserver("api", APISERVER_V1, false));
        h.run_to(10.0);
        let process = h.kubelet.processes().next().unwrap().clone();
        let since_start = |at: Timestamp| clock::elapsed(process.started_at, at).as_millis() as u64;
        assert_eq!(
            process.accepts_at.map(since_start),
            accepts,
            "{behaviour:?}"
        );
        assert_eq!(process.ready_at.map(since_start), ready, "{behaviour:?}");
    }
}

/// Ends every process that binds a port another process already holds.
#[derive(Debug)]
struct NoCompany;

impl ReadinessModel for NoCompany {
    fn probe(&self, ctx: &ProbeContext<'_>) -> ProbeResult {
        OwnProcessReadiness.probe(ctx)
    }

    fn after_bind(&self, ctx: &BindContext<'_>) -> Option<Exit> {
        let port = *ctx.process.claim.ports.first()?;
        (ctx.ports.holders(port).len() > 1).then(|| Exit {
            at: clock::after(ctx.now, Duration::from_secs(1)),
            code: 1,
            message: Some("x509: certificate signed by unknown authority".into()),
        })
    }
}

#[test]
fn a_readiness_model_can_end_a_process_that_just_bound() {
    let mut h = Harness::new();
    let mut config = KubeletConfig::new("cp-1", "10.0.0.11", 1);
    config.timings = timings();
    h.kubelet = Kubelet::with_readiness(config, Arc::new(NoCompany));
    let first = h.create(apiserver("first", APISERVER_V1, true));
    h.run_to(10.0);
    let second = h.create(apiserver("second", APISERVER_V2, true));
    h.run_to(16.5);
    // Second: binds at 14, exits at 15, restarts at once, binds at 16.
    let last = h.container(&second).last_state.unwrap().terminated.unwrap();
    assert_eq!(last.exit_code, 1);
    assert_eq!(
        last.message.as_deref(),
        Some("x509: certificate signed by unknown authority")
    );
    assert_eq!(h.container(&second).restart_count, 1);
    assert!(
        h.container(&first).ready,
        "the first one was alone when it bound"
    );
}
