//! Request bodies in Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), which
//! kubectl's generator commands send (`kubectl create namespace|configmap|secret generic|
//! serviceaccount`). Decoded: the envelope (the magic `k8s\0`, then a `runtime.Unknown`
//! holding the type and the raw message) and exactly the messages of those four kinds, into
//! the JSON the store takes. Answers stay JSON, which kubectl accepts (it asks for
//! `application/vnd.kubernetes.protobuf,application/json`).
//!
//! Every field of those messages that this decoder does not map is rejected rather than
//! skipped, so nothing a client sends is silently lost; Go's encoder always writes
//! non-pointer fields, so zero values of system fields (`selfLink`, `generation`, an empty
//! `creationTimestamp`) are accepted and omitted, as Go's JSON encoder would omit them.

mod messages;
mod wire;

use serde_json::Value;

use crate::error::ApiError;
use crate::resources::ResourceType;
use wire::{Fields, WireValue};

/// The media type of Kubernetes protobuf bodies.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The four bytes every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

/// The kinds whose protobuf messages are decoded: the ones kubectl's generators create.
const KINDS: &[&str] = &["Namespace", "ConfigMap", "Secret", "ServiceAccount"];

/// Why a protobuf body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("the body does not start with the Kubernetes protobuf prefix")]
    Magic,
    /// A field runs past the end of its message.
    #[error("a field runs past the end of its message")]
    Truncated,
    /// A varint longer than 64 bits.
    #[error("malformed varint")]
    BadVarint,
    /// Field number 0, which protobuf does not allow.
    #[error("field number 0")]
    FieldZero,
    /// A wire type no Kubernetes message uses (groups) or that does not exist.
    #[error("unsupported wire type {0}")]
    WireType(u64),
    /// A field of the wrong wire type.
    #[error("{message} field {field} has the wrong wire type")]
    WrongType {
        /// The message being decoded.
        message: &'static str,
        /// The field number.
        field: u32,
    },
    /// A string that is not UTF-8.
    #[error("{message} field {field} is not UTF-8")]
    Utf8 {
        /// The message being decoded.
        message: &'static str,
        /// The field number.
        field: u32,
    },
    /// A field this decoder does not map (rejected rather than dropped).
    #[error("{message} field {field} is not decoded by this server")]
    Unsupported {
        /// The message being decoded.
        message: &'static str,
        /// The field number.
        field: u32,
    },
    /// The endpoint serves a kind whose protobuf message is not decoded.
    #[error("{0} bodies are not decoded from protobuf")]
    Kind(&'static str),
    /// The envelope is compressed or nests another encoding.
    #[error("content encoding {0:?} is not supported")]
    Encoding(String),
    /// The envelope names another type than the endpoint serves.
    #[error("the body is a {api_version}/{kind}, not a {expected}")]
    WrongKind {
        /// `apiVersion` of the envelope.
        api_version: String,
        /// `kind` of the envelope.
        kind: String,
        /// What the endpoint serves.
        expected: String,
    },
}

impl ProtobufError {
    /// 415, naming what the server decodes, so that the client can send JSON instead.
    pub(crate) fn to_api_error(&self) -> ApiError {
        let mut err = ApiError::unsupported_media_type(&["application/json", "application/yaml"]);
        err.message = format!(
            "{}; {MEDIA_TYPE} only for {} (this body: {self})",
            err.message,
            KINDS.join(", ")
        );
        err
    }
}

/// Whether protobuf bodies of `rt` are decoded.
pub(crate) fn decodes(rt: &ResourceType) -> bool {
    rt.group.is_empty() && KINDS.contains(&rt.kind)
}

/// Decodes a protobuf body of a `rt` object into its JSON form.
///
/// # Errors
/// [`ProtobufError`] for anything but a well-formed message of one of the four kinds the
/// endpoint serves.
pub(crate) fn decode(rt: &ResourceType, body: &[u8]) -> Result<Value, ProtobufError> {
    if !decodes(rt) {
        return Err(ProtobufError::Kind(rt.kind));
    }
    let envelope = body.strip_prefix(MAGIC).ok_or(ProtobufError::Magic)?;
    let unknown = Unknown::decode(envelope)?;
    if !unknown.content_encoding.is_empty() {
        return Err(ProtobufError::Encoding(unknown.content_encoding));
    }
    let expected = format!("{}/{}", rt.api_version(), rt.kind);
    let named = (unknown.api_version.as_str(), unknown.kind.as_str());
    if named != ("", "") && named != (rt.api_version().as_str(), rt.kind) {
        return Err(ProtobufError::WrongKind {
            api_version: unknown.api_version,
            kind: unknown.kind,
            expected,
        });
    }
    let mut object = match rt.kind {
        "Namespace" => messages::namespace(unknown.raw)?,
        "ConfigMap" => messages::config_map(unknown.raw)?,
        "Secret" => messages::secret(unknown.raw)?,
        "ServiceAccount" => messages::service_account(unknown.raw)?,
        other => return Err(ProtobufError::Kind(other)),
    };
    object.insert("apiVersion".into(), Value::String(rt.api_version()));
    object.insert("kind".into(), Value::String(rt.kind.to_string()));
    Ok(Value::Object(object))
}

/// `runtime.Unknown`: the type, then the raw message.
#[derive(Debug, Default)]
struct Unknown<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
}

impl<'a> Unknown<'a> {
    fn decode(bytes: &'a [u8]) -> Result<Self, ProtobufError> {
        const MESSAGE: &str = "Unknown";
        let mut unknown = Unknown::default();
        for field in Fields::of(bytes) {
            match field? {
                (1, WireValue::Bytes(type_meta)) => {
                    for field in Fields::of(type_meta) {
                        match field? {
                            (1, v) => unknown.api_version = messages::string("TypeMeta", 1, v)?,
                            (2, v) => unknown.kind = messages::string("TypeMeta", 2, v)?,
                            (field, _) => {
                                return Err(ProtobufError::Unsupported {
                                    message: "TypeMeta",
                                    field,
                                });
                            }
                        }
                    }
                }
                (2, WireValue::Bytes(raw)) => unknown.raw = raw,
                (3, v) => unknown.content_encoding = messages::string(MESSAGE, 3, v)?,
                // The content type of `raw`: protobuf, whatever it says.
                (4, v) => {
                    messages::string(MESSAGE, 4, v)?;
                }
                (field @ (1 | 2), _) => {
                    return Err(ProtobufError::WrongType {
                        message: MESSAGE,
                        field,
                    });
                }
                (field, _) => {
                    return Err(ProtobufError::Unsupported {
                        message: MESSAGE,
                        field,
                    });
                }
            }
        }
        Ok(unknown)
    }
}

#[cfg(test)]
mod tests;
