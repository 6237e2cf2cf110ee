//! The parts of a resource request every handler reads (get, list, create, update, delete,
//! patch, watch), decoded once by the router.

use bytes::Bytes;
use http::HeaderMap;

use super::AppState;
use super::path::ResourceRequest;
use super::query::Query;
use crate::store::Subresource;

/// The parts of a request the handlers read.
pub(crate) struct Call<'a> {
    pub(crate) app: &'a AppState,
    pub(crate) req: ResourceRequest,
    pub(crate) query: Query,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: Bytes,
}

impl Call<'_> {
    pub(crate) fn namespace(&self) -> &str {
        self.req.namespace.as_deref().unwrap_or("")
    }

    pub(crate) fn name(&self) -> &str {
        self.req.name.as_deref().unwrap_or("")
    }

    pub(crate) fn subresource(&self) -> Subresource {
        match self.req.subresource.as_deref() {
            Some("status") => Subresource::Status,
            Some("finalize") => Subresource::Finalize,
            _ => Subresource::Main,
        }
    }

    pub(crate) fn user_agent(&self) -> Option<&str> {
        self.headers
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
    }
}
