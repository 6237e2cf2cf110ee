use proptest::prelude::*;

use super::*;

fn fail(why: &str) -> Check {
    Check::Fail(why.to_string())
}

fn pool(n: usize, rise: u32) -> Pool {
    Pool::new((0..n).map(|i| format!("b{i}")), HealthPolicy { rise })
}

/// Rise, checks, healthy after each, transition of each.
type Case = (u32, Vec<Check>, Vec<bool>, Vec<Option<Transition>>);

#[test]
fn health_rises_after_passes_in_a_row_and_falls_at_the_first_failure() {
    // (rise, checks, healthy after each, transitions)
    let p = Check::Pass;
    let cases: Vec<Case> = vec![
        (
            1,
            vec![p.clone()],
            vec![true],
            vec![Some(Transition::Healthy)],
        ),
        (
            1,
            vec![fail("500"), p.clone()],
            vec![false, true],
            vec![
                Some(Transition::Unhealthy {
                    reason: "500".into(),
                }),
                Some(Transition::Healthy),
            ],
        ),
        (
            1,
            vec![p.clone(), p.clone(), fail("refused"), fail("refused")],
            vec![true, true, false, false],
            vec![
                Some(Transition::Healthy),
                None,
                Some(Transition::Unhealthy {
                    reason: "refused".into(),
                }),
                None,
            ],
        ),
        (
            3,
            vec![
                p.clone(),
                p.clone(),
                fail("x"),
                p.clone(),
                p.clone(),
                p.clone(),
            ],
            vec![false, false, false, false, false, true],
            vec![None, None, None, None, None, Some(Transition::Healthy)],
        ),
        (
            0,
            vec![p.clone()],
            vec![true],
            vec![Some(Transition::Healthy)],
        ),
    ];
    for (rise, checks, healthy, transitions) in cases {
        let mut health = BackendHealth::new();
        assert!(!health.is_healthy(), "unchecked is not healthy");
        for (i, check) in checks.iter().enumerate() {
            let t = health.record(check, HealthPolicy { rise });
            assert_eq!(t, transitions[i], "rise {rise}, check {i} of {checks:?}");
            assert_eq!(health.is_healthy(), healthy[i], "rise {rise}, check {i}");
        }
    }
}

#[test]
fn events_say_each_change_once_and_the_pool_outage_around_them() {
    let mut p = pool(2, 1);
    assert_eq!(
        p.record(0, &fail("connection refused")),
        vec![Event::Unhealthy {
            backend: "b0".into(),
            reason: "connection refused".into()
        }]
    );
    assert_eq!(p.record(0, &fail("connection refused")), vec![]);
    assert_eq!(
        p.record(1, &Check::Pass),
        vec![
            Event::Healthy {
                backend: "b1".into()
            },
            Event::Available { closed: 0 }
        ]
    );
    assert_eq!(p.record(1, &Check::Pass), vec![]);
    assert_eq!(
        p.record(1, &fail("HTTP 500")),
        vec![
            Event::Unhealthy {
                backend: "b1".into(),
                reason: "HTTP 500".into()
            },
            Event::Unavailable
        ]
    );
    assert_eq!(p.pick(), None);
    assert_eq!(p.closed_unserved(), Some(Event::Closing));
    assert_eq!(p.closed_unserved(), None, "said once per outage");
    assert_eq!(
        p.record(0, &Check::Pass),
        vec![
            Event::Healthy {
                backend: "b0".into()
            },
            Event::Available { closed: 2 }
        ]
    );
    // The next outage says its first closed connection again.
    p.record(0, &fail("gone"));
    assert_eq!(p.closed_unserved(), Some(Event::Closing));
}

#[test]
fn picks_healthy_backends_only_least_connections_first_ties_in_turn() {
    let mut p = pool(3, 1);
    assert_eq!(p.pick(), None, "none checked yet");
    for i in 0..3 {
        p.record(i, &Check::Pass);
    }
    // Ties in turn.
    assert_eq!((p.pick(), p.pick(), p.pick()), (Some(0), Some(1), Some(2)));
    // b1's connection ends: it has the fewest.
    p.release(1);
    assert_eq!(p.pick(), Some(1));
    // b0 fails: its open connection stays counted, but it gets no new one.
    p.record(0, &fail("shutting down"));
    p.release(1);
    p.release(2);
    let picks: Vec<_> = (0..4)
        .map(|_| {
            let i = p.pick();
            if let Some(i) = i {
                p.release(i);
            }
            i
        })
        .collect();
    assert_eq!(picks, vec![Some(2), Some(1), Some(2), Some(1)]);
    assert_eq!(p.active(0), 1, "b0's connection is not cut");
    assert_eq!(pool(0, 1).pick(), None, "no backends at all");
}

#[test]
fn a_failed_connect_makes_the_backend_unhealthy_and_ends_its_connection() {
    let mut p = pool(2, 1);
    p.record(0, &Check::Pass);
    p.record(1, &Check::Pass);
    let first = p.pick().unwrap();
    let events = p.connect_failed(first, "connection refused".into());
    assert_eq!(
        events,
        vec![Event::Unhealthy {
            backend: format!("b{first}"),
            reason: "connection refused".into()
        }]
    );
    assert_eq!(p.active(first), 0);
    assert_eq!(p.pick(), Some(1 - first));
    assert_eq!(p.pick(), Some(1 - first));
}

#[derive(Debug, Clone)]
enum Op {
    Check(usize, bool),
    Pick,
    Release(usize),
    ConnectFailed(usize),
}

fn op(n: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..n, any::<bool>()).prop_map(|(i, pass)| Op::Check(i, pass)),
        Just(Op::Pick),
        (0..n).prop_map(Op::Release),
        (0..n).prop_map(Op::ConnectFailed),
    ]
}

proptest! {
    /// Whatever happens, a pick is a healthy backend, a failure makes its backend unhealthy at
    /// once, a backend is healthy exactly when its last `rise` checks passed, and `None` means
    /// none is healthy.
    #[test]
    fn laws(n in 1usize..5, rise in 1u32..4, ops in proptest::collection::vec(op(4), 0..200)) {
        let mut p = pool(n, rise);
        let mut streak = vec![0u32; n];
        let mut healthy = vec![false; n];
        for op in ops {
            match op {
                Op::Check(i, pass) => {
                    let i = i % n;
                    if pass {
                        p.record(i, &Check::Pass);
                        streak[i] += 1;
                        if streak[i] >= rise { healthy[i] = true; }
                    } else {
                        p.record(i, &fail("no"));
                        streak[i] = 0;
                        healthy[i] = false;
                        prop_assert!(!p.is_healthy(i));
                    }
                }
                Op::Pick => match p.pick() {
                    Some(i) => prop_assert!(p.is_healthy(i)),
                    None => prop_assert!(!p.any_healthy()),
                },
                Op::Release(i) => p.release(i % n),
                Op::ConnectFailed(i) => {
                    let i = i % n;
                    p.connect_failed(i, "refused".into());
                    streak[i] = 0;
                    healthy[i] = false;
                    prop_assert!(!p.is_healthy(i));
                }
            }
            for (i, &h) in healthy.iter().enumerate() {
                prop_assert_eq!(p.is_healthy(i), h);
            }
        }
    }

    /// Among healthy backends, a pick has the fewest open connections.
    #[test]
    fn picks_the_least_loaded(n in 1usize..5, opens in proptest::collection::vec(0usize..4, 0..30)) {
        let mut p = pool(n, 1);
        for i in 0..n { p.record(i, &Check::Pass); }
        for _ in opens { p.pick(); }
        let least = (0..n).map(|i| p.active(i)).min().unwrap();
        let chosen = p.pick().unwrap();
        prop_assert_eq!(p.active(chosen), least + 1);
    }
}
