//! Field ownership (`metadata.managedFields`) for server-side apply and updates.
//!
//! Simpler than the real structured-merge-diff, and documented so:
//! - list semantics come from a table of well-known field names (containers by `name`,
//!   volumeMounts by `mountPath`, ports by `containerPort`, conditions by `type`, finalizers as
//!   a set) instead of the OpenAPI schema; every other list is atomic;
//! - ownership is kept per leaf field; a manager that applies the same value as another
//!   shares the field, `force` takes it over;
//! - a manager's applied fields it no longer applies are removed from the object unless
//!   another manager owns them (as in real SSA), but only for map fields and whole keyed or set
//!   list items.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::meta;
use super::strategy::Subresource;
use crate::error::ApiError;
use crate::resources::ResourceType;

/// One field path in the fieldsV1 notation: `f:spec`, `k:{"name":"c"}`, `v:"x"`, `.`.
pub(crate) type FieldPath = Vec<String>;
/// A set of owned fields.
pub(crate) type FieldSet = BTreeSet<FieldPath>;

/// How a list field merges, by its name.
enum ListKind {
    Keyed(&'static [&'static str]),
    Set,
    Atomic,
}

fn list_kind(field: &str) -> ListKind {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets" => ListKind::Keyed(&["name"]),
        "volumeMounts" => ListKind::Keyed(&["mountPath"]),
        "volumeDevices" => ListKind::Keyed(&["devicePath"]),
        "ports" => ListKind::Keyed(&["containerPort", "protocol"]),
        "hostAliases" => ListKind::Keyed(&["ip"]),
        "conditions" => ListKind::Keyed(&["type"]),
        "finalizers" => ListKind::Set,
        _ => ListKind::Atomic,
    }
}

/// Metadata fields nobody owns.
const UNOWNED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Whether a field path belongs to the given subresource of a type.
fn in_scope(rt: &ResourceType, sub: Subresource, path: &FieldPath) -> bool {
    let first = path.first().map(String::as_str).unwrap_or("");
    if first == "f:apiVersion" || first == "f:kind" {
        return false;
    }
    if first == "f:metadata"
        && path
            .get(1)
            .is_some_and(|f| UNOWNED_METADATA.iter().any(|u| f == &format!("f:{u}")))
    {
        return false;
    }
    let is_status = first == "f:status";
    match sub {
        Subresource::Status => is_status,
        Subresource::Finalize => {
            first == "f:spec" && path.get(1).is_some_and(|f| f == "f:finalizers")
        }
        Subresource::Main => !(is_status && rt.has_status),
    }
}

/// The key of a keyed list item, in fieldsV1 notation, if the item has all key fields.
fn item_key(item: &Value, keys: &[&str]) -> Option<String> {
    let mut k = Map::new();
    for key in keys {
        match item.get(*key) {
            Some(v) => {
                k.insert((*key).to_string(), v.clone());
            }
            // `protocol` defaults to TCP and is optional in a port key.
            None if *key == "protocol" => {}
            None => return None,
        }
    }
    Some(format!("k:{}", Value::Object(k)))
}

fn walk(new: &Value, old: Option<&Value>, field: &str, path: &mut FieldPath, out: &mut FieldSet) {
    match new {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                path.push(format!("f:{k}"));
                walk(child, old.and_then(|o| o.get(k)), k, path, out);
                path.pop();
            }
        }
        Value::Array(items) => match list_kind(field) {
            ListKind::Keyed(keys) if items.iter().all(|i| item_key(i, keys).is_some()) => {
                for item in items {
                    let Some(key) = item_key(item, keys) else {
                        continue;
                    };
                    let old_item = old
                        .and_then(Value::as_array)
                        .and_then(|a| a.iter().find(|o| item_key(o, keys).as_ref() == Some(&key)));
                    path.push(key);
                    if old.is_none() || old_item.is_none() {
                        path.push(".".into());
                        out.insert(path.clone());
                        path.pop();
                    }
                    walk(item, old_item, "", path, out);
                    path.pop();
                }
            }
            ListKind::Set if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
                for item in items {
                    let known = old
                        .and_then(Value::as_array)
                        .is_some_and(|a| a.contains(item));
                    if !known {
                        path.push(format!("v:{item}"));
                        out.insert(path.clone());
                        path.pop();
                    }
                }
            }
            _ => {
                if old != Some(new) {
                    out.insert(path.clone());
                }
            }
        },
        _ => {
            if old != Some(new) {
                out.insert(path.clone());
            }
        }
    }
}

/// Every field set in `obj` (an applied configuration), within the subresource's scope.
pub(crate) fn fields_of(rt: &ResourceType, sub: Subresource, obj: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    walk(obj, None, "", &mut Vec::new(), &mut out);
    out.retain(|p| in_scope(rt, sub, p));
    out
}

/// The fields whose value differs between `old` and `new` (or that `new` adds).
pub(crate) fn changed_fields(
    rt: &ResourceType,
    sub: Subresource,
    old: &Value,
    new: &Value,
) -> FieldSet {
    let mut out = FieldSet::new();
    walk(new, Some(old), "", &mut Vec::new(), &mut out);
    out.retain(|p| in_scope(rt, sub, p));
    out
}

/// Resolves a field path in an object.
pub(crate) fn get_path<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for elem in path {
        cur = step(cur, elem)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, elem: &str) -> Option<&'a Value> {
    if elem == "." {
        return Some(cur);
    }
    if let Some(f) = elem.strip_prefix("f:") {
        return cur.get(f);
    }
    let items = cur.as_array()?;
    items.get(find_index(items, elem)?)
}

/// The position of the list item a `k:`, `v:` or `i:` path element names.
fn find_index(items: &[Value], elem: &str) -> Option<usize> {
    if let Some(k) = elem.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).ok()?;
        return items
            .iter()
            .position(|i| key.iter().all(|(kf, kv)| i.get(kf) == Some(kv)));
    }
    if let Some(v) = elem.strip_prefix("v:") {
        let v: Value = serde_json::from_str(v).ok()?;
        return items.iter().position(|i| *i == v);
    }
    let i: usize = elem.strip_prefix("i:")?.parse().ok()?;
    (i < items.len()).then_some(i)
}

/// Removes the field (or list item) a path names, if present.
fn remove_path(obj: &mut Value, path: &[String]) {
    let (last, parent_path) = match path.split_last() {
        Some((last, rest)) if last == "." => match rest.split_last() {
            Some((item, parent)) => (item, parent),
            None => return,
        },
        Some((last, rest)) => (last, rest),
        None => return,
    };
    let mut cur = obj;
    for elem in parent_path {
        let next = match (elem.strip_prefix("f:"), cur) {
            (Some(f), Value::Object(m)) => m.get_mut(f),
            (None, Value::Array(items)) => match find_index(items, elem) {
                Some(i) => items.get_mut(i),
                None => None,
            },
            _ => None,
        };
        let Some(next) = next else { return };
        cur = next;
    }
    match (last.strip_prefix("f:"), cur) {
        (Some(f), Value::Object(m)) => {
            m.remove(f);
        }
        (None, Value::Array(items)) => {
            if let Some(i) = find_index(items, last) {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// One parsed `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Manager {
    pub(crate) manager: String,
    pub(crate) operation: String,
    pub(crate) subresource: Option<String>,
    pub(crate) api_version: String,
    pub(crate) time: String,
    pub(crate) fields: FieldSet,
}

fn parse_trie(v: &Value, path: &mut FieldPath, out: &mut FieldSet) {
    let Some(m) = v.as_object() else { return };
    for (k, child) in m {
        path.push(k.clone());
        if child.as_object().is_none_or(Map::is_empty) {
            out.insert(path.clone());
        } else {
            parse_trie(child, path, out);
        }
        path.pop();
    }
}

fn to_trie(fields: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in fields {
        let mut cur = &mut root;
        for elem in path {
            let next = cur
                .entry(elem.clone())
                .or_insert_with(|| Value::Object(Map::new()));
            if !next.is_object() {
                *next = Value::Object(Map::new());
            }
            let Value::Object(m) = next else { break };
            cur = m;
        }
    }
    Value::Object(root)
}

/// The managers recorded on an object.
pub(crate) fn managers(obj: &Value) -> Vec<Manager> {
    let Some(entries) = meta::metadata(obj)
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    entries
        .iter()
        .map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let mut fields = FieldSet::new();
            if let Some(f) = e.get("fieldsV1") {
                parse_trie(f, &mut Vec::new(), &mut fields);
            }
            Manager {
                manager: s("manager"),
                operation: s("operation"),
                subresource: e
                    .get("subresource")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                api_version: s("apiVersion"),
                time: s("time"),
                fields,
            }
        })
        .collect()
}

fn write_managers(obj: &mut Value, managers: &[Manager]) {
    let entries: Vec<Value> = managers
        .iter()
        .filter(|m| !m.fields.is_empty())
        .map(|m| {
            let mut e = json!({
                "manager": m.manager,
                "operation": m.operation,
                "apiVersion": m.api_version,
                "time": m.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_trie(&m.fields),
            });
            if let Some(s) = &m.subresource {
                e["subresource"] = json!(s);
            }
            e
        })
        .collect();
    let meta = meta::metadata_mut(obj);
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(entries));
    }
}

fn entry<'a>(
    list: &'a mut Vec<Manager>,
    rt: &ResourceType,
    manager: &str,
    operation: &str,
    sub: Subresource,
) -> &'a mut Manager {
    let subresource = sub.name().map(str::to_string);
    let pos = list.iter().position(|m| {
        m.manager == manager && m.operation == operation && m.subresource == subresource
    });
    let pos = match pos {
        Some(p) => p,
        None => {
            list.push(Manager {
                manager: manager.to_string(),
                operation: operation.to_string(),
                subresource,
                api_version: rt.api_version(),
                time: String::new(),
                fields: FieldSet::new(),
            });
            list.len() - 1
        }
    };
    &mut list[pos]
}

/// Keeps only the owned fields that still exist in `obj`.
fn prune(managers: &mut [Manager], obj: &Value) {
    for m in managers.iter_mut() {
        m.fields.retain(|p| get_path(obj, p).is_some());
    }
}

/// Records an Update by `manager` from `old` (absent on create) to `new`: the changed fields
/// move to the manager, away from everyone else.
pub(crate) fn record_update(
    rt: &ResourceType,
    sub: Subresource,
    manager: &str,
    old: Option<&Value>,
    new: &mut Value,
) {
    let mut list = old.map(managers).unwrap_or_default();
    let changed = match old {
        Some(old) => changed_fields(rt, sub, old, new),
        None => fields_of(rt, sub, new),
    };
    if changed.is_empty() && old.is_some() {
        write_managers(new, &list);
        return;
    }
    for m in list.iter_mut() {
        m.fields.retain(|p| !changed.contains(p));
    }
    let e = entry(&mut list, rt, manager, "Update", sub);
    e.fields.extend(changed);
    e.time = meta::now();
    prune(&mut list, new);
    write_managers(new, &list);
}

/// Renders a field path as the apiserver prints it in conflicts: `.spec.containers[name="c"].image`.
fn display_path(path: &FieldPath) -> String {
    let mut out = String::new();
    for elem in path {
        if let Some(f) = elem.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(k) = elem.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = elem.strip_prefix("v:") {
            out.push_str(&format!("[={v}]"));
        } else if let Some(i) = elem.strip_prefix("i:") {
            out.push_str(&format!("[{i}]"));
        }
    }
    out
}

/// Server-side apply of `applied` by `manager` onto `live` (already merged into `merged` by
/// the caller), returning the object with ownership updated, or a 409 listing conflicts.
pub(crate) fn apply(
    rt: &ResourceType,
    sub: Subresource,
    manager: &str,
    force: bool,
    live: Option<&Value>,
    applied: &Value,
    mut merged: Value,
) -> Result<Value, ApiError> {
    let applied_fields = fields_of(rt, sub, applied);
    let mut list = live.map(managers).unwrap_or_default();
    let mut conflicts: Vec<(String, String, FieldPath)> = Vec::new();
    if let Some(live) = live {
        for m in &list {
            if m.manager == manager {
                continue;
            }
            for p in m.fields.intersection(&applied_fields) {
                if p.last().is_some_and(|l| l == ".") {
                    continue;
                }
                if get_path(live, p) != get_path(applied, p) {
                    conflicts.push((m.manager.clone(), m.api_version.clone(), p.clone()));
                }
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(conflict_error(
                rt,
                live.map(meta::name).unwrap_or(""),
                &conflicts,
            ));
        }
        for m in list.iter_mut() {
            if m.manager != manager {
                m.fields
                    .retain(|p| !conflicts.iter().any(|(_, _, c)| c == p));
            }
        }
    }
    let previously_applied = list
        .iter()
        .find(|m| {
            m.manager == manager && m.operation == "Apply" && m.subresource.as_deref() == sub.name()
        })
        .map(|m| m.fields.clone())
        .unwrap_or_default();
    let owned_by_others: FieldSet = list
        .iter()
        .filter(|m| m.manager != manager)
        .flat_map(|m| m.fields.iter().cloned())
        .collect();
    for p in previously_applied.difference(&applied_fields) {
        let shared = owned_by_others
            .iter()
            .any(|o| o.starts_with(p.strip_suffix(&[".".to_string()]).unwrap_or(p)));
        if !shared {
            remove_path(&mut merged, p);
        }
    }
    let e = entry(&mut list, rt, manager, "Apply", sub);
    if e.fields != applied_fields || e.time.is_empty() {
        // The time moves only when ownership changes, so a repeated apply is a no-op.
        e.fields = applied_fields;
        e.time = meta::now();
    }
    prune(&mut list, &merged);
    write_managers(&mut merged, &list);
    Ok(merged)
}

fn conflict_error(
    rt: &ResourceType,
    name: &str,
    conflicts: &[(String, String, FieldPath)],
) -> ApiError {
    let n = conflicts.len();
    let message = if n == 1 {
        let (m, v, p) = &conflicts[0];
        format!(
            "Apply failed with 1 conflict: conflict with \"{m}\" using {v}: {}",
            display_path(p)
        )
    } else {
        let lines: Vec<String> = conflicts
            .iter()
            .map(|(m, v, p)| format!("conflict with \"{m}\" using {v}: {}", display_path(p)))
            .collect();
        format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, v, p)| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with \"{m}\" using {v}"),
                "field": display_path(p),
            })
        })
        .collect();
    ApiError {
        code: 409,
        reason: "Conflict".into(),
        message,
        details: Some(
            json!({ "name": name, "group": rt.group, "kind": rt.plural, "causes": causes }),
        ),
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
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
}
