//! Discovery documents (`/api`, `/apis`, group versions, aggregated discovery) and OpenAPI,
//! served from the documents the `discovery` module derives from the resource registry.

use axum::extract::Path;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, header};
use serde_json::Value;

use super::respond;
use crate::discovery;
use crate::error::ApiError;

fn found(doc: Option<Value>) -> Response {
    match doc {
        Some(d) => respond::json(200, &d),
        None => respond::error(&ApiError::not_found_plain()),
    }
}

/// Whether the client's preferred representation is aggregated discovery v2 (kubectl ≥ 1.30).
fn wants_aggregated(headers: &HeaderMap) -> bool {
    let first = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .next()
        .unwrap_or("");
    let params: Vec<&str> = first.split(';').map(str::trim).collect();
    ["g=apidiscovery.k8s.io", "v=v2", "as=APIGroupDiscoveryList"]
        .iter()
        .all(|p| params.contains(p))
}

/// `/api` or `/apis`, legacy or aggregated as the Accept header asks.
pub(crate) fn root(core: bool, headers: &HeaderMap) -> Response {
    let mut resp = if wants_aggregated(headers) {
        let body = serde_json::to_vec(&discovery::aggregated_discovery(core)).unwrap_or_default();
        respond::json_bytes(200, body, discovery::AGGREGATED_DISCOVERY_MEDIA_TYPE)
    } else if core {
        respond::json(200, &discovery::api_versions())
    } else {
        respond::json(200, &discovery::api_group_list())
    };
    resp.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept"));
    resp
}

/// `/apis/<group>`.
pub(crate) fn group(group: &str) -> Response {
    found(discovery::api_group(group))
}

/// `/api/v1`, `/apis/<group>/<version>`.
pub(crate) fn group_version(group: &str, version: &str) -> Response {
    found(discovery::api_resource_list(group, version))
}

/// `/openapi/v2`.
pub(crate) async fn openapi_v2() -> Response {
    found(discovery::openapi_v2())
}

/// `/openapi/v3`.
pub(crate) async fn openapi_v3_root() -> Response {
    respond::json(200, &discovery::openapi_v3_root())
}

/// `/openapi/v3/<group path>`.
pub(crate) async fn openapi_v3_group(Path(path): Path<String>) -> Response {
    found(discovery::openapi_v3_group(&path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregated_discovery_is_served_when_it_is_the_first_choice() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static(
                "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json",
            ),
        );
        assert!(wants_aggregated(&h));
        let r = root(true, &h);
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            discovery::AGGREGATED_DISCOVERY_MEDIA_TYPE
        );
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!wants_aggregated(&h));
        assert_eq!(
            root(false, &h).headers()[header::CONTENT_TYPE],
            "application/json"
        );
    }
}
