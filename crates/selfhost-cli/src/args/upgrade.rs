//! The arguments of `plan` and `apply`: what an upgrade may do, how to reach etcd, and what
//! `apply` adds (its deadline, rollback, availability budget, report and etcd snapshot).

use std::path::{Path, PathBuf};
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
    #[arg(long, value_name = "DAYS", default_value_t = CERTIFICATE_WARNING_DAYS)]
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

/// kubeadm's etcd CA certificate.
const ETCD_CA: &str = "/etc/kubernetes/pki/etcd/ca.crt";
/// kubeadm's client certificate for the kube-apiserver to reach etcd, and its key.
const ETCD_CERT: &str = "/etc/kubernetes/pki/apiserver-etcd-client.crt";
const ETCD_KEY: &str = "/etc/kubernetes/pki/apiserver-etcd-client.key";
/// `--certificate-warning-days` unless given.
const CERTIFICATE_WARNING_DAYS: u32 = 30;

impl UpgradeFlags {
    /// The arguments that give again each of these flags that changes how an upgrade is
    /// judged or the way it takes, so that the `apply` a plan suggests, or the run that
    /// resumes one, is judged as it was and takes the same hops.
    pub fn repeated(&self) -> Vec<String> {
        let mut words = Vec::new();
        for (on, flag) in [
            (self.force, "--force"),
            (self.accept_downtime, "--accept-downtime"),
            (
                self.allow_experimental_upgrades,
                "--allow-experimental-upgrades",
            ),
            (
                self.allow_release_candidate_upgrades,
                "--allow-release-candidate-upgrades",
            ),
        ] {
            if on {
                words.push(flag.to_string());
            }
        }
        if self.certificate_warning_days != CERTIFICATE_WARNING_DAYS {
            words.push(format!(
                "--certificate-warning-days {}",
                self.certificate_warning_days
            ));
        }
        if let Some(endpoints) = &self.etcd.etcd_endpoints {
            words.push(format!("--etcd-endpoints {}", endpoints.join(",")));
            for (flag, file, default) in [
                ("--etcd-cacert", &self.etcd.etcd_cacert, ETCD_CA),
                ("--etcd-cert", &self.etcd.etcd_cert, ETCD_CERT),
                ("--etcd-key", &self.etcd.etcd_key, ETCD_KEY),
            ] {
                if file.as_path() != Path::new(default) {
                    words.push(format!("{flag} {}", file.display()));
                }
            }
        }
        if !self.via.is_empty() {
            words.push(format!("--via {}", self.via.join(",")));
        }
        if self.releases_url != selfhost::DEFAULT_RELEASES_URL {
            words.push(format!("--releases-url {}", self.releases_url));
        }
        words
    }
}

/// What follows the target in `selfhost apply <target>` as `plan` or `apply` was given it
/// (empty, or each argument after a space): the configuration file and every flag that
/// changes how the upgrade is judged or the way it takes.
pub fn apply_options(config: Option<&Path>, flags: &UpgradeFlags) -> String {
    let mut options = String::new();
    if let Some(config) = config {
        options.push_str(&format!(" --config {}", config.display()));
    }
    for word in flags.repeated() {
        options.push(' ');
        options.push_str(&word);
    }
    options
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
        default_value = ETCD_CA
    )]
    pub etcd_cacert: PathBuf,
    /// The client certificate etcd accepts (the kube-apiserver's).
    #[arg(
        long,
        value_name = "FILE",
        default_value = ETCD_CERT
    )]
    pub etcd_cert: PathBuf,
    /// Its key.
    #[arg(
        long,
        value_name = "FILE",
        default_value = ETCD_KEY
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::super::{Cli, Command};

    fn repeated(line: &str) -> String {
        let argv = std::iter::once("selfhost").chain(line.split_whitespace());
        match Cli::try_parse_from(argv).expect("parses").command {
            Command::Plan(plan) => plan.flags.repeated().join(" "),
            other => panic!("not a plan: {other:?}"),
        }
    }

    #[test]
    fn a_suggested_apply_is_judged_as_its_plan_was_and_takes_its_hops() {
        let rows = [
            ("plan v1.34.0", ""),
            ("plan v1.34.0 --prepull --certificate-warning-days 30", ""),
            (
                "plan v1.34.0 --accept-downtime --force --certificate-warning-days 7",
                "--force --accept-downtime --certificate-warning-days 7",
            ),
            (
                "plan v1.34.0-rc.1 --allow-release-candidate-upgrades",
                "--allow-release-candidate-upgrades",
            ),
            // Certificate files matter only when etcd is asked directly.
            ("plan v1.34.0 --etcd-cert /tmp/c.crt", ""),
            (
                "plan v1.34.0 --etcd-endpoints https://10.0.0.1:2379,https://10.0.0.2:2379 \
                 --etcd-key /tmp/c.key",
                "--etcd-endpoints https://10.0.0.1:2379,https://10.0.0.2:2379 --etcd-key /tmp/c.key",
            ),
            (
                "plan v1.36.2 --via v1.34.2,v1.35.1 --releases-url http://mirror/release",
                "--via v1.34.2,v1.35.1 --releases-url http://mirror/release",
            ),
            (
                "plan v1.36.2 --via v1.34.2 --via v1.35.1",
                "--via v1.34.2,v1.35.1",
            ),
        ];
        for (line, expected) in rows {
            assert_eq!(repeated(line), expected, "{line}");
        }
    }
}
