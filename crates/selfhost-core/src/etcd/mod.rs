//! Reading what the API server stored in etcd, without an API server: the key layout, etcd's
//! JSON gateway, and the storage encoding — `k8s\0` and a `runtime.Unknown` around a protobuf
//! message, or JSON — decoded into k8s-openapi's types through the JSON the API would answer
//! with. `selfhost recover` needs it when the control plane that would serve those objects
//! is gone.
//!
//! The protobuf messages are decoded by a schema table (field numbers from k8s-pb, JSON names
//! from k8s-openapi; `scripts/protobuf-schema.py` writes it) of the messages a DaemonSet, a
//! Secret and a ConfigMap reach. A field the table does not know (a newer Kubernetes) is
//! skipped and named in [`Skipped`], so that a caller can say so.

mod decode;
mod envelope;
mod gateway;
mod keys;
mod message;
mod schema;
#[cfg(test)]
mod tests;
mod wire;

pub use decode::Skipped;
pub use envelope::{Decoded, ENCRYPTED_PREFIX, PROTOBUF_MAGIC, decode_object, value_to_json};
pub use gateway::{KeyValue, RANGE_PATH, RangeRequest, RangeResponse};
pub use keys::{DEFAULT_PREFIX, StoredKind, object_key};

/// Why an etcd value could not be read as an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The value is encrypted at rest.
    #[error("it is encrypted at rest (provider {provider})")]
    Encrypted {
        /// The provider named in the prefix (`aescbc`, `kms`, …).
        provider: String,
    },
    /// The value holds another kind than the key's.
    #[error("it holds a {found}, not a {expected}")]
    OtherKind {
        /// What the key names.
        expected: String,
        /// What the value holds.
        found: String,
    },
    /// The envelope names a content encoding (compression) this decoder does not undo.
    #[error("its content encoding {0:?} is not supported")]
    Encoding(String),
    /// No schema for the message.
    #[error("no protobuf schema for {0}")]
    UnknownMessage(String),
    /// A field runs past the end of its message.
    #[error("a field runs past the end of its message")]
    Truncated,
    /// Something is not what the encoding allows.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// The same, inside a field.
    #[error("in {at}: {source}")]
    Within {
        /// The field, `Message.jsonName`.
        at: String,
        /// What was wrong.
        source: Box<DecodeError>,
    },
    /// The JSON does not fit k8s-openapi's type.
    #[error("it does not read as the kind: {0}")]
    NotTheType(String),
}

impl DecodeError {
    /// This error, placed inside the field `at` (the innermost place is kept).
    fn within(self, at: String) -> Self {
        match self {
            DecodeError::Within { .. } => self,
            other => DecodeError::Within {
                at,
                source: Box::new(other),
            },
        }
    }
}
