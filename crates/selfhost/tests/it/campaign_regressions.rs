//! Engine bugs the fault campaign found (crates/selfhost-cli/tests/it/campaign), each pinned by
//! the smallest scenario that showed it.

use http::Method;
use selfhost::apply::{ApplyOptions, RunOutcome};
use selfhost_core::Component;
use selfhost_sim::{FaultAction, RequestMatcher};

use crate::upgrade::{cluster_with, images, upgrade};

const TO: &str = "v1.34.0";

/// A concurrent writer (or a pod already gone, or a watch relisting after a 410) makes the API
/// answer the same action 409 or 404 several times in a row while our watches lag behind. That
/// is the cluster moving on, not an action without effect: the run waits for its view to catch
/// up and goes on. Before the fix the executor decided again at once on the same stale view,
/// counted each answer as a repeat and stopped after five ("carried out 5 times but the
/// cluster does not show its effect", exit 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_conflicts_on_an_update_do_not_stop_the_upgrade() {
    let sim = cluster_with(3, None).await;
    sim.faults().inject(
        RequestMatcher::path(&format!(
            "/apis/apps/v1/namespaces/kube-system/daemonsets/{}",
            Component::ApiServer.daemonset_name()
        ))
        .method(Method::PUT),
        FaultAction::Status {
            code: 409,
            retry_after: None,
        },
        Some(8),
    );
    let (report, _) = upgrade(&sim, TO, ApplyOptions::default()).await;
    assert_eq!(report.outcome, RunOutcome::Done);
    let expected: Vec<String> = Component::ALL
        .iter()
        .map(|c| format!("registry.k8s.io/{}:{TO}", c.name()))
        .collect();
    assert_eq!(images(&sim).await, (expected, false));
}
