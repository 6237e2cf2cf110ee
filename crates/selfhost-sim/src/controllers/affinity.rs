//! Whether a node satisfies a pod's `nodeSelector` and required node affinity, with the
//! semantics of `component-helpers/scheduling/corev1/nodeaffinity` that both the scheduler and
//! the DaemonSet controller use.
//!
//! - `nodeSelector`: every key must be present with the same value.
//! - `requiredDuringSchedulingIgnoredDuringExecution`: the terms are ORed; inside a term, every
//!   `matchExpressions` (on labels) and `matchFields` (only `metadata.name`) requirement must
//!   hold. An empty term matches nothing; a term with an invalid requirement (unknown operator,
//!   `Gt` with a non-integer, an unsupported field) is skipped, as upstream ignores it.

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, PodSpec};

use super::objects;

/// The only field node selectors may use.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// The outcome of one node selector term against one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TermMatch {
    /// Every requirement of the term holds.
    Matches,
    /// The term is valid but some requirement does not hold (or the term is empty).
    DoesNotMatch,
    /// The term cannot be evaluated; upstream skips such terms.
    Invalid(String),
}

/// Evaluates one term against a node.
pub fn match_term(term: &NodeSelectorTerm, node: &Node) -> TermMatch {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return TermMatch::DoesNotMatch;
    }
    let labels = objects::labels(&node.metadata);
    let mut all = true;
    for requirement in expressions {
        match label_requirement(
            requirement,
            labels.get(&requirement.key).map(String::as_str),
        ) {
            Ok(holds) => all &= holds,
            Err(why) => return TermMatch::Invalid(why),
        }
    }
    let name = node.metadata.name.as_deref().unwrap_or_default();
    for requirement in fields {
        match field_requirement(requirement, name) {
            Ok(holds) => all &= holds,
            Err(why) => return TermMatch::Invalid(why),
        }
    }
    if all {
        TermMatch::Matches
    } else {
        TermMatch::DoesNotMatch
    }
}

fn values(requirement: &NodeSelectorRequirement) -> &[String] {
    requirement.values.as_deref().unwrap_or_default()
}

fn label_requirement(r: &NodeSelectorRequirement, value: Option<&str>) -> Result<bool, String> {
    let values = values(r);
    let need_values = |ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(format!(
                "invalid values for operator {:?} on key {:?}",
                r.operator, r.key
            ))
        }
    };
    match r.operator.as_str() {
        "In" => {
            need_values(!values.is_empty())?;
            Ok(value.is_some_and(|v| values.iter().any(|x| x == v)))
        }
        "NotIn" => {
            need_values(!values.is_empty())?;
            Ok(!value.is_some_and(|v| values.iter().any(|x| x == v)))
        }
        "Exists" => {
            need_values(values.is_empty())?;
            Ok(value.is_some())
        }
        "DoesNotExist" => {
            need_values(values.is_empty())?;
            Ok(value.is_none())
        }
        "Gt" | "Lt" => {
            let [bound] = values else {
                return Err(format!(
                    "{} needs exactly one value on key {:?}",
                    r.operator, r.key
                ));
            };
            let bound: i64 = bound
                .parse()
                .map_err(|_| format!("{} value {bound:?} is not an integer", r.operator))?;
            let Some(actual) = value.and_then(|v| v.parse::<i64>().ok()) else {
                return Ok(false);
            };
            Ok(if r.operator == "Gt" {
                actual > bound
            } else {
                actual < bound
            })
        }
        other => Err(format!("{other:?} is not a valid node selector operator")),
    }
}

fn field_requirement(r: &NodeSelectorRequirement, node_name: &str) -> Result<bool, String> {
    if r.key != NODE_NAME_FIELD {
        return Err(format!(
            "{:?} is not a supported node field selector key",
            r.key
        ));
    }
    let values = values(r);
    if values.is_empty() {
        return Err(format!("{} needs values on {NODE_NAME_FIELD}", r.operator));
    }
    let listed = values.iter().any(|v| v == node_name);
    match r.operator.as_str() {
        "In" => Ok(listed),
        "NotIn" => Ok(!listed),
        other => Err(format!(
            "{other:?} is not a valid node field selector operator"
        )),
    }
}

/// Whether the node carries every `nodeSelector` label.
pub fn node_selector_matches(spec: &PodSpec, node: &Node) -> bool {
    let labels = objects::labels(&node.metadata);
    spec.node_selector
        .as_ref()
        .is_none_or(|wanted| wanted.iter().all(|(k, v)| labels.get(k) == Some(v)))
}

/// Whether the node satisfies the required node affinity (true when there is none).
pub fn required_affinity_matches(spec: &PodSpec, node: &Node) -> bool {
    let Some(required) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return true;
    };
    required
        .node_selector_terms
        .iter()
        .any(|term| match_term(term, node) == TermMatch::Matches)
}

/// `nodeSelector` and required node affinity together: what the scheduler's NodeAffinity
/// filter and the DaemonSet controller check.
pub fn node_matches(spec: &PodSpec, node: &Node) -> bool {
    node_selector_matches(spec, node) && required_affinity_matches(spec, node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelector};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn spec_with_terms(terms: Vec<NodeSelectorTerm>) -> PodSpec {
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

    fn expressions(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(reqs),
            match_fields: None,
        }
    }

    fn fields(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(reqs),
        }
    }

    #[test]
    fn label_operators() {
        let n = node("n1", &[("zone", "a"), ("cores", "8")]);
        let cases = [
            (req("zone", "In", &["a", "b"]), TermMatch::Matches),
            (req("zone", "In", &["b"]), TermMatch::DoesNotMatch),
            (req("zone", "NotIn", &["b"]), TermMatch::Matches),
            (req("missing", "NotIn", &["b"]), TermMatch::Matches),
            (req("zone", "Exists", &[]), TermMatch::Matches),
            (req("missing", "DoesNotExist", &[]), TermMatch::Matches),
            (req("zone", "DoesNotExist", &[]), TermMatch::DoesNotMatch),
            (req("cores", "Gt", &["4"]), TermMatch::Matches),
            (req("cores", "Lt", &["4"]), TermMatch::DoesNotMatch),
            (req("zone", "Gt", &["4"]), TermMatch::DoesNotMatch),
        ];
        for (requirement, expected) in cases {
            let label = format!("{requirement:?}");
            assert_eq!(
                match_term(&expressions(vec![requirement]), &n),
                expected,
                "{label}"
            );
        }
        for bad in [
            req("zone", "Equals", &["a"]),
            req("zone", "In", &[]),
            req("zone", "Exists", &["a"]),
            req("cores", "Gt", &["x"]),
        ] {
            assert!(matches!(
                match_term(&expressions(vec![bad]), &n),
                TermMatch::Invalid(_)
            ));
        }
    }

    #[test]
    fn field_terms_select_by_node_name_only() {
        let n = node("cp-1", &[]);
        assert_eq!(
            match_term(&fields(vec![req(NODE_NAME_FIELD, "In", &["cp-1"])]), &n),
            TermMatch::Matches
        );
        assert_eq!(
            match_term(&fields(vec![req(NODE_NAME_FIELD, "NotIn", &["cp-1"])]), &n),
            TermMatch::DoesNotMatch
        );
        assert!(matches!(
            match_term(&fields(vec![req("metadata.uid", "In", &["x"])]), &n),
            TermMatch::Invalid(_)
        ));
        assert_eq!(
            match_term(&NodeSelectorTerm::default(), &n),
            TermMatch::DoesNotMatch
        );
    }

    #[test]
    fn terms_are_ored_and_invalid_terms_are_skipped() {
        let n = node("w-1", &[("role", "worker")]);
        let spec = spec_with_terms(vec![
            expressions(vec![req("role", "Bogus", &["x"])]),
            expressions(vec![req("role", "In", &["worker"])]),
        ]);
        assert!(required_affinity_matches(&spec, &n));
        let spec = spec_with_terms(vec![expressions(vec![
            req("role", "In", &["worker"]),
            req("zone", "Exists", &[]),
        ])]);
        assert!(
            !required_affinity_matches(&spec, &n),
            "requirements in a term are ANDed"
        );
        assert!(!required_affinity_matches(&spec_with_terms(vec![]), &n));
        assert!(required_affinity_matches(&PodSpec::default(), &n));
    }

    #[test]
    fn node_selector_needs_every_label() {
        let n = node("w-1", &[("a", "1"), ("b", "2")]);
        let spec = |pairs: &[(&str, &str)]| PodSpec {
            node_selector: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..PodSpec::default()
        };
        assert!(node_matches(&spec(&[("a", "1")]), &n));
        assert!(node_matches(&spec(&[("a", "1"), ("b", "2")]), &n));
        assert!(!node_matches(&spec(&[("a", "2")]), &n));
        assert!(!node_matches(&spec(&[("c", "")]), &n));
    }
}
