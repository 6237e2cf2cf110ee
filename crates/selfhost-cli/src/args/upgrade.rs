//! The arguments of `plan` and `apply`: what an upgrade may do, how to reach etcd, and what
//! `apply` adds (its deadline, rollback, availability budget, report and etcd snapshot).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::deadline;

/// Flags that shape what an upgrade may do, shared by `plan` and `apply`.
#[derive(Debug, Args)]
pub struct UpgradeFlags {
    /// Proceed despite skippable preflight findings (they are shown as warnings), and take over
    /// a backup left by another run.
    #[arg(long)]
    pub force: bool,
    /// Allow a pre-release target (alpha, beta, rc).
    #[arg(long)]
    pub allow_experimental_upgrades: bool,
    /// Allow a release-candidate target.
    #[arg(long)]
    pub allow_release_candidate_upgrades: bool,
    /// Accept an API outage where the cluster's shape makes one unavoidable (one
    /// control-plane node without port sharing).
    #[arg(long)]
    pub accept_downtime: bool,
    /// Check first that every control-plane node can pull the target images: runs a temporary
    /// prepull DaemonSet per component in kube-system and removes it, in every case.
    #[arg(long)]
    pub prepull: bool,
    /// A control-plane certificate expiring within this many days is a warning (an expired one
    /// always refuses).
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    pub certificate_warning_days: u32,
    /// How to reach etcd itself.
    #[command(flatten)]
    pub etcd: EtcdFlags,
    /// A target two or more minors ahead is reached one minor at a time: the version of each
    /// minor between, comma-separated (else the newest patch the release index names).
    #[arg(long, value_name = "VERSIONS", value_delimiter = ',')]
    pub via: Vec<String>,
    /// The release index that names each minor's newest patch (`stable-1.NN.txt`).
    #[arg(long, value_name = "URL", default_value = selfhost::DEFAULT_RELEASES_URL)]
    pub releases_url: String,
}

/// etcd as the kube-apiserver reaches it, for the `etcd` check's per-member health and version
/// and for `apply --etcd-snapshot`.
#[derive(Debug, Args)]
pub struct EtcdFlags {
    /// etcd's client URLs, comma-separated: each member's /health and /version are read (else
    /// etcd is judged by the kube-apiserver's /readyz/etcd and etcd's static pods).
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    pub etcd_endpoints: Option<Vec<String>>,
    /// The etcd CA certificate.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/kubernetes/pki/etcd/ca.crt"
    )]
    pub etcd_cacert: PathBuf,
    /// The client certificate etcd accepts (the kube-apiserver's).
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/kubernetes/pki/apiserver-etcd-client.crt"
    )]
    pub etcd_cert: PathBuf,
    /// Its key.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "/etc/kubernetes/pki/apiserver-etcd-client.key"
    )]
    pub etcd_key: PathBuf,
}

/// Arguments of `selfhost plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The Kubernetes version to upgrade to, e.g. v1.34.1.
    #[arg(value_name = "VERSION")]
    pub target: String,
    /// A kubeadm configuration file (else the cluster's kube-system/kubeadm-config).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// What the upgrade may do.
    #[command(flatten)]
    pub flags: UpgradeFlags,
}

/// Arguments of `selfhost apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The Kubernetes version to upgrade to, e.g. v1.34.1.
    #[arg(value_name = "VERSION")]
    pub target: String,
    /// A kubeadm configuration file (else the cluster's kube-system/kubeadm-config).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Do not ask for confirmation (required when not run interactively).
    #[arg(short = 'y', long)]
    pub yes: bool,
    /// Send each component's first change as a server-side dry run and describe the rest;
    /// change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Per-component deadline for the rollout (e.g. 5m, at least 10s); past it, the
    /// component rolls back, and the rollback has twice as long from its own start.
    #[arg(long, value_name = "DURATION", value_parser = deadline)]
    pub timeout: Option<Duration>,
    /// On failure leave the backup serving instead of rolling back, and exit 4.
    #[arg(long)]
    pub no_rollback: bool,
    /// Roll the kube-apiserver back (exit 1) once the engine's own probes see the API
    /// unavailable for longer than SECONDS at a stretch (e.g. 2 or 0.5).
    #[arg(long, value_name = "SECONDS", value_parser = seconds_budget)]
    pub max_unavailable_seconds: Option<Duration>,
    /// Roll the kube-apiserver back (exit 1) once more than COUNT of the engine's own probes
    /// of the API have failed.
    #[arg(long, value_name = "COUNT")]
    pub max_failed_probes: Option<u32>,
    /// Write an HTML report of the run (pods per node, API health, steps) to FILE.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Take a snapshot of etcd into DIR after preflight and before the first change (from
    /// --etcd-endpoints, else the kube-apiserver's --etcd-servers, with etcd's client
    /// certificate); no snapshot, no upgrade.
    #[arg(long, value_name = "DIR")]
    pub etcd_snapshot: Option<PathBuf>,
    /// What the upgrade may do.
    #[command(flatten)]
    pub flags: UpgradeFlags,
}

/// Parses `--max-unavailable-seconds`: a number of seconds, fractions allowed.
pub fn seconds_budget(text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .ok_or_else(|| {
            format!(
                "invalid --max-unavailable-seconds {text:?}: give a number of seconds of zero \
                 or more, such as 2 or 0.5"
            )
        })
}
