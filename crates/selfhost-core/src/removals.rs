//! What a Kubernetes release no longer accepts on a control-plane component's command line:
//! flags it removed, feature gates it stopped recognising, and gates it locked to a value. A
//! template that carries one starts a component that exits at once, so preflight names every
//! such finding before the first change (see `preflight/flags.rs`).
//!
//! [`apis`] holds the API versions each release stops serving, for the `removed-apis` check.
//!
//! The tables (`removals/flags.rs`, `removals/gates.rs`, `removals/apis.rs`) hold one row per removal with the
//! release that made it and the source of the fact; [`NEWEST_KNOWN`] is the newest release
//! they have been checked against.

pub mod apis;
mod flags;
mod gates;
#[cfg(test)]
mod tests;

use std::fmt;

use serde::Serialize;

use crate::command_line::{flag_names, flag_values};
use crate::component::Component;
use crate::version::MinorVersion;

/// The newest release whose removals the tables hold; a newer target is checked against what
/// is known and said to be so.
pub const NEWEST_KNOWN: MinorVersion = m(35);

/// The release line `v1.minor`, for the tables.
pub(crate) const fn m(minor: u64) -> MinorVersion {
    MinorVersion::new(1, minor)
}

/// A flag that a component no longer accepts from a release on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemovedFlag {
    /// The component whose binary dropped it.
    pub component: Component,
    /// The flag's name, without the dashes.
    pub flag: &'static str,
    /// The first release that refuses it.
    pub removed_in: MinorVersion,
    /// What to use instead.
    pub instead: &'static str,
    /// Where the fact comes from.
    pub source: &'static str,
}

/// A feature gate that no component recognises from a release on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemovedGate {
    /// The gate's name.
    pub gate: &'static str,
    /// The first release that does not know it.
    pub removed_in: MinorVersion,
    /// Where the fact comes from.
    pub source: &'static str,
}

/// A feature gate locked to a value from a release on (GA, or deprecated and forced off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockedGate {
    /// The gate's name.
    pub gate: &'static str,
    /// The first release that refuses the other value.
    pub locked_in: MinorVersion,
    /// The only value accepted.
    pub value: bool,
    /// Where the fact comes from.
    pub source: &'static str,
}

/// One thing on a command line that the target release refuses or warns about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// A flag the target no longer accepts: the component exits at start.
    RemovedFlag(&'static RemovedFlag),
    /// A feature gate the target does not recognise: the component exits at start.
    RemovedGate(&'static RemovedGate),
    /// A locked gate set to the value the target refuses: the component exits at start.
    LockedAgainst(&'static LockedGate),
    /// A locked gate set to its locked value: accepted, but a later release removes the gate.
    Locked(&'static LockedGate),
}

impl Finding {
    /// Whether the component would refuse to start.
    pub fn refuses_start(&self) -> bool {
        !matches!(self, Finding::Locked(_))
    }

    /// The flag or `--feature-gates` entry as the command line carries it.
    pub fn subject(&self) -> String {
        match self {
            Finding::RemovedFlag(row) => format!("--{}", row.flag),
            Finding::RemovedGate(row) => format!("feature gate {}", row.gate),
            Finding::LockedAgainst(row) => format!("feature gate {}={}", row.gate, !row.value),
            Finding::Locked(row) => format!("feature gate {}={}", row.gate, row.value),
        }
    }

    /// Where the fact comes from.
    pub fn source(&self) -> &'static str {
        match self {
            Finding::RemovedFlag(row) => row.source,
            Finding::RemovedGate(row) => row.source,
            Finding::LockedAgainst(row) | Finding::Locked(row) => row.source,
        }
    }

    /// What to do about it.
    pub fn fix(&self) -> String {
        match self {
            Finding::RemovedFlag(row) => format!("drop --{}; instead: {}", row.flag, row.instead),
            Finding::RemovedGate(row) => format!(
                "drop {} from --feature-gates: the behaviour it chose is now the only one",
                row.gate
            ),
            Finding::LockedAgainst(row) => format!(
                "drop {} from --feature-gates: it can no longer be {}",
                row.gate, !row.value
            ),
            Finding::Locked(row) => format!(
                "drop {} from --feature-gates before a later release removes it",
                row.gate
            ),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::RemovedFlag(row) => write!(
                f,
                "--{} was removed in {}: the binary exits with `unknown flag`",
                row.flag, row.removed_in
            ),
            Finding::RemovedGate(row) => write!(
                f,
                "feature gate {} was removed in {}: the binary exits with `unrecognized feature \
                 gate`",
                row.gate, row.removed_in
            ),
            Finding::LockedAgainst(row) => write!(
                f,
                "feature gate {} is locked to {} since {}: setting it to {} stops the binary at \
                 start",
                row.gate, row.value, row.locked_in, !row.value
            ),
            Finding::Locked(row) => write!(
                f,
                "feature gate {} is locked to {} since {}: setting it has no effect",
                row.gate, row.value, row.locked_in
            ),
        }
    }
}

/// Where the tables stand for a target release, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Coverage {
    /// The tables have been checked against the target.
    Known,
    /// The target is newer than [`NEWEST_KNOWN`]: its own removals are not in the tables.
    Beyond,
}

/// Whether the tables cover `target`.
pub fn coverage(target: MinorVersion) -> Coverage {
    if target > NEWEST_KNOWN {
        Coverage::Beyond
    } else {
        Coverage::Known
    }
}

/// Every finding on `component`'s command line (command, then args) for a binary of release
/// `target`, flags first, each once.
pub fn findings(
    component: Component,
    command_line: &[String],
    target: MinorVersion,
) -> Vec<Finding> {
    let mut out = Vec::new();
    for name in flag_names(command_line) {
        let removed = flags::REMOVED_FLAGS
            .iter()
            .find(|row| row.component == component && row.flag == name && row.removed_in <= target);
        if let Some(row) = removed {
            push_once(&mut out, Finding::RemovedFlag(row));
        }
    }
    for (gate, value) in gate_settings(command_line) {
        if let Some(finding) = gate_finding(gate, value, target) {
            push_once(&mut out, finding);
        }
    }
    out
}

fn push_once(out: &mut Vec<Finding>, finding: Finding) {
    if !out.contains(&finding) {
        out.push(finding);
    }
}

/// What the target makes of one gate setting; a removal outranks a lock.
fn gate_finding(gate: &str, value: bool, target: MinorVersion) -> Option<Finding> {
    if let Some(row) = gates::REMOVED_GATES
        .iter()
        .find(|row| row.gate == gate && row.removed_in <= target)
    {
        return Some(Finding::RemovedGate(row));
    }
    let row = gates::LOCKED_GATES
        .iter()
        .find(|row| row.gate == gate && row.locked_in <= target)?;
    Some(if value == row.value {
        Finding::Locked(row)
    } else {
        Finding::LockedAgainst(row)
    })
}

/// Every `Gate=bool` of every `--feature-gates` occurrence, in order. An entry that is not
/// `Name=bool` is left to the binary to refuse.
fn gate_settings(command_line: &[String]) -> Vec<(&str, bool)> {
    flag_values(command_line, "feature-gates")
        .flat_map(|list| list.split(','))
        .filter_map(|entry| {
            let (name, value) = entry.split_once('=')?;
            Some((name.trim(), parse_bool(value.trim())?))
        })
        .collect()
}

/// A boolean as Go's `strconv.ParseBool` reads it, which the gates' flag uses.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}
