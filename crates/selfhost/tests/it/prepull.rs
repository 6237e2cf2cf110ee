//! `--prepull` against a simulated cluster: the prepull DaemonSets find out whether every
//! control-plane node can pull the target images, and are gone afterwards in every case.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use selfhost::Plan;
use selfhost::Targets;
use selfhost::{PrepullOptions, PrepullProgress, images_to_prepull, prepull, record_prepull};
use selfhost_core::preflight::{CheckId, Verdict};
use selfhost_core::prepull::{PREPULL_LABEL, PrepullOutcome};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::{SimCluster, SimTimings};
use tokio_util::sync::CancellationToken;

const FROM: &str = "v1.33.1";
const TO: &str = "v1.34.0";
/// The pause image kubeadm pairs with v1.34 (see `selfhost_core::prepull::pause_image`).
const PAUSE: &str = "registry.k8s.io/pause:3.10.1";

/// A self-hosted cluster whose registry has the v1.34 images and, as real registries do, the
/// `pause` images.
pub(crate) async fn cluster(nodes: usize) -> SimCluster {
    SimCluster::builder()
        .control_plane_nodes(nodes)
        .version(FROM)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(100))
        .start()
        .await
        .expect("cluster starts")
}

pub(crate) async fn plan(sim: &SimCluster) -> (selfhost::Clients, Plan, Targets) {
    let (clients, _, plan, targets) = crate::planned(sim, TO).await;
    (clients, plan, targets)
}

/// Every DaemonSet of kube-system with its uid and spec generation, and every pod with its uid
/// (status fields, and so resourceVersions, move on their own as kubelets and controllers
/// report).
async fn kube_system(client: &kube::Client) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    for ds in daemonsets.list(&ListParams::default()).await.expect("list") {
        out.insert(
            format!("ds/{}", ds.metadata.name.unwrap_or_default()),
            format!(
                "{}/{}",
                ds.metadata.uid.unwrap_or_default(),
                ds.metadata.generation.unwrap_or_default()
            ),
        );
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    for pod in pods.list(&ListParams::default()).await.expect("list") {
        out.insert(
            format!("pod/{}", pod.metadata.name.unwrap_or_default()),
            pod.metadata.uid.unwrap_or_default(),
        );
    }
    out
}

pub(crate) async fn leftovers(client: &kube::Client) -> Vec<String> {
    let by_label = ListParams::default().labels(PREPULL_LABEL);
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let mut left: Vec<String> = daemonsets
        .list(&ListParams::default())
        .await
        .expect("list")
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .filter(|n| n.starts_with("upgrade-prepull-"))
        .collect();
    left.extend(
        pods.list(&by_label)
            .await
            .expect("list")
            .into_iter()
            .filter_map(|p| p.metadata.name),
    );
    left
}

async fn run(
    clients: &selfhost::Clients,
    plan: &Plan,
    targets: &Targets,
) -> (PrepullOutcome, Vec<PrepullProgress>) {
    let images = images_to_prepull(plan, targets);
    assert_eq!(images.len(), 3, "every component changes its image");
    let mut seen = Vec::new();
    let outcome = prepull(
        &clients.api,
        targets,
        &images,
        &PrepullOptions {
            deadline: Duration::from_secs(60),
            ..PrepullOptions::default()
        },
        &CancellationToken::new(),
        &mut |p| seen.push(p),
    )
    .await
    .expect("the prepull runs and cleans up");
    (outcome, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pullable_images_pass_on_every_node_and_nothing_is_left_behind() {
    let sim = cluster(3).await;
    let (clients, mut plan, targets) = plan(&sim).await;
    let (outcome, progress) = run(&clients, &plan, &targets).await;

    let PrepullOutcome::Pulled { images, nodes } = &outcome else {
        panic!("expected the images to be pulled, got {outcome:#?}");
    };
    assert_eq!(images.len(), 3);
    assert!(
        images.iter().all(|i| i.image.ends_with(":v1.34.0")),
        "{images:?}"
    );
    for (component, on) in nodes {
        assert_eq!(on, &["cp-1", "cp-2", "cp-3"], "{component}");
    }
    assert!(progress.contains(&PrepullProgress::Removed), "{progress:?}");
    assert_eq!(leftovers(&clients.api).await, Vec::<String>::new());

    record_prepull(&mut plan, &outcome);
    let check = plan.preflight.checks.last().expect("a check");
    assert_eq!(check.id, CheckId::ImagesPullable);
    assert_eq!(check.verdict, Verdict::Pass, "{}", check.message);
    assert!(plan.proceeds);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_a_node_cannot_pull_is_refused_by_image_and_node_and_nothing_else_changes() {
    // The target images pull and run, but no node can pull the pause image that holds the
    // prepull pods: the failure is the pause container's, on every node.
    let sim = cluster(2).await;
    sim.registry().make_unpullable(PAUSE);
    let (clients, mut plan, targets) = plan(&sim).await;
    let before = kube_system(&clients.api).await;
    let (outcome, _) = run(&clients, &plan, &targets).await;

    let PrepullOutcome::Failed { failures } = &outcome else {
        panic!("expected a refusal, got {outcome:#?}");
    };
    let nodes: std::collections::BTreeSet<&str> =
        failures.iter().map(|f| f.node.as_str()).collect();
    assert!(
        !nodes.is_empty() && nodes.iter().all(|n| ["cp-1", "cp-2"].contains(n)),
        "{failures:#?}"
    );
    for failure in failures {
        assert_eq!(failure.image, PAUSE);
        assert!(
            ["ErrImagePull", "ImagePullBackOff"].contains(&failure.reason.as_str()),
            "{failure:?}"
        );
    }
    record_prepull(&mut plan, &outcome);
    let check = plan.preflight.checks.last().expect("a check");
    assert_eq!(check.verdict, Verdict::Fail);
    assert!(
        check.message.contains(PAUSE) && check.message.contains(" cp-"),
        "{}",
        check.message
    );
    assert!(!plan.proceeds);

    assert_eq!(leftovers(&clients.api).await, Vec::<String>::new());
    assert_eq!(
        kube_system(&clients.api).await,
        before,
        "every other DaemonSet and pod of kube-system as before"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leftover_of_an_interrupted_run_is_replaced_and_removed() {
    let sim = cluster(1).await;
    let (clients, plan, targets) = plan(&sim).await;
    // A prepull DaemonSet as a killed run leaves it: same name, an older image.
    let images = images_to_prepull(&plan, &targets);
    let mut stale = images[0].clone();
    stale.image = "registry.k8s.io/kube-apiserver:v1.33.1".into();
    let template = targets.templates.get(&stale.component).expect("template");
    let leftover = selfhost_core::prepull::prepull_daemonset(&stale, PAUSE, template);
    let daemonsets: Api<DaemonSet> = Api::namespaced(clients.api.clone(), "kube-system");
    daemonsets
        .create(&Default::default(), &leftover)
        .await
        .expect("leftover created");

    let (outcome, _) = run(&clients, &plan, &targets).await;
    assert!(
        matches!(outcome, PrepullOutcome::Pulled { .. }),
        "{outcome:#?}"
    );
    assert_eq!(leftovers(&clients.api).await, Vec::<String>::new());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_prepull_leaves_nothing_behind() {
    let sim = cluster(1).await;
    let (clients, plan, targets) = plan(&sim).await;
    let images = images_to_prepull(&plan, &targets);
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    // Interrupted as soon as the first DaemonSet exists.
    let outcome = prepull(
        &clients.api,
        &targets,
        &images,
        &PrepullOptions::default(),
        &cancel,
        &mut |p| {
            if matches!(p, PrepullProgress::Created { .. }) {
                stop.cancel();
            }
        },
    )
    .await
    .expect("cleans up");
    assert_eq!(outcome, PrepullOutcome::Interrupted);
    assert_eq!(leftovers(&clients.api).await, Vec::<String>::new());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpullable_target_image_is_refused_by_image_and_node() {
    // The init container pulls the target image: the kubelet's pull error names it.
    let scheduler = "registry.k8s.io/kube-scheduler:v1.34.0";
    let sim = cluster(2).await;
    sim.registry().make_unpullable(scheduler);
    let (clients, mut plan, targets) = plan(&sim).await;
    let (outcome, _) = run(&clients, &plan, &targets).await;
    let PrepullOutcome::Failed { failures } = &outcome else {
        panic!("expected a refusal, got {outcome:#?}");
    };
    assert!(!failures.is_empty());
    for failure in failures {
        assert_eq!(failure.image, scheduler, "{failure:?}");
        assert!(
            ["cp-1", "cp-2"].contains(&failure.node.as_str()),
            "{failure:?}"
        );
        assert!(
            ["ErrImagePull", "ImagePullBackOff"].contains(&failure.reason.as_str()),
            "{failure:?}"
        );
        assert!(
            failure
                .message
                .as_deref()
                .is_some_and(|m| m.contains(scheduler) && m.contains("not found")),
            "the registry's words: {failure:?}"
        );
    }
    record_prepull(&mut plan, &outcome);
    let check = plan.preflight.checks.last().expect("a check");
    assert_eq!(check.verdict, Verdict::Fail);
    assert!(check.message.contains(scheduler), "{}", check.message);
    assert!(!plan.proceeds);
    assert_eq!(leftovers(&clients.api).await, Vec::<String>::new());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_slower_than_the_deadline_times_out_naming_what_is_pending_and_leaves_nothing() {
    let sim = SimCluster::builder()
        .control_plane_nodes(1)
        .version(FROM)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(100))
        .image(PAUSE, ImageBehaviour::slow_pull(Duration::from_secs(600)))
        .start()
        .await
        .expect("cluster starts");
    let (clients, plan, targets) = plan(&sim).await;
    let images = images_to_prepull(&plan, &targets);
    let outcome = prepull(
        &clients.api,
        &targets,
        &images,
        &PrepullOptions {
            deadline: Duration::from_secs(3),
            ..PrepullOptions::default()
        },
        &CancellationToken::new(),
        &mut |_| {},
    )
    .await
    .expect("cleans up");
    let PrepullOutcome::TimedOut { pending, .. } = &outcome else {
        panic!("expected a timeout, got {outcome:#?}");
    };
    assert!(
        pending.iter().any(|p| p.contains("cp-1")),
        "the node still pulling is named: {pending:?}"
    );
    assert_eq!(leftovers(&clients.api).await, Vec::<String>::new());
    sim.shutdown().await;
}
