//! Discovery documents (`/api`, `/apis`, group versions, aggregated discovery) and OpenAPI.

use axum::response::Response;
use http::HeaderMap;

use super::respond;
use crate::error::ApiError;

fn not_served() -> Response {
    respond::error(&ApiError::not_found_plain())
}

/// `/api` or `/apis`.
pub(crate) fn root(_core: bool, _headers: &HeaderMap) -> Response {
    not_served()
}

/// `/apis/<group>`.
pub(crate) fn group(_group: &str) -> Response {
    not_served()
}

/// `/api/v1`, `/apis/<group>/<version>`.
pub(crate) fn group_version(_group: &str, _version: &str) -> Response {
    not_served()
}

/// `/openapi/v2`.
pub(crate) async fn openapi_v2() -> Response {
    not_served()
}

/// `/openapi/v3`.
pub(crate) async fn openapi_v3_root() -> Response {
    not_served()
}

/// `/openapi/v3/<group path>`.
pub(crate) async fn openapi_v3_group() -> Response {
    not_served()
}
