//! `apply` killed with SIGKILL at a step and run again: it continues from what the cluster
//! shows, finishes, leaves nothing behind, and (on three nodes) never fails a probe. Also the
//! JSON event stream a script reads.

use std::time::Duration;

use selfhost_sim::SimCluster;
use selfhost_sim::cluster::ProberOptions;

async fn cluster(nodes: usize) -> SimCluster {
    crate::self_hosted_nodes(nodes).await
}

/// Runs `selfhost apply <to> --yes -o json`; kills it with SIGKILL right after it reports
/// `step` of `component` (if given). Returns the JSON events it printed and its exit code.
async fn apply(
    sim: &SimCluster,
    to: &str,
    kill_at: Option<(&str, &str)>,
) -> (Vec<serde_json::Value>, Option<i32>) {
    let args = ["apply", to, "--yes"].map(Into::into).to_vec();
    let kill_at = kill_at.map(|(c, s)| (c.to_string(), s.to_string()));
    crate::run_json_events(sim.kubeconfig_path().to_path_buf(), args, move |event| {
        kill_at
            .as_ref()
            .is_some_and(|(component, step)| crate::is_event(event, "step", component, step))
    })
    .await
}

/// Kill points, one upgrade each: v1.33 → v1.34 → v1.35 → v1.36 on one cluster (the kubelets
/// stay on v1.33, and the skew policy allows three minors, so three upgrades per cluster).
/// (On three nodes the apiserver's backup is a record only, with no pods: `update-real`
/// follows `create-backup` at once, with no `wait-for-backup` between.)
const APISERVER_EARLY: &[(&str, &str)] = &[
    ("kube-apiserver", "create-backup"),
    ("kube-apiserver", "update-real"),
];
const APISERVER_LATE: &[(&str, &str)] = &[
    ("kube-apiserver", "wait-for-rollout"),
    ("kube-apiserver", "delete-old-pod"),
    ("kube-apiserver", "remove-backup"),
];
/// The end of the held rollout: the strategy written back once every new kube-apiserver
/// serves. (The backup, a record only on three nodes, never runs a pod: no node is vacated of
/// it, and its removal at the end deletes it at once, with no `drain-backup-node` or
/// `wait-for-backup-gone` to be killed in.)
const APISERVER_HANDOVER: &[(&str, &str)] = &[("kube-apiserver", "restore-update-strategy")];
/// (Not the scheduler's `wait-for-backup-gone`: at this scale what follows it can finish
/// before the SIGKILL lands, and the killed run then exits 0.)
const CONTROLLERS: &[(&str, &str)] = &[
    ("kube-controller-manager", "wait-for-backup"),
    ("kube-controller-manager", "update-real"),
    ("kube-scheduler", "wait-for-rollout"),
];

async fn killed_and_resumed(points: &[(&str, &str)]) {
    let sim = cluster(3).await;
    let prober = sim.prober(ProberOptions::default()).await.expect("prober");
    for (i, (component, step)) in points.iter().enumerate() {
        let to = format!("v1.{}.0", 34 + i);
        let (events, code) = apply(&sim, &to, Some((component, step))).await;
        assert!(
            events.iter().any(|e| e["step"] == *step),
            "the run reached {component}/{step} before it was killed: {events:?}"
        );
        assert_ne!(code, Some(0), "killed runs do not report success");
        // On three nodes the apiserver's backup says what it is: a record, running no pod;
        // and `status`, while the upgrade is in progress, says so too.
        if let Some(created) = events.iter().find(|e| {
            e["event"] == "step"
                && e["component"] == "kube-apiserver"
                && e["step"] == "create-backup"
        }) {
            assert!(
                created["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("record only, no pods")),
                "{created}"
            );
            // Announced once the backup exists (a step is announced before it acts).
            if *component == "kube-apiserver" && *step == "update-real" {
                let kubeconfig = sim.kubeconfig_path().to_path_buf();
                let out = tokio::task::spawn_blocking(move || {
                    crate::selfhost()
                        .env("KUBECONFIG", kubeconfig)
                        .arg("status")
                        .output()
                })
                .await
                .expect("joined")
                .expect("runs");
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    stdout.contains(&format!("in progress to {to}"))
                        && stdout.contains("record only, no pods"),
                    "{stdout}"
                );
            }
        }
        let (events, code) = apply(&sim, &to, None).await;
        assert_eq!(
            code,
            Some(0),
            "the re-run after a kill at {component}/{step} finishes: {:?}",
            events.last()
        );
        assert_eq!(
            events.last().map(|e| e["event"].clone()),
            Some("result".into())
        );
        assert_eq!(
            crate::backups_left(&sim).await,
            Vec::<String>::new(),
            "after {component}/{step}"
        );
    }
    let probes = prober.stop().await;
    assert_eq!(
        (probes.reads.failures(), probes.writes.failures()),
        (0, 0),
        "no failed probe on 3 nodes"
    );
    // And once more: a no-op that says so.
    let last = format!("v1.{}.0", 33 + points.len());
    let (events, code) = apply(&sim, &last, None).await;
    assert_eq!(code, Some(0));
    assert!(
        events
            .last()
            .and_then(|e| e["message"].as_str())
            .is_some_and(|m| m.contains("nothing to do")),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_the_apiservers_first_steps_and_resumed() {
    let run = killed_and_resumed(APISERVER_EARLY);
    tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_the_apiservers_rollout_and_resumed() {
    let run = killed_and_resumed(APISERVER_LATE);
    tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_while_the_apiservers_backup_goes_and_resumed() {
    let run = killed_and_resumed(APISERVER_HANDOVER);
    tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_during_the_controllers_and_resumed() {
    let run = killed_and_resumed(CONTROLLERS);
    tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_event_stream_tells_a_script_everything() {
    let sim = cluster(1).await;
    let (events, code) = apply(&sim, "v1.34.0", None).await;
    assert_eq!(code, Some(0));
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        let steps: Vec<_> = events
            .iter()
            .filter(|e| e["event"] == "step" && e["component"] == component)
            .filter_map(|e| e["step"].as_str())
            .collect();
        assert!(
            steps.starts_with(&["create-backup"]),
            "{component}: {steps:?}"
        );
        assert!(
            steps.contains(&"update-real") && steps.ends_with(&["done"]),
            "{component}: {steps:?}"
        );
        assert!(events.iter().any(|e| e["event"] == "component-finished"
            && e["component"] == component
            && e["outcome"] == "done"));
    }
    assert!(
        events
            .iter()
            .all(|e| e["event"] == "result" || e["at"].is_f64()),
        "every event is timed"
    );
    let result = events.last().expect("events");
    assert_eq!(
        (result["event"].as_str(), result["outcome"].as_str()),
        (Some("result"), Some("done"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_text_output_tells_a_person_what_happened() {
    let sim = cluster(1).await;
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        crate::selfhost()
            .env("KUBECONFIG", kubeconfig)
            .args(["apply", "v1.34.0", "--yes"])
            .output()
    })
    .await
    .expect("joined")
    .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "results only; progress goes to stderr"
    );
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        assert!(
            stderr.contains(&format!("{component}: create-backup:")),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!("{component}: done after")),
            "{stderr}"
        );
    }
    assert!(
        stderr
            .trim_end()
            .ends_with("the control plane runs v1.34.0"),
        "{stderr}"
    );
    // Every progress line says when it happened.
    assert!(
        stderr
            .lines()
            .filter(|l| l.contains(": "))
            .all(|l| l.starts_with('[') || !l.contains("kube-")),
        "{stderr}"
    );
}
