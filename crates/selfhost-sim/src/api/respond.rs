//! Response bodies: objects, lists, Status errors and Tables, with the content types the
//! apiserver uses.

use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::store::ObjectList;

/// Content type of a Table response.
pub(crate) const TABLE_CONTENT_TYPE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

fn status_code(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// A JSON response with the given status and content type.
pub(crate) fn json_bytes(code: u16, body: Vec<u8>, content_type: &str) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status_code(code);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    resp
}

/// A JSON response.
pub(crate) fn json<T: Serialize + ?Sized>(code: u16, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => json_bytes(code, bytes, "application/json"),
        Err(e) => error(&ApiError::internal(format!("encoding the response: {e}"))),
    }
}

/// A `metav1.Status` error response, with `Retry-After` for 429/503.
pub(crate) fn error(err: &ApiError) -> Response {
    let mut resp = json_bytes(
        err.code,
        serde_json::to_vec(&err.to_status()).unwrap_or_default(),
        "application/json",
    );
    if let Some(secs) = err.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// Adds one `Warning: 299 - "<text>"` header per text, as the apiserver sends warnings
/// (kubectl prints each as `Warning: <text>`). Texts that cannot be a header are skipped.
pub(crate) fn with_warnings(mut resp: Response, warnings: &[String]) -> Response {
    let mut seen: Vec<&String> = Vec::new();
    for text in warnings {
        // The apiserver sends each distinct warning once.
        if seen.contains(&text) {
            continue;
        }
        seen.push(text);
        let quoted = text.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_bytes(format!("299 - \"{quoted}\"").as_bytes()) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// A plain-text response (health endpoints).
pub(crate) fn text(code: u16, body: String) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status_code(code);
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

/// Whether the client asked for a Table (`kubectl get`).
pub(crate) fn wants_table(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .next()
        .is_some_and(|first| first.replace(' ', "").contains("as=Table"))
}

#[derive(Serialize)]
struct ListBody<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: String,
    metadata: Value,
    items: Vec<&'a Value>,
}

/// Where a list page ends: the token for the next page and how many items follow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Page<'a> {
    /// `metadata.continue`.
    pub(crate) continue_token: Option<&'a str>,
    /// `metadata.remainingItemCount`.
    pub(crate) remaining_item_count: Option<u64>,
}

impl<'a> Page<'a> {
    /// The page a store list ended on.
    pub(crate) fn of(list: &'a ObjectList) -> Self {
        Page {
            continue_token: list.continue_token.as_deref(),
            remaining_item_count: list.remaining_item_count,
        }
    }
}

/// A `ListMeta`: the resource version and, for a page that is not the last, what follows.
fn list_metadata(resource_version: u64, page: Page<'_>) -> Value {
    let mut metadata = json!({ "resourceVersion": resource_version.to_string() });
    if let Some(c) = page.continue_token {
        metadata["continue"] = json!(c);
    }
    if let Some(n) = page.remaining_item_count {
        metadata["remainingItemCount"] = json!(n);
    }
    metadata
}

/// The body of a list: `{"kind":"PodList","apiVersion":"v1","metadata":{...},"items":[...]}`.
pub(crate) fn list(rt: &ResourceType, list: &ObjectList) -> Response {
    json(
        200,
        &ListBody {
            kind: rt.list_kind,
            api_version: rt.api_version(),
            metadata: list_metadata(list.resource_version, Page::of(list)),
            items: list.items.iter().map(|i| &**i).collect(),
        },
    )
}

/// A list of items built from arbitrary objects (deletecollection's answer).
pub(crate) fn plain_list(
    rt: &ResourceType,
    items: &[Arc<Value>],
    resource_version: u64,
) -> Response {
    json(
        200,
        &ListBody {
            kind: rt.list_kind,
            api_version: rt.api_version(),
            metadata: json!({ "resourceVersion": resource_version.to_string() }),
            items: items.iter().map(|i| &**i).collect(),
        },
    )
}

/// A Table of objects for `kubectl get`. Tables page like lists: a page's metadata carries
/// `continue` and `remainingItemCount` (`kubectl get --chunk-size` follows them).
pub(crate) fn table(
    rt: &ResourceType,
    items: &[Arc<Value>],
    resource_version: u64,
    page: Page<'_>,
    include_object: &str,
) -> Response {
    let owned: Vec<Value> = items.iter().map(|i| (**i).clone()).collect();
    let mut table =
        crate::table::to_table(rt, &owned, &resource_version.to_string(), include_object);
    table["metadata"] = list_metadata(resource_version, page);
    match serde_json::to_vec(&table) {
        Ok(bytes) => json_bytes(200, bytes, TABLE_CONTENT_TYPE),
        Err(e) => error(&ApiError::internal(format!("encoding the table: {e}"))),
    }
}

/// The `Status` of an immediate deletion.
pub(crate) fn deleted_status(rt: &ResourceType, obj: &Value) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": crate::store::meta::name(obj),
            "group": rt.group,
            "kind": rt.plural,
            "uid": crate::store::meta::uid(obj),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_first_choice_of_table_gets_a_table() {
        let mut h = HeaderMap::new();
        h.insert(
            header::ACCEPT,
            HeaderValue::from_static(
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
            ),
        );
        assert!(wants_table(&h));
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!wants_table(&h));
    }

    #[test]
    fn warnings_are_quoted_headers_sent_once_each() {
        let texts = [
            r#"unknown field "spec.bogus""#.to_string(),
            r#"duplicate field "a\b""#.to_string(),
            r#"unknown field "spec.bogus""#.to_string(),
        ];
        let r = with_warnings(json(200, &json!({})), &texts);
        let sent: Vec<&str> = r
            .headers()
            .get_all(header::WARNING)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(
            sent,
            [
                r#"299 - "unknown field \"spec.bogus\"""#,
                r#"299 - "duplicate field \"a\\b\"""#,
            ]
        );
    }

    #[test]
    fn errors_carry_retry_after() {
        let r = error(&ApiError::too_many_requests(3));
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()[header::RETRY_AFTER], "3");
    }
}
