//! `SelfSubjectAccessReview` bodies in Kubernetes protobuf, which `kubectl auth can-i` sends:
//! the envelope (`k8s\0`, then a `runtime.Unknown` holding the raw message) and the fields a
//! review asks with, decoded into the JSON form [`super::review::answer`] reads.
//!
//! Field numbers are those of `k8s.io/api/authorization/v1` (`SelfSubjectAccessReview`:
//! metadata 1, spec 2, status 3; spec: resourceAttributes 1, nonResourceAttributes 2;
//! ResourceAttributes: namespace 1, verb 2, group 3, version 4, resource 5, subresource 6,
//! name 7; NonResourceAttributes: path 1, verb 2). Selectors and metadata are skipped: the
//! authorizer does not look at them.

use serde_json::{Map, Value};

/// The media type of Kubernetes protobuf bodies.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Why a protobuf review could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("the body does not start with the Kubernetes protobuf prefix")]
    Magic,
    /// A field is cut short, a varint too long, or a wire type unknown.
    #[error("malformed protobuf: {0}")]
    Malformed(&'static str),
    /// A string that is not UTF-8.
    #[error("a string field is not UTF-8")]
    Utf8,
    /// A compressed or otherwise encoded envelope.
    #[error("content encoding {0:?} is not supported")]
    Encoding(String),
}

enum Wire<'a> {
    Varint,
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, ProtobufError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes
            .get(*at)
            .ok_or(ProtobufError::Malformed("truncated varint"))?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(ProtobufError::Malformed("varint longer than 64 bits"))
}

/// The fields of one message, in order.
fn fields(bytes: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, ProtobufError> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let wire = match key & 7 {
            0 => {
                varint(bytes, &mut at)?;
                Wire::Varint
            }
            1 | 5 => {
                let width = if key & 7 == 1 { 8 } else { 4 };
                at += width;
                if at > bytes.len() {
                    return Err(ProtobufError::Malformed("truncated fixed-width field"));
                }
                Wire::Fixed
            }
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?)
                    .map_err(|_| ProtobufError::Malformed("length too large"))?;
                let end = at
                    .checked_add(len)
                    .filter(|end| *end <= bytes.len())
                    .ok_or(ProtobufError::Malformed("truncated length-delimited field"))?;
                let value = &bytes[at..end];
                at = end;
                Wire::Bytes(value)
            }
            _ => return Err(ProtobufError::Malformed("unknown wire type")),
        };
        out.push((key >> 3, wire));
    }
    Ok(out)
}

fn strings(bytes: &[u8], names: &[(u64, &str)]) -> Result<Value, ProtobufError> {
    let mut object = Map::new();
    for (number, wire) in fields(bytes)? {
        if let (Some((_, name)), Wire::Bytes(value)) =
            (names.iter().find(|(n, _)| *n == number), wire)
        {
            let text = std::str::from_utf8(value).map_err(|_| ProtobufError::Utf8)?;
            object.insert((*name).to_string(), Value::String(text.to_string()));
        }
    }
    Ok(Value::Object(object))
}

fn message(bytes: &[u8], number: u64) -> Result<Option<&[u8]>, ProtobufError> {
    Ok(fields(bytes)?.into_iter().find_map(|(n, wire)| match wire {
        Wire::Bytes(value) if n == number => Some(value),
        _ => None,
    }))
}

/// The review in `body` as JSON: `{"spec": {"resourceAttributes": {...}}}` or with
/// `nonResourceAttributes`.
///
/// # Errors
/// [`ProtobufError`] for a body that is not a well-formed Kubernetes protobuf message.
pub fn review(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body.strip_prefix(b"k8s\0").ok_or(ProtobufError::Magic)?;
    if let Some(encoding) = message(envelope, 3)?.filter(|e| !e.is_empty()) {
        return Err(ProtobufError::Encoding(
            String::from_utf8_lossy(encoding).into_owned(),
        ));
    }
    let raw = message(envelope, 2)?.unwrap_or_default();
    let spec_bytes = message(raw, 2)?.unwrap_or_default();
    let mut spec = Map::new();
    if let Some(attrs) = message(spec_bytes, 1)? {
        let names = [
            (1, "namespace"),
            (2, "verb"),
            (3, "group"),
            (4, "version"),
            (5, "resource"),
            (6, "subresource"),
            (7, "name"),
        ];
        spec.insert("resourceAttributes".into(), strings(attrs, &names)?);
    }
    if let Some(attrs) = message(spec_bytes, 2)? {
        let names = [(1, "path"), (2, "verb")];
        spec.insert("nonResourceAttributes".into(), strings(attrs, &names)?);
    }
    Ok(serde_json::json!({ "spec": spec }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u64, value: &[u8]) -> Vec<u8> {
        let mut out = vec![u8::try_from(number << 3 | 2).unwrap()];
        out.push(u8::try_from(value.len()).unwrap());
        out.extend_from_slice(value);
        out
    }

    #[test]
    fn a_kubectl_review_decodes_to_its_attributes() {
        let attrs = [
            field(1, b"kube-system"),
            field(2, b"update"),
            field(3, b"apps"),
            field(5, b"daemonsets"),
            field(7, b"real"),
        ]
        .concat();
        let spec = field(1, &attrs);
        let raw = [field(1, b""), field(2, &spec)].concat();
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        assert_eq!(
            review(&body).unwrap(),
            serde_json::json!({"spec": {"resourceAttributes": {
                "namespace": "kube-system", "verb": "update", "group": "apps",
                "resource": "daemonsets", "name": "real",
            }}})
        );
        let path = field(2, &[field(1, b"/readyz"), field(2, b"get")].concat());
        let body = [b"k8s\0".to_vec(), field(2, &field(2, &path))].concat();
        assert_eq!(
            review(&body).unwrap()["spec"]["nonResourceAttributes"],
            serde_json::json!({"path": "/readyz", "verb": "get"})
        );
    }

    #[test]
    fn malformed_bodies_are_refused_not_guessed() {
        assert_eq!(review(b"{}"), Err(ProtobufError::Magic));
        assert!(matches!(
            review(b"k8s\0\x12\x09abc"),
            Err(ProtobufError::Malformed(_))
        ));
        assert!(matches!(
            review(b"k8s\0\x1a\x04gzip"),
            Err(ProtobufError::Encoding(_))
        ));
        assert!(matches!(
            review(b"k8s\0\x0f"),
            Err(ProtobufError::Malformed(_))
        ));
    }
}
