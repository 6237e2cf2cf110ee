//! Merging lists that carry a merge strategy, and the apiserver's rules for their order.

use serde_json::{Map, Value};

use super::schema::Field;
use super::{DIRECTIVE, Result, StrategicPatchError, go_print, merge_map};

/// The Go type of list items, which must agree within a merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemKind {
    Map,
    String,
    Int,
    Float,
    Bool,
    Null,
}

fn kind_of(value: &Value) -> Result<ItemKind> {
    Ok(match value {
        Value::Object(_) => ItemKind::Map,
        Value::String(_) => ItemKind::String,
        Value::Number(n) if n.is_f64() => ItemKind::Float,
        Value::Number(_) => ItemKind::Int,
        Value::Bool(_) => ItemKind::Bool,
        Value::Null => ItemKind::Null,
        Value::Array(_) => return Err(StrategicPatchError::ListOfLists),
    })
}

fn item_kind(original: &[Value], patch: &[Value]) -> Result<ItemKind> {
    let mut kind = None;
    for item in original.iter().chain(patch) {
        let this = kind_of(item)?;
        match kind {
            None => kind = Some(this),
            Some(k) if k != this => {
                return Err(StrategicPatchError::BadList(format!(
                    "list element types are not identical: [{} {}]",
                    go_print(&Value::Array(original.to_vec())),
                    go_print(&Value::Array(patch.to_vec()))
                )));
            }
            Some(_) => {}
        }
    }
    kind.ok_or_else(|| {
        StrategicPatchError::BadList("no elements in any of the given slices".into())
    })
}

fn no_merge_key(item: &Value, key: &str) -> StrategicPatchError {
    StrategicPatchError::NoMergeKey {
        map: go_print(item),
        key: key.to_string(),
    }
}

/// The merge key's value of a keyed-list item.
fn key_value<'a>(item: &'a Value, key: &str) -> Result<&'a Value> {
    item.get(key).ok_or_else(|| no_merge_key(item, key))
}

/// Merges a patch list into the original list of a field with a merge strategy. With
/// `deleting` (a `$deleteFromPrimitiveList`), scalar patch items are removed instead.
pub(super) fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    field: Field,
    deleting: bool,
) -> Result<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let key = field.list.merge_key();
    if item_kind(&original, &patch)? != ItemKind::Map {
        if deleting {
            return Ok(original
                .into_iter()
                .filter(|v| !patch.contains(v))
                .collect());
        }
        let mut merged: Vec<Value> = Vec::new();
        for item in original.iter().chain(&patch) {
            if !merged.contains(item) {
                merged.push(item.clone());
            }
        }
        return normalize_partitioned(merged, &patch, &original, "");
    }
    if key.is_empty() {
        return Err(StrategicPatchError::BadList(
            "cannot merge lists without merge key for type struct".into(),
        ));
    }

    // `$patch: delete` items remove their match; a `$patch: replace` item makes the rest of
    // the patch list the whole list.
    let mut original = original;
    let mut plain = Vec::new();
    let mut replace = false;
    for item in patch {
        match item.get(DIRECTIVE) {
            None => plain.push(item),
            Some(directive) => match directive.as_str() {
                Some("delete") => {
                    let doomed = key_value(&item, key)?.clone();
                    original.retain(|o| o.get(key) != Some(&doomed));
                }
                Some("replace") => replace = true,
                Some("merge") => return Err(StrategicPatchError::MergeDirectiveInList),
                _ => {
                    return Err(StrategicPatchError::BadPatchType {
                        directive: go_print(directive),
                        map: go_print(&item),
                    });
                }
            },
        }
    }
    let (original, patch) = if replace {
        (Vec::new(), plain)
    } else {
        (original, plain)
    };

    let mut merged = original.clone();
    for item in &patch {
        let wanted = key_value(item, key)?;
        let Value::Object(item_map) = item.clone() else {
            return Err(no_merge_key(item, key));
        };
        match merged.iter().position(|o| o.get(key) == Some(wanted)) {
            Some(i) => {
                let Value::Object(existing) = std::mem::take(&mut merged[i]) else {
                    return Err(no_merge_key(&merged[i], key));
                };
                merged[i] = Value::Object(merge_map(existing, item_map, field.schema)?);
            }
            None => merged.push(Value::Object(merge_map(
                Map::new(),
                item_map,
                field.schema,
            )?)),
        }
    }
    if replace {
        // The replacing items are the new list, in the patch's order.
        return Ok(merged);
    }
    normalize_partitioned(merged, &patch, &original, key)
}

/// Splits `merged` into the items named by `order` and the server-only rest, then restores
/// the apiserver's order (see [`normalize`]).
fn normalize_partitioned(
    merged: Vec<Value>,
    order: &[Value],
    server_order: &[Value],
    key: &str,
) -> Result<Vec<Value>> {
    let mut named = Vec::new();
    let mut server_only = Vec::new();
    for item in merged {
        let present = if key.is_empty() {
            order.contains(&item)
        } else {
            let wanted = key_value(&item, key)?;
            order.iter().any(|o| o.get(key) == Some(wanted))
        };
        if present {
            named.push(item);
        } else {
            server_only.push(item);
        }
    }
    normalize(named, server_only, order, server_order, key)
}

/// Orders a `$setElementOrder` field: the merged list, sorted by `order` for the items it
/// names and by the original list for the rest.
pub(super) fn order_by(
    merged: Vec<Value>,
    order: &[Value],
    server_order: &[Value],
    key: &str,
) -> Result<Vec<Value>> {
    normalize_partitioned(merged, order, server_order, key)
}

/// Position of `item` in `list`, comparing merge key values (or whole scalars).
fn index_in(list: &[Value], item: &Value, key: &str) -> Option<usize> {
    if key.is_empty() {
        list.iter().position(|v| v == item)
    } else {
        let wanted = item.get(key);
        list.iter().position(|v| v.get(key) == wanted)
    }
}

fn sort_by_order(mut items: Vec<Value>, order: &[Value], key: &str) -> Result<Vec<Value>> {
    if !key.is_empty() {
        for item in items.iter().chain(order) {
            key_value(item, key)?;
        }
    }
    // Items the order does not name go first, as the apiserver's comparison puts them.
    items.sort_by_key(|item| index_in(order, item, key).map_or(-1, |i| i as i64));
    Ok(items)
}

/// The apiserver's order: patch items in the patch's order, server-only items in the
/// server's order, interleaved so that a server-only item stays ahead of a patch item it
/// preceded in the original list; items new to the list come before later server items.
fn normalize(
    named: Vec<Value>,
    server_only: Vec<Value>,
    order: &[Value],
    server_order: &[Value],
    key: &str,
) -> Result<Vec<Value>> {
    let right = sort_by_order(named, order, key)?;
    let left = sort_by_order(server_only, server_order, key)?;
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut left, mut right) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index_in(server_order, l, key), index_in(server_order, r, key)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    Ok(out)
}

/// Checks that a patch list's items appear in its `$setElementOrder` list, in that order.
pub(super) fn check_order(patch: &[Value], order: &[Value], field: Field) -> Result<()> {
    if patch.is_empty() || order.is_empty() {
        return Ok(());
    }
    let key = field.list.merge_key();
    let listed: Vec<&Value> = patch
        .iter()
        .filter(|item| {
            key.is_empty() || item.get(DIRECTIVE).and_then(Value::as_str) != Some("delete")
        })
        .collect();
    let equal = |a: &Value, b: &Value| -> Result<bool> {
        if key.is_empty() {
            return Ok(a == b);
        }
        Ok(key_value(a, key)? == key_value(b, key)?)
    };
    let (mut p, mut s) = (0, 0);
    while p < listed.len() && s < order.len() {
        if listed[p].get(DIRECTIVE).is_some() {
            p += 1;
            continue;
        }
        if equal(listed[p], &order[s])? {
            p += 1;
        }
        s += 1;
    }
    if p < listed.len() && s >= order.len() {
        return Err(StrategicPatchError::SetElementOrderMismatch {
            patch: go_print(&Value::Array(patch.to_vec())),
            order: go_print(&Value::Array(order.to_vec())),
        });
    }
    Ok(())
}
