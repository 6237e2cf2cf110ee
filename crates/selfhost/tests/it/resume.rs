//! A run stopped dead in the middle of the apiserver's pivot (the engine dropped, as SIGKILL
//! leaves it: no clean-up, no memory) and a new run against the same cluster, under the
//! measured hand-over model. The new run knows only what the cluster shows: it did not see
//! the backup's processes take their identity Leases over, and its preflight may meet an
//! apiserver the pivot is stopping or starting.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use selfhost::{ApplyOptions, RunOutcome, apply};
use selfhost::{Event, Events};
use selfhost_core::Component;
use selfhost_core::pivot::{BACKUP_IDENTITIES, PivotOptions};
use selfhost_sim::cluster::Handovers;
use selfhost_sim::{FaultAction, RequestMatcher, SimCluster};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::upgrade::{FROM, TO, cluster_with, images, on};

/// The per-component deadline of these runs: a never-Ready target is given up on after it.
const DEADLINE: Duration = Duration::from_secs(20);
/// Control-plane nodes of the never-Ready case, as in the campaign's seed.
const NODES: usize = 4;

fn options() -> ApplyOptions {
    ApplyOptions {
        pivot: PivotOptions {
            deadline: DEADLINE,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Starts an upgrade to [`TO`] and drops the engine (its task aborted mid-await, its watches
/// and identity memory gone) once it reports the apiserver's `wait-for-rollout` after its
/// `update-real` (the real DaemonSet is on the target, the backup serves) and, with
/// `target_rolled`, once a node runs a pod of the target template and no other (the engine
/// holds the apiserver's rollout to that node until its new pod serves).
async fn killed_during_the_apiservers_rollout(sim: &SimCluster, target_rolled: bool) {
    let (clients, mut observer, _, targets) = crate::planned(sim, TO).await;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let run = tokio::spawn(async move {
        let events = Events::to(sender);
        let cancel = CancellationToken::new();
        let options = options();
        apply(
            &mut observer,
            &clients.api,
            &targets,
            &options,
            &events,
            &cancel,
        )
        .await
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut updated = false;
    loop {
        let event = tokio::time::timeout_at(deadline, receiver.recv())
            .await
            .expect("the run reaches the apiserver's rollout in time")
            .expect("the run goes on until it is stopped");
        let Event::Step {
            component: Component::ApiServer,
            step,
            ..
        } = &event.event
        else {
            continue;
        };
        updated |= step == "update-real";
        if updated && step == "wait-for-rollout" {
            break;
        }
    }
    if target_rolled {
        a_target_pod_alone(sim, deadline).await;
    }
    run.abort();
    let _ = run.await;
}

/// Waits until every control-plane node runs exactly one apiserver pod of the real DaemonSet,
/// none Terminating, and at least one of them is of its current template generation: that
/// node's old pod is gone. (The engine holds the rollout there while the target does not
/// serve, so a never-Ready target never reaches a second node.)
async fn a_target_pod_alone(sim: &SimCluster, deadline: Instant) {
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let selector = ListParams::default().labels(&Component::ApiServer.label_query());
    loop {
        assert!(
            Instant::now() < deadline,
            "a node runs a target pod alone in time"
        );
        // Behind the load balancer a never-Ready process answers some requests 500 ("still
        // starting"), as a real one does: read again.
        let (Ok(real), Ok(listed)) = (
            daemonsets.get(&Component::ApiServer.daemonset_name()).await,
            pods.list(&selector).await,
        ) else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let listed = listed.items;
        let generation = real
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("deprecated.daemonset.template.generation"))
            .cloned();
        let current = |pod: &Pod| {
            pod.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("pod-template-generation"))
                == generation.as_ref()
        };
        let rolled = listed.len() == NODES
            && listed
                .iter()
                .all(|pod| pod.metadata.deletion_timestamp.is_none())
            && listed.iter().any(current);
        if rolled {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The second run, planned and applied from scratch.
async fn rerun(sim: &SimCluster) -> RunOutcome {
    crate::apply_to(sim, TO, &options(), |_, _| {})
        .await
        .0
        .outcome
}

/// Waits until the kubelet's whole-second start times of the running apiservers lie in an
/// earlier second than any pod the run will create, as on any cluster that has run for more
/// than a moment: a freshly booted simulated cluster starts its first pods within the second
/// the run creates the backup, and then no start time can tell which process took a Lease.
async fn settled(sim: &SimCluster) {
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let selector = ListParams::default().labels(&Component::ApiServer.label_query());
    let listed = crate::read_again("list the apiserver pods", || pods.list(&selector)).await;
    let latest = listed
        .items
        .iter()
        .flat_map(|pod| {
            pod.status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
        })
        .filter_map(|c| c.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .map(|t| t.0)
        .max()
        .expect("the apiservers run");
    // Two seconds past the latest start: the next whole second is certainly later.
    let until = latest + k8s_openapi::jiff::SignedDuration::from_secs(2);
    let wait = until.duration_since(k8s_openapi::jiff::Timestamp::now());
    if let Ok(wait) = Duration::try_from(wait) {
        tokio::time::sleep(wait).await;
    }
}

/// Whether the update that started the rollout recorded whose identity holder each backup
/// pod has.
async fn backup_identities_recorded(sim: &SimCluster) -> bool {
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // A never-Ready process may answer 500 ("still starting"): read again.
        match daemonsets.get(&Component::ApiServer.daemonset_name()).await {
            Ok(real) => {
                return real
                    .metadata
                    .annotations
                    .is_some_and(|a| a.contains_key(BACKUP_IDENTITIES));
            }
            Err(error) => assert!(
                Instant::now() < deadline,
                "read the real DaemonSet: {error}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Finding A: killed once a never-Ready target (Ready by a probe the backup answers) runs
/// alone on a node (the engine holds the rollout there; before the hold the DaemonSet
/// controller put it on all four), the re-run must roll back. Before the record it stopped
/// with "rolling back is not safe: no pod of the backup serves": on that host the backup's
/// process alone renews the Lease, beside a new pod's process that publishes nothing, and
/// nothing the re-run saw told the two apart.
///
/// Since the backup of a kube-apiserver on several nodes is a record only, no backup pod
/// exists to be proven: the re-run's rollback rests on the other nodes' old pods, which the
/// hold never touched, and the never-Ready pod's node is out of the load balancer.
///
/// `settle`: the first run starts once the apiservers' whole-second start times are past
/// (the backup's holders are attributed by their take-over), or at once, as the campaign
/// does. There the old and the backup processes may start within one second, and then only
/// elimination (the old holders seen before the backup existed) attributes the backup's
/// holders; whether they do depends on the machine's speed, so the rule itself is pinned by
/// the core's table (`pivot::tests::recorded`).
async fn never_ready_rollout_killed_then_rolled_back(settle: bool) {
    let sim = cluster_with(NODES, Some(Handovers::measured())).await;
    sim.registry()
        .make_never_ready(&format!("registry.k8s.io/kube-apiserver:{TO}"))
        .expect("a valid image name");
    if settle {
        settled(&sim).await;
    }
    let started = Instant::now();
    killed_during_the_apiservers_rollout(&sim, true).await;
    // On four nodes the backup is a record only (`vacate.rs`): no backup pod, so no identity
    // to record, and the re-run rolls back because the other nodes' untouched old pods serve.
    assert!(!backup_identities_recorded(&sim).await);
    let outcome = rerun(&sim).await;
    assert!(
        matches!(
            &outcome,
            RunOutcome::RolledBack {
                component: Component::ApiServer,
                ..
            }
        ),
        "{outcome:?}"
    );
    assert_eq!(
        images(&sim).await,
        (on(FROM), false),
        "back on the original, no backup left"
    );
    assert!(!sim.recorder().was_down(started, Instant::now()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_after_a_kill_during_a_never_ready_rollout_rolls_back() {
    never_ready_rollout_killed_then_rolled_back(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_on_a_freshly_booted_cluster_rolls_back() {
    never_ready_rollout_killed_then_rolled_back(false).await;
}

/// The same kill with a healthy target on three nodes: the re-run completes, leaves nothing
/// behind, and no probe fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_after_a_kill_during_the_apiservers_rollout_completes() {
    let sim = cluster_with(3, Some(Handovers::measured())).await;
    let prober = sim
        .prober(crate::upgrade::prober_options())
        .await
        .expect("prober");
    killed_during_the_apiservers_rollout(&sim, false).await;
    let outcome = rerun(&sim).await;
    let probes = prober.stop().await;
    assert_eq!(outcome, RunOutcome::Done);
    assert_eq!(images(&sim).await, (on(TO), false));
    let failed = crate::upgrade::failed_with_catchers(&probes);
    assert!(
        failed.is_empty(),
        "{} probes failed ({:?} replayed): {failed:#?}",
        failed.len(),
        probes.replay_reasons()
    );
}

/// Finding B: the re-run's first `/readyz` is answered 500 by an apiserver in its shutdown
/// delay ("[-]shutdown failed", which the load balancer needs to drain it). The plan proceeds
/// (the API answers reads and apiservers serve by identity), and the run finishes. The answer
/// is injected for the plan's probes only: which process a real probe lands on is the
/// kernel's choice, not the test's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_whose_readyz_lands_on_a_stopping_apiserver_resumes() {
    let sim = cluster_with(3, Some(Handovers::measured())).await;
    killed_during_the_apiservers_rollout(&sim, false).await;
    let shutting_down = sim.faults().inject(
        RequestMatcher::path("/readyz"),
        FaultAction::Status {
            code: 500,
            retry_after: None,
        },
        None,
    );
    let (clients, mut observer, plan, targets) = crate::planned(&sim, TO).await;
    let api = plan
        .preflight
        .checks
        .iter()
        .find(|c| c.id == selfhost_core::preflight::CheckId::ApiHealthy)
        .expect("the API check");
    assert_eq!(
        api.verdict,
        selfhost_core::preflight::Verdict::Warn,
        "{}",
        api.message
    );
    assert!(
        api.message.contains("an upgrade is in progress"),
        "{}",
        api.message
    );
    sim.faults().remove(shutting_down);
    let cancel = CancellationToken::new();
    let report = tokio::time::timeout(
        Duration::from_secs(240),
        apply(
            &mut observer,
            &clients.api,
            &targets,
            &options(),
            &Events::none(),
            &cancel,
        ),
    )
    .await
    .expect("finishes in time")
    .expect("runs");
    assert_eq!(report.outcome, RunOutcome::Done);
    assert_eq!(images(&sim).await, (on(TO), false));
}

/// A fresh run meeting the same answer is refused: nothing of ours is moving, so a failing
/// `/readyz` is the cluster's own trouble.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_run_whose_readyz_fails_is_refused() {
    let sim = cluster_with(1, Some(Handovers::measured())).await;
    sim.faults().inject(
        RequestMatcher::path("/readyz"),
        FaultAction::Status {
            code: 500,
            retry_after: None,
        },
        None,
    );
    let (_, _, plan, _) = crate::plan_for(&sim, TO).await;
    assert!(!plan.proceeds);
    assert!(
        plan.preflight
            .failures()
            .any(|c| c.id == selfhost_core::preflight::CheckId::ApiHealthy),
        "{:#?}",
        plan.preflight
    );
}
