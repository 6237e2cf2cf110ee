//! Strategic merge patch (`application/strategic-merge-patch+json`), as the apiserver applies
//! it to the built-in types: what `kubectl set image`, `label`, `annotate`, `patch` (its
//! default type) and client-side `apply` send.
//!
//! Semantics follow `k8s.io/apimachinery/pkg/util/strategicpatch`:
//! - maps merge key by key; `null` deletes a key;
//! - lists tagged with a merge key (containers by `name`, volumeMounts by `mountPath`, ports by
//!   `containerPort`, ...) merge item by item; lists of scalars tagged `merge` (finalizers) are
//!   set unions; every other list (tolerations, command, args) is replaced;
//! - directives: `$patch: replace|delete` in maps and list items, `$retainKeys`,
//!   `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>`;
//! - item order: patched items keep the patch's (or `$setElementOrder`'s) order and are
//!   interleaved with the items only the server has, which keep theirs; new items come first.
//!
//! Where the apiserver would store a directive verbatim in a value that did not exist before
//! (and then drop it while decoding into the Go type), we apply the directive to an empty value
//! instead, which gives the same object without the apiserver's leftovers: for example a
//! `$deleteFromPrimitiveList/finalizers` on an object without finalizers changes nothing.
//! `$patch: merge` is refused, as the apiserver refuses it.

mod list;
mod schema;

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::resources::ResourceType;
use schema::{ListStrategy, Schema};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

/// Why a strategic merge patch could not be applied, worded as the apiserver words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrategicPatchError {
    /// The patch or the object is not a JSON object.
    #[error("invalid JSON document")]
    BadJsonDoc,
    /// A list holds lists.
    #[error("lists of lists are not supported")]
    ListOfLists,
    /// A `$deleteFromPrimitiveList/...` key is malformed.
    #[error("invalid patch format of primitive list")]
    BadPrimitiveListFormat,
    /// `$retainKeys` is not a list, or the patch sets a key it does not retain.
    #[error("invalid patch format of retainKeys")]
    BadRetainKeysFormat,
    /// A `$setElementOrder/...` list is malformed.
    #[error("invalid patch format of setElementOrder list")]
    BadSetElementOrderFormat,
    /// The patch list's order contradicts its `$setElementOrder` list.
    #[error("The order in patch list:\n{patch}\n doesn't match $setElementOrder list:\n{order}\n")]
    SetElementOrderMismatch {
        /// The patch list, Go-printed.
        patch: String,
        /// The order list, Go-printed.
        order: String,
    },
    /// An item of a keyed list lacks the merge key.
    #[error("map: {map} does not contain declared merge key: {key}")]
    NoMergeKey {
        /// The item, Go-printed.
        map: String,
        /// The merge key.
        key: String,
    },
    /// An unknown `$patch` directive.
    #[error("unknown patch type: {directive} in map: {map}")]
    BadPatchType {
        /// The directive's value.
        directive: String,
        /// The map it was found in, Go-printed.
        map: String,
    },
    /// `$patch: merge` in a list, which the apiserver does not implement.
    #[error("merging lists cannot yet be specified in the patch")]
    MergeDirectiveInList,
    /// A merge list mixes item types, or a map list has no merge key.
    #[error("{0}")]
    BadList(String),
}

impl StrategicPatchError {
    /// The response the apiserver gives for this error: 400 for malformed directives, 422
    /// for lists of lists, and a reason-less 500 for the rest (kubectl then prints
    /// `Error from server: <message>`).
    pub fn to_api_error(&self) -> ApiError {
        let message = self.to_string();
        match self {
            StrategicPatchError::BadJsonDoc
            | StrategicPatchError::BadPrimitiveListFormat
            | StrategicPatchError::BadRetainKeysFormat
            | StrategicPatchError::BadSetElementOrderFormat => ApiError::bad_request(message),
            StrategicPatchError::ListOfLists => ApiError {
                code: 422,
                reason: "Invalid".into(),
                message,
                details: None,
                retry_after: None,
            },
            _ => ApiError {
                code: 500,
                reason: String::new(),
                message,
                details: None,
                retry_after: None,
            },
        }
    }
}

/// Applies a strategic merge patch to an object of type `rt`, returning the patched object.
///
/// # Errors
/// A malformed patch or directive, as listed in [`StrategicPatchError`].
pub fn strategic_merge_patch(
    original: &Value,
    patch: &Value,
    rt: &ResourceType,
) -> Result<Value, StrategicPatchError> {
    let (Value::Object(original), Value::Object(patch)) = (original, patch) else {
        return Err(StrategicPatchError::BadJsonDoc);
    };
    merge_map(original.clone(), patch.clone(), Schema::root(rt)).map(Value::Object)
}

type Result<T, E = StrategicPatchError> = std::result::Result<T, E>;

/// Merges `patch` into `original`, both maps of type `schema`.
fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    schema: Schema,
) -> Result<Map<String, Value>> {
    if let Some(directive) = patch.get(DIRECTIVE) {
        return match directive.as_str() {
            Some("replace") => {
                // The patch's map is the result; directives inside it apply to nothing.
                patch.remove(DIRECTIVE);
                merge_map(Map::new(), patch, schema)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(StrategicPatchError::BadPatchType {
                directive: go_print(directive),
                map: go_print(&Value::Object(patch)),
            }),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    apply_set_element_order(&mut original, &mut patch, schema)?;

    for (key, patch_value) in patch {
        let (key, deleting) = match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            Some(rest) => match rest.strip_prefix('/') {
                Some(field) => (field.to_string(), true),
                None => return Err(StrategicPatchError::BadPrimitiveListFormat),
            },
            // Other `$` keys are unknown fields, which decoding into the Go type drops.
            None if key.starts_with('$') => continue,
            None => (key, false),
        };
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let field = schema.field(&key);
        let merged = match original.remove(&key) {
            None if deleting => continue,
            None => fresh(patch_value, field)?,
            Some(Value::Object(o)) => match patch_value {
                Value::Object(p) => Value::Object(merge_map(o, p, field.schema)?),
                other => fresh(other, field)?,
            },
            Some(Value::Array(o)) => match patch_value {
                Value::Array(p) if field.list.merges() => {
                    Value::Array(list::merge_list(o, p, field, deleting)?)
                }
                other => fresh(other, field)?,
            },
            Some(_) => fresh(patch_value, field)?,
        };
        original.insert(key, merged);
    }
    Ok(original)
}

/// A patch value that replaces (or creates) a field: directives in it apply to an empty value.
fn fresh(value: Value, field: schema::Field) -> Result<Value> {
    match value {
        Value::Object(map) => merge_map(Map::new(), map, field.schema).map(Value::Object),
        Value::Array(items) if field.list.merges() => {
            list::merge_list(Vec::new(), items, field, false).map(Value::Array)
        }
        Value::Array(items) => items
            .into_iter()
            .map(|item| {
                fresh(
                    item,
                    schema::Field {
                        list: ListStrategy::Replace,
                        ..field
                    },
                )
            })
            .collect::<Result<Vec<_>>>()
            .map(Value::Array),
        scalar => Ok(scalar),
    }
}

/// `$retainKeys`: clears the original's keys that are not listed; the patch may only set
/// listed keys.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<()> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(StrategicPatchError::BadRetainKeysFormat);
    };
    let retained = |key: &str| retain.iter().any(|k| k.as_str() == Some(key));
    let sets_unretained = patch.iter().any(|(k, v)| {
        !v.is_null()
            && !k.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            && !k.starts_with(SET_ELEMENT_ORDER)
            && !retained(k)
    });
    if sets_unretained {
        return Err(StrategicPatchError::BadRetainKeysFormat);
    }
    original.retain(|k, _| retained(k));
    Ok(())
}

/// `$setElementOrder/<field>`: merges the field's list and orders it by the given order.
fn apply_set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    schema: Schema,
) -> Result<()> {
    let order_keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ELEMENT_ORDER))
        .cloned()
        .collect();
    for order_key in order_keys {
        let Some(Value::Array(order)) = patch.remove(&order_key) else {
            return Err(StrategicPatchError::BadSetElementOrderFormat);
        };
        let Some(key) = order_key
            .strip_prefix(SET_ELEMENT_ORDER)
            .and_then(|rest| rest.strip_prefix('/'))
        else {
            return Err(StrategicPatchError::BadSetElementOrderFormat);
        };
        let field = schema.field(key);
        let original_list = match original.get(key) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(_) => return Err(StrategicPatchError::BadSetElementOrderFormat),
        };
        let patch_list = match patch.get(key) {
            None => None,
            Some(Value::Array(items)) => Some(items.clone()),
            Some(_) => return Err(StrategicPatchError::BadSetElementOrderFormat),
        };
        list::check_order(patch_list.as_deref().unwrap_or_default(), &order, field)?;
        let merged = match (original_list.clone(), patch_list) {
            (Some(o), None) => o,
            (None, Some(p)) => match fresh(Value::Array(p), field)? {
                Value::Array(items) => items,
                _ => Vec::new(),
            },
            (Some(o), Some(p)) if field.list.merges() => list::merge_list(o, p, field, false)?,
            (Some(_), Some(p)) => match fresh(Value::Array(p), field)? {
                Value::Array(items) => items,
                _ => Vec::new(),
            },
            (None, None) => continue,
        };
        let ordered = list::order_by(
            merged,
            &order,
            original_list.as_deref().unwrap_or_default(),
            field.list.merge_key(),
        )?;
        original.insert(key.to_string(), Value::Array(ordered));
        patch.remove(key);
    }
    Ok(())
}

/// Prints a JSON value as Go's `%v` prints the decoded value (used in error messages).
pub(crate) fn go_print(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_print).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => format!(
            "map[{}]",
            map.iter()
                .map(|(k, v)| format!("{k}:{}", go_print(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

#[cfg(test)]
mod tests;
