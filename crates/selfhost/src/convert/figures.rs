//! What a conversion cost, per component, as the run itself measured it: the apiserver gap
//! (its `/readyz` probes, every 0.1 s while it worked) and the leaderless gap of the
//! controller-manager and scheduler Leases (from every change of the Leases it watched). For
//! the summary a user reads and the `-o json` result.

use selfhost_core::Component;
use serde::Serialize;

use super::ConvertReport;
use crate::outcome::ComponentOutcome;

/// The figures of one component's conversion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentFigures {
    /// The component.
    pub component: Component,
    /// `/readyz` probes the run made while converting it.
    pub api_probes: u32,
    /// Of those, how many failed (other than an apiserver draining as designed).
    pub api_failed_probes: u32,
    /// The apiserver gap: the longest stretch from a failed probe to the next one that did
    /// not fail, in seconds.
    pub api_gap_seconds: f64,
    /// The longest leaderless gap of a leader change meanwhile, in seconds, if one was seen:
    /// at most from the old holder's last renewal to the new holder's acquisition.
    pub leaderless_seconds: Option<f64>,
    /// Without port sharing: from rewriting the static manifest with port sharing to the
    /// restarted static pod (or the DaemonSet pod) serving, in seconds, when this run did that.
    pub handover_gap_seconds: Option<f64>,
}

impl ConvertReport {
    /// The figures of every component converted (those that ended done).
    pub fn figures(&self) -> Vec<ComponentFigures> {
        self.components
            .iter()
            .filter_map(|(component, outcome)| match outcome {
                ComponentOutcome::Done {
                    handover_gap_seconds,
                    measured: Some(measured),
                    ..
                } => Some(ComponentFigures {
                    component: *component,
                    api_probes: measured.health_probes,
                    api_failed_probes: measured.failed_health_probes,
                    api_gap_seconds: measured.longest_failing_seconds,
                    leaderless_seconds: measured.longest_leaderless_seconds(),
                    handover_gap_seconds: *handover_gap_seconds,
                }),
                _ => None,
            })
            .collect()
    }

    /// The figures in one line: the longest apiserver gap and the longest leaderless gap of
    /// the run; `None` when no component was converted.
    pub fn figures_summary(&self) -> Option<String> {
        let figures = self.figures();
        let api = figures.iter().map(|f| f.api_gap_seconds).reduce(f64::max)?;
        let failed: u32 = figures.iter().map(|f| f.api_failed_probes).sum();
        let probes: u32 = figures.iter().map(|f| f.api_probes).sum();
        let leaderless = figures
            .iter()
            .filter_map(|f| f.leaderless_seconds.map(|s| (f.component, s)))
            .reduce(|a, b| if b.1 > a.1 { b } else { a });
        let mut line = format!("API gap {api:.2}s ({failed} of {probes} /readyz probes failed)");
        match leaderless {
            Some((component, seconds)) => line.push_str(&format!(
                "; longest leaderless gap {seconds:.2}s ({component})"
            )),
            None => line.push_str("; no leader change"),
        }
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use crate::measure::{LeaderChange, MeasuredDisruption};

    use super::*;

    fn done(failed: u32, gap: f64, leaderless: Option<f64>) -> ComponentOutcome {
        ComponentOutcome::Done {
            summary: "converted".into(),
            handover_gap_seconds: None,
            measured: Some(MeasuredDisruption {
                wall_seconds: 1.0,
                health_probes: 10,
                failed_health_probes: failed,
                draining_health_probes: 0,
                longest_failing_seconds: gap,
                leader_changes: leaderless
                    .map(|s| LeaderChange {
                        lease: "kube-scheduler".into(),
                        from: Some("a".into()),
                        to: "b".into(),
                        leaderless_seconds: Some(s),
                    })
                    .into_iter()
                    .collect(),
            }),
        }
    }

    #[test]
    fn the_summary_names_the_longest_gaps_of_the_run() {
        let report = ConvertReport {
            components: vec![
                (Component::ApiServer, done(2, 0.25, None)),
                (Component::ControllerManager, done(0, 0.0, Some(0.3))),
                (Component::Scheduler, done(0, 0.0, Some(0.4))),
            ],
            backup_dir: PathBuf::from("/b"),
            checkpointer: None,
        };
        assert_eq!(report.figures().len(), 3);
        assert_eq!(
            report.figures_summary().as_deref(),
            Some(
                "API gap 0.25s (2 of 30 /readyz probes failed); longest leaderless gap 0.40s \
                 (kube-scheduler)"
            )
        );
    }

    #[test]
    fn a_run_that_converted_nothing_has_no_figures() {
        let report = ConvertReport {
            components: vec![(
                Component::ApiServer,
                ComponentOutcome::RolledBack { reason: "x".into() },
            )],
            backup_dir: PathBuf::from("/b"),
            checkpointer: None,
        };
        assert_eq!(report.figures(), vec![]);
        assert_eq!(report.figures_summary(), None);
    }
}
