//! PATCH: JSON patch, JSON merge patch, strategic merge patch and server-side apply,
//! chosen by Content-Type as the apiserver does. Patched objects go through field validation
//! (see [`super::strict`]); apply configurations through the kind's schema.

use axum::response::Response;
use serde_json::Value;

use super::call::Call;
use super::respond;
use super::strict::{self, FieldValidation, PatchedOrder, scan, shown};
use crate::error::ApiError;
use crate::store::ApplyOptions;

/// The patch types the apiserver accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

fn patch_type(content_type: &str) -> Result<PatchType, ApiError> {
    let media = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "application/json-patch+json" => Ok(PatchType::Json),
        "application/merge-patch+json" => Ok(PatchType::Merge),
        "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
        "application/apply-patch+yaml" => Ok(PatchType::Apply),
        _ => Err(ApiError::unsupported_media_type(&[
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/apply-patch+yaml",
            "application/strategic-merge-patch+json",
        ])),
    }
}

fn unprocessable(message: String) -> ApiError {
    ApiError {
        code: 422,
        reason: "Invalid".into(),
        message,
        details: None,
        retry_after: None,
    }
}

/// Serves a PATCH.
pub(crate) fn serve(call: &Call<'_>) -> Result<Response, ApiError> {
    let content_type = call
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let kind = patch_type(content_type)?;
    if kind != PatchType::Apply && call.query.get("force").is_some() {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            "force",
            "FieldValueForbidden",
            "Forbidden: may not be specified for non-apply patch",
        ));
    }
    let directive = FieldValidation::from_query(&call.query, "PatchOptions")?;
    if kind == PatchType::Apply {
        return apply(call);
    }
    let rt = call.req.resource;
    let opts = call.query.write_options(call.user_agent())?;
    let scanned = scan::scan(&call.body)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
    let mut warnings = Vec::new();
    let written = if kind == PatchType::Json {
        let ops: json_patch::Patch = serde_json::from_value(scanned.value.clone())
            .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
        let own = strict::json_patch_problems(&scanned);
        call.app.store.modify(
            &rt,
            call.namespace(),
            call.name(),
            call.subresource(),
            &opts,
            |cur| {
                let mut doc = cur.clone();
                json_patch::patch(&mut doc, &ops).map_err(|e| unprocessable(e.to_string()))?;
                warnings = strict::check_patched(
                    &rt,
                    &mut doc,
                    &own,
                    PatchedOrder::Walk,
                    directive,
                    |obj| shown::patched_object(&rt, obj),
                )?;
                Ok(doc)
            },
        )?
    } else {
        let patch = &scanned.value;
        if !patch.is_object() {
            return Err(ApiError::bad_request(
                "error decoding patch: the patch is not a JSON object",
            ));
        }
        let own = strict::repeated_fields(&scanned);
        call.app.store.modify(
            &rt,
            call.namespace(),
            call.name(),
            call.subresource(),
            &opts,
            |cur| {
                let (mut doc, order) = if kind == PatchType::Strategic {
                    let doc = crate::strategic::strategic_merge_patch(cur, patch, &rt)
                        .map_err(|e| e.to_api_error())?;
                    (doc, PatchedOrder::Text)
                } else {
                    let mut doc = cur.clone();
                    json_patch::merge(&mut doc, patch);
                    (doc, PatchedOrder::Walk)
                };
                warnings = strict::check_patched(&rt, &mut doc, &own, order, directive, |obj| {
                    if kind == PatchType::Strategic {
                        shown::strategic_patch(&rt, patch)
                    } else {
                        shown::patched_object(&rt, obj)
                    }
                })?;
                Ok(doc)
            },
        )?
    };
    Ok(respond::with_warnings(
        respond::json(200, &*written.object),
        &warnings,
    ))
}

fn apply(call: &Call<'_>) -> Result<Response, ApiError> {
    let manager = call.query.get("fieldManager").unwrap_or("");
    if manager.is_empty() {
        return Err(ApiError::invalid_options(
            "PatchOptions",
            "fieldManager",
            "FieldValueRequired",
            "Required value: is required for apply patch",
        ));
    }
    // The body is YAML (JSON is YAML); kube-rs sends JSON.
    let text = std::str::from_utf8(&call.body)
        .map_err(|_| ApiError::bad_request("error decoding YAML: the body is not UTF-8"))?;
    let applied: Value = serde_saphyr::from_str(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?;
    if !applied.is_object() {
        return Err(ApiError::bad_request(
            "error decoding YAML: the applied configuration is not an object",
        ));
    }
    let rt = call.req.resource;
    for (field, want) in [
        ("apiVersion", rt.api_version()),
        ("kind", rt.kind.to_string()),
    ] {
        if applied
            .get(field)
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(ApiError::bad_request(format!(
                "{field} must be set in the applied configuration (expected {want})"
            )));
        }
    }
    strict::check_applied(&rt, &applied)?;
    let options = ApplyOptions {
        field_manager: manager.to_string(),
        force: call.query.flag("force"),
        dry_run: call.query.dry_run()?,
    };
    let written = call.app.store.apply(
        &rt,
        call.namespace(),
        call.name(),
        applied,
        call.subresource(),
        &options,
    )?;
    Ok(respond::json(
        if written.created { 201 } else { 200 },
        &*written.object,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_types_follow_the_content_type() {
        let cases = [
            ("application/json-patch+json", Some(PatchType::Json)),
            (
                "application/merge-patch+json; charset=utf-8",
                Some(PatchType::Merge),
            ),
            (
                "application/strategic-merge-patch+json",
                Some(PatchType::Strategic),
            ),
            ("application/apply-patch+yaml", Some(PatchType::Apply)),
            ("application/json", None),
            ("", None),
        ];
        for (ct, want) in cases {
            assert_eq!(patch_type(ct).ok(), want, "{ct}");
        }
        assert_eq!(patch_type("text/plain").unwrap_err().code, 415);
    }
}
