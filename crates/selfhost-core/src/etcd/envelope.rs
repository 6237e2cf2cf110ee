//! What the API server puts in an etcd value: `k8s\0` and a `runtime.Unknown` holding the
//! type and the protobuf message (the default storage media type), a JSON object (a server
//! told `--storage-media-type=application/json`), or `k8s:enc:<provider>:…` (encrypted at rest,
//! unreadable without the server's key).

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::DecodeError;
use super::decode::{Skipped, message_to_json};
use super::wire::{Fields, WireValue};

/// The four bytes every protobuf object the API server stores starts with.
pub const PROTOBUF_MAGIC: &[u8] = b"k8s\0";
/// How a value encrypted at rest starts.
pub const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

/// An object read from an etcd value, and what its decoding skipped.
#[derive(Debug, Clone)]
pub struct Decoded<T> {
    /// The object.
    pub object: T,
    /// Fields the schema does not know (none when it is as new as the server).
    pub skipped: Skipped,
}

/// The protobuf message that holds a kind in storage.
fn message_name(api_version: &str, kind: &str) -> Option<&'static str> {
    Some(match (api_version, kind) {
        ("apps/v1", "DaemonSet") => "api.apps.v1.DaemonSet",
        ("v1", "Secret") => "api.core.v1.Secret",
        ("v1", "ConfigMap") => "api.core.v1.ConfigMap",
        _ => return None,
    })
}

/// Decodes an etcd value holding a `kind` object of `api_version` into the JSON the API
/// would answer with.
///
/// # Errors
/// The value is encrypted, of another kind, compressed, or not a valid encoding.
pub fn value_to_json(
    value: &[u8],
    api_version: &str,
    kind: &str,
) -> Result<(Value, Skipped), DecodeError> {
    if let Some(rest) = value.strip_prefix(ENCRYPTED_PREFIX) {
        let provider = rest
            .split(|b| *b == b':')
            .next()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default();
        return Err(DecodeError::Encrypted { provider });
    }
    let mut skipped = Skipped::default();
    let mut json = if let Some(unknown) = value.strip_prefix(PROTOBUF_MAGIC) {
        let (stored_version, stored_kind, raw) = unknown_parts(unknown)?;
        if stored_version != api_version || stored_kind != kind {
            return Err(DecodeError::OtherKind {
                expected: format!("{api_version} {kind}"),
                found: format!("{stored_version} {stored_kind}"),
            });
        }
        let name = message_name(api_version, kind)
            .ok_or_else(|| DecodeError::UnknownMessage(format!("{api_version} {kind}")))?;
        Value::Object(message_to_json(name, raw, &mut skipped)?)
    } else if value.first() == Some(&b'{') {
        serde_json::from_slice(value).map_err(|_| DecodeError::Malformed("JSON"))?
    } else {
        return Err(DecodeError::Malformed(
            "neither Kubernetes protobuf (k8s\\0) nor JSON",
        ));
    };
    if let Value::Object(object) = &mut json {
        object.insert("apiVersion".into(), Value::from(api_version));
        object.insert("kind".into(), Value::from(kind));
    }
    Ok((json, skipped))
}

/// Decodes an etcd value into a k8s-openapi object.
///
/// # Errors
/// As [`value_to_json`], or the JSON does not fit the type.
pub fn decode_object<T: DeserializeOwned + k8s_openapi::Resource>(
    value: &[u8],
) -> Result<Decoded<T>, DecodeError> {
    let (json, skipped) = value_to_json(value, T::API_VERSION, T::KIND)?;
    let object =
        serde_json::from_value(json).map_err(|e| DecodeError::NotTheType(e.to_string()))?;
    Ok(Decoded { object, skipped })
}

/// The type, and the raw message, of a `runtime.Unknown`.
fn unknown_parts(bytes: &[u8]) -> Result<(String, String, &[u8]), DecodeError> {
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    let mut fields = Fields::new(bytes);
    while let Some((tag, value)) = fields.next_field()? {
        let WireValue::Bytes(b) = value else {
            return Err(DecodeError::Malformed("runtime.Unknown"));
        };
        match tag {
            1 => {
                let mut meta = Fields::new(b);
                while let Some((tag, value)) = meta.next_field()? {
                    let WireValue::Bytes(s) = value else {
                        return Err(DecodeError::Malformed("TypeMeta"));
                    };
                    let s = String::from_utf8_lossy(s).into_owned();
                    match tag {
                        1 => api_version = s,
                        2 => kind = s,
                        _ => {}
                    }
                }
            }
            2 => raw = b,
            3 if !b.is_empty() => {
                return Err(DecodeError::Encoding(
                    String::from_utf8_lossy(b).into_owned(),
                ));
            }
            _ => {}
        }
    }
    Ok((api_version, kind, raw))
}
