//! Command-line arguments, with kubectl's conventions for the cluster connection.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Upgrade a self-hosted Kubernetes control plane with no API downtime.
#[derive(Debug, Parser)]
#[command(name = "selfhost", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Options that every command shares.
    #[command(flatten)]
    pub global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options shared by every command.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Output format of results on stdout.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// More log output on stderr (-v info, -vv debug, -vvv trace); RUST_LOG overrides.
    #[arg(short = 'v', long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

/// Output format of results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people.
    Text,
    /// For programs.
    Json,
    /// For programs and kubectl.
    Yaml,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the control-plane manifests selfhost would run for a version, as YAML.
    Manifests(ManifestsArgs),
    /// Show what selfhost can do, on a built-in simulated cluster.
    Demo(DemoArgs),
}

/// The form of the printed manifests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ManifestForm {
    /// kubeadm static pods, as written to /etc/kubernetes/manifests.
    StaticPods,
    /// Self-hosted DaemonSets in kube-system.
    Daemonsets,
}

/// Arguments of `selfhost manifests`.
#[derive(Debug, Args)]
pub struct ManifestsArgs {
    /// The Kubernetes version, e.g. v1.33.2.
    #[arg(value_name = "VERSION")]
    pub target: String,
    /// A kubeadm configuration file (ClusterConfiguration, kubeadm.k8s.io/v1beta3 or v1beta4).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print static pods or DaemonSets.
    #[arg(long = "as", value_enum, default_value_t = ManifestForm::Daemonsets)]
    pub form: ManifestForm,
    /// Mount certificates and kubeconfigs from Secrets instead of host paths (DaemonSets only).
    #[arg(long)]
    pub certs_in_secrets: bool,
}

/// Arguments of `selfhost demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {}
