//! The engine against a simulated cluster over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is a failed test

mod campaign_regressions;
mod client;
mod convert;
mod handover;
mod prepull;
mod retry;
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

/// Logs to the test's captured output, filtered by `RUST_LOG` (nothing when unset).
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// The engine's clients for a simulator, from the kubeconfig it wrote.
pub async fn clients(kubeconfig: &std::path::Path) -> selfhost::Clients {
    let source = selfhost::client::KubeconfigSource::Flag(kubeconfig.into());
    selfhost::client::connect_with(&source, None)
        .await
        .expect("connects")
}
