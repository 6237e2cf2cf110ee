//! The `api-fronts` check: where the kube-apiserver DaemonSet listens behind the nodes' API
//! fronts, every control-plane node must run its front. A node without one has nothing on its
//! API address, and a pivot there has no front to move new connections to the backup.

use super::{Check, CheckId, Verdict};
use crate::node_fronts::{FrontState, NodeApiFront};

/// The check for each control-plane node's front, where the kube-apiserver listens `behind`
/// them (`None` where no node has a front and the kube-apiserver listens behind none).
pub fn api_fronts_check(behind: bool, fronts: &[NodeApiFront]) -> Option<Check> {
    if !behind && fronts.iter().all(|f| f.state == FrontState::None) {
        return None;
    }
    let missing: Vec<&NodeApiFront> = fronts
        .iter()
        .filter(|f| f.state != FrontState::Running)
        .collect();
    let (verdict, message, fix) = if missing.is_empty() {
        (
            Verdict::Pass,
            format!("every control-plane node runs one ({})", fronts.len()),
            None,
        )
    } else {
        let each: Vec<String> = missing
            .iter()
            .map(|f| format!("{}: {}", f.node, f.state))
            .collect();
        let names: Vec<&str> = missing.iter().map(|f| f.node.as_str()).collect();
        if behind {
            (
                Verdict::Fail,
                format!(
                    "{}; the kube-apiserver listens behind the fronts, so such a node serves \
                     nothing on its API address and its pivot has no front to move connections",
                    each.join("; ")
                ),
                Some(format!(
                    "on {}: `selfhost front install --node <node>` (see `selfhost status`)",
                    names.join(", ")
                )),
            )
        } else {
            (
                Verdict::Warn,
                format!(
                    "{}; the kube-apiserver does not listen behind the fronts yet, so they \
                     pass every connection to it as it is",
                    each.join("; ")
                ),
                Some(format!(
                    "on {}: `selfhost front install --node <node>`",
                    names.join(", ")
                )),
            )
        }
    };
    Some(Check {
        id: CheckId::ApiFronts,
        component: None,
        verdict,
        message,
        fix,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, state: FrontState) -> NodeApiFront {
        NodeApiFront {
            node: name.into(),
            state,
            backends: Vec::new(),
        }
    }

    #[test]
    fn verdicts() {
        let not_running = FrontState::NotRunning {
            why: "its container waits: ErrImagePull".into(),
        };
        // (why, behind fronts, the nodes' fronts, verdict, what the message says)
        type Row = (
            &'static str,
            bool,
            Vec<NodeApiFront>,
            Option<Verdict>,
            &'static str,
        );
        let rows: Vec<Row> = vec![
            (
                "no front anywhere, none needed",
                false,
                vec![node("cp-1", FrontState::None)],
                None,
                "",
            ),
            (
                "behind fronts, each node runs one",
                true,
                vec![
                    node("cp-1", FrontState::Running),
                    node("cp-2", FrontState::Running),
                ],
                Some(Verdict::Pass),
                "every control-plane node runs one (2)",
            ),
            (
                "behind fronts, one node has none: refused",
                true,
                vec![
                    node("cp-1", FrontState::Running),
                    node("cp-2", FrontState::None),
                ],
                Some(Verdict::Fail),
                "cp-2: none",
            ),
            (
                "behind fronts, one does not run: refused",
                true,
                vec![node("cp-1", not_running.clone())],
                Some(Verdict::Fail),
                "cp-1: NOT running: its container waits: ErrImagePull",
            ),
            (
                "fronts being installed before the kube-apiserver moves behind them",
                false,
                vec![
                    node("cp-1", FrontState::Running),
                    node("cp-2", FrontState::None),
                ],
                Some(Verdict::Warn),
                "does not listen behind the fronts yet",
            ),
        ];
        for (why, behind, fronts, verdict, says) in rows {
            let check = api_fronts_check(behind, &fronts);
            assert_eq!(check.as_ref().map(|c| c.verdict), verdict, "{why}");
            if let Some(check) = check {
                assert!(check.message.contains(says), "{why}: {}", check.message);
                assert_eq!(check.verdict == Verdict::Pass, check.fix.is_none(), "{why}");
            }
        }
    }
}
