//! `selfhost plan <VERSION>`: preflight, the version change per component, the template
//! diffs and the expected disruption; changes nothing. Exit 0 if `apply` would proceed, 3 if
//! preflight refuses.

use std::path::PathBuf;

use selfhost::{
    ApiImpact, CertificateContent, Check, Cluster, Command, DEFAULT_PREPULL_DEADLINE, EtcdAccess,
    Hop, KubeVersion, Plan, PlanRequest, SkewFlags, Targets, Verdict,
};
use tokio_util::sync::CancellationToken;

use crate::args::{EtcdFlags, GlobalArgs, OutputFormat, PlanArgs, UpgradeFlags};
use crate::exit::{CliError, Outcome};
use crate::progress::Progress;
use crate::ui;

/// Parses the version and reads the configuration: the request both `plan` and `apply` make.
pub fn request(
    target: &str,
    config: Option<&PathBuf>,
    flags: &UpgradeFlags,
) -> Result<PlanRequest, CliError> {
    let version = KubeVersion::parse(target).map_err(CliError::bad_input)?;
    let config_file = match config {
        Some(path) => Some((
            path.clone(),
            super::config_file::read_config(path, Some(&version))?,
        )),
        None => None,
    };
    Ok(PlanRequest {
        version,
        config_file,
        flags: SkewFlags {
            allow_experimental: flags.allow_experimental_upgrades,
            allow_release_candidate: flags.allow_release_candidate_upgrades,
            force: flags.force,
        },
        accept_downtime: flags.accept_downtime,
        certificate_warning: days(flags.certificate_warning_days),
        etcd: flags
            .etcd
            .etcd_endpoints
            .as_ref()
            .map(|endpoints| etcd_access(&flags.etcd, endpoints.clone())),
        assume_from: None,
    })
}

/// `--via`, parsed.
pub fn via(flags: &UpgradeFlags) -> Result<Vec<KubeVersion>, CliError> {
    flags
        .via
        .iter()
        .map(|v| {
            KubeVersion::parse(v)
                .map_err(|e| CliError::bad_input(anyhow::anyhow!("--via {v}: {e}")))
        })
        .collect()
}

/// The plan of `request`: of its hops when the target is two or more minors ahead.
pub async fn plan_hops(
    cluster: &mut Cluster,
    request: &PlanRequest,
    flags: &UpgradeFlags,
) -> Result<(Plan, Targets, Vec<Hop>), CliError> {
    let chain = cluster
        .chain(
            &request.version,
            &via(flags)?,
            &flags.releases_url,
            request.flags,
        )
        .await?;
    let (plan, targets) = cluster.plan_chain(request, &chain).await?;
    Ok((plan, targets, chain.hops))
}

/// The etcd flags with `endpoints`.
pub fn etcd_access(flags: &EtcdFlags, endpoints: Vec<String>) -> EtcdAccess {
    EtcdAccess {
        endpoints,
        ca: flags.etcd_cacert.clone(),
        cert: flags.etcd_cert.clone(),
        key: flags.etcd_key.clone(),
    }
}

/// Checks as lines: the mark, the id, the component, what was found, and under a warning or
/// failure its fix.
pub fn check_lines(checks: &[Check]) -> String {
    let mut out = String::new();
    for check in checks {
        let mark = match check.verdict {
            Verdict::Pass => "PASS",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
            Verdict::NotRun => "SKIP",
        };
        let scope = check
            .component
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {mark}  {}{scope}: {}\n",
            check.id.id(),
            check.message
        ));
        if let (Some(fix), Verdict::Warn | Verdict::Fail) = (&check.fix, check.verdict) {
            out.push_str(&format!("        fix: {fix}\n"));
        }
    }
    out
}

/// A number of days (`--certificate-warning-days`) as a duration.
pub fn days(days: u32) -> std::time::Duration {
    std::time::Duration::from_secs(u64::from(days) * 24 * 3600)
}

/// The certificates the target templates read, one row per certificate with its dates: the
/// table `kubeadm certs check-expiration` shows, for what the templates mount.
fn certificates_table(plan: &Plan) -> String {
    let observed = &plan.certificates;
    // Files only on the nodes' disks are one line of the check already; a table of them
    // would show no date.
    if observed
        .readings
        .iter()
        .all(|r| r.content == CertificateContent::OnNodes)
    {
        return String::new();
    }
    let mut rows = Vec::new();
    for reading in &observed.readings {
        let kept = reading.file.source.to_string();
        match &reading.content {
            CertificateContent::Read { certificates } => {
                for c in certificates {
                    let days = (c.not_after.as_second() - observed.at.as_second()) / (24 * 3600);
                    rows.push(vec![
                        reading.file.path.clone(),
                        kept.clone(),
                        c.subject.clone(),
                        c.not_after.strftime("%Y-%m-%d").to_string(),
                        if days < 0 {
                            "expired".into()
                        } else {
                            format!("{days}d")
                        },
                    ]);
                }
            }
            CertificateContent::Unreadable { .. } => rows.push(vec![
                reading.file.path.clone(),
                kept,
                "(unreadable)".into(),
                "-".into(),
                "-".into(),
            ]),
            CertificateContent::OnNodes => rows.push(vec![
                reading.file.path.clone(),
                kept,
                "(on the nodes)".into(),
                "-".into(),
                "-".into(),
            ]),
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "\nCertificates the target templates read:\n{}",
        ui::table(&["FILE", "KEPT IN", "SUBJECT", "EXPIRES", "LEFT"], &rows)
    )
}

fn impact(api: &ApiImpact) -> String {
    match api {
        ApiImpact::None => "none".into(),
        ApiImpact::ListenBeforeServe { windows, window_ms } => {
            format!(
                "{windows} window(s) of ~{:.1} s where some new connections fail",
                *window_ms as f64 / 1000.0
            )
        }
        ApiImpact::Outage { up_to_seconds } => format!("API outage of up to {up_to_seconds} s"),
    }
}

/// The plan for people: the checks (one line for a check every component passes), a table
/// of components with how each hands over in a word (`front`, `balancer`, `shared port`,
/// `restart`, `lease`, `refused`) and the expected disruption in a few words, the template
/// diffs; with
/// `verbose`, what each check found and why each component's disruption is what it is.
pub fn render_text(plan: &Plan, verbose: bool, apply_options: &str) -> String {
    let mut out = String::new();
    if !plan.chain.is_empty() {
        out.push_str(&format!(
            "A chained upgrade, one minor at a time, in {} hops; each is planned and checked \
             again when it starts:\n",
            plan.chain.len()
        ));
        for (at, hop) in plan.chain.iter().enumerate() {
            out.push_str(&format!("  {}. {}\n", at + 1, hop.hop));
        }
        out.push_str(&format!("\nHop 1 of {}: ", plan.chain.len()));
    }
    out.push_str(&format!(
        "Upgrade to {}, the target templates from {}.\n\nPreflight:\n",
        plan.target_version, plan.template_source_description
    ));
    let checks = &plan.preflight.checks;
    let passed_for_each = |c: &Check| c.verdict == Verdict::Pass && c.component.is_some();
    for (at, check) in checks.iter().enumerate() {
        // A check that passes for each component is one line naming them; what each found is
        // behind -v.
        if !verbose && passed_for_each(check) {
            let first = checks[..at]
                .iter()
                .all(|c| !(passed_for_each(c) && c.id == check.id));
            if first {
                let components: Vec<String> = checks
                    .iter()
                    .filter(|c| passed_for_each(c) && c.id == check.id)
                    .filter_map(|c| c.component.map(|c| c.to_string()))
                    .collect();
                out.push_str(&format!(
                    "  PASS  {}: {}\n",
                    check.id.id(),
                    components.join(", ")
                ));
            }
            continue;
        }
        out.push_str(&check_lines(std::slice::from_ref(check)));
    }
    // The table's own header names it.
    out.push('\n');
    let rows: Vec<Vec<String>> = plan
        .components
        .iter()
        .map(|c| {
            let mut current: Vec<String> = c
                .running
                .iter()
                .map(|p| p.image.rsplit(':').next().unwrap_or("").to_string())
                .collect();
            current.sort();
            current.dedup();
            vec![
                c.component.to_string(),
                if current.is_empty() {
                    "-".into()
                } else {
                    current.join(", ")
                },
                c.target_image
                    .as_deref()
                    .and_then(|i| i.rsplit(':').next())
                    .unwrap_or("-")
                    .to_string(),
                if c.changes {
                    "yes".into()
                } else {
                    "no (already on target)".into()
                },
                c.expected.hand_over.word().to_string(),
                impact(&c.expected.api),
                c.expected
                    .leaderless_gap_seconds
                    .map_or("-".into(), |s| format!("≤ {s} s")),
            ]
        })
        .collect();
    out.push_str(&ui::table(
        &[
            "COMPONENT",
            "CURRENT",
            "TARGET",
            "CHANGES",
            "HAND-OVER",
            "API IMPACT",
            "LEADERLESS GAP",
        ],
        &rows,
    ));
    for c in &plan.components {
        if let Some(target) = &c.in_progress_to {
            out.push_str(&format!(
                "  {}: an upgrade to {target} is in progress; apply continues it\n",
                c.component
            ));
        }
        if verbose {
            for line in &c.expected.explanation {
                out.push_str(&format!("  {}: {line}\n", c.component));
            }
        }
    }
    out.push_str(&certificates_table(plan));
    for c in plan.components.iter().filter(|c| !c.diff.is_empty()) {
        out.push_str(&format!(
            "\nTemplate diff of {} (live → target):\n{}",
            c.daemonset, c.diff
        ));
    }
    let total = plan.chain.len();
    for (at, hop) in plan.chain.iter().enumerate().skip(1) {
        out.push_str(&format!(
            "\nHop {} of {total}: {}; the checks its version decides:\n",
            at + 1,
            hop.hop
        ));
        out.push_str(&check_lines(&hop.checks));
    }
    let target = plan
        .chain
        .last()
        .map_or(plan.target_version.clone(), |h| h.hop.to.to_string());
    out.push_str(&if plan.proceeds {
        format!("\napply would proceed: selfhost apply {target}{apply_options}\n")
    } else {
        let failed = plan
            .preflight
            .checks
            .iter()
            .chain(plan.chain.iter().skip(1).flat_map(|h| h.checks.iter()))
            .filter(|c| c.verdict == Verdict::Fail)
            .count();
        format!("\napply would refuse: {failed} preflight check(s) failed (see the fixes above)\n")
    });
    out
}

/// Prints the plan.
pub async fn run(global: &GlobalArgs, args: &PlanArgs) -> Result<Outcome, CliError> {
    let request = request(&args.target, args.config.as_ref(), &args.flags)?;
    let command = Command::Plan {
        config_from_cluster: args.config.is_none(),
        prepull: args.flags.prepull,
    };
    let mut cluster = super::cluster::connect(global, command).await?;
    let (mut plan, targets, _) = plan_hops(&mut cluster, &request, &args.flags).await?;
    if super::prepull::skip_unless_requested(&mut plan, args.flags.prepull) {
        let progress = Progress::stderr();
        let cancel = CancellationToken::new();
        let signals = super::prepull::cancel_on_stop(&cancel, &progress);
        let on = super::prepull::On {
            cluster: &cluster,
            cancel: &cancel,
            progress: &progress,
        };
        let result = super::prepull::run(&mut plan, &targets, DEFAULT_PREPULL_DEADLINE, &on).await;
        progress.finish();
        signals.abort();
        result?;
    }
    let text = match global.output {
        OutputFormat::Text => render_text(
            &plan,
            global.verbose > 0,
            &crate::args::apply_options(args.config.as_deref(), &args.flags),
        ),
        format => ui::structured(&plan, format)?,
    };
    ui::print(&text)?;
    Ok(if plan.proceeds {
        Outcome::Done
    } else {
        Outcome::Refused
    })
}
