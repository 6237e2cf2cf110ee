//! What a demo run measured, side by side, and the verdict.

use std::time::Duration;

use selfhost::report::{ClientConnections, ProbeFailure, ProbeKind, Table};
use selfhost_sim::cluster::{ProbeReport, ProbeSeries};
use tokio::time::Instant;

/// The availability figures of one upgrade on one simulated cluster.
#[derive(Debug, Clone)]
pub struct Figures {
    /// What was upgraded how: `selfhost apply` or `naive set image`.
    pub label: &'static str,
    /// How the upgrade ended, in a few words.
    pub outcome: String,
    /// Whether it reached the target.
    pub upgraded: bool,
    /// What each kind of client's prober recorded.
    pub probes: Vec<(ClientConnections, ProbeReport)>,
    /// When the upgrade started.
    pub from: Instant,
    /// The stretches in which the API answered nothing at all (the simulator's model).
    pub outages: Vec<(Instant, Instant)>,
    /// Whether the API was still down when the run ended.
    pub down_at_end: bool,
    /// API requests the upgrading client made (the prober's are not counted).
    pub requests: u64,
}

fn ok_failed(series: &ProbeSeries) -> String {
    format!(
        "{} / {}",
        series.attempts() - series.failures(),
        series.failures()
    )
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

impl Figures {
    /// Failed probes, reads and writes, of every kind of client.
    pub fn failed_probes(&self) -> usize {
        self.probes
            .iter()
            .map(|(_, p)| p.reads.failures() + p.writes.failures())
            .sum()
    }

    /// What the prober of `kind` recorded, if one ran.
    fn probes_of(&self, kind: ClientConnections) -> Option<&ProbeReport> {
        self.probes.iter().find(|(k, _)| *k == kind).map(|(_, p)| p)
    }

    /// Whether the API was fully down at some moment.
    pub fn went_down(&self) -> bool {
        !self.outages.is_empty()
    }

    fn down_text(&self) -> String {
        if self.outages.is_empty() {
            return "never".into();
        }
        let total: Duration = self.outages.iter().map(|(a, b)| b.duration_since(*a)).sum();
        if self.down_at_end {
            let since = self.outages.last().map_or(Duration::ZERO, |(a, _)| {
                a.saturating_duration_since(self.from)
            });
            format!(
                "since {} and never back ({} in all)",
                secs(since),
                secs(total)
            )
        } else {
            format!("{} time(s), {} in all", self.outages.len(), secs(total))
        }
    }
}

/// The failed probes of one prober on a time axis that starts at `zero`, for the report.
pub fn failures_since(probes: &ProbeReport, zero: Instant) -> Vec<ProbeFailure> {
    let mut out: Vec<ProbeFailure> = [
        (&probes.reads, ProbeKind::Read),
        (&probes.writes, ProbeKind::Write),
    ]
    .into_iter()
    .flat_map(|(series, kind)| {
        series
            .samples
            .iter()
            .filter(|s| !s.ok)
            .map(move |s| ProbeFailure {
                at: s.started.saturating_duration_since(zero).as_secs_f64(),
                kind,
                error: s.error.clone().unwrap_or_default(),
            })
    })
    .collect();
    out.sort_by(|a, b| a.at.total_cmp(&b.at));
    out
}

/// The side-by-side table: one column per run, the probes' rows per kind of client.
pub fn comparison(runs: &[&Figures]) -> Table {
    let mut headers = vec![String::new()];
    headers.extend(runs.iter().map(|r| r.label.to_string()));
    let row = |name: &str, cell: &dyn Fn(&Figures) -> String| {
        let mut row = vec![name.to_string()];
        row.extend(runs.iter().map(|r| cell(r)));
        row
    };
    let mut kinds: Vec<ClientConnections> = Vec::new();
    for (kind, _) in runs.iter().flat_map(|r| &r.probes) {
        if !kinds.contains(kind) {
            kinds.push(*kind);
        }
    }
    let mut rows = vec![row("upgrade", &|r| r.outcome.clone())];
    for kind in kinds {
        let of = |r: &Figures, cell: &dyn Fn(&ProbeReport) -> String| {
            r.probes_of(kind).map_or_else(|| "-".to_string(), cell)
        };
        let name = kind.label();
        rows.push(row(&format!("{name}: probe reads ok / failed"), &|r| {
            of(r, &|p| ok_failed(&p.reads))
        }));
        rows.push(row(&format!("{name}: probe writes ok / failed"), &|r| {
            of(r, &|p| ok_failed(&p.writes))
        }));
        rows.push(row(
            &format!("{name}: longest time without a successful read"),
            &|r| of(r, &|p| secs(p.reads.longest_gap())),
        ));
        if kind == ClientConnections::KeepAlive {
            // Only a reused connection can be closed under a request and replayed.
            rows.push(row(
                &format!("{name}: probes replayed by the client's transport"),
                &|r| of(r, &|p| p.replayed().to_string()),
            ));
        }
    }
    rows.push(row("API fully down", &|r| r.down_text()));
    rows.push(row("API requests by the upgrading client", &|r| {
        r.requests.to_string()
    }));
    Table {
        title: "Summary".into(),
        headers,
        rows,
    }
}

/// The demo's verdict: selfhost upgraded and the API never went fully down; on three nodes
/// or more (behind a load balancer) not a single probe failed either.
pub fn verdict(selfhost: &Figures, nodes: usize, naive: Option<&Figures>) -> (bool, String) {
    let mut text = if !selfhost.upgraded {
        format!("selfhost did not finish the upgrade: {}.", selfhost.outcome)
    } else if selfhost.went_down() {
        "selfhost upgraded the control plane, but the API went fully down.".to_string()
    } else if nodes >= 3 && selfhost.failed_probes() > 0 {
        format!(
            "selfhost upgraded the control plane and the API never went down, but {} probe(s) \
             failed; on {nodes} nodes none should (see why above).",
            selfhost.failed_probes()
        )
    } else {
        format!(
            "selfhost upgraded the control plane; the API never went down ({} failed probe(s)).",
            selfhost.failed_probes()
        )
    };
    let success =
        selfhost.upgraded && !selfhost.went_down() && (nodes < 3 || selfhost.failed_probes() == 0);
    if let Some(naive) = naive {
        text.push(' ');
        text.push_str(&if naive.down_at_end {
            "The naive upgrade deadlocked: the API went down and never came back, because \
             the pod that would replace the apiserver can only be learnt of through the \
             apiserver."
                .to_string()
        } else if !naive.upgraded {
            format!("The naive upgrade did not finish: {}.", naive.outcome)
        } else if naive.went_down() || naive.failed_probes() > 0 {
            format!(
                "The naive upgrade finished, with {} failed probe(s){}.",
                naive.failed_probes(),
                if naive.went_down() {
                    " and the API fully down at times"
                } else {
                    ""
                }
            )
        } else {
            "The naive upgrade also finished without a failed probe.".to_string()
        });
    }
    (success, text)
}

/// Per run, why the client's transport sent probes again (as Go's does, on a reused
/// connection the server closed before answering), with how often.
pub fn replay_reasons(runs: &[&Figures]) -> String {
    let mut out = String::new();
    for run in runs {
        for (kind, probes) in &run.probes {
            for (reason, n) in probes.replay_reasons() {
                out.push_str(&format!(
                    "  {}, {}: {n} x {reason}\n",
                    run.label,
                    kind.label()
                ));
            }
        }
    }
    out
}

/// Per run, the distinct reasons probes failed, with how often: `  selfhost apply: 2 x read: ...`.
pub fn failure_reasons(runs: &[&Figures]) -> String {
    let mut out = String::new();
    for run in runs {
        for (client, probes) in &run.probes {
            let mut counts: std::collections::BTreeMap<(&'static str, String), usize> =
                std::collections::BTreeMap::new();
            for (series, kind) in [(&probes.reads, "read"), (&probes.writes, "write")] {
                for sample in series.samples.iter().filter(|s| !s.ok) {
                    let reason = sample.error.clone().unwrap_or_default();
                    *counts.entry((kind, reason)).or_default() += 1;
                }
            }
            // A deadlocked cluster fails every probe the same way; a few lines say it all.
            for ((kind, reason), n) in counts.into_iter().take(4) {
                out.push_str(&format!(
                    "  {}, {}: {n} x {kind}: {reason}\n",
                    run.label,
                    client.label()
                ));
            }
        }
    }
    out
}
