//! Unit tests of field ownership.

use super::fields::{FieldPath, FieldSet, display_path, fields_of, get_path, parse_trie, to_trie};
use super::*;
use crate::resources::DAEMONSETS;

fn ds(image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "d", "labels": {"a": "1"}},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": image}]}}}
    })
}

#[test]
fn applied_fields_use_keys_for_containers() {
    let f = fields_of(&DAEMONSETS, Subresource::Main, &ds("i:1"));
    let image: FieldPath = [
        "f:spec",
        "f:template",
        "f:spec",
        "f:containers",
        "k:{\"name\":\"c\"}",
        "f:image",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert!(f.contains(&image), "{f:?}");
    assert!(!f.iter().any(|p| p[0] == "f:kind"));
    assert_eq!(
        display_path(&image),
        ".spec.template.spec.containers[name=\"c\"].image"
    );
    assert_eq!(get_path(&ds("i:1"), &image), Some(&json!("i:1")));
}

#[test]
fn fields_round_trip_through_fields_v1() {
    let f = fields_of(&DAEMONSETS, Subresource::Main, &ds("i:1"));
    let mut parsed = FieldSet::new();
    parse_trie(&to_trie(&f), &mut Vec::new(), &mut parsed);
    assert_eq!(parsed, f);
}

#[test]
fn a_second_manager_conflicts_unless_forced() {
    let live = apply(
        &DAEMONSETS,
        Subresource::Main,
        "a",
        false,
        None,
        &ds("i:1"),
        ds("i:1"),
    )
    .unwrap();
    let err = apply(
        &DAEMONSETS,
        Subresource::Main,
        "b",
        false,
        Some(&live),
        &ds("i:2"),
        ds("i:2"),
    )
    .unwrap_err();
    assert_eq!(err.code, 409);
    assert!(
        err.message.contains("conflict with \"a\""),
        "{}",
        err.message
    );
    let forced = apply(
        &DAEMONSETS,
        Subresource::Main,
        "b",
        true,
        Some(&live),
        &ds("i:2"),
        ds("i:2"),
    )
    .unwrap();
    let owners: Vec<String> = managers(&forced).into_iter().map(|m| m.manager).collect();
    assert!(owners.contains(&"b".to_string()));
    // The same value is shared, not a conflict.
    assert!(
        apply(
            &DAEMONSETS,
            Subresource::Main,
            "b",
            false,
            Some(&live),
            &ds("i:1"),
            ds("i:1")
        )
        .is_ok()
    );
}

#[test]
fn fields_a_manager_stops_applying_are_removed() {
    let live = apply(
        &DAEMONSETS,
        Subresource::Main,
        "a",
        false,
        None,
        &ds("i:1"),
        ds("i:1"),
    )
    .unwrap();
    let mut without_labels = ds("i:1");
    without_labels["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("labels");
    let merged = live.clone();
    let out = apply(
        &DAEMONSETS,
        Subresource::Main,
        "a",
        false,
        Some(&live),
        &without_labels,
        merged,
    )
    .unwrap();
    assert!(
        out["metadata"]
            .get("labels")
            .is_none_or(|l| l.get("a").is_none()),
        "{out}"
    );
}

#[test]
fn updates_take_changed_fields_from_appliers() {
    let live = apply(
        &DAEMONSETS,
        Subresource::Main,
        "a",
        false,
        None,
        &ds("i:1"),
        ds("i:1"),
    )
    .unwrap();
    let mut new = live.clone();
    new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("i:9");
    record_update(
        &DAEMONSETS,
        Subresource::Main,
        "kubectl-set",
        Some(&live),
        &mut new,
    );
    let err = apply(
        &DAEMONSETS,
        Subresource::Main,
        "a",
        false,
        Some(&new),
        &ds("i:1"),
        ds("i:1"),
    )
    .unwrap_err();
    assert!(err.message.contains("kubectl-set"), "{}", err.message);
}
