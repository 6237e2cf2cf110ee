//! What an `apply` run leaves behind for whoever asked: its events, the engine's report and,
//! when a report file is wanted, the recording of the control-plane pods. `apply --report`
//! and `demo` both read it.

use std::path::Path;

use anyhow::Context;
use selfhost::Clients;
use selfhost::ComponentOutcome;
use selfhost::Stamped;
use selfhost::report::{Recorded, Recording};
use selfhost::report::{Table, UpgradeReport, render_html, step_timings};
use selfhost::{RunOutcome, RunReport};

use crate::args::ApplyArgs;
use crate::ui;

/// The trace of one apply run.
#[derive(Debug, Default)]
pub struct RunTrace {
    /// Whether to record the pods once connected.
    record: bool,
    /// Whether the recording probes the API's health itself (no independent prober runs).
    probe_health: bool,
    /// The recording, from connection on.
    pub recording: Option<Recording>,
    /// The recording's time (seconds) when the engine's event clock started.
    pub engine_offset: f64,
    /// Every event the engine sent.
    pub events: Vec<Stamped>,
    /// The engine's result, when it ran to an end.
    pub report: Option<RunReport>,
    /// The kubeconfig context in use.
    pub context: String,
}

impl RunTrace {
    /// A trace that records pods (and probes health, if `probe_health`) when `record`.
    pub fn new(record: bool, probe_health: bool) -> RunTrace {
        RunTrace {
            record,
            probe_health,
            ..RunTrace::default()
        }
    }

    /// The cluster is connected: start recording if asked.
    pub fn connected(&mut self, clients: &Clients) {
        self.context = clients.context.clone();
        if self.record {
            let probe = self.probe_health.then(|| clients.probe.clone());
            self.recording = Some(Recording::start(&clients.api, probe));
        }
    }

    /// The engine's clock starts now.
    pub fn engine_starting(&mut self) {
        self.engine_offset = self.recording.as_ref().map_or(0.0, Recording::elapsed);
    }

    /// The engine ended with `report`.
    pub fn finished(&mut self, report: &RunReport) {
        self.report = Some(report.clone());
    }
}

/// What a run's outcome means, in a sentence, and whether it is a success.
pub fn verdict(outcome: Option<&RunOutcome>, target: &str) -> (String, bool) {
    match outcome {
        Some(RunOutcome::Done) => (format!("The control plane runs {target}."), true),
        Some(RunOutcome::DryRun) => ("Dry run: nothing was changed.".into(), true),
        Some(RunOutcome::RolledBack { component, reason }) => (
            format!("{component} failed and was rolled back: {reason}"),
            false,
        ),
        Some(RunOutcome::Refused {
            component, reason, ..
        }) => (format!("{component} refused: {reason}"), false),
        Some(RunOutcome::Failed {
            component, reason, ..
        }) => (
            format!("{component} failed and was NOT restored: {reason}"),
            false,
        ),
        Some(RunOutcome::Interrupted { component, .. }) => {
            (format!("Stopped during {component}."), false)
        }
        None => (
            "The run stopped before the engine finished (see the command's error).".into(),
            false,
        ),
    }
}

/// A component's outcome in a few words.
fn describe(outcome: &ComponentOutcome) -> String {
    match outcome {
        ComponentOutcome::Done { summary, .. } => format!("done: {summary}"),
        ComponentOutcome::Refused { reason, .. } => format!("refused: {reason}"),
        ComponentOutcome::RolledBack { reason } => format!("rolled back: {reason}"),
        ComponentOutcome::Failed { reason, .. } => format!("failed: {reason}"),
        ComponentOutcome::Interrupted { step, .. } => format!("interrupted at {step}"),
        ComponentOutcome::DryRun { .. } => "dry run".into(),
    }
}

/// The tables every report has: per component its outcome and time, and per step its time.
pub fn engine_tables(trace: &RunTrace, markers_end: f64) -> Vec<Table> {
    let markers = selfhost::report::markers(&trace.events, trace.engine_offset);
    let mut tables = Vec::new();
    if let Some(report) = &trace.report {
        tables.push(Table {
            title: "Components".into(),
            headers: ["component", "outcome", "seconds"]
                .map(String::from)
                .to_vec(),
            rows: report
                .components
                .iter()
                .map(|(component, outcome, seconds)| {
                    vec![
                        component.name().to_string(),
                        describe(outcome),
                        format!("{seconds:.2}"),
                    ]
                })
                .collect(),
        });
    }
    tables.push(Table {
        title: "Time per step".into(),
        headers: ["component", "step", "seconds"].map(String::from).to_vec(),
        rows: step_timings(&markers, markers_end)
            .into_iter()
            .map(|t| {
                vec![
                    t.component.name().to_string(),
                    t.step,
                    format!("{:.2}", t.seconds),
                ]
            })
            .collect(),
    });
    tables
}

/// The report of an `apply` run, from its trace: lanes and health from the recording.
pub fn apply_report(
    trace: &RunTrace,
    recorded: Recorded,
    target: &str,
    context: &str,
) -> UpgradeReport {
    let (verdict, success) = verdict(trace.report.as_ref().map(|r| &r.outcome), target);
    UpgradeReport {
        title: format!("selfhost apply {target}"),
        subtitle: format!(
            "Context {context}; recorded from {} for {:.1} s.",
            recorded.started.strftime("%Y-%m-%d %H:%M:%S UTC"),
            recorded.duration
        ),
        verdict,
        success,
        duration: recorded.duration,
        markers: selfhost::report::markers(&trace.events, trace.engine_offset),
        tables: engine_tables(trace, recorded.duration),
        lanes: recorded.lanes,
        availability: recorded.health.into_iter().collect(),
        notes: vec![
            "Times are seconds since selfhost connected to the cluster.".into(),
            "Old template: what the real DaemonSet's pods ran when the recording started \
             (by controller-revision-hash); new: any other revision of the real DaemonSet."
                .into(),
        ],
    }
}

/// Writes the report `apply --report FILE` asked for (if it did); a report that cannot be
/// written is a warning, not a change to the upgrade's outcome.
pub async fn write_apply_report(args: &ApplyArgs, mut trace: RunTrace) {
    let Some(path) = &args.report else { return };
    let Some(recording) = trace.recording.take() else {
        ui::warn("no report written: the run stopped before selfhost reached the cluster");
        return;
    };
    let recorded = recording.stop().await;
    let report = apply_report(&trace, recorded, &args.target, &trace.context);
    match write_report(path, &report) {
        Ok(()) => ui::say(format!("report written to {}", path.display())),
        Err(e) => ui::warn(format!("{e:#}")),
    }
}

/// Writes the page.
pub fn write_report(path: &Path, report: &UpgradeReport) -> anyhow::Result<()> {
    std::fs::write(path, render_html(report))
        .with_context(|| format!("writing the report {}", path.display()))
}
