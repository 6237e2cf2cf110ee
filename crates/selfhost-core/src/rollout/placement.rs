//! Which control-plane nodes a DaemonSet's pod template is meant to run on, whatever the
//! DaemonSet's status says at the moment.
//!
//! The DaemonSet controller counts a node in `desiredNumberScheduled` only while a new daemon
//! pod could be placed there, and a node whose Ready condition is not True carries the
//! `node.kubernetes.io/not-ready:NoSchedule` taint, which daemon pods do not tolerate: while it
//! does, the node leaves the desired count and a pod deleted there is not created again. A
//! rollout judged by the status alone then looks complete with that node left without the
//! component. So the nodes a rollout must cover are read from the template itself: its node
//! selector, its required node affinity and its tolerations of every taint but the ones the
//! node lifecycle controller sets and lifts with the node's conditions.

use k8s_openapi::api::core::v1::{
    NodeSelectorRequirement, NodeSelectorTerm, PodTemplateSpec, Taint, Toleration,
};

use crate::observation::NodeObservation;

/// The prefix of the taints the node lifecycle controller derives from a node's conditions
/// (`not-ready`, `unreachable`, `unschedulable`, the pressure taints): they come and go with
/// the node's health, and the DaemonSet controller tolerates the ones that are not about
/// readiness by itself.
const CONDITION_TAINT_PREFIX: &str = "node.kubernetes.io/";

/// The node field a required node affinity can select on.
const NODE_NAME_FIELD: &str = "metadata.name";

/// Whether `template` is meant to run a pod on `node` once the node is healthy: its node
/// selector and required node affinity select the node, and it tolerates every `NoSchedule`
/// and `NoExecute` taint of the node that is not a condition taint.
pub fn places_on(template: &PodTemplateSpec, node: &NodeObservation) -> bool {
    let Some(spec) = template.spec.as_ref() else {
        return true;
    };
    let selected = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(key, value)| node.labels.get(key) == Some(value));
    let terms = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|s| s.node_selector_terms.as_slice())
        .unwrap_or_default();
    // Terms are alternatives; no terms select every node.
    let affine = terms.is_empty() || terms.iter().any(|term| term_matches(term, node));
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    let tolerated = node
        .taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .filter(|t| !t.key.starts_with(CONDITION_TAINT_PREFIX))
        .all(|taint| tolerations.iter().any(|t| tolerates(t, taint)));
    selected && affine && tolerated
}

/// Whether one node selector term matches: every requirement of it holds.
fn term_matches(term: &NodeSelectorTerm, node: &NodeObservation) -> bool {
    let labels = term
        .match_expressions
        .iter()
        .flatten()
        .all(|r| requirement_holds(r, node.labels.get(&r.key).map(String::as_str)));
    let fields = term.match_fields.iter().flatten().all(|r| {
        let value = (r.key == NODE_NAME_FIELD).then_some(node.name.as_str());
        requirement_holds(r, value)
    });
    labels && fields
}

/// Whether `requirement` holds for a label or field whose value is `value` (`None`: absent).
fn requirement_holds(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let listed = || value.is_some_and(|v| values.iter().any(|w| w == v));
    let number = |s: &str| s.parse::<i64>().ok();
    let compared = |wanted: fn(i64, i64) -> bool| match (
        value.and_then(number),
        values.first().and_then(|w| number(w)),
    ) {
        (Some(v), Some(w)) => wanted(v, w),
        _ => false,
    };
    match requirement.operator.as_str() {
        "In" => listed(),
        "NotIn" => !listed(),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compared(|v, w| v > w),
        "Lt" => compared(|v, w| v < w),
        _ => false,
    }
}

/// Whether `toleration` tolerates `taint`, by the scheduler's rule.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key = toleration.key.as_deref().unwrap_or_default();
    let matches = match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        _ => {
            key == taint.key
                && toleration.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
        }
    };
    effect && matches
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelector, PodSpec};

    use super::*;
    use crate::observation::NodeReadiness;

    const CP: &str = "node-role.kubernetes.io/control-plane";
    const GATE: &str = "selfhost.dev/self-hosted-kube-scheduler";

    fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str)]) -> NodeObservation {
        NodeObservation {
            name: name.into(),
            hostname: Some(name.into()),
            ready: NodeReadiness::Ready,
            ready_since: None,
            unschedulable: false,
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taints: taints
                .iter()
                .map(|(key, effect)| Taint {
                    key: key.to_string(),
                    effect: effect.to_string(),
                    ..Taint::default()
                })
                .collect(),
        }
    }

    fn template(spec: PodSpec) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: None,
            spec: Some(spec),
        }
    }

    fn requirement(key: &str, operator: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn with_affinity(terms: Vec<NodeSelectorTerm>) -> PodSpec {
        PodSpec {
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: terms,
                    }),
                    ..NodeAffinity::default()
                }),
                ..Affinity::default()
            }),
            ..PodSpec::default()
        }
    }

    #[test]
    fn a_node_selector_must_match_every_label() {
        let gated = PodSpec {
            node_selector: Some(BTreeMap::from([
                (CP.to_string(), String::new()),
                (GATE.to_string(), "true".to_string()),
            ])),
            ..PodSpec::default()
        };
        let labelled = node("cp-1", &[(CP, ""), (GATE, "true")], &[]);
        let unlabelled = node("cp-2", &[(CP, "")], &[]);
        assert!(places_on(&template(gated.clone()), &labelled));
        assert!(!places_on(&template(gated), &unlabelled));
        assert!(places_on(&template(PodSpec::default()), &unlabelled));
    }

    #[test]
    fn required_node_affinity_terms_are_alternatives_of_requirements() {
        let excluded = with_affinity(vec![NodeSelectorTerm {
            match_fields: Some(vec![requirement(NODE_NAME_FIELD, "NotIn", &["cp-1"])]),
            ..NodeSelectorTerm::default()
        }]);
        assert!(!places_on(
            &template(excluded.clone()),
            &node("cp-1", &[], &[])
        ));
        assert!(places_on(&template(excluded), &node("cp-2", &[], &[])));
        let either = with_affinity(vec![
            NodeSelectorTerm {
                match_expressions: Some(vec![requirement("zone", "In", &["a"])]),
                ..NodeSelectorTerm::default()
            },
            NodeSelectorTerm {
                match_expressions: Some(vec![requirement("rank", "Gt", &["2"])]),
                ..NodeSelectorTerm::default()
            },
        ]);
        let cases = [
            (node("n", &[("zone", "a")], &[]), true),
            (node("n", &[("zone", "b"), ("rank", "3")], &[]), true),
            (node("n", &[("zone", "b"), ("rank", "2")], &[]), false),
            (node("n", &[], &[]), false),
        ];
        for (n, expected) in cases {
            assert_eq!(places_on(&template(either.clone()), &n), expected, "{n:?}");
        }
    }

    #[test]
    fn condition_taints_keep_a_node_but_other_untolerated_taints_do_not() {
        let tolerating_cp = PodSpec {
            tolerations: Some(vec![Toleration {
                key: Some(CP.into()),
                operator: Some("Exists".into()),
                effect: Some("NoSchedule".into()),
                ..Toleration::default()
            }]),
            ..PodSpec::default()
        };
        let cases = [
            (vec![(CP, "NoSchedule")], true),
            (
                vec![
                    (CP, "NoSchedule"),
                    ("node.kubernetes.io/not-ready", "NoSchedule"),
                    ("node.kubernetes.io/not-ready", "NoExecute"),
                ],
                true,
            ),
            (vec![("dedicated", "NoSchedule")], false),
            (vec![("dedicated", "PreferNoSchedule")], true),
        ];
        for (taints, expected) in cases {
            let n = node("cp-1", &[], &taints);
            assert_eq!(
                places_on(&template(tolerating_cp.clone()), &n),
                expected,
                "{taints:?}"
            );
        }
    }
}
