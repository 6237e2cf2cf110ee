//! Engine bugs the fault campaign found (crates/selfhost-cli/tests/it/campaign), each pinned by
//! the smallest scenario that showed it.

use std::time::Duration;

use http::Method;
use selfhost::{ApplyOptions, RunOutcome};
use selfhost_core::Component;
use selfhost_sim::{FaultAction, RequestMatcher};
use tokio::time::Instant;

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
    use selfhost::Observer;

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
    leases
        .replace(name, &post, &lease("old", taken.metadata.resource_version))
        .await
        .unwrap();
    // Every snapshot from now on shows the old holder; the new one is known only to a watcher
    // that saw each change.
    let deadline = Instant::now() + Duration::from_secs(20);
    let seen = |observation: &selfhost_core::observation::Observation| {
        observation
            .identity_leases
            .iter()
            .find(|s| s.holder == format!("{name}_new"))
            .cloned()
    };
    let mut observation = observer.observe(Component::ApiServer).await;
    while seen(&observation).is_none() && Instant::now() < deadline {
        observer.next_change(deadline).await;
        observation = observer.observe(Component::ApiServer).await;
    }
    let new = seen(&observation);
    assert!(
        new.as_ref().is_some_and(|s| s.holder_since.is_some()),
        "the new process is seen taking the Lease over: {:?}",
        observation.identity_leases
    );
}

/// Finding H of docs/reliability.md: a `--prepull` wait stalled after dropped watches and 410s,
/// "still waiting for kube-controller-manager: cp-1: Running" until its deadline although the
/// pod was Ready. The wait judged the caches, then began its next wait by marking every change
/// so far as seen, so a change that landed in between was lost; once every prepull pod is
/// Ready nothing changes any more. A watch that resumes after a drop, or relists after a 410,
/// delivers what it missed back to back, which opens exactly that gap. Here the gap is made
/// wide: the progress display blocks (as a terminal or pipe nobody reads does) while the
/// watches are cut and refused with 410 as the pods turn Ready, and then cut and refused again
/// until both watches have relisted the final state, so that all of it lands between one
/// judgement and the next wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepull_wait_sees_the_pods_ready_through_dropped_watches_and_410s() {
    use selfhost::{PrepullOptions, PrepullProgress, images_to_prepull, prepull};
    use selfhost_core::prepull::PrepullOutcome;
    use tokio_util::sync::CancellationToken;

    use crate::prepull::{cluster, leftovers, plan};

    let sim = cluster(3).await;
    let (clients, planned, targets) = plan(&sim).await;
    let images = images_to_prepull(&planned, &targets);
    let handle = tokio::runtime::Handle::current();
    let mut faulted = false;
    let mut lagging_display = |progress: PrepullProgress| {
        if faulted || !matches!(progress, PrepullProgress::Waiting { .. }) {
            return;
        }
        faulted = true;
        tokio::task::block_in_place(|| {
            handle.block_on(async {
                let deadline = Instant::now() + Duration::from_secs(60);
                // Only the prepull's two watches (pods, DaemonSets) watch over HTTP here: the
                // planning observer is gone and the cluster's own components read the store.
                let watches = || {
                    sim.metrics().requests("watch", "pods")
                        + sim.metrics().requests("watch", "daemonsets")
                };
                let settled = |expected: u64| async move {
                    while watches() < expected {
                        assert!(Instant::now() < deadline, "the watches come back");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                };
                // Every watch request while an expiry is pending takes it, so once the count
                // reaches base + expiries + 2, both watches relisted and watch again.
                let base = watches();
                sim.faults().drop_watches();
                sim.faults().expire_next_watches(2);
                all_prepull_pods_ready(&sim.client(), 3, deadline).await;
                settled(base + 2 + 2).await;
                let base = watches();
                sim.faults().drop_watches();
                sim.faults().expire_next_watches(4);
                settled(base + 4 + 2).await;
            });
        });
    };
    let outcome = prepull(
        &clients.api,
        &targets,
        &images,
        &PrepullOptions {
            deadline: Duration::from_secs(90),
            ..PrepullOptions::default()
        },
        &CancellationToken::new(),
        &mut lagging_display,
    )
    .await
    .expect("the prepull runs and cleans up");
    assert!(faulted, "the faults were injected while the wait ran");
    let PrepullOutcome::Pulled { nodes, .. } = &outcome else {
        panic!("expected the images to be pulled, got {outcome:#?}");
    };
    for (component, on) in nodes {
        assert_eq!(on, &["cp-1", "cp-2", "cp-3"], "{component}");
    }
    assert_eq!(leftovers(&clients.api).await, Vec::<String>::new());
    sim.shutdown().await;
}

/// Waits until the three prepull DaemonSets report every one of their `nodes` pods Ready and
/// each of those pods is Ready: after that, nothing the prepull watches changes any more.
async fn all_prepull_pods_ready(client: &kube::Client, nodes: usize, deadline: Instant) {
    use k8s_openapi::api::apps::v1::DaemonSet;
    use k8s_openapi::api::core::v1::Pod;
    use kube::Api;
    use kube::api::ListParams;
    use selfhost_core::prepull::PREPULL_LABEL;

    let by_label = ListParams::default().labels(PREPULL_LABEL);
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let ready = |pod: &Pod| {
        pod.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    let want = i32::try_from(nodes).expect("a few nodes");
    loop {
        let pods_ready = pods
            .list(&by_label)
            .await
            .is_ok_and(|l| l.items.len() == 3 * nodes && l.items.iter().all(ready));
        let counted = daemonsets.list(&by_label).await.is_ok_and(|l| {
            l.items.len() == 3
                && l.items.iter().all(|d| {
                    d.status.as_ref().is_some_and(|s| {
                        s.desired_number_scheduled == want && s.number_ready == want
                    })
                })
        });
        if pods_ready && counted {
            return;
        }
        assert!(Instant::now() < deadline, "the prepull pods become Ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The live pods of a component on each node (by `spec.nodeName`, empty while unbound).
type PodsByNode = std::collections::BTreeMap<String, Vec<String>>;

/// A control-plane node turns NotReady just as the scheduler's pivot, its backup removed,
/// stops a real pod on it that may hold the leader Lease (the fault campaign's run with three
/// control-plane nodes, `--prepull`, a SIGKILL and a NotReady window). The node lifecycle
/// controller taints the node `not-ready:NoSchedule`, so the DaemonSet controller no longer
/// counts it among the nodes that should run a daemon pod and creates none there: the
/// DaemonSet wants two pods and has two. Before the fix the pivot took that status for a
/// complete rollout and reported the component done with the node left without its pod. Now
/// it waits for the node's pod, which comes once the node is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn done_waits_for_a_pod_on_a_node_that_was_not_ready_when_its_pod_was_stopped() {
    use std::sync::{Arc, Mutex};

    use selfhost::Event;
    use selfhost_sim::controllers::kubelet::NodeState;
    use selfhost_sim::resources::PODS;
    use selfhost_sim::store::ListOptions;

    let sim = Arc::new(cluster_with(3, None).await);
    let app = Component::Scheduler.app_label_value();
    // Whether the backup's removal was asked for, the node made NotReady, and the
    // scheduler's pods per node when the pivot said done.
    let backup_removed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let not_ready: Arc<Mutex<Option<String>>> = Arc::default();
    let at_done: Arc<Mutex<Option<PodsByNode>>> = Arc::default();
    let on_event = {
        let (sim, backup_removed, not_ready, at_done, app) = (
            sim.clone(),
            backup_removed.clone(),
            not_ready.clone(),
            at_done.clone(),
            app.clone(),
        );
        move |stamped: &selfhost::Stamped, _: &tokio_util::sync::CancellationToken| {
            use std::sync::atomic::Ordering;
            match &stamped.event {
                Event::Action {
                    component: Component::Scheduler,
                    step,
                    ..
                } if step == "remove-backup" => backup_removed.store(true, Ordering::SeqCst),
                Event::Step {
                    component: Component::Scheduler,
                    step,
                    description,
                } if step == "stop-possible-lease-holder"
                    && backup_removed.load(Ordering::SeqCst)
                    && description.contains(&format!("pod {app}-")) =>
                {
                    let mut chosen = not_ready.lock().unwrap();
                    let node = description
                        .split(" on ")
                        .nth(1)
                        .and_then(|rest| rest.split(',').next());
                    if chosen.is_none()
                        && let Some(node) = node
                    {
                        sim.set_node_state(node, NodeState::NotReady)
                            .expect("the node is told");
                        *chosen = Some(node.to_string());
                    }
                }
                // A NotReady node makes no progress: the node comes back once the pivot
                // waits for something there.
                Event::Waiting {
                    component: Component::Scheduler,
                    pending,
                    ..
                } => {
                    let chosen = not_ready.lock().unwrap();
                    if let Some(node) = chosen.as_deref()
                        && pending.iter().any(|p| p.starts_with(&format!("{node}:")))
                    {
                        sim.set_node_state(node, NodeState::Up)
                            .expect("the node is told");
                    }
                }
                Event::Step {
                    component: Component::Scheduler,
                    step,
                    ..
                } if step == "done" => {
                    let pods = sim
                        .store()
                        .list(&PODS, &ListOptions::default())
                        .expect("the store lists")
                        .items;
                    let mut by_node = PodsByNode::new();
                    for pod in pods.iter().filter(|p| {
                        p.pointer("/metadata/labels/k8s-app")
                            .and_then(|v| v.as_str())
                            == Some(app.as_str())
                            && p.pointer("/metadata/deletionTimestamp").is_none()
                    }) {
                        let node = pod["spec"]["nodeName"].as_str().unwrap_or("").to_string();
                        let name = pod["metadata"]["name"].as_str().unwrap_or("").to_string();
                        by_node.entry(node).or_default().push(name);
                    }
                    *at_done.lock().unwrap() = Some(by_node);
                }
                _ => {}
            }
        }
    };
    let (report, _, _) = crate::apply_to(&sim, TO, &ApplyOptions::default(), on_event).await;
    assert_eq!(report.outcome, RunOutcome::Done);
    let at_done = at_done
        .lock()
        .unwrap()
        .clone()
        .expect("the scheduler's pivot said done");
    for node in sim.control_plane_names() {
        assert_eq!(
            at_done.get(&node).map(Vec::len),
            Some(1),
            "{node}: one live scheduler pod when the pivot said done (NotReady during the pivot: {:?}); by node: {at_done:?}",
            not_ready.lock().unwrap()
        );
    }
}
