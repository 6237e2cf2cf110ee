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
