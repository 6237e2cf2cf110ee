//! `apply` asked to stop with SIGINT (Ctrl-C) or SIGTERM at each distinct step of the pivot:
//! it stops at the next safe point, exits 4 (stopped, not restored) with the
//! command that resumes, and that command, run as printed, finishes the upgrade and leaves
//! nothing behind.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

use selfhost_sim::SimCluster;

/// What one interrupted run showed.
struct Interrupted {
    events: Vec<serde_json::Value>,
    code: Option<i32>,
    stderr: String,
}

/// Where to send the signal: right after the run reports the first of `steps` of `component`.
/// Some steps happen only when the cluster needs them (an old pod to delete, a Lease to hand
/// over, a backup still going), so a point may name the step that follows as a fallback.
struct Point {
    component: &'static str,
    steps: &'static [&'static str],
    signal: &'static str,
}

/// Runs `selfhost <args> -o json` and sends the point's signal (`INT` or `TERM`) at it.
async fn run_and_signal(sim: &SimCluster, args: &[&str], point: &Point) -> Interrupted {
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let (component, steps, signal) = (point.component, point.steps, point.signal);
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
            .env("NO_COLOR", "1")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(&args)
            .args(["-o", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("selfhost runs");
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            text
        });
        let mut events = Vec::new();
        let mut signalled = false;
        for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
            let Ok(line) = line else { break };
            let event: serde_json::Value =
                serde_json::from_str(&line).expect("every line is one JSON event");
            let hit = event["event"] == "step"
                && event["component"] == component
                && steps.iter().any(|s| event["step"] == *s);
            events.push(event);
            if hit && !signalled {
                signalled = true;
                let sent = Command::new("kill")
                    .args([format!("-{signal}"), child.id().to_string()])
                    .status()
                    .expect("kill runs");
                assert!(sent.success(), "kill -{signal}");
            }
        }
        let seen: Vec<String> = events
            .iter()
            .filter(|e| e["event"] == "step")
            .map(|e| format!("{}/{}", e["component"], e["step"]))
            .collect();
        assert!(
            signalled,
            "the run never reached {component}/{steps:?}: {seen:?} then {:?}",
            events.last()
        );
        let status = child.wait().expect("exits");
        Interrupted {
            events,
            code: status.code(),
            stderr: stderr.join().expect("stderr read"),
        }
    })
    .await
    .expect("joined")
}

/// Stops one upgrade per point (v1.33 → v1.34 → v1.35 → v1.36: the kubelets stay on v1.33,
/// three minors is what the skew policy allows) and resumes it with the printed command.
async fn stopped_and_resumed(points: &[Point]) {
    let sim = crate::one_self_hosted_node().await;
    for (i, point) in points.iter().enumerate() {
        let to = format!("v1.{}.0", 34 + i);
        let run = run_and_signal(&sim, &["apply", &to, "--yes"], point).await;
        let at = format!(
            "SIG{} at {}/{:?}",
            point.signal, point.component, point.steps
        );
        assert_eq!(
            run.code,
            Some(4),
            "{at}: stopped, not restored\n{}",
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{at}: {}", run.stderr);
        assert!(
            run.stderr.contains("stopping at the next safe point"),
            "{at}: says it heard the signal\n{}",
            run.stderr
        );
        let result = run.events.last().expect("events");
        assert_eq!(
            (result["event"].as_str(), result["outcome"].as_str()),
            (Some("result"), Some("not-restored")),
            "{at}: {result}"
        );
        let message = result["message"].as_str().unwrap_or_default();
        assert!(message.contains("at a safe point"), "{at}: {message}");
        let resume = message
            .split_once("Continue with: ")
            .map(|(_, command)| command.trim().to_string())
            .unwrap_or_else(|| panic!("{at}: the message names the command: {message}"));
        assert!(
            run.stderr.contains(&resume),
            "{at}: a person reading stderr sees `{resume}` too\n{}",
            run.stderr
        );
        let words: Vec<String> = resume.split_whitespace().map(str::to_string).collect();
        assert_eq!(
            words.first().map(String::as_str),
            Some("selfhost"),
            "{resume}"
        );
        let kubeconfig = sim.kubeconfig_path().to_path_buf();
        let out = tokio::task::spawn_blocking(move || {
            crate::selfhost()
                .env("KUBECONFIG", kubeconfig)
                .args(&words[1..])
                .timeout(Duration::from_secs(240))
                .output()
        })
        .await
        .expect("joined")
        .expect("runs");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{at}: `{resume}` finishes\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("the control plane runs {to}")),
            "{at}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            crate::backups_left(&sim).await,
            Vec::<String>::new(),
            "{at}"
        );
    }
    sim.shutdown().await;
}

const fn at(
    component: &'static str,
    steps: &'static [&'static str],
    signal: &'static str,
) -> Point {
    Point {
        component,
        steps,
        signal,
    }
}

const API: &str = "kube-apiserver";
const KCM: &str = "kube-controller-manager";
const SCHED: &str = "kube-scheduler";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_at_the_apiservers_first_steps() {
    let points = [
        at(API, &["create-backup"], "INT"),
        at(API, &["wait-for-backup"], "TERM"),
        at(API, &["update-real"], "INT"),
    ];
    tokio::time::timeout(Duration::from_secs(600), stopped_and_resumed(&points))
        .await
        .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_during_the_apiservers_rollout() {
    let points = [
        at(API, &["wait-for-rollout"], "TERM"),
        at(API, &["delete-old-pod", "remove-backup"], "INT"),
        at(API, &["remove-backup"], "TERM"),
    ];
    tokio::time::timeout(Duration::from_secs(600), stopped_and_resumed(&points))
        .await
        .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_at_the_later_steps_and_the_controllers() {
    let points = [
        at(API, &["wait-for-backup-gone", "done"], "INT"),
        at(KCM, &["hand-over-lease", "remove-backup"], "TERM"),
        at(SCHED, &["update-real"], "INT"),
    ];
    tokio::time::timeout(Duration::from_secs(600), stopped_and_resumed(&points))
        .await
        .expect("in time");
}

/// A second signal abandons the run at once (exit 4 too): the escape hatch for a run that
/// will not reach its safe point soon enough.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_abandons_the_run_at_once() {
    let sim = crate::one_self_hosted_node().await;
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let code = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
            .env("NO_COLOR", "1")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["apply", "v1.34.0", "--yes", "-o", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("selfhost runs");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        // The first wait: the run is between safe points for a while.
        for line in lines.by_ref() {
            if line.expect("line").contains("\"wait-for-backup\"") {
                break;
            }
        }
        // Two different signals, so that neither can be merged into the other.
        for signal in ["-TERM", "-INT"] {
            Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status()
                .expect("kill runs");
        }
        let status = child.wait().expect("exits");
        status.code()
    })
    .await
    .expect("joined");
    assert_eq!(code, Some(4));
    // Whatever it left is what an interrupted run leaves: the next run finishes it.
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        crate::selfhost()
            .env("KUBECONFIG", kubeconfig)
            .args(["apply", "v1.34.0", "--yes"])
            .timeout(Duration::from_secs(240))
            .output()
    })
    .await
    .expect("joined")
    .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(crate::backups_left(&sim).await, Vec::<String>::new());
    sim.shutdown().await;
}
