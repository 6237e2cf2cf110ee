//! `selfhost apply <VERSION>`: plan, confirm, then the pivot of every component, with
//! progress on stderr (or JSON events on stdout with `-o json`) and the exit codes of
//! docs/design.md. Ctrl-C (SIGINT) or SIGTERM stops at the next safe point and prints the
//! command that resumes.

use anyhow::anyhow;
use selfhost::{
    ApplyOptions, AvailabilityBudget, Command, DEFAULT_UPGRADE_DEADLINE, ExecuteOptions,
    PivotOptions, RetryPolicy, RunOutcome,
};

use crate::args::{ApplyArgs, GlobalArgs, OutputFormat};
use crate::exit::{CliError, Outcome};
use crate::ui;

use super::running::{Running, Show};
use super::trace::RunTrace;

/// The command that continues this run, for messages.
fn resume_command(args: &ApplyArgs) -> String {
    let mut command = format!(
        "selfhost apply {}{}",
        args.target,
        crate::args::apply_options(args.config.as_deref(), &args.flags)
    );
    if args.no_rollback {
        command.push_str(" --no-rollback");
    }
    if let Some(seconds) = args.max_unavailable_seconds {
        command.push_str(&format!(
            " --max-unavailable-seconds {}",
            seconds.as_secs_f64()
        ));
    }
    if let Some(count) = args.max_failed_probes {
        command.push_str(&format!(" --max-failed-probes {count}"));
    }
    command.push_str(" --yes");
    command
}

/// Runs the upgrade, and writes the report if `--report` asks for one.
pub async fn run(global: &GlobalArgs, args: &ApplyArgs) -> Result<Outcome, CliError> {
    let mut trace = RunTrace::new(args.report.is_some(), true);
    let result = run_traced(global, args, &mut trace).await;
    super::trace::write_apply_report(args, trace).await;
    result
}

/// Runs the upgrade, leaving its events, result and recording in `trace`.
pub async fn run_traced(
    global: &GlobalArgs,
    args: &ApplyArgs,
    trace: &mut RunTrace,
) -> Result<Outcome, CliError> {
    let request = super::plan::request(&args.target, args.config.as_ref(), &args.flags)?;
    let deadline = args.timeout.unwrap_or(DEFAULT_UPGRADE_DEADLINE);
    let json = global.output == OutputFormat::Json;
    let command = Command::Apply {
        config_from_cluster: args.config.is_none(),
        prepull: args.flags.prepull,
    };
    let mut cluster = super::cluster::connect(global, command).await?;
    trace.connected(cluster.clients());
    let (mut plan, mut targets, chain) =
        super::plan::plan_hops(&mut cluster, &request, &args.flags).await?;
    let total = chain.len();
    let mut prepull = super::prepull::skip_unless_requested(&mut plan, args.flags.prepull);
    if !plan.proceeds {
        return refuse(
            &plan,
            args,
            global,
            json,
            "preflight refused the upgrade; nothing was changed",
        );
    }
    let nothing_to_do = plan
        .components
        .iter()
        .all(|c| !c.changes && c.in_progress_to.is_none())
        && plan
            .components
            .iter()
            .all(|c| c.running.iter().all(|p| !p.backup));
    if nothing_to_do {
        let message = format!(
            "the control plane already runs {}; nothing to do",
            plan.target_version
        );
        if json {
            ui::json_line(
                &serde_json::json!({"event": "result", "outcome": "done", "message": message}),
            )?;
        } else {
            ui::say(message);
        }
        return Ok(Outcome::Done);
    }
    let hops_said = if total > 1 {
        format!(" in {total} hops, one minor at a time")
    } else {
        String::new()
    };
    if !args.yes
        && !args.dry_run
        && !ui::confirm(&format!(
            "Upgrade the control plane to {}{hops_said}?",
            args.target
        ))?
    {
        return Err(CliError::bad_input(anyhow!(
            "not confirmed; nothing was changed"
        )));
    }
    let options = ApplyOptions {
        pivot: PivotOptions {
            force: args.flags.force,
            no_rollback: args.no_rollback,
            accept_downtime: args.flags.accept_downtime,
            deadline,
            budget: AvailabilityBudget {
                max_unavailable: args.max_unavailable_seconds,
                max_failed_probes: args.max_failed_probes,
            },
            ..PivotOptions::default()
        },
        execute: ExecuteOptions {
            retry: RetryPolicy::default(),
            dry_run: args.dry_run,
        },
        resume_command: resume_command(args),
    };
    for (at, hop) in chain.iter().enumerate() {
        // Which hop, in the words of every message it ends with.
        let on_hop = if total > 1 {
            format!("hop {} of {total} ({hop}): ", at + 1)
        } else {
            String::new()
        };
        if at > 0 {
            // Each later hop is planned again, against the cluster the hop before it left.
            let mut hop_request = request.clone();
            hop_request.version = hop.to.clone();
            (plan, targets) = cluster.plan(&hop_request).await?;
            prepull = super::prepull::skip_unless_requested(&mut plan, args.flags.prepull);
            if !plan.proceeds {
                let why = format!(
                    "{on_hop}preflight refused it; the control plane runs {}, and nothing of \
                     this hop was changed",
                    hop.from
                );
                return refuse(&plan, args, global, json, &why);
            }
        }
        if total > 1 {
            if json {
                ui::json_line(&serde_json::json!({
                    "event": "hop", "hop": at + 1, "of": total,
                    "from": hop.from.to_string(), "to": hop.to.to_string(),
                }))?;
            } else {
                ui::say(format!("Hop {} of {total}: {hop}", at + 1));
            }
        }
        let running = Running::start();
        if prepull {
            // `--timeout` bounds the prepull too when given.
            let prepull_deadline = args.timeout.as_ref().map(|_| deadline);
            let on = super::prepull::On {
                cluster: &cluster,
                cancel: &running.cancel,
                progress: &running.progress,
            };
            super::prepull::before_apply(
                &mut plan,
                &targets,
                prepull_deadline,
                args.dry_run,
                json,
                &on,
            )
            .await?;
        }
        if at == 0
            && let Some(dir) = &args.etcd_snapshot
        {
            snapshot(&cluster, args, &plan, dir, json).await?;
        }
        let printer = running.printer(Show {
            json,
            verb: "upgrading",
            dry_run: args.dry_run,
            verbose: global.verbose > 0,
        });
        trace.engine_starting();
        let result = cluster
            .apply(&targets, &options, &printer.events, &running.cancel)
            .await;
        trace.events = printer.finish().await;
        running.end();
        if let Ok(report) = &result {
            trace.finished(report);
        }
        let report = result.map_err(|e| CliError {
            outcome: Outcome::NotRestored,
            error: anyhow::Error::from(e).context(format!(
                "{on_hop}the upgrade stopped; re-run `{}` to continue",
                options.resume_command
            )),
        })?;

        let (outcome, message) = match &report.outcome {
            RunOutcome::Done => (Outcome::Done, format!("the control plane runs {}", targets.version)),
            RunOutcome::DryRun => (Outcome::Done, "dry run: the API server accepted the first change of each component; nothing was changed".into()),
            RunOutcome::RolledBack { component, reason } => (
                Outcome::RolledBack,
                format!("{component} failed and was rolled back to its original template: {reason}"),
            ),
            RunOutcome::Refused { component, reason, fix } => {
                (Outcome::Refused, format!("{component}: {reason}; {fix}. Nothing was changed."))
            }
            RunOutcome::Failed { component, reason, state, resume } => (
                Outcome::NotRestored,
                format!("{component} failed and was NOT restored: {reason}. The cluster now: {state}. Continue with: {resume}"),
            ),
            RunOutcome::Interrupted { component, resume } => (
                Outcome::NotRestored,
                format!("stopped during {component} at a safe point; the cluster is consistent. Continue with: {resume}"),
            ),
        };
        let last = at + 1 == total;
        // A dry run cannot go on: the next hop starts from what this one would leave.
        let goes_on = !last && report.outcome == RunOutcome::Done;
        let message = format!("{on_hop}{message}");
        if json {
            ui::json_line(&serde_json::json!({
                "event": if goes_on { "hop-result" } else { "result" },
                "outcome": outcome.name(),
                "message": message,
                "disruption": report.disruption,
                "api_requests": cluster.requests().total(),
            }))?;
        } else {
            for line in super::apply_summary::lines(&report.disruption) {
                ui::say(line);
            }
        }
        if goes_on {
            if !json {
                ui::say(message);
            }
            continue;
        }
        return super::conclude(outcome, message, json);
    }
    Ok(Outcome::Done)
}

/// Refuses with `plan` shown and `why` as the message; nothing was changed.
fn refuse(
    plan: &selfhost::Plan,
    args: &ApplyArgs,
    global: &GlobalArgs,
    json: bool,
    why: &str,
) -> Result<Outcome, CliError> {
    if !json {
        ui::say(super::plan::render_text(
            plan,
            global.verbose > 0,
            &crate::args::apply_options(args.config.as_deref(), &args.flags),
        ));
    } else {
        ui::json_line(&serde_json::json!({"event": "refused", "plan": plan}))?;
    }
    Err(CliError {
        outcome: Outcome::Refused,
        error: anyhow!(why.to_string()),
    })
}

/// `--etcd-snapshot DIR`, after preflight and before the first change.
async fn snapshot(
    cluster: &selfhost::Cluster,
    args: &ApplyArgs,
    plan: &selfhost::Plan,
    dir: &std::path::Path,
    json: bool,
) -> Result<(), CliError> {
    let endpoints = args
        .flags
        .etcd
        .etcd_endpoints
        .clone()
        .unwrap_or_else(|| plan.etcd.servers.clone());
    let access = super::plan::etcd_access(&args.flags.etcd, endpoints);
    if args.dry_run {
        ui::say(format!(
            "dry run: no etcd snapshot is taken (one would be written into {})",
            dir.display()
        ));
        return Ok(());
    }
    let snapshot = cluster.snapshot_etcd(&access, dir).await?;
    if json {
        ui::json_line(&serde_json::json!({"event": "etcd-snapshot", "snapshot": snapshot}))?;
    } else {
        ui::say(format!(
            "etcd snapshot: {} ({} bytes{}, from {}; its SHA-256 checked)",
            snapshot.path.display(),
            snapshot.bytes,
            snapshot
                .revision
                .map(|r| format!(", revision {r}"))
                .unwrap_or_default(),
            snapshot.endpoint
        ));
    }
    Ok(())
}
