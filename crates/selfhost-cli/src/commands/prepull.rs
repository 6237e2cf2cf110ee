//! `--prepull` for `plan` and `apply`: the `images-pullable` preflight check.
//!
//! Both commands offer it. `apply` runs it after the confirmation and before its first change;
//! `plan` runs it too because it is the only way to learn, before committing to an upgrade,
//! whether every control-plane node can pull the target images. It is the one thing `plan`
//! writes: temporary DaemonSets, removed again in every case, so the cluster's objects end as
//! they were (the nodes keep the images in their cache, which `apply` would pull anyway).

use std::time::Duration;

use anyhow::anyhow;
use selfhost::{
    Cluster, DEFAULT_PREPULL_DEADLINE, Error, PREPULL_LABEL, Plan, PrepullError, PrepullOptions,
    PrepullProgress, Targets, skip_prepull,
};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::exit::{CliError, Outcome};
use crate::progress::Progress;
use crate::ui;

/// Why the check did not run when it was not asked for, and how to run it.
pub const NOT_REQUESTED: &str =
    "not run: --prepull has every control-plane node pull the target images first";
/// Why the check did not run when other checks refused already.
pub const OTHERS_FAILED: &str =
    "not run: other checks fail; fix them first, then run again with --prepull";

/// Records the check as not run unless it was asked for and the other checks pass; returns
/// whether it is to run.
pub fn skip_unless_requested(plan: &mut Plan, requested: bool) -> bool {
    let reason = match (requested, plan.proceeds) {
        (true, true) => return true,
        (false, _) => NOT_REQUESTED,
        (true, false) => OTHERS_FAILED,
    };
    skip_prepull(plan, reason);
    false
}

/// Where a prepull runs and reports.
pub struct On<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// Cancelled at Ctrl-C.
    pub cancel: &'a CancellationToken,
    /// Progress on stderr.
    pub progress: &'a Progress,
}

/// `apply --prepull`, after the confirmation: runs the prepull (only described with
/// `--dry-run`) and refuses, exit 3, when a node cannot pull. `deadline`: `--timeout`, if
/// given.
///
/// # Errors
/// The refusal, or a prepull that could not be carried out (see [`run`]).
pub async fn before_apply(
    plan: &mut Plan,
    targets: &Targets,
    deadline: Option<Duration>,
    dry_run: bool,
    json: bool,
    on: &On<'_>,
) -> Result<(), CliError> {
    if dry_run {
        on.progress.line("dry run: the image prepull is not performed (it would run a prepull DaemonSet per component and remove it)");
        return Ok(());
    }
    let ran = run(
        plan,
        targets,
        deadline.unwrap_or(DEFAULT_PREPULL_DEADLINE),
        on,
    )
    .await;
    if ran.is_err() || !plan.proceeds {
        // The error or refusal is printed next, on a line of its own.
        on.progress.finish();
    }
    ran?;
    if plan.proceeds {
        if json && let Some(check) = plan.preflight.checks.last() {
            ui::json_line(&serde_json::json!({"event": "preflight-check", "check": check}))?;
        }
        return Ok(());
    }
    if json {
        ui::json_line(&serde_json::json!({"event": "refused", "plan": plan}))?;
    }
    let failed: Vec<String> = plan
        .preflight
        .failures()
        .map(|c| match &c.fix {
            Some(fix) => format!("{} (fix: {fix})", c.message),
            None => c.message.clone(),
        })
        .collect();
    Err(CliError {
        outcome: Outcome::Refused,
        error: anyhow!(
            "preflight refused the upgrade: {}; nothing was changed",
            failed.join("; ")
        ),
    })
}

/// Runs the prepull and records its check in `plan` (whose `proceeds` then says whether
/// `apply` may go on).
///
/// # Errors
/// The prepull could not be carried out: exit 1 when it removed what it created (the
/// cluster is as it was), exit 4 when it could not.
pub async fn run(
    plan: &mut Plan,
    targets: &Targets,
    deadline: Duration,
    on: &On<'_>,
) -> Result<(), CliError> {
    let On {
        cluster,
        cancel,
        progress,
    } = *on;
    let started = std::time::Instant::now();
    let shown = progress.clone();
    let mut report = move |event: PrepullProgress| match event {
        PrepullProgress::Starting { images } if images.is_empty() => {}
        PrepullProgress::Starting { images } => {
            shown.line(&format!(
                "prepull: pulling {} on the control-plane nodes",
                images.join(", ")
            ));
            shown.step("prepull: creating the prepull DaemonSets");
        }
        PrepullProgress::Created { component, image } => {
            shown.line(&format!(
                "prepull:   created DaemonSet kube-system/{} ({image})",
                component.prepull_name()
            ));
            shown.step("prepull: waiting for every node to pull");
        }
        PrepullProgress::Waiting { pending } => {
            let plain = format!(
                "prepull:   waiting for {}{}",
                pending
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; "),
                match pending.len().saturating_sub(3) {
                    0 => String::new(),
                    more => format!(" (+{more} more)"),
                }
            );
            shown.waiting(pending, started.elapsed().as_secs_f64(), Some(&plain));
        }
        PrepullProgress::Removing => shown.step("prepull: removing the prepull DaemonSets"),
        PrepullProgress::Removed => {
            shown.line("prepull:   removed the prepull DaemonSets and their pods")
        }
    };
    let options = PrepullOptions {
        deadline,
        ..PrepullOptions::default()
    };
    cluster
        .prepull(plan, targets, &options, cancel, &mut report)
        .await
        .map_err(|e| match e {
            Error::Prepull(ref cause) if matches!(**cause, PrepullError::Cleanup { .. }) => CliError {
                outcome: Outcome::NotRestored,
                error: anyhow::Error::from(e).context(format!(
                    "the cluster is unchanged but for the temporary DaemonSets labelled {PREPULL_LABEL}"
                )),
            },
            e => CliError::from(anyhow::Error::from(e).context(
                "the image prepull could not run; its DaemonSets were removed and nothing else was changed",
            )),
        })?;
    Ok(())
}

/// Cancels `cancel` at the first Ctrl-C or SIGTERM, so that the prepull stops and removes its
/// DaemonSets; a second signal exits at once (exit 4: they may be left behind).
pub fn cancel_on_stop(cancel: &CancellationToken, progress: &Progress) -> JoinHandle<()> {
    let cancel = cancel.clone();
    let progress = progress.clone();
    let mut stops = super::signals::StopSignals::listen();
    tokio::spawn(async move {
        let stop = stops.next().await;
        progress.line(&format!(
            "{stop}: stopping: removing the prepull DaemonSets (signal again to leave them)..."
        ));
        cancel.cancel();
        stops.next().await;
        progress.finish();
        std::process::exit(i32::from(Outcome::NotRestored.code()));
    })
}
