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
//!   list items;
//! - `managedFields` sent by clients are ignored: the server's record is kept.

mod fields;
#[cfg(test)]
mod tests;

pub(crate) use fields::{DataStep, display_data_path};

use serde_json::{Value, json};

use super::meta;
use super::strategy::Subresource;
use crate::error::ApiError;
use crate::resources::ResourceType;
use fields::{
    FieldPath, FieldSet, changed_fields, display_path, fields_of, get_path, parse_trie,
    remove_path, to_trie,
};

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
