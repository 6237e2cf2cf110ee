//! Bounded retries that ride out transient failures and report the last real error.

use std::time::Duration;

use http::Method;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use selfhost::{FailureKind, RetryPolicy, with_retries};
use selfhost_sim::{FaultAction, RequestMatcher};

use crate::sim;

fn quick() -> RetryPolicy {
    RetryPolicy {
        first_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(50),
        max_attempts: 5,
        attempt_timeout: Duration::from_secs(5),
        deadline: Duration::from_secs(20),
    }
}

#[tokio::test]
async fn transient_failures_are_retried_until_the_call_succeeds() {
    let sim = sim().await;
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let api: Api<ConfigMap> = Api::namespaced(clients.api.clone(), "kube-system");
    let path = "/api/v1/namespaces/kube-system/configmaps/missing";
    sim.faults().inject(
        RequestMatcher::path(path).method(Method::GET),
        FaultAction::Status {
            code: 503,
            retry_after: None,
        },
        Some(2),
    );
    sim.faults().inject(
        RequestMatcher::path(path).method(Method::GET),
        FaultAction::ResetConnection,
        Some(1),
    );
    let got = with_retries("get ConfigMap missing", &quick(), || api.get_opt("missing")).await;
    assert!(matches!(got, Ok(None)), "{got:?}");
}

#[tokio::test]
async fn a_failure_retrying_cannot_fix_is_reported_at_once_in_the_servers_words() {
    let sim = sim().await;
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let api: Api<ConfigMap> = Api::namespaced(clients.api.clone(), "kube-system");
    let err = with_retries("get ConfigMap missing", &quick(), || api.get("missing"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FailureKind::NotFound);
    assert_eq!(err.attempts, 1);
    assert_eq!(
        err.to_string(),
        "get ConfigMap missing: configmaps \"missing\" not found (404 NotFound)"
    );
}

#[tokio::test]
async fn a_persistent_failure_gives_up_with_the_last_real_error() {
    let sim = sim().await;
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let api: Api<ConfigMap> = Api::namespaced(clients.api.clone(), "kube-system");
    sim.faults().inject(
        RequestMatcher::resource("configmaps"),
        FaultAction::Status {
            code: 500,
            retry_after: None,
        },
        None,
    );
    let params = kube::api::ListParams::default();
    let err = with_retries("list ConfigMaps", &quick(), || api.list(&params))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FailureKind::ServerError);
    assert_eq!(err.attempts, 5);
    let text = err.to_string();
    assert!(
        text.starts_with("list ConfigMaps: ")
            && text.contains("(500")
            && text.ends_with("(after 5 attempts)"),
        "{text}"
    );
    assert!(!text.contains("timed out waiting for the condition"));
}

#[tokio::test]
async fn an_early_denial_is_tried_again_but_a_real_one_is_reported() {
    let sim = sim().await;
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let api: Api<ConfigMap> = Api::namespaced(clients.api.clone(), "kube-system");
    let path = "/api/v1/namespaces/kube-system/configmaps/missing";
    // One 403, as a just-started apiserver gives before its authorization cache is loaded.
    sim.faults().inject(
        RequestMatcher::path(path).method(Method::GET),
        FaultAction::Status {
            code: 403,
            retry_after: None,
        },
        Some(1),
    );
    let got = with_retries("get ConfigMap missing", &quick(), || api.get_opt("missing")).await;
    assert!(matches!(got, Ok(None)), "{got:?}");
    // A lasting denial is reported after a few tries, in the server's words.
    sim.faults().inject(
        RequestMatcher::path(path).method(Method::GET),
        FaultAction::Status {
            code: 403,
            retry_after: None,
        },
        None,
    );
    let err = with_retries("get ConfigMap missing", &quick(), || api.get_opt("missing"))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FailureKind::Forbidden);
    assert_eq!(err.attempts, 3);
}
