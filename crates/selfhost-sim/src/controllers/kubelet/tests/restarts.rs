//! Crash loops under the kubelet's back-off: first restart at once, then 10 s doubling to
//! 300 s, reset after 10 minutes of running.

use super::*;

fn crashing(h: &mut Harness, after: u64) -> String {
    h.registry
        .add(
            "example.com/crash:1",
            ImageBehaviour::crash_looping(Duration::from_secs(after)),
        )
        .unwrap();
    h.create(pod("crash", "example.com/crash:1"))
}

#[test]
fn restarts_follow_the_crash_loop_back_off_schedule() {
    let mut h = Harness::new();
    let uid = crashing(&mut h, 2);
    h.run_to(2_000.0);
    assert_eq!(h.phase(&uid), "Running");
    let starts: Vec<u64> = h
        .events
        .iter()
        .filter(|e| e.reason == "Started")
        .map(|e| ms(e.at) / 1000)
        .collect();
    // First start at 4 (sandbox 1, pull 2, create 1); each run lasts 2 s; a restart takes 1 s
    // to create after the back-off: waits 0, 10, 20, 40, 80, 160, 300, 300…
    let mut expected = vec![4];
    let mut wait = 0;
    while expected.len() < starts.len() {
        let exit = expected.last().unwrap() + 2;
        expected.push(exit + wait + 1);
        wait = if wait == 0 { 10 } else { (wait * 2).min(300) };
    }
    assert_eq!(starts, expected);
    assert!(starts.len() >= 10, "{starts:?}");
}

#[test]
fn crash_loop_status_shows_the_back_off_the_last_exit_and_the_restart_count() {
    let mut h = Harness::new();
    let uid = crashing(&mut h, 2);
    // Start 4, exit 6, restart (create) 6-7, exit 9 → back-off 10 s until 19.
    h.run_to(6.5);
    let c = h.container(&uid);
    assert_eq!(
        (h.state(&uid).as_str(), c.restart_count),
        ("ContainerCreating", 1)
    );
    h.run_to(10.0);
    let c = h.container(&uid);
    assert_eq!(
        (h.state(&uid).as_str(), c.restart_count, c.ready),
        ("CrashLoopBackOff", 1, false)
    );
    assert_eq!(
        c.state.unwrap().waiting.unwrap().message.as_deref(),
        Some("back-off 10s restarting failed container=main pod=crash_kube-system(uid-crash)")
    );
    let last = c.last_state.unwrap().terminated.unwrap();
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert_eq!(
        (
            ms(last.started_at.unwrap().0),
            ms(last.finished_at.unwrap().0)
        ),
        (7_000, 9_000)
    );
    assert_eq!(h.phase(&uid), "Running", "a restarting pod is Running");
    assert_eq!(
        h.condition(&uid, "Ready").map(|c| c.0),
        Some("False".into())
    );
    h.run_to(20.0);
    assert_eq!(
        (h.state(&uid).as_str(), h.container(&uid).restart_count),
        ("Running", 2)
    );
    let backoffs = h.events.iter().filter(|e| e.reason == "BackOff").count();
    assert_eq!(backoffs, 1);
    let event = h.events.iter().find(|e| e.reason == "BackOff").unwrap();
    assert_eq!(
        event.message,
        "Back-off restarting failed container main in pod crash_kube-system(uid-crash)"
    );
}

#[test]
fn ten_minutes_of_running_resets_the_back_off() {
    let mut h = Harness::new();
    let uid = crashing(&mut h, 700);
    // Runs 4..704, restarts at once (no back-off yet), runs 705..1405: more than 10 min since
    // the last restart, so again at once instead of waiting 10 s.
    h.run_to(1_500.0);
    let starts: Vec<u64> = h
        .events
        .iter()
        .filter(|e| e.reason == "Started")
        .map(|e| ms(e.at) / 1000)
        .collect();
    assert_eq!(starts, [4, 705, 1_406]);
    assert_eq!(h.container(&uid).restart_count, 2);
}
