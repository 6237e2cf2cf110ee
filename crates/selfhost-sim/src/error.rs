//! API errors as the real kube-apiserver reports them: a `metav1.Status` with the exact
//! `reason`, `code`, `details` and message wording (kube-rs matches on `reason`).

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// An error response of the simulated API server.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// Machine-readable reason (`NotFound`, `Conflict`, ...).
    pub reason: String,
    /// Human-readable message, worded as the real apiserver words it.
    pub message: String,
    /// `details` of the Status, if any.
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429/503).
    pub retry_after: Option<u64>,
}

fn details(rt: &ResourceType, name: &str) -> Value {
    json!({ "name": name, "group": rt.group, "kind": rt.plural })
}

/// A kind as `schema.GroupKind` prints it: `DaemonSet.apps`, or `Pod` for the core group.
fn group_kind(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        rt.kind.to_string()
    } else {
        format!("{}.{}", rt.kind, rt.group)
    }
}

impl ApiError {
    fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.into(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// 404 `daemonsets.apps "x" not found`.
    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        ApiError {
            details: Some(details(rt, name)),
            ..Self::new(
                404,
                "NotFound",
                format!("{} \"{name}\" not found", rt.qualified()),
            )
        }
    }

    /// 404 for a URL that names no served resource.
    pub fn no_route(path: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 404 for a path the server does not serve, worded as the apiserver words it.
    pub fn not_found_plain() -> Self {
        ApiError {
            details: Some(json!({})),
            ..Self::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        }
    }

    /// 409 `daemonsets.apps "x" already exists`.
    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        ApiError {
            details: Some(details(rt, name)),
            ..Self::new(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", rt.qualified()),
            )
        }
    }

    /// 409 Conflict for a stale resourceVersion or a failed precondition.
    pub fn conflict(rt: &ResourceType, name: &str, why: &str) -> Self {
        ApiError {
            details: Some(details(rt, name)),
            ..Self::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": {why}",
                    rt.qualified()
                ),
            )
        }
    }

    /// The standard Conflict sentence for a stale resourceVersion.
    pub fn stale(rt: &ResourceType, name: &str) -> Self {
        Self::conflict(
            rt,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid with field causes: each `(field, cause type, message)`, e.g.
    /// `("spec.selector", "FieldValueInvalid", "field is immutable")`. The message names the
    /// kind qualified by its group, as `schema.GroupKind` prints it: `DaemonSet.apps "x" is
    /// invalid: ...`, and `Pod "x" is invalid: ...` for the core group.
    pub fn invalid(rt: &ResourceType, name: &str, causes: &[(String, String, String)]) -> Self {
        let text: Vec<String> = causes.iter().map(|(f, _, m)| format!("{f}: {m}")).collect();
        let message = format!(
            "{} \"{name}\" is invalid: {}",
            group_kind(rt),
            if text.len() == 1 {
                text[0].clone()
            } else {
                format!("[{}]", text.join(", "))
            }
        );
        let causes: Vec<Value> = causes
            .iter()
            .map(|(f, t, m)| json!({ "reason": t, "message": m, "field": f }))
            .collect();
        ApiError {
            details: Some(
                json!({ "name": name, "group": rt.group, "kind": rt.kind, "causes": causes }),
            ),
            ..Self::new(422, "Invalid", message)
        }
    }

    /// 422 for invalid request options (`PatchOptions`, `DeleteOptions`): `PatchOptions.meta.k8s.io ""
    /// is invalid: fieldManager: Required value: is required for apply patch`.
    pub fn invalid_options(kind: &str, field: &str, cause: &str, message: &str) -> Self {
        ApiError {
            details: Some(json!({
                "group": "meta.k8s.io",
                "kind": kind,
                "causes": [{ "reason": cause, "message": message, "field": field }],
            })),
            ..Self::new(
                422,
                "Invalid",
                format!("{kind}.meta.k8s.io \"\" is invalid: {field}: {message}"),
            )
        }
    }

    /// 422 Invalid about a patch whose result cannot be decoded (or, with strict field
    /// validation, has unknown or repeated fields), as the patch handler words it: no kind
    /// and no name, one cause on the field `patch` quoting `value` (Go's `%q`).
    pub fn invalid_patch(value: &str, detail: &str) -> Self {
        let body = format!("Invalid value: {value:?}: {detail}");
        ApiError {
            details: Some(json!({
                "causes": [{ "reason": "FieldValueInvalid", "message": body, "field": "patch" }],
            })),
            ..Self::new(422, "Invalid", format!(" \"\" is invalid: patch: {body}"))
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 415 UnsupportedMediaType for a body of a media type the endpoint does not decode;
    /// `accepted` lists what it does, in the apiserver's wording.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 410 Expired: a watch or list continue token from a resourceVersion that is too old.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 403 Forbidden.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 403 `namespaces "default" is forbidden: <why>` about one object.
    pub fn forbidden_object(rt: &ResourceType, name: &str, why: &str) -> Self {
        ApiError {
            details: Some(details(rt, name)),
            ..Self::new(
                403,
                "Forbidden",
                format!("{} \"{name}\" is forbidden: {why}", rt.qualified()),
            )
        }
    }

    /// 403 from the namespace lifecycle admission: no new content in a terminating namespace.
    pub fn forbidden_in_terminating_namespace(
        rt: &ResourceType,
        name: &str,
        namespace: &str,
    ) -> Self {
        let mut err = Self::forbidden_object(
            rt,
            name,
            &format!(
                "unable to create new content in namespace {namespace} because it is being terminated"
            ),
        );
        if let Some(d) = err.details.as_mut() {
            d["causes"] = json!([{
                "reason": "NamespaceTerminating",
                "message": format!("namespace {namespace} is being terminated"),
                "field": "metadata.namespace",
            }]);
        }
        err
    }

    /// 409 Conflict for a failed delete precondition, worded as the storage layer words it.
    pub fn precondition_failed(rt: &ResourceType, namespace: &str, name: &str, why: &str) -> Self {
        let key = if namespace.is_empty() {
            format!("/registry/{}/{name}", rt.plural)
        } else {
            format!("/registry/{}/{namespace}/{name}", rt.plural)
        };
        Self::conflict(
            rt,
            name,
            &format!(
                "StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: {why}"
            ),
        )
    }

    /// 504 Timeout for a list or watch from a resourceVersion the server has not reached.
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        ApiError {
            details: Some(json!({
                "causes": [{ "reason": "ResourceVersionTooLarge", "message": "Too large resource version" }],
                "retryAfterSeconds": 1,
            })),
            ..Self::new(
                504,
                "Timeout",
                format!("Too large resource version: {requested}, current: {current}"),
            )
        }
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 429 TooManyRequests with a Retry-After.
    pub fn too_many_requests(retry_after: u64) -> Self {
        ApiError {
            retry_after: Some(retry_after),
            ..Self::new(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            )
        }
    }

    /// 503 ServiceUnavailable.
    pub fn service_unavailable(retry_after: Option<u64>) -> Self {
        ApiError {
            retry_after,
            ..Self::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            )
        }
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// 500 without a reason, as the apiserver answers an error that is not a Status (what
    /// server-side apply returns for an applied configuration its schema rejects).
    pub fn unknown(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// The `metav1.Status` body of this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // StatusReasonUnknown is "", which Go omits.
            if let Some(map) = status.as_object_mut() {
                map.remove("reason");
            }
        }
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        if let Some(secs) = self.retry_after {
            let d = status["details"].as_object().cloned().unwrap_or_default();
            let mut d = Value::Object(d);
            d["retryAfterSeconds"] = json!(secs);
            status["details"] = d;
        }
        status
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{DAEMONSETS, PODS};

    #[test]
    fn messages_match_the_real_apiserver() {
        assert_eq!(
            ApiError::not_found(&DAEMONSETS, "x").message,
            "daemonsets.apps \"x\" not found"
        );
        assert_eq!(
            ApiError::not_found(&PODS, "p").message,
            "pods \"p\" not found"
        );
        assert_eq!(
            ApiError::already_exists(&DAEMONSETS, "x").message,
            "daemonsets.apps \"x\" already exists"
        );
        assert_eq!(
            ApiError::stale(&DAEMONSETS, "x").message,
            "Operation cannot be fulfilled on daemonsets.apps \"x\": the object has been modified; please apply your changes to the latest version and try again"
        );
        let causes = [(
            "spec.selector".to_string(),
            "FieldValueInvalid".to_string(),
            "Invalid value: \"x\": field is immutable".to_string(),
        )];
        assert_eq!(
            ApiError::invalid(&DAEMONSETS, "x", &causes).message,
            "DaemonSet.apps \"x\" is invalid: spec.selector: Invalid value: \"x\": field is immutable"
        );
        assert_eq!(
            ApiError::invalid(&PODS, "p", &causes).message,
            "Pod \"p\" is invalid: spec.selector: Invalid value: \"x\": field is immutable"
        );
        let s = ApiError::not_found(&DAEMONSETS, "x").to_status();
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["details"]["kind"], "daemonsets");
        assert_eq!(s["details"]["group"], "apps");
    }
}
