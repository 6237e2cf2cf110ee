use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::resources::{DAEMONSETS, EVENTS, NODES, PODS};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_grammar_parses_into_the_apiservers_canonical_form() {
    // input → canonical printing (requirements sorted by key, values sorted, deduplicated)
    let cases = [
        ("", ""),
        ("k8s-app=kube-apiserver", "k8s-app=kube-apiserver"),
        ("a==b", "a==b"),
        (" a != b ", "a!=b"),
        ("tier in (web, api,web)", "tier in (api,web)"),
        ("tier notin (x)", "tier notin (x)"),
        ("a,!b", "a,!b"),
        ("z=1,a=2", "a=2,z=1"),
        (
            "x in (foo,,baz),y,z notin ()",
            "x in (,baz,foo),y,z notin ()",
        ),
        ("a=", "a="),
        ("a in (in, notin)", "a in (in,notin)"),
        ("in in (x)", "in in (x)"),
        ("gen>3", "gen>3"),
        ("gen<3", "gen<3"),
        (
            "app.kubernetes.io/name=selfhost",
            "app.kubernetes.io/name=selfhost",
        ),
    ];
    for (input, canonical) in cases {
        let selector = LabelSelector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(selector.to_string(), canonical, "{input:?}");
    }
}

#[test]
fn bad_selectors_are_refused_with_the_apiservers_words() {
    let cases = [
        ("a b", "found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a,", "found '', expected: identifier after ','"),
        (
            ",a",
            "found ',', expected: !, identifier, or 'end of string'",
        ),
        ("a in b", "found 'b' expected: '('"),
        ("a in (b", "found '', expected: ',' or ')'"),
        ("a=(", "found '(', expected: identifier"),
        ("a (b)", "found '(', expected: in, notin, =, ==, !=, gt, lt"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        (
            "gen>x",
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer",
        ),
        (
            "a@b=c",
            "unable to parse requirement: <nil>: Invalid value: \"a@b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ),
    ];
    for (input, message) in cases {
        let err = LabelSelector::parse(input).expect_err(input);
        assert_eq!(err.to_string(), message, "{input:?}");
        assert_eq!(err.to_api_error().code, 400);
    }
    let err = LabelSelector::parse("a=-x-").expect_err("bad value");
    assert!(err.to_string().starts_with(
        "unable to parse requirement: values[0][a]: Invalid value: \"-x-\": a valid label must be"
    ));
}

#[test]
fn requirements_match_like_the_apiserver() {
    let pod = labels(&[
        ("k8s-app", "kube-apiserver"),
        ("tier", "control-plane"),
        ("gen", "7"),
    ]);
    let cases = [
        ("", true),
        ("k8s-app=kube-apiserver", true),
        ("k8s-app==kube-scheduler", false),
        ("k8s-app!=kube-scheduler", true),
        ("missing!=x", true),
        ("tier in (control-plane,node)", true),
        ("tier notin (control-plane)", false),
        ("missing notin (x)", true),
        ("missing in (x)", false),
        ("tier", true),
        ("!tier", false),
        ("!missing", true),
        ("gen>6,gen<8", true),
        ("gen>7", false),
        ("tier>1", false),
        ("k8s-app=kube-apiserver,!tier", false),
    ];
    for (input, expected) in cases {
        let selector = LabelSelector::parse(input).expect(input);
        assert_eq!(selector.matches(&pod), expected, "{input:?}");
    }
    let object = json!({"metadata": {"labels": {"tier": "control-plane"}}});
    assert!(
        LabelSelector::parse("tier")
            .expect("valid")
            .matches_object(&object)
    );
    assert!(
        LabelSelector::parse("!tier")
            .expect("valid")
            .matches_object(&json!({"metadata": {}}))
    );
}

#[test]
fn object_selectors_follow_metav1_semantics() {
    let pod = labels(&[("k8s-app", "kube-apiserver"), ("tier", "control-plane")]);
    let null = LabelSelector::from_label_selector_json(&json!(null)).expect("null is valid");
    assert!(null.is_nothing() && !null.matches(&pod) && !null.matches(&BTreeMap::new()));
    let empty = LabelSelector::from_label_selector_json(&json!({})).expect("{} is valid");
    assert!(empty.is_everything() && empty.matches(&pod));

    let selector = LabelSelector::from_label_selector_json(&json!({
        "matchLabels": {"k8s-app": "kube-apiserver"},
        "matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["control-plane", "node"]},
            {"key": "gone", "operator": "DoesNotExist"},
            {"key": "tier", "operator": "Exists"},
        ]
    }))
    .expect("valid selector");
    assert!(selector.matches(&pod));
    assert_eq!(
        selector.to_string(),
        "!gone,k8s-app=kube-apiserver,tier in (control-plane,node),tier"
    );
    assert!(!selector.matches(&labels(&[("k8s-app", "kube-apiserver")])));

    let err = LabelSelector::from_label_selector_json(&json!({
        "matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]
    }))
    .expect_err("Gt is not an object-selector operator");
    assert_eq!(
        err.to_string(),
        "\"Gt\" is not a valid label selector operator"
    );
    let err = LabelSelector::from_label_selector_json(&json!({
        "matchExpressions": [{"key": "a", "operator": "In", "values": []}]
    }))
    .expect_err("In needs values");
    assert!(
        err.to_string().contains("values set can't be empty"),
        "{err}"
    );
    let err = LabelSelector::from_label_selector_json(&json!({"matchLabels": {"a": "b c"}}))
        .expect_err("bad value");
    assert!(
        err.to_string()
            .starts_with("values[0][a]: Invalid value: \"b c\""),
        "{err}"
    );
}

#[test]
fn field_selectors_accept_the_kinds_selectable_fields() {
    let pod = json!({
        "metadata": {"name": "kube-apiserver-cp-1", "namespace": "kube-system"},
        "spec": {"nodeName": "cp-1", "hostNetwork": true},
        "status": {"phase": "Running"}
    });
    let cases = [
        ("", true),
        ("spec.nodeName=cp-1", true),
        ("spec.nodeName==cp-2", false),
        ("spec.nodeName!=cp-2,status.phase=Running", true),
        (
            "metadata.name=kube-apiserver-cp-1,metadata.namespace=kube-system",
            true,
        ),
        ("status.phase!=Running", false),
        ("spec.hostNetwork=true", true),
        ("spec.schedulerName=", true),
        ("status.podIP!=", false),
    ];
    for (input, expected) in cases {
        let selector =
            FieldSelector::parse(input, &PODS).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        assert_eq!(selector.matches(&pod), expected, "{input:?}");
    }
    let selector =
        FieldSelector::parse("spec.nodeName==cp-1,metadata.name!=x", &PODS).expect("valid");
    assert_eq!(selector.to_string(), "metadata.name!=x,spec.nodeName=cp-1");
    assert_eq!(selector.requires_exact("spec.nodeName"), Some("cp-1"));
    assert_eq!(selector.requires_exact("metadata.name"), None);

    let event =
        json!({"involvedObject": {"kind": "Pod", "name": "p"}, "source": {"component": "kubelet"}});
    let selector =
        FieldSelector::parse("involvedObject.kind=Pod,source=kubelet", &EVENTS).expect("valid");
    assert!(selector.matches(&event));
    let node = json!({"metadata": {"name": "cp-1"}, "spec": {}});
    assert!(
        FieldSelector::parse("spec.unschedulable=false", &NODES)
            .expect("valid")
            .matches(&node)
    );
    let escaped = FieldSelector::parse(r"metadata.name=a\,b\=c", &DAEMONSETS).expect("valid");
    assert!(escaped.matches(&json!({"metadata": {"name": "a,b=c"}})));
    assert_eq!(escaped.to_string(), r"metadata.name=a\,b\=c");
}

#[test]
fn unsupported_or_malformed_field_selectors_are_refused() {
    let cases = [
        (
            "spec.nodeName=cp-1",
            &DAEMONSETS,
            "field label not supported: spec.nodeName",
        ),
        (
            "metadata.namespace=x",
            &NODES,
            "field label not supported: metadata.namespace",
        ),
        (
            "status.phase",
            &PODS,
            "invalid selector: 'status.phase'; can't understand 'status.phase'",
        ),
        (
            r"metadata.name=a\b",
            &PODS,
            r"invalid field selector: invalid escape sequence: \b",
        ),
        (
            "metadata.name=a=b",
            &PODS,
            "invalid field selector: unescaped character in value: =",
        ),
    ];
    for (input, rt, message) in cases {
        let err = FieldSelector::parse(input, rt).expect_err(input);
        assert_eq!(err.to_string(), message, "{input:?}");
    }
}

fn key_strategy() -> impl Strategy<Value = String> {
    let name = "[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,10}[a-zA-Z0-9])?";
    prop_oneof![
        name.prop_map(|n| n.to_string()),
        ("[a-z0-9]{1,5}(\\.[a-z0-9]{1,5}){0,2}", name).prop_map(|(p, n)| format!("{p}/{n}")),
    ]
}

fn value_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,8}[a-zA-Z0-9])?"
    ]
}

fn requirement_strategy() -> impl Strategy<Value = Requirement> {
    let op = prop_oneof![
        Just(Operator::Equals),
        Just(Operator::DoubleEquals),
        Just(Operator::NotEquals),
        Just(Operator::In),
        Just(Operator::NotIn),
        Just(Operator::Exists),
        Just(Operator::DoesNotExist),
        Just(Operator::GreaterThan),
        Just(Operator::LessThan),
    ];
    (
        key_strategy(),
        op,
        prop::collection::vec(value_strategy(), 1..4),
        0i64..50,
    )
        .prop_map(|(key, op, values, number)| {
            let values = match op {
                Operator::Exists | Operator::DoesNotExist => vec![],
                Operator::In | Operator::NotIn => values,
                Operator::GreaterThan | Operator::LessThan => vec![number.to_string()],
                _ => values[..1].to_vec(),
            };
            Requirement::new(&key, op, values).expect("strategy only builds valid requirements")
        })
}

proptest! {
    #[test]
    fn printing_then_parsing_gives_the_same_selector(
        requirements in prop::collection::vec(requirement_strategy(), 0..5),
        label_set in prop::collection::btree_map(key_strategy(), value_strategy(), 0..5),
    ) {
        let selector = LabelSelector::from_requirements(requirements);
        let reparsed = LabelSelector::parse(&selector.to_string())
            .map_err(|e| TestCaseError::fail(format!("{selector}: {e}")))?;
        prop_assert_eq!(&reparsed, &selector);
        prop_assert_eq!(reparsed.matches(&label_set), selector.matches(&label_set));
    }

    #[test]
    fn a_selector_built_from_a_label_set_matches_exactly_its_supersets(
        set in prop::collection::btree_map(key_strategy(), value_strategy(), 1..5),
        extra_key in key_strategy(),
    ) {
        let requirements = set
            .iter()
            .map(|(k, v)| Requirement::new(k, Operator::Equals, vec![v.clone()]).expect("valid"))
            .collect();
        let selector = LabelSelector::from_requirements(requirements);
        prop_assert!(selector.matches(&set));
        let mut superset = set.clone();
        superset.entry(extra_key).or_insert_with(|| "x".into());
        prop_assert!(selector.matches(&superset));
        let mut changed = set.clone();
        if let Some((_, v)) = changed.iter_mut().next() {
            v.push('z');
        }
        prop_assert!(!selector.matches(&changed));
    }

    #[test]
    fn parsing_never_panics(input in "\\PC{0,40}") {
        let _ = LabelSelector::parse(&input);
        let _ = FieldSelector::parse(&input, &PODS);
    }
}
