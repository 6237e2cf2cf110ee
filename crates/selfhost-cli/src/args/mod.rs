//! Command-line arguments, with kubectl's conventions for the cluster connection.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use selfhost::KUBELET_KUBECONFIG;

mod upgrade;

pub use upgrade::{ApplyArgs, EtcdFlags, PlanArgs, UpgradeFlags, apply_options};

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
    /// Show the control plane: components, versions per node, upgrades in progress.
    Status(StatusArgs),
    /// Preflight checks, version changes, template diffs and expected disruption; changes nothing.
    Plan(PlanArgs),
    /// Upgrade the control plane to a version with the least disruption the cluster allows.
    Apply(ApplyArgs),
    /// Print the control-plane manifests selfhost would run for a version, as YAML.
    Manifests(ManifestsArgs),
    /// Convert this node's control plane: kubeadm static pods ↔ self-hosted DaemonSets.
    Convert(ConvertArgs),
    /// Keep this node's control-plane pods on disk and start them without the API after a
    /// reboot or power cut (a node agent, run by the kubelet as a static pod).
    Checkpoint(CheckpointArgs),
    /// Bring back a self-hosted control plane that is gone with no checkpoint: read it from
    /// etcd and start it on this node as static pods.
    Recover(RecoverArgs),
    /// Pass this node's API port to its kube-apiservers whose /readyz passes, TLS untouched
    /// (a node agent, run by the kubelet as a static pod).
    Front(FrontArgs),
    /// Run a simulated cluster in the foreground and write a kubeconfig for it.
    #[command(disable_version_flag = true)]
    Sim(SimArgs),
    /// Upgrade a built-in simulated cluster while probing its API, then show what happened.
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

/// The checkpointer's static pod: its image and the kubeconfig it reads on the node.
#[derive(Debug, Args)]
pub struct CheckpointerArgs {
    /// The image of the checkpointer (it runs `selfhost checkpoint`; any image with the
    /// `selfhost` binary on its PATH).
    #[arg(long, value_name = "IMAGE", default_value = DEFAULT_CHECKPOINTER_IMAGE)]
    pub checkpointer_image: String,
    /// The kubeconfig the checkpointer reaches the API with, on the node (the kubelet's: the
    /// node authorizer lets it read this node's pods and the Secrets they mount).
    #[arg(long, value_name = "PATH", default_value = KUBELET_KUBECONFIG)]
    pub checkpointer_kubeconfig: String,
}

/// Where the checkpointer's image is published, tagged with this release.
pub const DEFAULT_CHECKPOINTER_IMAGE: &str = selfhost::DEFAULT_IMAGE;

/// Arguments of `selfhost demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Control-plane nodes of the simulated cluster (cp-1, cp-2, ...).
    #[arg(long, default_value_t = 3)]
    pub control_plane_nodes: usize,
    /// The Kubernetes version the simulated cluster starts at.
    #[arg(long, default_value = "v1.33.1")]
    pub from: String,
    /// The version to upgrade to (default: the next minor release after --from).
    #[arg(long)]
    pub to: Option<String>,
    /// Pods ten times faster than real ones instead of five (a run of about ten seconds).
    #[arg(long)]
    pub fast: bool,
    /// Also upgrade an identical cluster the way a user without selfhost would (`set image`
    /// on each DaemonSet, then wait like `kubectl rollout status`), and compare.
    #[arg(long)]
    pub compare_naive: bool,
    /// Write an HTML report of the upgrade (timeline, availability, steps) to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Hand-overs as in a diagram (a connection only ever reaches a Ready apiserver) instead
    /// of as real processes perform them.
    #[arg(long)]
    pub idealised: bool,
    /// A cluster without the node-local API front `convert to-self-hosted` installs on every
    /// control-plane node: clients then reach the kube-apiservers' shared port directly.
    #[arg(long)]
    pub no_front: bool,
    /// What to show: an upgrade, or a power cut of every node survived with
    /// `selfhost checkpoint` on each control-plane node.
    #[arg(long, value_enum, default_value = "upgrade")]
    pub scenario: DemoScenario,
}

/// What `selfhost demo` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DemoScenario {
    /// `selfhost apply` to the next version while probers read and write the API.
    Upgrade,
    /// Every node loses power and gets it back; the checkpointer brings the control plane back.
    PowerCycle,
}

/// Arguments of `selfhost checkpoint`: the agent, or one of its subcommands.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct CheckpointArgs {
    /// Instead of running the agent.
    #[command(subcommand)]
    pub action: Option<CheckpointAction>,
    /// The agent's options.
    #[command(flatten)]
    pub agent: AgentArgs,
}

/// What `selfhost checkpoint` does instead of running the agent.
#[derive(Debug, Subcommand)]
pub enum CheckpointAction {
    /// Install the checkpointer on this node (a self-hosted node converted without it): write
    /// its static pod and wait until the kubelet runs it.
    Install(CheckpointInstallArgs),
    /// Remove the checkpointer from this node: its static pod and checkpoints, then its node's
    /// read access to kube-system Leases. Refused while a checkpoint's copy is active.
    Remove(CheckpointRemoveArgs),
}

/// The node a node agent (the checkpointer, the API front) is installed on or removed from,
/// and where its files are.
#[derive(Debug, Args)]
pub struct NodeAgentArgs {
    /// This node's name in the cluster.
    #[arg(long)]
    pub node: String,
    /// The kubelet's static pod directory on this node, as the node sees it.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_MANIFESTS_DIR)]
    pub manifests_dir: PathBuf,
    /// Where the node's root filesystem is, when selfhost runs outside it.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub host_root: PathBuf,
}

/// Arguments of `selfhost checkpoint remove`.
#[derive(Debug, Args)]
pub struct CheckpointRemoveArgs {
    /// The node and its files.
    #[command(flatten)]
    pub on: NodeAgentArgs,
    /// Say what would be removed, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// Arguments of `selfhost checkpoint install`.
#[derive(Debug, Args)]
pub struct CheckpointInstallArgs {
    /// The node and its files.
    #[command(flatten)]
    pub on: NodeAgentArgs,
    /// Its image and kubeconfig.
    #[command(flatten)]
    pub checkpointer: CheckpointerArgs,
    /// Say what would be written, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How long the kubelet may take to start it (an image pull included).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = period)]
    pub timeout: Duration,
}

/// Arguments of `selfhost front`: the front, or one of its subcommands.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct FrontArgs {
    /// Instead of running the front.
    #[command(subcommand)]
    pub action: Option<FrontAction>,
    /// The front's options.
    #[command(flatten)]
    pub proxy: FrontProxyArgs,
}

/// What `selfhost front` does instead of running the front.
#[derive(Debug, Subcommand)]
pub enum FrontAction {
    /// Put the API front on this node of a self-hosted cluster that has none: write its static
    /// pod and wait until the kubelet runs it. Once every control-plane node runs one, the
    /// kube-apiserver DaemonSet is marked to listen behind them, and the next `apply` moves it.
    Install(FrontInstallArgs),
    /// Remove the API front from this node, where the kube-apiserver does not listen behind it.
    Remove(FrontRemoveArgs),
}

/// Arguments of `selfhost front install`.
#[derive(Debug, Args)]
pub struct FrontInstallArgs {
    /// The node and its files.
    #[command(flatten)]
    pub on: NodeAgentArgs,
    /// Its image and the kube-apiservers' addresses behind it.
    #[command(flatten)]
    pub front: FrontPlacementArgs,
    /// Say what would be written, and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How long the kubelet may take to start it (an image pull included).
    #[arg(long, value_name = "DURATION", default_value = "2m", value_parser = period)]
    pub timeout: Duration,
}

/// Arguments of `selfhost front remove`.
#[derive(Debug, Args)]
pub struct FrontRemoveArgs {
    /// The node and its files.
    #[command(flatten)]
    pub on: NodeAgentArgs,
    /// Say what would be removed, and remove nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// The front's own options.
#[derive(Debug, Args)]
pub struct FrontProxyArgs {
    /// The node's API address and port, e.g. 10.0.0.11:6443 (required to run the front).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<std::net::SocketAddr>,
    /// A kube-apiserver of this node on its own loopback address, e.g. 127.0.0.1:6443 (repeat
    /// for each: the DaemonSet's and the backup's).
    #[arg(long = "backend", value_name = "ADDR:PORT")]
    pub backends: Vec<std::net::SocketAddr>,
    /// The cluster CA the kube-apiservers' serving certificates are verified against (PEM).
    #[arg(long, value_name = "PATH", default_value = selfhost::DEFAULT_FRONT_CA_FILE)]
    pub ca_file: PathBuf,
    /// The name the backends' certificates are verified for, e.g. kubernetes (default: each
    /// backend's IP address).
    #[arg(long, value_name = "NAME")]
    pub check_server_name: Option<String>,
    /// How often each backend's /readyz is checked.
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = period)]
    pub check_interval: Duration,
    /// How long a new connection waits for a healthy backend before it is closed.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = period)]
    pub hold: Duration,
    /// On SIGTERM, or once a new front took the listening socket, how long open connections
    /// may take to finish before they are cut.
    #[arg(long, value_name = "DURATION", default_value = "25s", value_parser = period)]
    pub drain_timeout: Duration,
    /// How long it checks the backends for a ready one before it listens anyway (while a
    /// front serves at the hand-over socket, it checks on and takes over once one is ready).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = period)]
    pub start_patience: Duration,
    /// The Unix socket where it takes the listening socket of the front serving this node
    /// before it, and then gives its own to the next: a new front takes over without losing a
    /// connection. Its directory is made when missing.
    #[arg(long, value_name = "PATH", default_value = selfhost::DEFAULT_FRONT_HANDOVER_SOCKET)]
    pub handover_socket: PathBuf,
}

/// The agent's options.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The node this agent runs on (required to run the agent).
    #[arg(long)]
    pub node: Option<String>,
    /// The kubelet's static pod directory (kubeadm: /etc/kubernetes/manifests).
    #[arg(long, default_value = "/etc/kubernetes/manifests")]
    pub manifests_dir: PathBuf,
    /// Where checkpoints are kept on the node.
    #[arg(long, default_value = "/etc/kubernetes/selfhost-checkpoints")]
    pub checkpoint_dir: PathBuf,
    /// Where the host's root is mounted: Secret files a checkpoint needs are written beneath.
    #[arg(long, default_value = "/")]
    pub host_root: PathBuf,
    /// How long a DaemonSet pod must have served before it is kept.
    #[arg(long, default_value = "10s", value_parser = period)]
    pub soak: Duration,
    /// How long the API must be unreachable before a checkpoint is started: longer than a
    /// restart of the node's kube-apiserver, and at least 1s.
    #[arg(long, default_value = "10s", value_parser = api_grace)]
    pub api_grace: Duration,
    /// How often the node is read.
    #[arg(long, default_value = "1s", value_parser = period)]
    pub interval: Duration,
}

/// Arguments of `selfhost recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The node this runs on.
    #[arg(long)]
    pub node: String,
    /// etcd's client URLs, comma-separated, tried in order.
    #[arg(
        long,
        value_name = "URLS",
        value_delimiter = ',',
        default_value = "https://127.0.0.1:2379"
    )]
    pub etcd_endpoints: Vec<String>,
    /// The etcd CA certificate on this node, as the node sees it.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/kubernetes/pki/etcd/ca.crt"
    )]
    pub etcd_cacert: PathBuf,
    /// The client certificate etcd accepts (the API server's), as the node sees it.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/kubernetes/pki/apiserver-etcd-client.crt"
    )]
    pub etcd_cert: PathBuf,
    /// Its key, as the node sees it.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/kubernetes/pki/apiserver-etcd-client.key"
    )]
    pub etcd_key: PathBuf,
    /// The API server's --etcd-prefix.
    #[arg(long, value_name = "PREFIX", default_value = "/registry")]
    pub etcd_prefix: String,
    /// The kubelet's static pod directory on this node, as the node sees it.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_MANIFESTS_DIR)]
    pub manifests_dir: PathBuf,
    /// Where the node's root filesystem is, when selfhost runs outside it (in a container
    /// with the host mounted at /host, say): the manifests directory, the etcd files and the
    /// files from Secrets and ConfigMaps are read and written beneath it.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub host_root: PathBuf,
    /// How long the API may take to serve once the static pods are written (at least 10s).
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = deadline)]
    pub timeout: Duration,
    /// Show what would be written (paths, images, flags; never a Secret's content) and write
    /// nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// A period given on the command line (`10s`, `500ms`, `1m`): more than zero.
pub fn period(text: &str) -> Result<Duration, String> {
    let period = humantime::parse_duration(text)
        .map_err(|e| format!("invalid duration {text:?}: {e}; write one such as 10s or 500ms"))?;
    if period.is_zero() {
        return Err(format!(
            "{text:?} is no time at all; give a duration such as 10s"
        ));
    }
    Ok(period)
}

/// `--api-grace`: a period of at least a second. A pod's Ready time is known to the second
/// only; the grace is what tells a status kept from before the API went down from a fresh one.
pub fn api_grace(text: &str) -> Result<Duration, String> {
    let grace = period(text)?;
    if grace < Duration::from_secs(1) {
        return Err(format!(
            "--api-grace {text} is shorter than the second a pod's Ready time is known to; give \
             at least 1s (the default, 10s, outlasts a restart of the kube-apiserver)"
        ));
    }
    Ok(grace)
}

/// Arguments of `selfhost status`.
#[derive(Debug, Args)]
pub struct StatusArgs {}

/// Where kubeadm's kubelet reads static pods from.
pub const DEFAULT_MANIFESTS_DIR: &str = "/etc/kubernetes/manifests";
/// Arguments of `selfhost convert`.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Which way.
    #[command(subcommand)]
    pub direction: ConvertDirection,
}

/// The two conversions.
#[derive(Debug, Subcommand)]
pub enum ConvertDirection {
    /// Hand this node's kubeadm static pods over to self-hosted DaemonSets.
    ToSelfHosted(ToSelfHostedArgs),
    /// Hand this node's self-hosted DaemonSet pods back to static pods.
    ToStatic(NodeArgs),
}

/// Arguments of `convert to-self-hosted`.
#[derive(Debug, Args)]
pub struct ToSelfHostedArgs {
    /// The node and how to run.
    #[command(flatten)]
    pub node: NodeArgs,
    /// Upload the certificates and kubeconfigs (etcd client certificates included) as
    /// Secrets and mount them from there instead of from the host.
    #[arg(long)]
    pub certs_in_secrets: bool,
    /// Where the checkpointer comes from, once the node is converted.
    #[command(flatten)]
    pub checkpointer: CheckpointerArgs,
    /// Do not install the checkpointer: the node's control plane then does not come back
    /// by itself after a power cut of every control-plane node.
    #[arg(long)]
    pub no_checkpointer: bool,
    /// The node's API front, written before the static kube-apiserver leaves.
    #[command(flatten)]
    pub front: FrontPlacementArgs,
    /// Do not put the API front before the node's kube-apiserver: a restart of the
    /// kube-apiserver on a single node then fails requests, as without selfhost.
    #[arg(long)]
    pub no_front: bool,
}

/// The node's API front as a conversion writes it.
#[derive(Debug, Args)]
pub struct FrontPlacementArgs {
    /// The image of the front (it runs `selfhost front`; any image with the `selfhost` binary
    /// on its PATH).
    #[arg(long, value_name = "IMAGE", default_value = selfhost::DEFAULT_IMAGE)]
    pub front_image: String,
    /// Where the kube-apiservers listen behind the front: the DaemonSet's and a pivot's
    /// backup's loopback addresses, on the API port.
    #[arg(
        long,
        value_name = "ADDRESS,ADDRESS",
        default_value = "127.0.0.1,127.0.0.2",
        value_parser = front_layout
    )]
    pub front_addresses: selfhost::FrontLayout,
}

/// Parses `--front-addresses`: two distinct addresses of the node's own.
pub fn front_layout(text: &str) -> Result<selfhost::FrontLayout, String> {
    selfhost::FrontLayout::parse(text).map_err(|e| format!("invalid --front-addresses: {e}"))
}

/// What both conversions take.
#[derive(Debug, Args)]
pub struct NodeArgs {
    /// The kubelet's static pod directory on this node, as the node sees it.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_MANIFESTS_DIR)]
    pub manifests_dir: PathBuf,
    /// Where the node's root filesystem is, when selfhost runs outside it (in a container
    /// with the host mounted at /host, say): every host path is read and written beneath it.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub host_root: PathBuf,
    /// This node's name in the cluster (default: this host's name).
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// A kubeadm configuration file to check what runs against (else the cluster's
    /// kube-system/kubeadm-config). What runs is converted as it is; the plan lists where the
    /// configuration disagrees. Its nodeRegistration.name is the default of --node.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Show the plan, send every API write as a server-side dry run, describe the waits and
    /// file moves, and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (required when not run interactively).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// How long each component may take to hand over (e.g. 5m, at least 10s); past it, the
    /// node is put back.
    #[arg(long, value_name = "DURATION", value_parser = deadline)]
    pub timeout: Option<Duration>,
    /// A certificate of what runs on the node expiring within this many days is a warning (an
    /// expired one refuses).
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    pub certificate_warning_days: u32,
}

/// Arguments of `selfhost sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Control-plane nodes (cp-1, cp-2, ...).
    #[arg(long, default_value_t = 1)]
    pub control_plane_nodes: usize,
    /// Worker nodes (worker-1, ...).
    #[arg(long, default_value_t = 0)]
    pub workers: usize,
    /// Kubernetes version of the control plane.
    #[arg(long = "version", id = "kubernetes_version", default_value = "v1.33.1")]
    pub version: String,
    /// `static` (kubeadm's static pods) or `self-hosted` (DaemonSets).
    #[arg(long, default_value = "self-hosted")]
    pub mode: String,
    /// Port of the API server (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Where to write the kubeconfig (also `--kubeconfig`; default: selfhost-sim.kubeconfig in
    /// the temp directory).
    #[arg(long = "write-kubeconfig", value_name = "PATH")]
    pub write_kubeconfig: Option<PathBuf>,
    /// Serve HTTPS with a minted CA and a bearer token.
    #[arg(long)]
    pub tls: bool,
    /// Near-zero pod latencies instead of human-visible ones.
    #[arg(long)]
    pub fast: bool,
    /// Self-hosted components without --permit-port-sharing.
    #[arg(long)]
    pub no_port_sharing: bool,
    /// A self-hosted cluster without the checkpointer `convert to-self-hosted` installs on
    /// every control-plane node (it then does not come back from a power cut by itself).
    #[arg(long)]
    pub no_checkpointer: bool,
    /// A self-hosted cluster without the node-local API front `convert to-self-hosted`
    /// installs on every control-plane node: clients then reach the kube-apiservers' shared
    /// port directly.
    #[arg(long)]
    pub no_front: bool,
    /// Hand-overs as in a diagram (a connection only ever reaches a Ready apiserver) instead
    /// of as real processes perform them.
    #[arg(long)]
    pub idealised: bool,
}

/// The shortest per-component deadline a command accepts: no component hands over faster.
pub const MIN_DEADLINE: Duration = Duration::from_secs(10);

/// Parses a per-component deadline (`--timeout`): a duration such as `5m` or `90s`, of at
/// least [`MIN_DEADLINE`]. The same rule for every command.
pub fn deadline(text: &str) -> Result<Duration, String> {
    let deadline = humantime::parse_duration(text).map_err(|e| {
        format!("invalid --timeout {text:?}: {e}; write a duration such as 5m or 90s")
    })?;
    if deadline < MIN_DEADLINE {
        return Err(format!(
            "--timeout {} is shorter than a control-plane pod takes to start and serve; give at \
             least {}",
            humantime::format_duration(deadline),
            humantime::format_duration(MIN_DEADLINE)
        ));
    }
    Ok(deadline)
}
