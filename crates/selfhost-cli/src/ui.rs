//! Messages for people on stderr (results go to stdout).

use std::io::{BufRead, IsTerminal, Write};

use crate::exit::CliError;

/// Prints `warning: <message>` on stderr. A closed stderr is not worth failing the command.
pub fn warn(message: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr(), "warning: {message}");
}

/// Rows as a plain table with columns padded to their widest cell, like kubectl's.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                let pad = widths[i] - cell.chars().count() + 3;
                out.push_str(cell);
                out.push_str(&" ".repeat(pad));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// Writes `text` to stdout. A stdout closed by its reader (`selfhost status | head -1`) is
/// the reader's choice, not a failure: the command goes on to end with its own outcome, so
/// that a refusal or a failed upgrade keeps its exit code.
pub fn print(text: &str) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("writing to stdout"),
    }
}

/// Writes one value as a single JSON line on stdout (`-o json` event streams). An object gets
/// the `schema` of the stream's shape, so that a program reading it can tell a shape it does
/// not know.
pub fn json_line<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut value = serde_json::to_value(value).context("rendering JSON")?;
    if let serde_json::Value::Object(fields) = &mut value {
        fields.insert("schema".into(), selfhost::EVENTS_SCHEMA.into());
    }
    let line = serde_json::to_string(&value).context("rendering JSON")?;
    print(&(line + "\n"))
}

/// Writes `message` on stderr, plainly.
pub fn say(message: impl std::fmt::Display) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

/// One value as JSON or YAML, for `-o json|yaml`.
pub fn structured<T: serde::Serialize>(
    value: &T,
    format: crate::args::OutputFormat,
) -> anyhow::Result<String> {
    use anyhow::Context;
    Ok(match format {
        crate::args::OutputFormat::Yaml => selfhost::to_yaml(value).context("rendering YAML")?,
        _ => serde_json::to_string_pretty(value).context("rendering JSON")? + "\n",
    })
}

/// Asks `question` on stderr and reads y/yes from a terminal; a run that is not interactive is
/// refused (exit 2) with the flag that answers for it.
pub fn confirm(question: &str) -> Result<bool, CliError> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(CliError::bad_input(anyhow::anyhow!(
            "refusing to change the cluster without confirmation: this run is not interactive; pass --yes"
        )));
    }
    let _ = write!(std::io::stderr(), "{question} [y/N]: ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .map_err(|e| CliError::bad_input(anyhow::anyhow!(e)))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn columns_are_padded_to_the_widest_cell() {
        let text = super::table(
            &["A", "LONGER"],
            &[
                vec!["wide cell".into(), "x".into()],
                vec!["b".into(), "y".into()],
            ],
        );
        assert_eq!(text, "A           LONGER\nwide cell   x\nb           y\n");
    }
}
