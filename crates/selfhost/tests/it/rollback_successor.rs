//! A rollback must not remove the backup while the restored kube-apiserver pods are Ready
//! only because the backup's process answers their readiness probes on the shared port:
//! nothing would serve once it went. Here the target cannot be pulled,
//! and the restored pods never serve at all — the original image turns never-Ready once the
//! update is written, so every process started after it, the rollback's included, never
//! finishes starting — and the run must keep the backup: the API never down, the rollback
//! reported failing (exit 4), the backup left. On one node the backup's process is what keeps
//! serving; on two the backup is a record only (no pod: `vacate.rs`) and the other node's
//! untouched old pod serves while the failed node stays out of the load balancer.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use selfhost::{ApplyOptions, RunOutcome};
use selfhost_core::Component;
use tokio::time::Instant;

use selfhost_sim::resources;

use crate::upgrade::{FROM, TO, cluster, upgrade};

/// The real apiserver DaemonSet's image, once the engine updated it.
async fn wait_for_the_update(sim: &selfhost_sim::SimCluster, deadline: Instant) {
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let name = Component::ApiServer.daemonset_name();
    let target = format!("registry.k8s.io/kube-apiserver:{TO}");
    loop {
        let image = daemonsets
            .get(&name)
            .await
            .ok()
            .and_then(|d| d.spec)
            .and_then(|s| s.template.spec)
            .and_then(|s| s.containers.first().and_then(|c| c.image.clone()));
        if image.as_deref() == Some(target.as_str()) {
            return;
        }
        assert!(Instant::now() < deadline, "the engine never updated {name}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_keeps_the_backup_while_the_restored_apiservers_do_not_serve() {
    for nodes in [1, 2] {
        let sim = cluster(nodes).await;
        // An unpullable target: its pods never run a process, so the rollout cannot mistake
        // one for serving, and the rollback is what is tested.
        sim.registry()
            .make_unpullable(&format!("registry.k8s.io/kube-apiserver:{TO}"));
        let started = Instant::now();
        let options = ApplyOptions {
            pivot: selfhost_core::pivot::PivotOptions {
                deadline: Duration::from_secs(4),
                ..Default::default()
            },
            ..Default::default()
        };
        // The backup's processes run (they started before the update, and keep the fate they
        // started with); every original process started from now on never finishes starting.
        let spoil_the_original = async {
            wait_for_the_update(&sim, started + Duration::from_secs(60)).await;
            sim.registry()
                .make_never_ready(&format!("registry.k8s.io/kube-apiserver:{FROM}"))
                .expect("a valid image name");
        };
        let ((report, _), ()) = tokio::join!(upgrade(&sim, TO, options), spoil_the_original);
        let ended = Instant::now();
        let RunOutcome::Failed {
            component, reason, ..
        } = &report.outcome
        else {
            panic!(
                "{nodes} node(s): expected a failed rollback, got {:?}",
                report.outcome
            );
        };
        assert_eq!(*component, Component::ApiServer);
        assert!(
            reason.contains("the rollback to the original template is failing too"),
            "{nodes} node(s): {reason}"
        );
        assert!(
            !sim.recorder().was_down(started, ended),
            "{nodes} node(s): the API was down {:?}",
            sim.recorder().down_intervals(started, ended)
        );
        // Read from the store: the API answers through whichever process the kernel picks,
        // and the restored ones answer 500 ("the server is still starting").
        let backup = Component::ApiServer.backup_name();
        assert!(
            sim.store()
                .get_opt(&resources::DAEMONSETS, "kube-system", &backup)
                .is_some(),
            "{nodes} node(s): the backup {backup} is left (on one node it keeps serving; on \
             two it is a record only, and the untouched old pod of the other node serves)"
        );
    }
}
