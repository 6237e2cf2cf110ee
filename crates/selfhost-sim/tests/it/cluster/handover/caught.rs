//! Who caught a failed probe: a kube-apiserver that never gets Ready shares the port with the
//! serving one, the node's kernel hands it some of the prober's connections, and every probe
//! it fails names it — its pod, its image, and that it was not serving yet.

use std::time::Duration;

use selfhost_sim::cluster::handover::PortBalancing;
use selfhost_sim::cluster::{CaughtBy, Handovers, ProbeReport, ProberOptions};

use super::{NEXT, backup_process, cluster, create_backup, model, start, until};

fn failed(report: &ProbeReport) -> Vec<(Option<String>, Option<CaughtBy>)> {
    report
        .reads
        .samples
        .iter()
        .chain(&report.writes.samples)
        .filter(|s| !s.ok)
        .map(|s| (s.error.clone(), s.caught_by.clone()))
        .collect()
}

fn caught_by_backup(caught: &Option<CaughtBy>) -> bool {
    matches!(caught, Some(CaughtBy::Process { pod, .. }) if pod.starts_with("temp-upgrade-"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_probe_names_the_never_ready_process_that_caught_it() {
    // In turn, so that of a few fresh connections some reach each process.
    let handovers = Handovers {
        balancing: PortBalancing::RoundRobin,
        ..model()
    };
    let cluster = start(cluster(1, true, handovers)).await;
    let image = format!("registry.k8s.io/kube-apiserver:{NEXT}");
    cluster
        .registry()
        .make_never_ready(&image)
        .expect("a valid image name");
    create_backup(&cluster, "kube-apiserver", Some(&image)).await;
    until("the never-Ready process accepts", || {
        backup_process(&cluster).is_some_and(|p| p.accepting)
    })
    .await;
    let options = ProberOptions {
        read_path: "/api/v1/namespaces/kube-system".into(),
        timeout: Duration::from_secs(3),
        ..ProberOptions::default()
    };
    // Each prober opens its own connections; one of the first few reaches the new process.
    let mut report = None;
    for _ in 0..20 {
        let prober = cluster.prober(options.clone()).await.expect("a prober");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let probed = prober.stop().await;
        if failed(&probed).iter().any(|(_, c)| caught_by_backup(c)) {
            report = Some(probed);
            break;
        }
    }
    let report = report.expect("some probe reached the never-Ready process");
    for (error, caught) in failed(&report) {
        // On a loaded machine the serving process may restart (its liveness probe) and fail
        // a probe itself while it reloads its caches: such a failure names it, not the
        // never-Ready one.
        if let Some(CaughtBy::Process { pod, .. }) = &caught
            && !pod.starts_with("temp-upgrade-")
        {
            continue;
        }
        match &caught {
            Some(CaughtBy::Process {
                node,
                pod,
                image: Some(caught_image),
                had_served: false,
                ..
            }) => {
                assert_eq!(node, "cp-1");
                assert!(pod.starts_with("temp-upgrade-"), "{pod}");
                assert_eq!(*caught_image, image);
            }
            other => panic!("{error:?} was caught by {other:?}, not the never-Ready process"),
        }
        let said = caught.map(|c| c.to_string()).unwrap_or_default();
        assert!(said.contains("not serving yet"), "{said}");
    }
    assert!(
        report
            .reads
            .samples
            .iter()
            .any(|s| s.ok && s.caught_by.is_none()),
        "the serving process answered the other connection, and a success names nobody"
    );
}
