//! The `checkpointers` check: whether every control-plane node runs the checkpointer. It never
//! refuses (the upgrade does not need it), but an upgrade is when a reboot is most likely, and
//! a node without it does not come back from a power cut of every node.

use super::{Check, CheckId, Verdict};
use crate::checkpoint::{CheckpointerState, NodeCheckpointer};

/// The check for each control-plane node's checkpointer (`nodes` empty: they could not be
/// listed).
pub fn checkpointers_check(nodes: &[NodeCheckpointer]) -> Check {
    let missing: Vec<&NodeCheckpointer> = nodes
        .iter()
        .filter(|n| n.state != CheckpointerState::Running)
        .collect();
    let (verdict, message, fix) = if nodes.is_empty() {
        (
            Verdict::NotRun,
            "the control-plane nodes or their checkpointers' pods could not be listed".to_string(),
            None,
        )
    } else if missing.is_empty() {
        (
            Verdict::Pass,
            format!("every control-plane node runs one ({})", nodes.len()),
            None,
        )
    } else {
        let each: Vec<String> = missing
            .iter()
            .map(|n| match &n.state {
                CheckpointerState::NotRunning { why } => format!("{}: NOT running: {why}", n.node),
                _ => format!("{}: none", n.node),
            })
            .collect();
        let names: Vec<&str> = missing.iter().map(|n| n.node.as_str()).collect();
        (
            Verdict::Warn,
            format!(
                "{}; a power cut of every control-plane node, during the upgrade or after it, \
                 leaves the control plane down",
                each.join("; ")
            ),
            Some(format!(
                "on {}: `selfhost checkpoint install --node <node>` (see `selfhost status`)",
                names.join(", ")
            )),
        )
    };
    Check {
        id: CheckId::Checkpointers,
        component: None,
        verdict,
        message,
        fix,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, state: CheckpointerState) -> NodeCheckpointer {
        NodeCheckpointer {
            node: name.into(),
            state,
        }
    }

    #[test]
    fn verdicts() {
        let rows: Vec<(&str, Vec<NodeCheckpointer>, Verdict, &[&str])> = vec![
            (
                "every node runs one",
                vec![
                    node("cp-1", CheckpointerState::Running),
                    node("cp-2", CheckpointerState::Running),
                ],
                Verdict::Pass,
                &["every control-plane node runs one (2)"],
            ),
            (
                "one node without, one whose pod does not run: a warning naming both",
                vec![
                    node("cp-1", CheckpointerState::Running),
                    node("cp-2", CheckpointerState::None),
                    node(
                        "cp-3",
                        CheckpointerState::NotRunning {
                            why: "its container waits: ErrImagePull".into(),
                        },
                    ),
                ],
                Verdict::Warn,
                &[
                    "cp-2: none",
                    "cp-3: NOT running: its container waits: ErrImagePull",
                    "power cut",
                ],
            ),
            (
                "nothing could be listed: not run",
                vec![],
                Verdict::NotRun,
                &["could not be listed"],
            ),
        ];
        for (case, nodes, verdict, mentions) in rows {
            let check = checkpointers_check(&nodes);
            assert_eq!(check.verdict, verdict, "{case}");
            for m in mentions {
                assert!(
                    check.message.contains(m),
                    "{case}: {m:?} in {}",
                    check.message
                );
            }
            assert_eq!(check.fix.is_some(), verdict == Verdict::Warn, "{case}");
        }
    }

    #[test]
    fn the_fix_names_the_nodes_without_one() {
        let check = checkpointers_check(&[
            node("cp-1", CheckpointerState::None),
            node("cp-2", CheckpointerState::Running),
        ]);
        let fix = check.fix.unwrap_or_default();
        assert!(
            fix.starts_with("on cp-1: `selfhost checkpoint install"),
            "{fix}"
        );
    }
}
