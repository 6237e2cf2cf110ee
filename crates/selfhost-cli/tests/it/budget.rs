//! `apply --max-unavailable-seconds` and `--max-failed-probes`: an upgrade whose API outage,
//! as the engine's own probes see it, outlasts the budget is rolled back and says by how much.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use selfhost_sim::SimCluster;

/// The images the kube-apiserver pods in kube-system run, once no pod terminates.
async fn apiserver_images(sim: &SimCluster) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let listed = pods
            .list(&ListParams::default().labels("k8s-app=self-hosted-kube-apiserver"))
            .await
            .expect("pods listed");
        let settled = listed
            .items
            .iter()
            .all(|p| p.metadata.deletion_timestamp.is_none());
        if settled || tokio::time::Instant::now() >= deadline {
            return listed
                .items
                .iter()
                .filter_map(|p| p.spec.as_ref()?.containers.first()?.image.clone())
                .collect();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs `apply v1.34.0 --yes` with `budget` flags, taking the API down for `outage` right
/// after the engine's update of the real kube-apiserver DaemonSet is accepted.
async fn apply_with_outage(
    sim: &SimCluster,
    budget: &[&str],
    outage: Duration,
) -> (Vec<serde_json::Value>, Option<i32>) {
    let mut args: Vec<std::ffi::OsString> = ["apply", "v1.34.0", "--yes"].map(Into::into).to_vec();
    args.extend(budget.iter().map(Into::into));
    let faults = sim.faults().clone();
    let runtime = tokio::runtime::Handle::current();
    crate::run_json_events(sim.kubeconfig_path().to_path_buf(), args, move |event| {
        if crate::is_event(event, "action", "kube-apiserver", "update-real") {
            let _entered = runtime.enter();
            faults.down_for(outage);
        }
        false
    })
    .await
}

fn reasons(events: &[serde_json::Value]) -> String {
    events
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_longer_than_the_budget_rolls_the_apiserver_back_and_says_by_how_much() {
    let sim = crate::self_hosted_nodes(3).await;
    let (events, code) = apply_with_outage(
        &sim,
        &["--max-unavailable-seconds", "1", "--timeout", "60s"],
        Duration::from_secs(3),
    )
    .await;
    let all = reasons(&events);
    assert_eq!(code, Some(1), "a rolled-back upgrade exits 1:\n{all}");
    assert!(
        all.contains("availability budget exceeded") && all.contains("over the budget of 1.0 s"),
        "the run says the budget was exceeded and by how much:\n{all}"
    );
    let images = apiserver_images(&sim).await;
    assert!(
        !images.is_empty() && images.iter().all(|i| i.ends_with(":v1.33.1")),
        "every kube-apiserver is back on the original version: {images:?}"
    );
    assert_eq!(crate::backups_left(&sim).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_within_the_budget_does_not_stop_the_upgrade() {
    let sim = crate::self_hosted_nodes(3).await;
    let (events, code) = apply_with_outage(
        &sim,
        &[
            "--max-unavailable-seconds",
            "30",
            "--max-failed-probes",
            "100",
        ],
        Duration::from_secs(1),
    )
    .await;
    let all = reasons(&events);
    assert_eq!(code, Some(0), "the upgrade finishes:\n{all}");
    assert!(!all.contains("availability budget exceeded"), "{all}");
    let images = apiserver_images(&sim).await;
    assert!(
        !images.is_empty() && images.iter().all(|i| i.ends_with(":v1.34.0")),
        "{images:?}"
    );
}

#[test]
fn a_budget_that_is_not_a_number_of_seconds_is_refused_before_anything_runs() {
    let output = crate::selfhost()
        .args([
            "apply",
            "v1.34.0",
            "--yes",
            "--max-unavailable-seconds",
            "two",
        ])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("invalid --max-unavailable-seconds \"two\"") && stderr.contains("0.5"),
        "{stderr}"
    );
}
