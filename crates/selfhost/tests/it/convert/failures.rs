//! Failures: an image that cannot be pulled, a DaemonSet pod that never serves after the
//! hand-over (both under the measured hand-over model), and bad input.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use selfhost::ComponentOutcome;
use selfhost::ConversionView;
use selfhost::{ConvertRequest, convert};
use selfhost::{Event, Events};
use selfhost_core::Component;
use selfhost_core::conversion::decide::Direction;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;

/// Rewrites the static manifests of `node` so that the kubelet pulls their image on every
/// start, and waits for the restarted static pods: then a DaemonSet pod of the same image
/// needs the registry, while the running static pods do not.
async fn pull_always(sim: &SimCluster, node: &str) {
    let dir = sim.manifests_dir(node).expect("dir").to_path_buf();
    for file in ALL_MANIFESTS {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).expect("manifest");
        let changed = text.replace("imagePullPolicy: IfNotPresent", "imagePullPolicy: Always");
        assert_ne!(text, changed, "{file} names a pull policy");
        std::fs::write(&path, changed).expect("write");
    }
    // The API is down while the one node's apiserver restarts: ask until it answers.
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let restarted = pods
            .list(&ListParams::default().labels("tier=control-plane"))
            .await
            .is_ok_and(|list| {
                list.items.len() == 3
                    && list.items.iter().all(|p| {
                        is_ready(p)
                            && p.spec.as_ref().is_some_and(|s| {
                                s.containers[0].image_pull_policy.as_deref() == Some("Always")
                            })
                            && started_at(p)
                                .is_some_and(|t| Timestamp::now().duration_since(t).as_secs() >= 2)
                    })
            });
        if restarted {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the static pods restart with the new policy"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Under the measured hand-over model, with and without port sharing on the static pods: the
/// DaemonSet pod never gets its image, so the hand-over never starts, and the static pods keep
/// serving throughout.
async fn an_unpullable_image_leaves_the_static_pods_serving(port_sharing: bool) {
    let sim = static_cluster_with(1, port_sharing, Some(Handovers::measured())).await;
    pull_always(&sim, "cp-1").await;
    let before = wait_for(&sim, &expected(&sim, "static", FROM)).await;
    assert_eq!(before.running, expected(&sim, "static", FROM));
    sim.registry()
        .make_unpullable(&format!("registry.k8s.io/kube-apiserver:{FROM}"));
    let started = Instant::now();
    let prober = sim.prober(prober_options()).await.expect("prober");
    let (report, _) = run(&sim, &request(&sim, Direction::ToSelfHosted, "cp-1")).await;
    let probes = prober.stop().await;
    let (component, outcome) = report.first_problem().expect("a failure");
    assert_eq!(*component, Component::ApiServer);
    let ComponentOutcome::RolledBack { reason } = outcome else {
        panic!("expected a rollback: {outcome:?}");
    };
    assert!(
        reason.contains("ErrImagePull") || reason.contains("ImagePullBackOff"),
        "{reason}"
    );
    assert!(
        !sim.recorder().was_down(started, Instant::now()),
        "the API never went down"
    );
    assert_eq!(failed(&probes), Vec::<String>::new(), "no probe failed");
    let after = wait_for(&sim, &expected(&sim, "static", FROM)).await;
    assert_eq!(after.running, expected(&sim, "static", FROM));
    assert_eq!(after.daemonsets, Vec::<String>::new());
    assert_eq!(after.gate_labels, Vec::<String>::new());
    assert_eq!(manifests(&sim, "cp-1"), ALL_MANIFESTS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpullable_image_with_port_sharing_exits_rolled_back_without_a_failed_probe() {
    an_unpullable_image_leaves_the_static_pods_serving(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpullable_image_without_port_sharing_exits_rolled_back_without_a_failed_probe() {
    an_unpullable_image_leaves_the_static_pods_serving(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_pod_that_never_serves_after_the_hand_over_gets_the_static_pod_back() {
    let sim = static_cluster_with(3, false, Some(Handovers::measured())).await;
    let image = format!("registry.k8s.io/kube-scheduler:{FROM}");
    let started = Instant::now();
    let prober = sim.prober(prober_options()).await.expect("prober");
    let mut request = request(&sim, Direction::ToSelfHosted, "cp-2");
    request.deadline = Duration::from_secs(5);
    let scheduler_manifest = sim
        .manifests_dir("cp-2")
        .expect("dir")
        .join("kube-scheduler.yaml");
    let original = std::fs::read(&scheduler_manifest).expect("the scheduler's manifest");
    // The scheduler's image is broken for every process started from now on (the running
    // static pods keep going), and mended as soon as the engine decides to restore — before it
    // puts the original manifest back, so the static pod restarts from a good image. Without
    // port sharing the static pod is first restarted with it (and is broken too until then);
    // the DaemonSet pod is found not to serve beside it, and the original manifest, without
    // port sharing, is put back once that pod has gone.
    sim.registry()
        .make_never_ready(&image)
        .expect("known image");
    let registry = sim.registry().clone();
    let (report, events) = run_with(&sim, &request, move |e| {
        if matches!(&e.event, Event::Step { component: Component::Scheduler, step, .. } if step == "restore") {
            registry.add_image(&image).expect("known image");
        }
    })
    .await;
    let probes = prober.stop().await;
    let (component, outcome) = report.first_problem().expect("a failure");
    assert_eq!(*component, Component::Scheduler, "{report:#?}");
    assert!(
        matches!(outcome, ComponentOutcome::RolledBack { .. }),
        "{outcome:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(&e.event, Event::Action { step, .. } if step == "restore-manifest")),
        "the static manifest rewritten with port sharing was put back as it was"
    );
    assert!(!sim.recorder().was_down(started, Instant::now()));
    eprintln!("failed probes: {:?}", failed(&probes));
    let mut wanted = expected(&sim, "static", FROM);
    for component in [Component::ApiServer, Component::ControllerManager] {
        wanted.insert(
            ("cp-2".to_string(), component),
            vec![format!(
                "daemonset registry.k8s.io/{}:{FROM}",
                component.name()
            )],
        );
    }
    let after = wait_for(&sim, &wanted).await;
    assert_eq!(
        after.running, wanted,
        "cp-2 keeps the components converted before"
    );
    assert_eq!(manifests(&sim, "cp-2"), ["kube-scheduler.yaml"]);
    assert_eq!(
        std::fs::read(&scheduler_manifest).expect("the scheduler's manifest"),
        original,
        "the original manifest, without port sharing, is back byte for byte"
    );
    assert!(
        !after
            .daemonsets
            .contains(&Component::Scheduler.daemonset_name())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_and_changes_nothing() {
    use selfhost::ConvertError;
    let sim = static_cluster(1, true).await;
    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let clients = crate::clients(sim.kubeconfig_path()).await;
    let before = control_plane(&sim).await;
    let attempt = |request: ConvertRequest| {
        let clients = &clients;
        async move {
            let mut view = ConversionView::start(&clients.api);
            view.ready(Duration::from_secs(20)).await.expect("watches");
            convert(
                clients,
                &mut view,
                &request,
                &Events::none(),
                &CancellationToken::new(),
            )
            .await
        }
    };

    let missing = ConvertRequest::new(Direction::ToSelfHosted, "cp-1", dir.join("nope"));
    let err = attempt(missing).await.expect_err("no such directory");
    assert!(
        err.is_bad_input() && err.to_string().contains("does not exist"),
        "{err}"
    );

    let unknown = ConvertRequest::new(Direction::ToSelfHosted, "cp-9", &dir);
    let err = attempt(unknown).await.expect_err("no such node");
    assert!(
        matches!(err, ConvertError::UnknownNode(_)) && err.is_bad_input(),
        "{err}"
    );

    // A component missing on disk (moved away by hand): refused, before any change.
    let scheduler = dir.join("kube-scheduler.yaml");
    let aside = dir
        .parent()
        .expect("parent")
        .join("kube-scheduler.yaml.by-hand");
    std::fs::rename(&scheduler, &aside).expect("move");
    let report = attempt(ConvertRequest::new(Direction::ToSelfHosted, "cp-1", &dir))
        .await
        .expect("runs");
    let (component, outcome) = report.first_problem().expect("refused");
    assert_eq!(*component, Component::Scheduler);
    assert!(
        matches!(outcome, ComponentOutcome::Refused { .. }),
        "{outcome:?}"
    );
    std::fs::rename(&aside, &scheduler).expect("move back");

    // A manifest that is not a Pod.
    let original = std::fs::read_to_string(&scheduler).expect("read");
    std::fs::write(
        &scheduler,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
    )
    .expect("write");
    let err = attempt(ConvertRequest::new(Direction::ToSelfHosted, "cp-1", &dir))
        .await
        .expect_err("not a pod");
    assert!(
        err.is_bad_input() && err.to_string().contains("kind Pod"),
        "{err}"
    );
    std::fs::write(&scheduler, original).expect("restore");

    let after = wait_for(&sim, &before.running).await;
    assert_eq!(after, before, "nothing changed");
    assert_eq!(manifests(&sim, "cp-1"), ALL_MANIFESTS);
}
