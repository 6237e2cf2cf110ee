//! The prober's bookkeeping: failure windows, replays, error texts.

use super::*;

fn series(outcomes: &[(u64, u64, bool)]) -> ProbeSeries {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    ProbeSeries {
        since: t0,
        samples: outcomes
            .iter()
            .map(|(from, to, ok)| ProbeSample {
                started: at(*from),
                finished: at(*to),
                time: Timestamp::UNIX_EPOCH,
                ok: *ok,
                error: (!ok).then(|| "refused".to_string()),
                replayed: None,
                caught_by: None,
            })
            .collect(),
    }
}

#[test]
fn windows_and_gaps_follow_the_failures() {
    let clean = series(&[(0, 1, true), (10, 11, true), (20, 21, true)]);
    assert_eq!(clean.failures(), 0);
    assert!(clean.failure_windows().is_empty());
    assert_eq!(clean.longest_gap(), Duration::from_millis(10));

    let outage = series(&[
        (0, 1, true),
        (10, 11, false),
        (20, 21, false),
        (30, 41, true),
        (50, 51, false),
    ]);
    assert_eq!((outage.attempts(), outage.failures()), (5, 3));
    let windows = outage.failure_windows();
    assert_eq!(windows.len(), 2);
    assert_eq!(
        outage.longest_failure_window(),
        Duration::from_millis(31),
        "from the first failed start to the recovering answer"
    );
    assert_eq!(outage.longest_gap(), Duration::from_millis(40));
}

#[test]
fn only_what_go_may_send_again_is_replayable() {
    let request = |method: http::Method, key: Option<&str>| {
        let mut b = http::Request::builder().method(method).uri("/x");
        if let Some(k) = key {
            b = b.header(k, "counter-1");
        }
        b.body(Vec::new()).unwrap()
    };
    let cases = [
        (http::Method::GET, None, true),
        (http::Method::HEAD, None, true),
        (http::Method::PATCH, None, false),
        (http::Method::POST, None, false),
        (http::Method::PATCH, Some("Idempotency-Key"), true),
        (http::Method::POST, Some("X-Idempotency-Key"), true),
    ];
    for (method, key, expected) in cases {
        assert_eq!(
            is_replayable(&request(method.clone(), key)),
            expected,
            "{method} {key:?}"
        );
    }
}

#[test]
fn error_answers_read_like_the_client_reports_them() {
    let status = br#"{"kind":"Status","message":"the server is still starting","code":500}"#;
    assert_eq!(
        status_error(http::StatusCode::INTERNAL_SERVER_ERROR, status),
        "500: the server is still starting"
    );
    assert_eq!(
        status_error(http::StatusCode::BAD_GATEWAY, b"bad gateway\n"),
        "502: bad gateway"
    );
}

#[test]
fn replays_are_counted_apart_from_failures() {
    let mut reads = series(&[(0, 1, true), (10, 11, true), (20, 21, false)]);
    reads.samples[1].replayed = Some("closed".into());
    let report = ProbeReport {
        writes: series(&[(0, 1, true)]),
        reads,
    };
    assert_eq!((report.reads.failures(), report.replayed()), (1, 1));
    assert_eq!(report.replay_reasons().get("closed"), Some(&1));
}
