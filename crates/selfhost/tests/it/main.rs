//! The engine against a simulated cluster over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is a failed test

mod backup_removal;
mod campaign_regressions;
mod client;
mod convert;
mod front;
mod front_start;
mod front_upgrade;
mod handover;
mod held_rollout;
mod live_templates;
mod machine_hostname;
mod prepull;
mod resume;
mod retry;
mod rollback_successor;
mod upgrade;
mod versus_kubeadm;
mod view;

/// kubeadm's algorithm, for comparison only (see the file).
#[path = "../reference/kubeadm.rs"]
mod kubeadm_reference;
/// The side-by-side harness of selfhost and kubeadm's algorithm.
#[path = "../reference/versus.rs"]
mod versus;

use selfhost_sim::{SimServer, SimServerOptions};

/// A plain-HTTP simulator.
pub async fn sim() -> SimServer {
    SimServer::start(SimServerOptions::default())
        .await
        .expect("simulator starts")
}

/// A test's own read of the cluster, made again after a failure until it succeeds or 30 s
/// have passed. Under the measured hand-over model a read can meet what a client-go client
/// rides out by retrying: a keep-alive connection closed by an apiserver leaving the port, a
/// connection the load balancer resets while no node passed its last check, an apiserver that
/// is starting (403, 500). Not found is an answer, not a transient failure: it fails at once.
pub async fn read_again<T, F, Fut>(what: &str, mut read: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match read().await {
            Ok(value) => return value,
            Err(kube::Error::Api(status)) if status.code == 404 => {
                panic!("{what}: {status}")
            }
            Err(error) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{what}: still failing after 30 s: {error}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}

/// Logs to the test's captured output, filtered by `RUST_LOG` (nothing when unset).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// Plans the upgrade of `sim` to `to` afresh and applies it with `options`. Every event is
/// printed (shown only when the test fails: the run as the engine saw it) and handed to
/// `on_event` with the run's token, which may stop the run as Ctrl-C does. Returns the
/// report, every event, and the instant the events' times count from.
pub async fn apply_to(
    sim: &selfhost_sim::SimCluster,
    to: &str,
    options: &selfhost::ApplyOptions,
    mut on_event: impl FnMut(&selfhost::Stamped, &tokio_util::sync::CancellationToken) + Send + 'static,
) -> (
    selfhost::RunReport,
    Vec<selfhost::Stamped>,
    tokio::time::Instant,
) {
    init_tracing();
    let (clients, mut observer, _, targets) = planned(sim, to).await;
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let cancel = tokio_util::sync::CancellationToken::new();
    let collected = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let mut events = Vec::new();
            while let Some(event) = receiver.recv().await {
                eprintln!("{}", serde_json::to_string(&event).unwrap_or_default());
                on_event(&event, &cancel);
                events.push(event);
            }
            events
        })
    };
    let events_base = tokio::time::Instant::now();
    let events = selfhost::Events::to(sender);
    let run = selfhost::apply(
        &mut observer,
        &clients.api,
        &targets,
        options,
        &events,
        &cancel,
    );
    let report = tokio::time::timeout(std::time::Duration::from_secs(240), run)
        .await
        .expect("the run finishes in time")
        .unwrap_or_else(|e| panic!("the run runs: {e}"));
    drop(events);
    (report, collected.await.expect("collector"), events_base)
}

/// The engine's clients for a simulator, from the kubeconfig it wrote.
pub async fn clients(kubeconfig: &std::path::Path) -> selfhost::Clients {
    let source = selfhost::KubeconfigSource::Flag(kubeconfig.into());
    selfhost::connect_with(&source, None)
        .await
        .expect("connects")
}

/// The clients, the observer the run goes on with, a plan and its targets.
pub type Planned = (
    selfhost::Clients,
    selfhost::Observer,
    selfhost::Plan,
    selfhost::Targets,
);

/// Connects to `sim`, waits for the watches, and plans the upgrade to `to`, whatever the plan
/// says. Returns the clients, the observer the run goes on with, the plan and its targets.
pub async fn plan_for(sim: &selfhost_sim::SimCluster, to: &str) -> Planned {
    let clients = clients(sim.kubeconfig_path()).await;
    let mut observer = selfhost::Observer::start(&clients);
    observer
        .ready(std::time::Duration::from_secs(20))
        .await
        .expect("watches list");
    let request = selfhost::PlanRequest {
        version: selfhost_core::version::KubeVersion::parse(to).expect("version"),
        config_file: None,
        flags: Default::default(),
        accept_downtime: false,
        certificate_warning: selfhost::DEFAULT_CERTIFICATE_WARNING,
        etcd: None,
        assume_from: None,
    };
    let (plan, targets, _) = selfhost::make_plan(
        &mut observer,
        &clients.api,
        &request,
        &selfhost::RetryPolicy::default(),
    )
    .await
    .expect("plan");
    (clients, observer, plan, targets)
}

/// [`plan_for`], where the plan must proceed.
pub async fn planned(sim: &selfhost_sim::SimCluster, to: &str) -> Planned {
    let planned = plan_for(sim, to).await;
    assert!(planned.2.proceeds, "{:#?}", planned.2.preflight);
    planned
}
