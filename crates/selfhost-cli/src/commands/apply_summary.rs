//! The end of `apply`: per component, the disruption the plan expected on this cluster next to
//! what the engine measured.

use selfhost::report::ComponentDisruption;
use selfhost::{ApiImpact, ExpectedDisruption};

/// The expected effect on API clients, in words.
fn expected_api(expected: &ExpectedDisruption) -> String {
    match &expected.api {
        ApiImpact::None => "no failed requests".to_string(),
        ApiImpact::ListenBeforeServe { windows, window_ms } => format!(
            "{windows} windows of ~{:.1}s with some failed new connections",
            *window_ms as f64 / 1000.0
        ),
        ApiImpact::Outage { up_to_seconds } => format!("an outage of up to {up_to_seconds}s"),
    }
}

/// One line per component, after a heading; empty when no component was worked on.
pub fn lines(disruption: &[ComponentDisruption]) -> Vec<String> {
    if disruption.is_empty() {
        return Vec::new();
    }
    let mut out = vec![
        "disruption, expected → measured by selfhost's own probes and Lease watch:".to_string(),
    ];
    for d in disruption {
        let (expected, measured) = (&d.expected, &d.measured);
        // No ": " after a component's name: that shape is kept for timed progress lines.
        let probes = match measured.health_probes {
            0 => "no /readyz probe made meanwhile".to_string(),
            n => format!(
                "{} of {n} /readyz probes failed",
                measured.failed_health_probes
            ),
        };
        let mut line = format!(
            "  {}, {:.1}s; API {} → {probes}",
            d.component,
            measured.wall_seconds,
            expected_api(expected),
        );
        if measured.failed_health_probes > 0 {
            line.push_str(&format!(
                " (longest {:.1}s)",
                measured.longest_failing_seconds
            ));
        }
        if measured.draining_health_probes > 0 {
            line.push_str(&format!(
                ", {} answered by a draining apiserver",
                measured.draining_health_probes
            ));
        }
        let changes = measured.leader_changes.len();
        if let Some(bound) = expected.leaderless_gap_seconds {
            line.push_str(&format!(
                "; leader ≤ {} changes of ≤ {bound}s without a leader → {changes}",
                expected.leader_changes
            ));
            match measured.longest_leaderless_seconds() {
                Some(longest) => {
                    line.push_str(&format!(", longest {longest:.2}s without a leader"))
                }
                None if changes > 0 => line.push_str(", gaps unknown"),
                None => {}
            }
        } else if changes > 0 {
            line.push_str(&format!("; {changes} controller leader changes meanwhile"));
            if let Some(longest) = measured.longest_leaderless_seconds() {
                line.push_str(&format!(", longest {longest:.2}s without a leader"));
            }
        }
        out.push(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use selfhost::report::{LeaderChange, MeasuredDisruption};
    use selfhost::{Component, HandOver};

    use super::*;

    fn expected(component: Component, api: ApiImpact, gap: Option<u64>) -> ExpectedDisruption {
        ExpectedDisruption {
            component,
            hand_over: if gap.is_some() {
                HandOver::Lease
            } else {
                HandOver::Balancer
            },
            api,
            leaderless_gap_seconds: gap,
            leader_changes: if gap.is_some() { 2 } else { 0 },
            requires_accept_downtime: false,
            blocked: None,
            fix: None,
            explanation: Vec::new(),
        }
    }

    fn measured(failed: u32, draining: u32, gaps: &[f64]) -> MeasuredDisruption {
        MeasuredDisruption {
            wall_seconds: 3.26,
            health_probes: 12,
            failed_health_probes: failed,
            draining_health_probes: draining,
            longest_failing_seconds: 0.5,
            leader_changes: gaps
                .iter()
                .map(|g| LeaderChange {
                    lease: "kube-scheduler".into(),
                    from: Some("a".into()),
                    to: "b".into(),
                    leaderless_seconds: Some(*g),
                })
                .collect(),
        }
    }

    #[test]
    fn each_component_gets_its_expected_and_measured_figures() {
        let report = vec![
            ComponentDisruption {
                component: Component::ApiServer,
                expected: expected(
                    Component::ApiServer,
                    ApiImpact::ListenBeforeServe {
                        windows: 2,
                        window_ms: 1_700,
                    },
                    None,
                ),
                measured: measured(1, 2, &[]),
            },
            ComponentDisruption {
                component: Component::Scheduler,
                expected: expected(Component::Scheduler, ApiImpact::None, Some(3)),
                measured: measured(0, 0, &[0.04, 0.12]),
            },
        ];
        let lines = lines(&report);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        assert_eq!(
            lines[1],
            "  kube-apiserver, 3.3s; API 2 windows of ~1.7s with some failed new connections \
             → 1 of 12 /readyz probes failed (longest 0.5s), 2 answered by a draining apiserver"
        );
        assert_eq!(
            lines[2],
            "  kube-scheduler, 3.3s; API no failed requests → 0 of 12 /readyz probes failed; \
             leader ≤ 2 changes of ≤ 3s without a leader → 2, longest 0.12s without a leader"
        );
        assert!(super::lines(&[]).is_empty());
    }
}
