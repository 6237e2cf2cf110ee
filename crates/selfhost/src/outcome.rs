//! How the change of one component ends, for the upgrade and the conversion alike.

use serde::Serialize;

use crate::measure::MeasuredDisruption;

/// How one component's change (its upgrade, or its conversion on one node) ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "outcome")]
pub enum ComponentOutcome {
    /// On the target (or found there already), verified.
    Done {
        /// What was verified.
        summary: String,
        /// A conversion without port sharing: seconds from rewriting the static manifest with
        /// port sharing to the restarted static pod (or the DaemonSet pod) serving, when this
        /// run did that.
        #[serde(skip_serializing_if = "Option::is_none")]
        handover_gap_seconds: Option<f64>,
        /// What a conversion saw meanwhile: its `/readyz` probes (the apiserver gap) and the
        /// leader changes of the controller-manager and scheduler Leases (the leaderless
        /// gap). An upgrade reports these per component in its run report instead.
        #[serde(skip_serializing_if = "Option::is_none")]
        measured: Option<MeasuredDisruption>,
    },
    /// Refused before anything that matters changed.
    Refused {
        /// What is wrong.
        reason: String,
        /// What to do about it.
        fix: String,
    },
    /// Failed, and put back as it was.
    RolledBack {
        /// What failed.
        reason: String,
    },
    /// Failed, and not restored.
    Failed {
        /// What failed.
        reason: String,
        /// The state the cluster (or the node) is in.
        state: String,
        /// The command that continues, when one does.
        #[serde(skip_serializing_if = "Option::is_none")]
        resume: Option<String>,
    },
    /// Stopped at a safe point on request (Ctrl-C, SIGTERM).
    Interrupted {
        /// The step it stopped before.
        step: String,
    },
    /// `--dry-run`: what was sent was only accepted by the API server's dry run; nothing
    /// changed.
    DryRun {
        /// What the run would do or end with.
        summary: String,
        /// How many API writes were sent with `dryRun=All`.
        writes: usize,
    },
}

impl ComponentOutcome {
    /// The outcome's name in events: `done`, `refused`, `rolled-back`, `failed`,
    /// `interrupted` or `dry-run`.
    pub fn name(&self) -> &'static str {
        match self {
            ComponentOutcome::Done { .. } => "done",
            ComponentOutcome::Refused { .. } => "refused",
            ComponentOutcome::RolledBack { .. } => "rolled-back",
            ComponentOutcome::Failed { .. } => "failed",
            ComponentOutcome::Interrupted { .. } => "interrupted",
            ComponentOutcome::DryRun { .. } => "dry-run",
        }
    }

    /// What happened, in words.
    pub fn message(&self) -> String {
        match self {
            ComponentOutcome::Done {
                summary,
                handover_gap_seconds,
                measured,
            } => {
                let mut out = summary.clone();
                if let Some(gap) = handover_gap_seconds {
                    out.push_str(&format!(
                        "; restarting the static pod with port sharing took {gap:.2}s"
                    ));
                }
                if let Some(measured) = measured {
                    out.push_str(&format!(
                        "; API: {} of {} /readyz probes failed (longest {:.2}s)",
                        measured.failed_health_probes,
                        measured.health_probes,
                        measured.longest_failing_seconds
                    ));
                    if let Some(leaderless) = measured.longest_leaderless_seconds() {
                        out.push_str(&format!("; leaderless for at most {leaderless:.2}s"));
                    }
                }
                out
            }
            ComponentOutcome::Refused { reason, fix } => format!("{reason}; {fix}"),
            ComponentOutcome::RolledBack { reason } => reason.clone(),
            ComponentOutcome::Failed {
                reason,
                state,
                resume,
            } => match resume {
                Some(resume) => format!("{reason}. State: {state}. Resume with: {resume}"),
                None => format!("{reason}. State: {state}"),
            },
            ComponentOutcome::Interrupted { step } => format!("stopped before {step}"),
            ComponentOutcome::DryRun { summary, writes } => match writes {
                0 => format!("nothing changed; {summary}"),
                _ => format!(
                    "{writes} API write(s) accepted by the server's dry run, nothing changed; \
                     then: {summary}"
                ),
            },
        }
    }

    /// Whether the component is on its target (or would be, in a dry run).
    pub fn succeeded(&self) -> bool {
        matches!(
            self,
            ComponentOutcome::Done { .. } | ComponentOutcome::DryRun { .. }
        )
    }
}
