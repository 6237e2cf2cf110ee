//! The messages of the kinds kubectl's generators create, with the field numbers of
//! `k8s.io/api/core/v1/generated.proto` and `k8s.io/apimachinery/pkg/apis/meta/v1/
//! generated.proto`, into JSON as Go's encoder writes it (empty values omitted).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::ProtobufError;
use super::wire::{Fields, WireValue};

type Object = Map<String, Value>;

fn wrong(message: &'static str, field: u32) -> ProtobufError {
    ProtobufError::WrongType { message, field }
}

fn unsupported(message: &'static str, field: u32) -> ProtobufError {
    ProtobufError::Unsupported { message, field }
}

/// A length-delimited value (bytes, embedded message).
fn bytes<'a>(
    message: &'static str,
    field: u32,
    value: WireValue<'a>,
) -> Result<&'a [u8], ProtobufError> {
    match value {
        WireValue::Bytes(b) => Ok(b),
        _ => Err(wrong(message, field)),
    }
}

/// A `string` field.
pub(super) fn string(
    message: &'static str,
    field: u32,
    value: WireValue<'_>,
) -> Result<String, ProtobufError> {
    let b = bytes(message, field, value)?;
    String::from_utf8(b.to_vec()).map_err(|_| ProtobufError::Utf8 { message, field })
}

fn varint(message: &'static str, field: u32, value: WireValue<'_>) -> Result<u64, ProtobufError> {
    match value {
        WireValue::Varint(v) => Ok(v),
        _ => Err(wrong(message, field)),
    }
}

/// An `int64` (two's complement in a varint).
fn int64(message: &'static str, field: u32, value: WireValue<'_>) -> Result<i64, ProtobufError> {
    // Reinterpreting the bits is what protobuf's int64 encoding means.
    varint(message, field, value).map(|v| v as i64)
}

fn boolean(message: &'static str, field: u32, value: WireValue<'_>) -> Result<bool, ProtobufError> {
    varint(message, field, value).map(|v| v != 0)
}

/// One entry of a `map<string, V>`: `key = 1`, `value = 2` (both may be absent when empty).
fn map_entry<'a>(
    message: &'static str,
    field: u32,
    value: WireValue<'a>,
) -> Result<(String, &'a [u8]), ProtobufError> {
    let mut key = String::new();
    let mut entry_value: &[u8] = &[];
    for f in Fields::of(bytes(message, field, value)?) {
        match f? {
            (1, v) => key = string(message, field, v)?,
            (2, v) => entry_value = bytes(message, field, v)?,
            _ => return Err(unsupported(message, field)),
        }
    }
    Ok((key, entry_value))
}

/// Adds an entry of a `map<string, string>` field to `obj[name]`.
fn string_entry(
    obj: &mut Object,
    name: &str,
    (message, field): (&'static str, u32),
    value: WireValue<'_>,
) -> Result<(), ProtobufError> {
    let (key, v) = map_entry(message, field, value)?;
    let v = String::from_utf8(v.to_vec()).map_err(|_| ProtobufError::Utf8 { message, field })?;
    insert_entry(obj, name, key, Value::String(v));
    Ok(())
}

/// Adds an entry of a `map<string, bytes>` field to `obj[name]`, base64 as in JSON.
fn bytes_entry(
    obj: &mut Object,
    name: &str,
    (message, field): (&'static str, u32),
    value: WireValue<'_>,
) -> Result<(), ProtobufError> {
    let (key, v) = map_entry(message, field, value)?;
    insert_entry(obj, name, key, Value::String(STANDARD.encode(v)));
    Ok(())
}

/// Adds `key: value` to the map `obj[name]`.
fn insert_entry(obj: &mut Object, name: &str, key: String, value: Value) {
    match obj
        .entry(name.to_string())
        .or_insert_with(|| Value::Object(Map::new()))
    {
        Value::Object(map) => {
            map.insert(key, value);
        }
        other => *other = Value::Object(Map::from_iter([(key, value)])),
    }
}

fn push(obj: &mut Object, name: &str, item: Value) {
    match obj
        .entry(name.to_string())
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        Value::Array(items) => items.push(item),
        other => *other = Value::Array(vec![item]),
    }
}

fn set_string(obj: &mut Object, name: &str, s: String) {
    // Go's JSON encoder omits empty strings (omitempty).
    if !s.is_empty() {
        obj.insert(name.to_string(), Value::String(s));
    }
}

/// `metav1.Time` (`seconds = 1`, `nanos = 2`) as RFC 3339, `None` for the zero time.
fn time(
    message: &'static str,
    field: u32,
    value: WireValue<'_>,
) -> Result<Option<String>, ProtobufError> {
    let (mut seconds, mut nanos) = (0i64, 0i64);
    for f in Fields::of(bytes(message, field, value)?) {
        match f? {
            (1, v) => seconds = int64("Time", 1, v)?,
            (2, v) => nanos = int64("Time", 2, v)?,
            (other, _) => return Err(unsupported("Time", other)),
        }
    }
    if (seconds, nanos) == (0, 0) {
        return Ok(None);
    }
    let nanos = i32::try_from(nanos).map_err(|_| wrong("Time", 2))?;
    jiff::Timestamp::new(seconds, nanos)
        .map(|t| Some(t.to_string()))
        .map_err(|_| wrong(message, field))
}

/// `metav1.ObjectMeta`.
fn object_meta(raw: &[u8]) -> Result<Object, ProtobufError> {
    const M: &str = "ObjectMeta";
    let mut meta = Object::new();
    for f in Fields::of(raw) {
        match f? {
            (1, v) => set_string(&mut meta, "name", string(M, 1, v)?),
            (2, v) => set_string(&mut meta, "generateName", string(M, 2, v)?),
            (3, v) => set_string(&mut meta, "namespace", string(M, 3, v)?),
            (4, v) => set_string(&mut meta, "selfLink", string(M, 4, v)?),
            (5, v) => set_string(&mut meta, "uid", string(M, 5, v)?),
            (6, v) => set_string(&mut meta, "resourceVersion", string(M, 6, v)?),
            (7, v) => match int64(M, 7, v)? {
                0 => {}
                g => {
                    meta.insert("generation".into(), Value::from(g));
                }
            },
            (field @ (8 | 9), v) => {
                if let Some(t) = time(M, field, v)? {
                    let name = if field == 8 {
                        "creationTimestamp"
                    } else {
                        "deletionTimestamp"
                    };
                    meta.insert(name.into(), Value::String(t));
                }
            }
            (10, v) => {
                meta.insert(
                    "deletionGracePeriodSeconds".into(),
                    Value::from(int64(M, 10, v)?),
                );
            }
            (11, v) => string_entry(&mut meta, "labels", (M, 11), v)?,
            (12, v) => string_entry(&mut meta, "annotations", (M, 12), v)?,
            (13, v) => push(
                &mut meta,
                "ownerReferences",
                owner_reference(bytes(M, 13, v)?)?,
            ),
            (14, v) => push(&mut meta, "finalizers", Value::String(string(M, 14, v)?)),
            // managedFields (17) and anything newer are not decoded.
            (field, _) => return Err(unsupported(M, field)),
        }
    }
    Ok(meta)
}

/// `metav1.OwnerReference`.
fn owner_reference(raw: &[u8]) -> Result<Value, ProtobufError> {
    const M: &str = "OwnerReference";
    let mut reference = Object::new();
    for f in Fields::of(raw) {
        match f? {
            (1, v) => set_string(&mut reference, "kind", string(M, 1, v)?),
            (3, v) => set_string(&mut reference, "name", string(M, 3, v)?),
            (4, v) => set_string(&mut reference, "uid", string(M, 4, v)?),
            (5, v) => set_string(&mut reference, "apiVersion", string(M, 5, v)?),
            (6, v) => {
                reference.insert("controller".into(), Value::Bool(boolean(M, 6, v)?));
            }
            (7, v) => {
                reference.insert("blockOwnerDeletion".into(), Value::Bool(boolean(M, 7, v)?));
            }
            (field, _) => return Err(unsupported(M, field)),
        }
    }
    Ok(Value::Object(reference))
}

/// The `metadata = 1` field every top-level message has.
fn metadata(
    obj: &mut Object,
    message: &'static str,
    value: WireValue<'_>,
) -> Result<(), ProtobufError> {
    obj.insert(
        "metadata".into(),
        Value::Object(object_meta(bytes(message, 1, value)?)?),
    );
    Ok(())
}

/// `v1.Namespace`: `spec.finalizers`, and an empty status (the server owns it).
pub(super) fn namespace(raw: &[u8]) -> Result<Object, ProtobufError> {
    const M: &str = "Namespace";
    let mut obj = Object::new();
    for f in Fields::of(raw) {
        match f? {
            (1, v) => metadata(&mut obj, M, v)?,
            (2, v) => {
                let mut spec = Object::new();
                for f in Fields::of(bytes(M, 2, v)?) {
                    match f? {
                        (1, v) => push(
                            &mut spec,
                            "finalizers",
                            Value::String(string("NamespaceSpec", 1, v)?),
                        ),
                        (field, _) => return Err(unsupported("NamespaceSpec", field)),
                    }
                }
                if !spec.is_empty() {
                    obj.insert("spec".into(), Value::Object(spec));
                }
            }
            (3, v) => {
                for f in Fields::of(bytes(M, 3, v)?) {
                    match f? {
                        (1, v) if string("NamespaceStatus", 1, v)?.is_empty() => {}
                        (field, _) => return Err(unsupported("NamespaceStatus", field)),
                    }
                }
            }
            (field, _) => return Err(unsupported(M, field)),
        }
    }
    Ok(obj)
}

/// `v1.ConfigMap`.
pub(super) fn config_map(raw: &[u8]) -> Result<Object, ProtobufError> {
    const M: &str = "ConfigMap";
    let mut obj = Object::new();
    for f in Fields::of(raw) {
        match f? {
            (1, v) => metadata(&mut obj, M, v)?,
            (2, v) => string_entry(&mut obj, "data", (M, 2), v)?,
            (3, v) => bytes_entry(&mut obj, "binaryData", (M, 3), v)?,
            (4, v) => {
                obj.insert("immutable".into(), Value::Bool(boolean(M, 4, v)?));
            }
            (field, _) => return Err(unsupported(M, field)),
        }
    }
    Ok(obj)
}

/// `v1.Secret`.
pub(super) fn secret(raw: &[u8]) -> Result<Object, ProtobufError> {
    const M: &str = "Secret";
    let mut obj = Object::new();
    for f in Fields::of(raw) {
        match f? {
            (1, v) => metadata(&mut obj, M, v)?,
            (2, v) => bytes_entry(&mut obj, "data", (M, 2), v)?,
            (3, v) => set_string(&mut obj, "type", string(M, 3, v)?),
            (4, v) => string_entry(&mut obj, "stringData", (M, 4), v)?,
            (5, v) => {
                obj.insert("immutable".into(), Value::Bool(boolean(M, 5, v)?));
            }
            (field, _) => return Err(unsupported(M, field)),
        }
    }
    Ok(obj)
}

/// `v1.ServiceAccount`.
pub(super) fn service_account(raw: &[u8]) -> Result<Object, ProtobufError> {
    const M: &str = "ServiceAccount";
    let mut obj = Object::new();
    for f in Fields::of(raw) {
        match f? {
            (1, v) => metadata(&mut obj, M, v)?,
            (2, v) => push(&mut obj, "secrets", object_reference(bytes(M, 2, v)?)?),
            (3, v) => {
                let mut reference = Object::new();
                for f in Fields::of(bytes(M, 3, v)?) {
                    match f? {
                        (1, v) => set_string(
                            &mut reference,
                            "name",
                            string("LocalObjectReference", 1, v)?,
                        ),
                        (field, _) => return Err(unsupported("LocalObjectReference", field)),
                    }
                }
                push(&mut obj, "imagePullSecrets", Value::Object(reference));
            }
            (4, v) => {
                obj.insert(
                    "automountServiceAccountToken".into(),
                    Value::Bool(boolean(M, 4, v)?),
                );
            }
            (field, _) => return Err(unsupported(M, field)),
        }
    }
    Ok(obj)
}

/// `v1.ObjectReference`: all strings.
fn object_reference(raw: &[u8]) -> Result<Value, ProtobufError> {
    const M: &str = "ObjectReference";
    const NAMES: [&str; 7] = [
        "kind",
        "namespace",
        "name",
        "uid",
        "apiVersion",
        "resourceVersion",
        "fieldPath",
    ];
    let mut reference = Object::new();
    for f in Fields::of(raw) {
        let (field, v) = f?;
        let name = usize::try_from(field)
            .ok()
            .and_then(|n| NAMES.get(n.wrapping_sub(1)))
            .ok_or_else(|| unsupported(M, field))?;
        set_string(&mut reference, name, string(M, field, v)?);
    }
    Ok(Value::Object(reference))
}
