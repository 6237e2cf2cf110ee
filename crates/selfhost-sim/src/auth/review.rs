//! `SelfSubjectAccessReview` (`authorization.k8s.io/v1`): "may I do this?", answered by the
//! authorizer for the user who asks. Nothing is stored; the answer is the review with its
//! `status` filled in (201 Created), as the apiserver answers `kubectl auth can-i`.

use serde_json::{Value, json};

use super::attributes::{Attributes, ResourceAttributes};
use super::{Authenticator, UserInfo};
use crate::error::ApiError;
use crate::store::Store;

/// The path reviews are posted to.
pub const PATH: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

fn text(value: &Value, field: &str) -> String {
    value[field].as_str().unwrap_or_default().to_string()
}

fn optional(value: &Value, field: &str) -> Option<String> {
    value[field]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The attributes a review's `spec` asks about.
fn asked(spec: &Value) -> Result<Attributes, ApiError> {
    let resource = &spec["resourceAttributes"];
    let non_resource = &spec["nonResourceAttributes"];
    match (resource.is_object(), non_resource.is_object()) {
        (true, false) => Ok(Attributes::Resource(ResourceAttributes {
            verb: text(resource, "verb"),
            group: text(resource, "group"),
            version: text(resource, "version"),
            resource: text(resource, "resource"),
            subresource: optional(resource, "subresource"),
            namespace: optional(resource, "namespace"),
            name: optional(resource, "name"),
        })),
        (false, true) => Ok(Attributes::NonResource {
            verb: text(non_resource, "verb"),
            path: text(non_resource, "path"),
        }),
        _ => Err(invalid(
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

fn invalid(why: &str) -> ApiError {
    ApiError {
        code: 422,
        reason: "Invalid".into(),
        message: format!(
            "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Invalid value: \"null\": {why}"
        ),
        details: Some(json!({
            "group": "authorization.k8s.io",
            "kind": "SelfSubjectAccessReview",
            "causes": [{ "reason": "FieldValueInvalid", "message": why, "field": "spec.resourceAttributes" }],
        })),
        retry_after: None,
    }
}

/// Answers the review in `body` (JSON, or Kubernetes protobuf when `content_type` says so,
/// as kubectl sends it) for `user`.
///
/// # Errors
/// 400 for a body that does not decode, 422 for a spec asking about nothing or two things.
pub fn answer(
    auth: &Authenticator,
    store: &Store,
    user: &UserInfo,
    content_type: &str,
    body: &[u8],
) -> Result<Value, ApiError> {
    let review: Value = if content_type.starts_with(super::protobuf::MEDIA_TYPE) {
        super::protobuf::review(body).map_err(|e| {
            ApiError::bad_request(format!("the body of the review cannot be decoded: {e}"))
        })?
    } else {
        serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("the body of the review is not JSON: {e}"))
        })?
    };
    let spec = &review["spec"];
    let decision = auth.authorize(store, user, &asked(spec)?);
    let mut status = json!({ "allowed": decision.allowed });
    if !decision.reason.is_empty() {
        status["reason"] = json!(decision.reason);
    }
    Ok(json!({
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": { "creationTimestamp": null },
        "spec": spec,
        "status": status,
    }))
}
