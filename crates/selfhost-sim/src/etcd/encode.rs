//! An object as the store holds it (the API's JSON) into the protobuf message the API server
//! writes to etcd, by the schema tables; then wrapped as it stores it: `k8s\0` and a
//! `runtime.Unknown` naming the type.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use super::message::{Field, Kind};
use super::wire::{message, put_bytes_field, put_varint_field};

/// The four bytes every protobuf object in etcd starts with.
const MAGIC: &[u8] = b"k8s\0";

/// The protobuf message that holds a kind in storage, where there is one in the schema.
pub(crate) fn message_name(api_version: &str, kind: &str) -> Option<&'static str> {
    Some(match (api_version, kind) {
        ("apps/v1", "DaemonSet") => "api.apps.v1.DaemonSet",
        ("v1", "Secret") => "api.core.v1.Secret",
        ("v1", "ConfigMap") => "api.core.v1.ConfigMap",
        _ => return None,
    })
}

/// `object` as the API server stores it: protobuf in the envelope.
pub(crate) fn stored_protobuf(name: &str, object: &Value) -> Result<Vec<u8>, String> {
    let Value::Object(fields) = object else {
        return Err("not an object".into());
    };
    let api_version = fields
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = fields.get("kind").and_then(Value::as_str).unwrap_or("");
    let mut body = fields.clone();
    body.remove("apiVersion");
    body.remove("kind");
    let raw = encode_message(name, &body)?;
    let mut type_meta = Vec::new();
    put_bytes_field(&mut type_meta, 1, api_version.as_bytes());
    put_bytes_field(&mut type_meta, 2, kind.as_bytes());
    let mut unknown = Vec::new();
    put_bytes_field(&mut unknown, 1, &type_meta);
    put_bytes_field(&mut unknown, 2, &raw);
    put_bytes_field(&mut unknown, 3, b"");
    put_bytes_field(&mut unknown, 4, b"");
    let mut value = MAGIC.to_vec();
    value.extend(unknown);
    Ok(value)
}

/// Where a JSON key of a message goes: one of its fields, or a field of an embedded message.
fn place<'a>(fields: &'a [Field], key: &str) -> Option<&'a Field> {
    if let Some(field) = fields
        .iter()
        .find(|f| f.json == key && !matches!(f.kind, Kind::Inline(_)))
    {
        return Some(field);
    }
    fields.iter().find(|f| match f.kind {
        Kind::Inline(name) => message(name).is_some_and(|m| place(m.fields, key).is_some()),
        _ => false,
    })
}

/// Encodes the JSON object `object` as the message `name`. A key the schema does not know is
/// an error: nothing stored is dropped unnoticed.
pub(crate) fn encode_message(name: &str, object: &Map<String, Value>) -> Result<Vec<u8>, String> {
    let schema = message(name).ok_or_else(|| format!("no schema for {name}"))?;
    let mut inline: Vec<(&Field, Map<String, Value>)> = Vec::new();
    let mut direct: Vec<(&Field, &Value)> = Vec::new();
    for (key, value) in object {
        let field =
            place(schema.fields, key).ok_or_else(|| format!("{name} has no field {key:?}"))?;
        if matches!(field.kind, Kind::Inline(_)) {
            match inline.iter_mut().find(|(f, _)| f.tag == field.tag) {
                Some((_, map)) => {
                    map.insert(key.clone(), value.clone());
                }
                None => inline.push((field, Map::from_iter([(key.clone(), value.clone())]))),
            }
        } else {
            direct.push((field, value));
        }
    }
    let mut out = Vec::new();
    let mut all: Vec<(u32, Vec<u8>)> = Vec::new();
    for (field, map) in &inline {
        if let Kind::Inline(inner) = field.kind {
            let mut bytes = Vec::new();
            put_bytes_field(&mut bytes, field.tag, &encode_message(inner, map)?);
            all.push((field.tag, bytes));
        }
    }
    for (field, value) in direct {
        let mut bytes = Vec::new();
        encode_field(&mut bytes, field, value)
            .map_err(|e| format!("{name}.{}: {e}", field.json))?;
        all.push((field.tag, bytes));
    }
    // Go writes fields in the order of their numbers.
    all.sort_by_key(|(tag, _)| *tag);
    for (_, bytes) in all {
        out.extend(bytes);
    }
    Ok(out)
}

fn encode_field(out: &mut Vec<u8>, field: &Field, value: &Value) -> Result<(), String> {
    if value.is_null() {
        return Ok(());
    }
    if let Kind::Map(of) = field.kind {
        let Value::Object(map) = value else {
            return Err("not a map".into());
        };
        for (key, entry) in map {
            let mut bytes = Vec::new();
            put_bytes_field(&mut bytes, 1, key.as_bytes());
            encode_value(&mut bytes, 2, *of, entry)?;
            put_bytes_field(out, field.tag, &bytes);
        }
        return Ok(());
    }
    if field.repeated {
        let Value::Array(items) = value else {
            return Err("not a list".into());
        };
        for item in items {
            encode_value(out, field.tag, field.kind, item)?;
        }
        return Ok(());
    }
    encode_value(out, field.tag, field.kind, value)
}

fn encode_value(out: &mut Vec<u8>, tag: u32, kind: Kind, value: &Value) -> Result<(), String> {
    match (kind, value) {
        (_, Value::Null) => {}
        (Kind::Str, Value::String(s)) => put_bytes_field(out, tag, s.as_bytes()),
        (Kind::Bytes, Value::String(s)) => {
            let bytes = STANDARD.decode(s).map_err(|e| format!("not base64: {e}"))?;
            put_bytes_field(out, tag, &bytes);
        }
        (Kind::Bool, Value::Bool(b)) => put_varint_field(out, tag, u64::from(*b)),
        (Kind::I32 | Kind::I64, Value::Number(n)) => {
            let n = n.as_i64().ok_or("not an integer")?;
            // Protobuf writes a negative integer as the varint of its two's complement.
            put_varint_field(out, tag, n as u64);
        }
        (Kind::Msg(name), Value::Object(map)) => {
            put_bytes_field(out, tag, &encode_message(name, map)?);
        }
        (Kind::Time, Value::String(s)) => {
            let at: jiff::Timestamp = s.parse().map_err(|e| format!("not a time: {e}"))?;
            let mut bytes = Vec::new();
            put_varint_field(&mut bytes, 1, at.as_second() as u64);
            if at.subsec_nanosecond() != 0 {
                put_varint_field(&mut bytes, 2, at.subsec_nanosecond() as u64);
            }
            put_bytes_field(out, tag, &bytes);
        }
        (Kind::IntOrString, Value::Number(n)) => {
            let mut bytes = Vec::new();
            put_varint_field(&mut bytes, 1, 0);
            put_varint_field(&mut bytes, 2, n.as_i64().ok_or("not an integer")? as u64);
            put_bytes_field(out, tag, &bytes);
        }
        (Kind::IntOrString, Value::String(s)) => {
            let mut bytes = Vec::new();
            put_varint_field(&mut bytes, 1, 1);
            put_bytes_field(&mut bytes, 3, s.as_bytes());
            put_bytes_field(out, tag, &bytes);
        }
        (Kind::Quantity, Value::String(s)) => {
            let mut bytes = Vec::new();
            put_bytes_field(&mut bytes, 1, s.as_bytes());
            put_bytes_field(out, tag, &bytes);
        }
        (Kind::Quantity, Value::Number(n)) => {
            let mut bytes = Vec::new();
            put_bytes_field(&mut bytes, 1, n.to_string().as_bytes());
            put_bytes_field(out, tag, &bytes);
        }
        (Kind::FieldsV1, v) => {
            let raw = serde_json::to_vec(v).map_err(|e| e.to_string())?;
            let mut bytes = Vec::new();
            put_bytes_field(&mut bytes, 1, &raw);
            put_bytes_field(out, tag, &bytes);
        }
        (kind, value) => return Err(format!("{value} is not a {kind:?}")),
    }
    Ok(())
}
