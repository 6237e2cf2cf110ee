//! What the table tests of several decision modules share.

/// A failure line for each of `mentions` that a step's serialised `text` does not contain.
pub(crate) fn missing_mentions(
    case: &str,
    step: &str,
    text: &str,
    mentions: &[&str],
) -> Vec<String> {
    mentions
        .iter()
        .filter(|mention| !text.contains(*mention))
        .map(|mention| format!("{case}: {step} does not mention {mention:?}: {text}"))
        .collect()
}

/// The failure lines of one row of a phase table: the phase found is not the one expected,
/// or the step decided is not one of the phase found's `steps`.
pub(crate) fn phase_row_failures(
    case: &str,
    expected: &str,
    found: &str,
    step: &str,
    steps: &[&str],
) -> Vec<String> {
    let mut failures = Vec::new();
    if found != expected {
        failures.push(format!("{case}: expected {expected}, got {found}"));
    }
    if !steps.contains(&step) {
        failures.push(format!("{case}: {step} is not a step of {found}"));
    }
    failures
}

/// Asserts that the `failures` are none and that the table's rows cover every phase name.
pub(crate) fn assert_phase_table(
    failures: &[String],
    covered: impl IntoIterator<Item = &'static str>,
    all: impl IntoIterator<Item = &'static str>,
) {
    use std::collections::BTreeSet;
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    let covered: BTreeSet<&str> = covered.into_iter().collect();
    let all: BTreeSet<&str> = all.into_iter().collect();
    assert_eq!(covered, all, "a row for every phase");
}
