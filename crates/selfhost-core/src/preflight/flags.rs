//! The `flags-and-gates` check: every flag and `--feature-gates` entry of the templates the
//! target runs, against what the target release removed or locked (see [`crate::removals`]).
//! A component that would exit at start fails the check; a gate set to its locked value warns.

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{Check, CheckId, ClusterObservation, PreflightTarget, Report, Verdict};
use crate::command_line::template_command_line;
use crate::component::Component;
use crate::removals::{self, Coverage, Finding, NEWEST_KNOWN};
use crate::version::MinorVersion;

/// The findings for one component's target template at `target`, each a check; `origin` says
/// where an operator edits the template (a DaemonSet, a static pod's file).
pub fn flags_and_gates(
    component: Component,
    template: &PodTemplateSpec,
    target: MinorVersion,
    origin: &str,
) -> Vec<Check> {
    let line = template_command_line(template, component.name());
    removals::findings(component, &line, target)
        .into_iter()
        .map(|finding| Check {
            id: CheckId::FlagsAndGates,
            component: Some(component),
            verdict: if finding.refuses_start() {
                Verdict::Fail
            } else {
                Verdict::Warn
            },
            message: format!(
                "{} {target}: {finding} (source: {})",
                if finding.refuses_start() {
                    "refused by"
                } else {
                    "ignored by"
                },
                finding.source()
            ),
            fix: Some(format!("edit {origin}: {}", finding.fix())),
        })
        .collect()
}

/// The check's one line when no template has a finding: a pass, or a warning when the target
/// is newer than the tables.
pub fn flags_and_gates_clean(target: MinorVersion, templates: usize) -> Check {
    let (verdict, message, fix) = match removals::coverage(target) {
        Coverage::Known => (
            Verdict::Pass,
            format!(
                "no flag or feature gate that {target} removed or locked in the {templates} target \
                 templates"
            ),
            None,
        ),
        Coverage::Beyond => (
            Verdict::Warn,
            format!(
                "checked against the removals known up to {NEWEST_KNOWN} only: {target}'s own \
                 are not in selfhost's tables"
            ),
            Some(format!(
                "read the release notes of {target} for removed flags and feature gates"
            )),
        ),
    };
    Check {
        id: CheckId::FlagsAndGates,
        component: None,
        verdict,
        message,
        fix,
    }
}

/// Adds the check over every target template of an upgrade, and over the live templates: a
/// finding only the live template has is one the upgrade drops, which an operator should see.
pub(super) fn check(report: &mut Report, cluster: &ClusterObservation, target: &PreflightTarget) {
    let minor = target.version.minor_version();
    let mut found = false;
    for (component, template) in &target.templates {
        let origin = match &target.templates_edited_in {
            Some(config) => format!("{config}, {component}'s extraArgs"),
            None => format!("the DaemonSet kube-system/{}", component.daemonset_name()),
        };
        let checks = flags_and_gates(*component, template, minor, &origin);
        let in_target: Vec<Finding> = removals::findings(
            *component,
            &template_command_line(template, component.name()),
            minor,
        );
        found |= !checks.is_empty();
        report.0.extend(checks);
        let Some(live) = cluster.component(*component).and_then(|o| o.real.as_ref()) else {
            continue;
        };
        let live_line = template_command_line(&live.template, component.name());
        for finding in removals::findings(*component, &live_line, minor) {
            if in_target.iter().any(|t| t.subject() == finding.subject()) {
                continue;
            }
            found = true;
            report.add(
                CheckId::FlagsAndGates,
                Some(*component),
                Verdict::Warn,
                format!(
                    "the live template's {} is not in the target template, so the upgrade drops \
                     it: {finding}",
                    finding.subject()
                ),
                Some(format!(
                    "nothing, if losing it is meant (see the diff); otherwise {}",
                    finding.fix()
                )),
            );
        }
    }
    if !found {
        report
            .0
            .push(flags_and_gates_clean(minor, target.templates.len()));
    }
}
