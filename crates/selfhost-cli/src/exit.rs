//! Exit codes (docs/design.md, "Exit codes") and the errors that carry them.

use std::fmt;
use std::process::ExitCode;

use selfhost::ErrorKind;

/// How a command ended, as the exit code tells scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 0: done.
    Done,
    /// 1: failed and rolled back; the cluster is as before.
    RolledBack,
    /// 2: usage or bad input; nothing was changed.
    BadInput,
    /// 3: a preflight check refused; nothing was changed.
    Refused,
    /// 4: failed and NOT restored; the message says what state the cluster is in.
    NotRestored,
}

impl Outcome {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Outcome::Done => 0,
            Outcome::RolledBack => 1,
            Outcome::BadInput => 2,
            Outcome::Refused => 3,
            Outcome::NotRestored => 4,
        }
    }

    /// Its name in a `-o json` result line.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::RolledBack => "rolled-back",
            Outcome::BadInput => "bad-input",
            Outcome::Refused => "refused",
            Outcome::NotRestored => "not-restored",
        }
    }
}

impl From<Outcome> for ExitCode {
    fn from(outcome: Outcome) -> Self {
        ExitCode::from(outcome.code())
    }
}

/// An error that ends the command with a particular outcome.
#[derive(Debug)]
pub struct CliError {
    /// The exit code it ends with.
    pub outcome: Outcome,
    /// What went wrong, with its causes.
    pub error: anyhow::Error,
}

impl CliError {
    /// Bad input from the user: exit 2.
    pub fn bad_input(error: impl Into<anyhow::Error>) -> Self {
        CliError {
            outcome: Outcome::BadInput,
            error: error.into(),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

/// An engine error ends the command with the outcome its kind calls for.
impl From<selfhost::Error> for CliError {
    fn from(error: selfhost::Error) -> Self {
        let outcome = match error.kind() {
            ErrorKind::BadInput => Outcome::BadInput,
            ErrorKind::Refused => Outcome::Refused,
            ErrorKind::Failed => Outcome::RolledBack,
            ErrorKind::NotRestored => Outcome::NotRestored,
        };
        CliError {
            outcome,
            error: error.into(),
        }
    }
}

/// An error that escapes a command without a classification exits 1, "failed, the cluster
/// is as it was": it stopped the command before any change of its own (a write that fails
/// mid-upgrade is classified by the command, as exit 4).
impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> Self {
        CliError {
            outcome: Outcome::RolledBack,
            error,
        }
    }
}
