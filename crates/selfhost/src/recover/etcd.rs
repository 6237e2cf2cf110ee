//! Reading etcd's keys one at a time through its JSON gateway.

use selfhost_core::etcd::{RANGE_PATH, RangeRequest, RangeResponse};

use super::RecoverError;
use crate::etcd_client::{EtcdAccess, endpoints};

/// One etcd endpoint that answered.
pub(super) struct Etcd {
    client: kube::Client,
    pub endpoint: String,
}

impl Etcd {
    /// The first endpoint that answers a read, with why each before it did not.
    pub async fn connect(access: &EtcdAccess, prefix: &str) -> Result<Etcd, RecoverError> {
        let mut failures = Vec::new();
        for endpoint in endpoints(access).await? {
            let etcd = Etcd {
                client: endpoint.client,
                endpoint: endpoint.endpoint,
            };
            // A read of the prefix itself proves the endpoint, the TLS and the certificate.
            match etcd.get(prefix).await {
                Ok(_) => return Ok(etcd),
                Err(e) => failures.push(e.to_string()),
            }
        }
        Err(RecoverError::Unreachable {
            endpoints: access.endpoints.join(","),
            reasons: failures.join("; "),
        })
    }

    /// The value at `key`, `None` when there is none.
    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, RecoverError> {
        let failed = |reason: String| RecoverError::Request {
            endpoint: self.endpoint.clone(),
            reason,
        };
        let body =
            serde_json::to_vec(&RangeRequest::key(key)).map_err(|e| failed(e.to_string()))?;
        let request = http::Request::post(RANGE_PATH)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| failed(e.to_string()))?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|e| failed(crate::api_call::describe(&e)))?;
        let answer: RangeResponse = serde_json::from_str(&text)
            .map_err(|e| failed(format!("not an etcd range answer: {e}")))?;
        Ok(answer
            .kvs
            .into_iter()
            .find(|kv| kv.key.0 == key.as_bytes())
            .map(|kv| kv.value.map(|v| v.0).unwrap_or_default()))
    }
}
