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

/// Two kube-apiserver processes on one host (the real pod and its backup, or the backup and
/// the new pod) take the host's identity Lease from each other on every renewal. When their
/// renewals fall close together, every snapshot of the cache shows the same holder; before the
/// fix the other process was never seen, so its pod never counted as serving and the upgrade
/// rolled back at the deadline (about one run in ten of the campaign on a loaded machine). The
/// observer now reads every version the watch delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_overwritten_before_the_observation_is_still_seen() {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use k8s_openapi::jiff::Timestamp;
    use kube::Api;
    use kube::api::PostParams;
    use selfhost::observe::Observer;
    use std::time::Duration;

    let sim = crate::sim().await;
    let leases: Api<Lease> = Api::namespaced(sim.client(), "kube-system");
    let name = "apiserver-sharedbyonehost";
    let lease = |holder: &str, resource_version: Option<String>| Lease {
        metadata: ObjectMeta {
            name: Some(name.into()),
            resource_version,
            labels: Some(
                [
                    ("apiserver.kubernetes.io/identity", "kube-apiserver"),
                    ("kubernetes.io/hostname", "cp-1"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(format!("{name}_{holder}")),
            lease_duration_seconds: Some(3600),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..Default::default()
        }),
    };
    let post = PostParams::default();
    let created = leases.create(&post, &lease("old", None)).await.unwrap();

    let clients = crate::clients(sim.kubeconfig_path()).await;
    let mut observer = Observer::start(&clients);
    observer.ready(Duration::from_secs(20)).await.unwrap();
    observer.observe(Component::ApiServer).await;

    // The new process takes the Lease over, and the old one takes it back at once.
    let taken = leases
        .replace(
            name,
            &post,
            &lease("new", created.metadata.resource_version),
        )
        .await
        .unwrap();
    let back = leases
        .replace(name, &post, &lease("old", taken.metadata.resource_version))
        .await
        .unwrap();
    let last = back.metadata.resource_version.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while !observer
        .view
        .leases
        .state()
        .iter()
        .any(|l| l.metadata.resource_version.as_deref() == Some(last.as_str()))
    {
        assert!(tokio::time::Instant::now() < deadline, "the watch delivers");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let observation = observer.observe(Component::ApiServer).await;
    let new = observation
        .identity_leases
        .iter()
        .find(|s| s.holder == format!("{name}_new"));
    assert!(
        new.is_some_and(|s| s.holder_since.is_some()),
        "the new process is seen taking the Lease over: {:?}",
        observation.identity_leases
    );
}
