//! Messages for people on stderr (results go to stdout).

use std::io::Write;

/// Prints `warning: <message>` on stderr. A closed stderr is not worth failing the command.
pub fn warn(message: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr(), "warning: {message}");
}
