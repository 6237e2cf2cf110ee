//! `selfhost-e2e-kubelet`: the process kubelet of the end-to-end test bed. See
//! [`selfhost_e2e::kubelet`].

use clap::Parser;
use selfhost_e2e::kubelet::{self, KubeletConfig};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let config = KubeletConfig::parse();
    // kube's client logs every failed connection as an error; the kubelet reports API
    // outages itself, once, so kube's lines are kept out unless asked for.
    let directives = if config.log_level.contains("kube_client") {
        config.log_level.clone()
    } else {
        format!("{},kube_client=off", config.log_level)
    };
    let filter = EnvFilter::try_new(&directives).unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    match kubelet::run(config).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "kubelet failed");
            std::process::ExitCode::FAILURE
        }
    }
}
