//! `selfhost apply <VERSION>`: plan, confirm, then the pivot of every component, with
//! progress on stderr (or JSON events on stdout with `-o json`) and the exit codes of
//! DESIGN.md §2. Ctrl-C (SIGINT) or SIGTERM stops at the next safe point and prints the
//! command that resumes.

use std::time::Duration;

use anyhow::anyhow;
use selfhost::apply::{ApplyOptions, RunOutcome, apply};
use selfhost::events::{Event, Events, Stamped};
use selfhost::plan::make_plan;
use selfhost::retry::RetryPolicy;
use selfhost::upgrade::ExecuteOptions;
use selfhost_core::pivot::PivotOptions;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::args::{ApplyArgs, GlobalArgs, OutputFormat};
use crate::exit::{CliError, Outcome};
use crate::progress::Progress;
use crate::ui;

use super::trace::RunTrace;

/// The command that continues this run, for messages.
fn resume_command(args: &ApplyArgs) -> String {
    let mut command = format!("selfhost apply {}", args.target);
    if let Some(config) = &args.config {
        command.push_str(&format!(" --config {}", config.display()));
    }
    for (on, flag) in [
        (args.flags.force, "--force"),
        (args.flags.accept_downtime, "--accept-downtime"),
        (
            args.flags.allow_experimental_upgrades,
            "--allow-experimental-upgrades",
        ),
        (
            args.flags.allow_release_candidate_upgrades,
            "--allow-release-candidate-upgrades",
        ),
        (args.no_rollback, "--no-rollback"),
    ] {
        if on {
            command.push(' ');
            command.push_str(flag);
        }
    }
    command.push_str(" --yes");
    command
}

fn render(event: &Stamped) -> Option<String> {
    let at = format!("[{:>6.1}s]", event.at);
    Some(match &event.event {
        Event::ComponentStarted { component } => format!("{at} {component}: upgrading"),
        // The end of a component is told by its component-finished line.
        Event::Step { step, .. } if step == "done" => return None,
        Event::Step {
            component,
            step,
            description,
        } => format!("{at} {component}: {step}: {description}"),
        Event::Waiting {
            component, pending, ..
        } if !pending.is_empty() => {
            let shown: Vec<_> = pending.iter().take(3).cloned().collect();
            let more = pending.len().saturating_sub(3);
            let more = if more > 0 {
                format!(" (+{more} more)")
            } else {
                String::new()
            };
            format!("{at} {component}:   waiting for {}{more}", shown.join("; "))
        }
        Event::Waiting { .. } => return None,
        Event::Action {
            component,
            detail,
            dry_run,
            ..
        } => {
            format!(
                "{at} {component}:   {}{detail}",
                if *dry_run { "(dry run) " } else { "" }
            )
        }
        Event::ComponentFinished {
            component,
            outcome,
            message,
            elapsed_seconds,
        } => {
            format!("{at} {component}: {outcome} after {elapsed_seconds:.1}s: {message}")
        }
    })
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
    let deadline = match &args.timeout {
        Some(text) => humantime::parse_duration(text).map_err(|e| {
            CliError::bad_input(anyhow!(
                "invalid --timeout {text:?}: {e}; write a duration such as 5m or 90s"
            ))
        })?,
        None => selfhost_core::pivot::DEFAULT_DEADLINE,
    };
    if deadline < Duration::from_secs(10) {
        return Err(CliError::bad_input(anyhow!(
            "--timeout {} is too short for a component to hand over; give at least 10s",
            humantime::format_duration(deadline)
        )));
    }
    let json = global.output == OutputFormat::Json;
    let mut permissions = selfhost::access::upgrade();
    if args.config.is_none() {
        permissions.extend(selfhost::access::cluster_config());
    }
    if args.flags.prepull {
        permissions.extend(selfhost::access::prepull());
    }
    let needs = super::cluster::Needs {
        command: "selfhost apply",
        permissions,
        role: selfhost::access::UPGRADER,
    };
    let (clients, mut observer) = super::cluster::connect(global, needs).await?;
    trace.connected(&clients);
    let policy = RetryPolicy::default();
    let (mut plan, targets, _) = make_plan(&mut observer, &clients.api, &request, &policy)
        .await
        .map_err(|e| CliError::from(anyhow::Error::from(e)))?;
    let prepull = super::prepull::skip_unless_requested(&mut plan, args.flags.prepull);
    if !plan.proceeds {
        if !json {
            ui::say(super::plan::render_text(&plan));
        } else {
            ui::json_line(&serde_json::json!({"event": "refused", "plan": plan}))?;
        }
        return Err(CliError {
            outcome: Outcome::Refused,
            error: anyhow!("preflight refused the upgrade; nothing was changed"),
        });
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
    if !args.yes
        && !args.dry_run
        && !ui::confirm(&format!(
            "Upgrade the control plane to {}?",
            plan.target_version
        ))?
    {
        return Err(CliError::bad_input(anyhow!(
            "not confirmed; nothing was changed"
        )));
    }

    let cancel = CancellationToken::new();
    let signal_cancel = cancel.clone();
    let progress = Progress::stderr();
    let signal_progress = progress.clone();
    let mut stops = super::signals::StopSignals::listen();
    let signals = tokio::spawn(async move {
        let stop = stops.next().await;
        signal_progress.line(&format!(
            "{stop}: stopping at the next safe point (signal again to abandon the run at once)..."
        ));
        signal_cancel.cancel();
        stops.next().await;
        signal_progress.finish();
        std::process::exit(i32::from(Outcome::NotRestored.code()));
    });
    if prepull {
        // `--timeout` bounds the prepull too when given.
        let prepull_deadline = args.timeout.as_ref().map(|_| deadline);
        let on = super::prepull::Cluster {
            client: &clients.api,
            cancel: &cancel,
            progress: &progress,
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
    let (sender, mut receiver) = mpsc::unbounded_channel::<Stamped>();
    let shown = progress.clone();
    let printer = tokio::spawn(async move {
        // Programs get every event; people get the progress display of progress.rs.
        let mut seen = Vec::new();
        while let Some(event) = receiver.recv().await {
            seen.push(event.clone());
            if json {
                let _ = ui::json_line(&event);
                continue;
            }
            shown.event(&event, render(&event));
        }
        shown.finish();
        seen
    });
    let options = ApplyOptions {
        pivot: PivotOptions {
            force: args.flags.force,
            no_rollback: args.no_rollback,
            accept_downtime: args.flags.accept_downtime,
            deadline,
            ..PivotOptions::default()
        },
        execute: ExecuteOptions {
            retry: policy,
            dry_run: args.dry_run,
        },
        resume_command: resume_command(args),
    };
    trace.engine_starting();
    let events = Events::to(sender);
    let result = apply(
        &mut observer,
        &clients.api,
        &targets,
        &options,
        &events,
        &cancel,
    )
    .await;
    drop(events);
    trace.events = printer.await.unwrap_or_default();
    signals.abort();
    if let Ok(report) = &result {
        trace.finished(report);
    }
    let report = result.map_err(|e| CliError {
        outcome: Outcome::NotRestored,
        error: anyhow!(e).context(format!(
            "the upgrade stopped; re-run `{}` to continue",
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
    if json {
        let name = match outcome {
            Outcome::Done => "done",
            Outcome::RolledBack => "rolled-back",
            Outcome::BadInput => "bad-input",
            Outcome::Refused => "refused",
            Outcome::NotRestored => "not-restored",
        };
        ui::json_line(&serde_json::json!({
            "event": "result",
            "outcome": name,
            "message": message,
            "disruption": report.disruption,
            "api_requests": clients.requests.total(),
        }))?;
    } else {
        for line in super::apply_summary::lines(&report.disruption) {
            ui::say(line);
        }
    }
    super::conclude(outcome, message, json)
}
