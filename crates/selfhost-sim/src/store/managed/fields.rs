//! Field paths in the fieldsV1 notation, the sets of fields an object sets or an update
//! changes, and their trie form in `managedFields`.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::super::strategy::Subresource;
use crate::resources::ResourceType;

/// One field path in the fieldsV1 notation: `f:spec`, `k:{"name":"c"}`, `v:"x"`, `.`.
pub(super) type FieldPath = Vec<String>;
/// A set of owned fields.
pub(super) type FieldSet = BTreeSet<FieldPath>;

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
pub(super) fn fields_of(rt: &ResourceType, sub: Subresource, obj: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    walk(obj, None, "", &mut Vec::new(), &mut out);
    out.retain(|p| in_scope(rt, sub, p));
    out
}

/// The fields whose value differs between `old` and `new` (or that `new` adds).
pub(super) fn changed_fields(
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
pub(super) fn get_path<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
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
pub(super) fn remove_path(obj: &mut Value, path: &[String]) {
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

pub(super) fn parse_trie(v: &Value, path: &mut FieldPath, out: &mut FieldSet) {
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

pub(super) fn to_trie(fields: &FieldSet) -> Value {
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

/// Renders a field path as the apiserver prints it in conflicts: `.spec.containers[name="c"].image`.
pub(super) fn display_path(path: &FieldPath) -> String {
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

/// One step of a path into an object: a field, or a list element by position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataStep<'a> {
    /// A field (or map key).
    Field(&'a str),
    /// A list element.
    Index(usize),
}

/// A path into `obj` as structured-merge-diff prints it (`.spec.containers[name="c"].image`):
/// items of keyed lists by their key, other list items by position.
pub(crate) fn display_data_path(obj: &Value, steps: &[DataStep<'_>]) -> String {
    let mut path = FieldPath::new();
    let mut node = Some(obj);
    let mut list_field = "";
    for step in steps {
        match *step {
            DataStep::Field(name) => {
                path.push(format!("f:{name}"));
                node = node.and_then(|n| n.get(name));
                list_field = name;
            }
            DataStep::Index(i) => {
                let item = node.and_then(|n| n.get(i));
                let key = match (list_kind(list_field), item) {
                    (ListKind::Keyed(keys), Some(item)) => item_key(item, keys),
                    _ => None,
                };
                path.push(key.unwrap_or_else(|| format!("i:{i}")));
                node = item;
            }
        }
    }
    display_path(&path)
}
