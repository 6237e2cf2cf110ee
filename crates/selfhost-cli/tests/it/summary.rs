//! `apply` ends with the disruption the plan expected next to what the engine measured, as
//! text for people and in the JSON result event for scripts.

use selfhost_sim::SimCluster;

const COMPONENTS: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

async fn apply(sim: &SimCluster, json: bool) -> std::process::Output {
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut cmd = crate::selfhost();
        cmd.env("KUBECONFIG", kubeconfig)
            .args(["apply", "v1.34.0", "--yes"]);
        if json {
            cmd.args(["-o", "json"]);
        }
        cmd.output()
    })
    .await
    .expect("joined")
    .expect("runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_text_summary_sets_measured_disruption_against_the_expected() {
    let sim = crate::one_self_hosted_node().await;
    let out = apply(&sim, false).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // Shown with --nocapture: the figures of a one-node run.
    eprintln!("{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    let heading = lines
        .iter()
        .position(|l| l.starts_with("disruption, expected → measured"))
        .unwrap_or_else(|| panic!("no summary: {stderr}"));
    let summary = &lines[heading + 1..heading + 4];
    for (line, component) in summary.iter().zip(COMPONENTS) {
        assert!(line.starts_with(&format!("  {component}, ")), "{stderr}");
        assert!(line.contains("/readyz probe"), "{line}");
    }
    // One node with port sharing: the plan expects two listen-before-serve windows.
    assert!(
        summary[0].contains("API 2 windows of ~1.7s with some failed new connections → "),
        "{}",
        summary[0]
    );
    for line in &summary[1..] {
        assert!(
            line.contains("leader ≤ 2 changes of ≤ 3s without a leader → "),
            "{line}"
        );
    }
    assert!(
        stderr
            .trim_end()
            .ends_with("the control plane runs v1.34.0"),
        "the result stays last: {stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_result_carries_disruption_and_the_requests_sent() {
    let sim = crate::one_self_hosted_node().await;
    let served_before = sim.metrics().total();
    let out = apply(&sim, true).await;
    let served = sim.metrics().total() - served_before;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "result")
        .unwrap_or_else(|| panic!("no result event: {stdout}"));
    let disruption = result["disruption"].as_array().expect("a list");
    let components: Vec<&str> = disruption
        .iter()
        .filter_map(|d| d["component"].as_str())
        .collect();
    assert_eq!(components, COMPONENTS);
    for d in disruption {
        let measured = &d["measured"];
        assert!(
            measured["wall_seconds"].as_f64().is_some_and(|s| s > 0.0),
            "{d}"
        );
        assert!(
            measured["health_probes"].as_u64().is_some_and(|n| n > 0),
            "{d}"
        );
        assert!(measured["failed_health_probes"].is_u64(), "{d}");
        assert!(measured["leader_changes"].is_array(), "{d}");
        assert!(d["expected"]["api"]["impact"].is_string(), "{d}");
    }
    assert_eq!(disruption[1]["expected"]["leaderless_gap_seconds"], 3);
    // Every request the tool sent, as the API server counted them.
    assert_eq!(result["api_requests"].as_u64(), Some(served), "{result}");
}
