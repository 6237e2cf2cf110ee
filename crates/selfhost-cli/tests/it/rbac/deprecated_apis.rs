//! The `removed-apis` preflight check under RBAC: the viewer role reads the kube-apiserver's
//! count of requested deprecated APIs (`/metrics`); without that rule `plan` still plans and
//! says the check could not be made, and how to let it.

use super::fixture::*;

const VIEWER: &str = "selfhost-viewer";

/// The `removed-apis` checks of `plan TO -o json` run with `kubeconfig`.
async fn removed_apis_checks(kubeconfig: &std::path::Path) -> Vec<serde_json::Value> {
    let out = selfhost(kubeconfig, &["-o", "json", "plan", TO]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plan: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("plan -o json prints one document");
    plan["preflight"]["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == "removed-apis")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_the_viewer_role_reads_which_deprecated_apis_clients_request() {
    let (_sim, _dir, kubeconfig) = cluster_as(&manifest(), VIEWER).await;
    let checks = removed_apis_checks(&kubeconfig).await;
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(checks[0]["verdict"], "pass", "{checks:?}");
    assert!(
        checks[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no client requests an API version that v1.34")),
        "{checks:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_without_the_metrics_rule_the_plan_says_the_check_could_not_be_made() {
    let (_sim, _dir, kubeconfig) = cluster_as(
        &cut(manifest(), Cut::Rule("ClusterRole", VIEWER, 3)),
        VIEWER,
    )
    .await;
    let checks = removed_apis_checks(&kubeconfig).await;
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(checks[0]["verdict"], "warn", "{checks:?}");
    let words = format!("{} | {}", checks[0]["message"], checks[0]["fix"]);
    assert!(
        words.contains("GET /metrics")
            && words.contains("forbidden")
            && words.contains("/metrics to the user"),
        "{words}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_the_deprecated_api_gauge_selfhost_reads() {
    let sim = crate::one_self_hosted_node().await;
    let home = tempfile::tempdir().expect("temporary directory");
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let cache = home.path().join("cache");
    let home_path = home.path().to_path_buf();
    let metrics = tokio::task::spawn_blocking(move || {
        std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--cache-dir")
            .arg(cache)
            .args(["--request-timeout=30s", "get", "--raw", "/metrics"])
            .env("HOME", home_path)
            .output()
            .expect("kubectl runs")
    })
    .await
    .expect("joined");
    let text = String::from_utf8_lossy(&metrics.stdout);
    assert!(
        metrics.status.success()
            && text.contains("# TYPE apiserver_requested_deprecated_apis gauge"),
        "{text}{}",
        String::from_utf8_lossy(&metrics.stderr)
    );
}
