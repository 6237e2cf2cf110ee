//! Pieces of the policy's messages.

use super::findings::Severity;
use crate::version::MinorVersion;
use std::borrow::Cow;
use std::fmt;

/// How many names a message lists before it says "and N more": a cluster of a thousand nodes
/// must not produce a message of a thousand names.
pub(super) const NAMES_SHOWN: usize = 5;

/// A list of names (nodes, kube-apiservers) for a message: `a, b, c and 4 more`.
pub(super) struct NameList<'a> {
    names: Vec<Cow<'a, str>>,
}

impl<'a> NameList<'a> {
    pub(super) fn new<S: Into<Cow<'a, str>>>(names: impl IntoIterator<Item = S>) -> Self {
        NameList {
            names: names.into_iter().map(Into::into).collect(),
        }
    }
}

impl fmt::Display for NameList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = self.names.iter().take(NAMES_SHOWN);
        for (index, name) in shown.enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            f.write_str(name)?;
        }
        if self.names.len() > NAMES_SHOWN {
            write!(f, " and {} more", self.names.len() - NAMES_SHOWN)?;
        }
        Ok(())
    }
}

/// The end of a finding's message: what `--force` does about it.
pub(super) struct Tail {
    severity: Severity,
    forced: bool,
}

impl Tail {
    pub(super) fn new(severity: Severity, forced: bool) -> Self {
        Tail { severity, forced }
    }

    /// Whether the finding refuses the upgrade.
    pub(super) fn blocking(&self) -> bool {
        self.severity == Severity::Mandatory || !self.forced
    }
}

impl fmt::Display for Tail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (self.severity, self.forced) {
            (Severity::Mandatory, false) => "",
            (Severity::Mandatory, true) => "; --force does not override this check",
            (Severity::Skippable, false) => ", or pass --force to proceed at your own risk",
            (Severity::Skippable, true) => "; proceeding anyway because --force was given",
        })
    }
}

/// How many intermediate steps a message spells out before it summarises the way.
const STEPS_SPELLED: u64 = 4;

/// The way from one minor to another of the same major, one minor at a time: "upgrade to
/// v1.34.x first, then to v1.35.x".
pub(super) fn steps(verb: &str, from: MinorVersion, to: MinorVersion) -> String {
    let up = to > from;
    let step = |minor: MinorVersion| {
        if up {
            Some(minor.next())
        } else {
            minor.previous()
        }
    };
    let Some(first) = step(from) else {
        return format!("{verb} to {to}.x");
    };
    let count = to.minor().abs_diff(from.minor());
    if count > STEPS_SPELLED {
        return format!("{verb} to {first}.x first, then one minor version at a time to {to}.x");
    }
    let mut text = format!("{verb} to {first}.x first");
    let mut current = first;
    for _ in 1..count {
        let Some(next) = step(current) else { break };
        current = next;
        text.push_str(&format!(", then to {current}.x"));
    }
    text
}

/// At most 32 characters of a value reported by a node, for quoting it in a message.
pub(super) fn shorten(value: &str) -> Cow<'_, str> {
    const SHOWN: usize = 32;
    match value.char_indices().nth(SHOWN) {
        Some((cut, _)) => Cow::Owned(format!("{}…", &value[..cut])),
        None => Cow::Borrowed(value),
    }
}
