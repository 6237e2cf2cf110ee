//! etcd's JSON gateway (grpc-gateway over the v3 API): `POST /v3/kv/range` with the key in
//! base64, answered with the key-values in base64 and every int64 as a string.

use k8s_openapi::ByteString;
use serde::{Deserialize, Serialize};

/// The gateway's path of a range read.
pub const RANGE_PATH: &str = "/v3/kv/range";

/// A `RangeRequest`: one key, or with `range_end` every key in `[key, range_end)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeRequest {
    /// The key, or the first of the range.
    pub key: ByteString,
    /// The end of the range (exclusive); absent for one key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub range_end: Option<ByteString>,
}

/// One key-value of a `RangeResponse`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyValue {
    /// The key.
    pub key: ByteString,
    /// The value; absent when empty.
    #[serde(default)]
    pub value: Option<ByteString>,
    /// The revision of its last change, an int64 as a string.
    #[serde(default)]
    pub mod_revision: Option<String>,
}

/// A `RangeResponse`; the gateway leaves out `kvs` when nothing matched.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RangeResponse {
    /// What matched.
    #[serde(default)]
    pub kvs: Vec<KeyValue>,
}

impl RangeRequest {
    /// A read of one key.
    pub fn key(key: &str) -> Self {
        RangeRequest {
            key: ByteString(key.as_bytes().to_vec()),
            range_end: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_are_the_gateways_json() {
        let body = serde_json::to_value(RangeRequest::key("/registry/secrets/kube-system/ca"))
            .expect("json");
        assert_eq!(
            body,
            serde_json::json!({"key": "L3JlZ2lzdHJ5L3NlY3JldHMva3ViZS1zeXN0ZW0vY2E="})
        );
        let answer: RangeResponse = serde_json::from_str(
            r#"{"header":{"revision":"7"},"kvs":[{"key":"YQ==","create_revision":"2",
            "mod_revision":"5","version":"1","value":"Yg=="}],"count":"1"}"#,
        )
        .expect("parses");
        assert_eq!(answer.kvs[0].value, Some(ByteString(b"b".to_vec())));
        let empty: RangeResponse =
            serde_json::from_str(r#"{"header":{"revision":"7"}}"#).expect("parses");
        assert!(empty.kvs.is_empty());
    }
}
