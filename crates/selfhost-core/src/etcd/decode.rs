//! A protobuf message into the JSON the API server would have written for it, by the schema
//! tables: so that k8s-openapi's types read it as they read the API's answers.
//!
//! Go's protobuf encoder writes every non-pointer field, empty strings included; an empty
//! string is omitted here, as Go's JSON encoder omits it, since for these kinds an empty string
//! and an absent one mean the same. Zeros and `false` are kept: a pointer field set to them
//! (`runAsUser: 0`, `automountServiceAccountToken: false`) means something its absence does
//! not. A zero `Time` is Go's zero time, which JSON writes as null: it is omitted.

use serde_json::{Map, Value};

use super::DecodeError;
use super::message::{Field, Kind};
use super::wire::{Fields, WireValue, message, varint};

/// What decoding found that the schema does not know: fields of a newer Kubernetes than the
/// schema's, skipped (k8s-openapi's types would drop them too), named `Message.field-number`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Skipped(pub Vec<String>);

/// Decodes the message `name` from `bytes` into a JSON object.
pub(crate) fn message_to_json(
    name: &str,
    bytes: &[u8],
    skipped: &mut Skipped,
) -> Result<Map<String, Value>, DecodeError> {
    let schema = message(name).ok_or_else(|| DecodeError::UnknownMessage(name.to_string()))?;
    let mut object = Map::new();
    let mut fields = Fields::new(bytes);
    while let Some((tag, value)) = fields.next_field()? {
        let Some(field) = schema.fields.iter().find(|f| f.tag == tag) else {
            skipped.0.push(format!("{name}.{tag}"));
            continue;
        };
        put(&mut object, field, value, skipped)
            .map_err(|e| e.within(format!("{name}.{}", field.json)))?;
    }
    Ok(object)
}

fn put(
    object: &mut Map<String, Value>,
    field: &Field,
    value: WireValue<'_>,
    skipped: &mut Skipped,
) -> Result<(), DecodeError> {
    if let Kind::Inline(name) = field.kind {
        let bytes = bytes_of(value)?;
        object.extend(message_to_json(name, bytes, skipped)?);
        return Ok(());
    }
    if let Kind::Map(of) = field.kind {
        let (key, entry) = map_entry(of, bytes_of(value)?, skipped)?;
        let map = object
            .entry(field.json)
            .or_insert_with(|| Value::Object(Map::new()));
        if let (Value::Object(map), Some(entry)) = (map, entry) {
            map.insert(key, entry);
        }
        return Ok(());
    }
    if field.repeated {
        let items = object
            .entry(field.json)
            .or_insert_with(|| Value::Array(Vec::new()));
        let Value::Array(items) = items else {
            return Err(DecodeError::Malformed("a repeated field"));
        };
        match (field.kind, value) {
            // Packed numbers: one length-delimited run of varints.
            (Kind::I32 | Kind::I64 | Kind::Bool, WireValue::Bytes(mut run)) => {
                while !run.is_empty() {
                    let v = varint(&mut run)?;
                    items.push(scalar(field.kind, WireValue::Varint(v))?);
                }
            }
            (kind, value) => items.push(single(kind, value, skipped)?.unwrap_or(Value::Null)),
        }
        return Ok(());
    }
    match single(field.kind, value, skipped)? {
        Some(Value::String(s)) if s.is_empty() && field.kind == Kind::Str => {}
        Some(v) => {
            object.insert(field.json.to_string(), v);
        }
        None => {}
    }
    Ok(())
}

/// One value of `kind`; `None` for a zero `Time`.
fn single(
    kind: Kind,
    value: WireValue<'_>,
    skipped: &mut Skipped,
) -> Result<Option<Value>, DecodeError> {
    Ok(Some(match kind {
        Kind::Msg(name) => Value::Object(message_to_json(name, bytes_of(value)?, skipped)?),
        Kind::Time => return time(bytes_of(value)?),
        Kind::IntOrString => int_or_string(bytes_of(value)?)?,
        Kind::Quantity => {
            let mut fields = Fields::new(bytes_of(value)?);
            let mut quantity = String::new();
            while let Some((tag, v)) = fields.next_field()? {
                if tag == 1 {
                    quantity = utf8(bytes_of(v)?)?;
                }
            }
            Value::String(quantity)
        }
        Kind::FieldsV1 => {
            let mut fields = Fields::new(bytes_of(value)?);
            let mut raw = Value::Object(Map::new());
            while let Some((tag, v)) = fields.next_field()? {
                if tag == 1 {
                    raw = serde_json::from_slice(bytes_of(v)?)
                        .map_err(|_| DecodeError::Malformed("FieldsV1 is not JSON"))?;
                }
            }
            raw
        }
        Kind::Inline(_) | Kind::Map(_) => return Err(DecodeError::Malformed("a nested map")),
        _ => scalar(kind, value)?,
    }))
}

fn scalar(kind: Kind, value: WireValue<'_>) -> Result<Value, DecodeError> {
    Ok(match (kind, value) {
        (Kind::Str, WireValue::Bytes(b)) => Value::String(utf8(b)?),
        (Kind::Bytes, WireValue::Bytes(b)) => {
            serde_json::to_value(k8s_openapi::ByteString(b.to_vec()))
                .map_err(|_| DecodeError::Malformed("bytes"))?
        }
        (Kind::Bool, WireValue::Varint(v)) => Value::Bool(v != 0),
        // Protobuf writes a negative int32 as the ten-byte varint of its int64.
        #[allow(clippy::cast_possible_truncation, clippy::cast_possible_wrap)]
        (Kind::I32, WireValue::Varint(v)) => Value::from(v as i64 as i32),
        #[allow(clippy::cast_possible_wrap)]
        (Kind::I64, WireValue::Varint(v)) => Value::from(v as i64),
        _ => return Err(DecodeError::Malformed("a field of the wrong wire type")),
    })
}

fn bytes_of(value: WireValue<'_>) -> Result<&[u8], DecodeError> {
    match value {
        WireValue::Bytes(b) => Ok(b),
        _ => Err(DecodeError::Malformed("a field of the wrong wire type")),
    }
}

fn utf8(bytes: &[u8]) -> Result<String, DecodeError> {
    String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Malformed("a string not in UTF-8"))
}

/// A map entry: key 1, value 2.
fn map_entry(
    of: &Kind,
    bytes: &[u8],
    skipped: &mut Skipped,
) -> Result<(String, Option<Value>), DecodeError> {
    let mut fields = Fields::new(bytes);
    let mut key = String::new();
    let mut value = None;
    while let Some((tag, v)) = fields.next_field()? {
        match tag {
            1 => key = utf8(bytes_of(v)?)?,
            2 => value = single(*of, v, skipped)?,
            _ => {}
        }
    }
    // An entry without a value holds the kind's zero value.
    let value = value.or_else(|| match of {
        Kind::Str | Kind::Quantity => Some(Value::String(String::new())),
        Kind::Bytes => Some(Value::String(String::new())),
        _ => None,
    });
    Ok((key, value))
}

fn time(bytes: &[u8]) -> Result<Option<Value>, DecodeError> {
    let mut fields = Fields::new(bytes);
    let (mut seconds, mut nanos) = (0i64, 0i64);
    while let Some((tag, v)) = fields.next_field()? {
        #[allow(clippy::cast_possible_wrap)]
        match (tag, v) {
            (1, WireValue::Varint(s)) => seconds = s as i64,
            (2, WireValue::Varint(n)) => nanos = n as i64,
            _ => return Err(DecodeError::Malformed("a Time")),
        }
    }
    if seconds == 0 && nanos == 0 {
        return Ok(None);
    }
    let at = k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map_err(|_| DecodeError::Malformed("a Time out of range"))?;
    Ok(Some(Value::String(
        at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )))
}

fn int_or_string(bytes: &[u8]) -> Result<Value, DecodeError> {
    let mut fields = Fields::new(bytes);
    let (mut is_string, mut int, mut string) = (false, 0i64, String::new());
    while let Some((tag, v)) = fields.next_field()? {
        #[allow(clippy::cast_possible_wrap, clippy::cast_possible_truncation)]
        match (tag, v) {
            (1, WireValue::Varint(t)) => is_string = t == 1,
            (2, WireValue::Varint(i)) => int = i64::from(i as i64 as i32),
            (3, WireValue::Bytes(s)) => string = utf8(s)?,
            _ => return Err(DecodeError::Malformed("an IntOrString")),
        }
    }
    Ok(if is_string {
        Value::String(string)
    } else {
        Value::from(int)
    })
}
