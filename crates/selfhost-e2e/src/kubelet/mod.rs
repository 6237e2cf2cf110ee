//! The process kubelet: a node agent that runs Kubernetes pods as real processes, as a
//! kubelet 1.20 would as far as the API can see.
//!
//! It registers its Node (Ready, labelled as a control-plane node) and renews its Lease; runs
//! the static pods of its manifests directory and mirrors them into the API; runs the API pods
//! bound to it; and reports their statuses (phases, conditions, container states, restart
//! counts, probe results) the way the kubelet words them, in whole seconds.
//!
//! Pods run without isolation: a container is a process in its own process group, its image
//! `…/<component>:<tag>` is the executable `<images>/<tag>/<component>`, its volumes are
//! directories under the node's private root (paths on its command line are rewritten to
//! them), and every pod shares the node's network. Processes are recorded under
//! `<root>/run/selfhost-e2e-kubelet/`, so a restarted kubelet adopts them and
//! [`kill_node_processes`] can take a node down as a reboot would. The kubelet itself exits on
//! SIGTERM or SIGINT without stopping its containers, as a real kubelet does.
//!
//! Decisions are plain data with table-driven tests (the modules `pod`, `container`,
//! `probe`, `status`, `backoff`, `command`, `images`, `static_pods`, `mirrors`); the worker,
//! agent, node and API layers around them do the I/O.

mod agent;
mod api;
mod backoff;
mod clock;
mod command;
mod config;
mod container;
mod error;
mod images;
mod manifests;
mod mirrors;
mod node;
mod pod;
mod probe;
mod prober;
mod process;
mod records;
mod static_pods;
mod status;
mod sync;
mod volumes;
mod worker;

use std::sync::Arc;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};

pub use config::{KubeletConfig, Layout, timing};
pub use error::KubeletError;
pub use records::{ContainerRecord, RecordedExit, kill_node_processes, recorded_containers};
pub use static_pods::{
    CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION, CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION, ManifestError,
};

/// Runs the kubelet until SIGTERM or SIGINT. Containers keep running after it returns.
///
/// # Errors
/// The kubeconfig cannot be loaded, the container records cannot be read, or the signals
/// cannot be watched. API failures are never errors: they are retried.
pub async fn run(config: KubeletConfig) -> Result<(), KubeletError> {
    // kube and the probes build TLS from the process-wide provider; install it once.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut terminate = signal(SignalKind::terminate()).map_err(KubeletError::Signals)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(KubeletError::Signals)?;
    let layout = Layout::new(&config.root);
    let client = api::client(&config.kubeconfig).await?;
    let tags = images::tags(&config.images);
    let kubelet_version = config.kubelet_version.clone().unwrap_or_else(|| {
        images::newest_version(tags.iter().map(String::as_str))
            .unwrap_or("v0.0.0")
            .to_string()
    });
    let records = records::RecordStore::new(&layout);
    let recorded = records.load_all()?;
    tracing::info!(
        node = %config.node_name,
        ip = %config.node_ip,
        root = %config.root.display(),
        version = %kubelet_version,
        recorded = recorded.len(),
        "kubelet starting"
    );
    let ctx = Arc::new(worker::NodeContext {
        node_name: config.node_name.clone(),
        node_ip: config.node_ip.clone(),
        layout,
        images: config.images.clone(),
        client: client.clone(),
        prober: prober::Prober::new(),
        records,
    });
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (finished_tx, mut finished) = mpsc::unbounded_channel();
    let (node_uid_tx, mut node_uid) = watch::channel(None);
    let identity = node::NodeIdentity {
        name: config.node_name.clone(),
        ip: config.node_ip.clone(),
        kubelet_version,
    };
    tokio::spawn(node::run_heartbeat(client, identity, node_uid_tx));
    tokio::spawn(agent::watch_pods(ctx.clone(), events_tx.clone()));
    tokio::spawn(agent::scan_manifests(
        config.manifests_dir.clone(),
        config.node_name.clone(),
        events_tx.clone(),
    ));
    let mut agent = agent::Agent::new(ctx, events_tx, finished_tx, node_uid.clone(), recorded);
    let mut housekeeping = tokio::time::interval(timing::HOUSEKEEPING);
    loop {
        tokio::select! {
            Some(event) = events.recv() => {
                agent.handle(event);
                while let Ok(event) = events.try_recv() {
                    agent.handle(event);
                }
            }
            Some(uid) = finished.recv() => agent.worker_finished(&uid),
            Ok(()) = node_uid.changed() => {}
            _ = housekeeping.tick() => {}
            _ = terminate.recv() => break,
            _ = interrupt.recv() => break,
        }
        agent.reconcile();
    }
    tracing::info!("kubelet exiting; its containers keep running");
    Ok(())
}
