//! Validation the real apiserver applies on create and update, answered as 422 Invalid with
//! one cause per field, worded as the apiserver words them (clients and users see them).
//!
//! Covered: object metadata (names, `generateName`, labels, annotations, owner references,
//! immutable identity), pod specs (containers, images, ports, volumes and mounts, policies),
//! the pod update rule (only images, `activeDeadlineSeconds`, added tolerations and a
//! negative grace period may change), DaemonSets (selector against template labels, selector
//! immutability, update strategy, `maxSurge`/`maxUnavailable`), ConfigMap and Secret keys,
//! Lease and ControllerRevision numbers.
//!
//! The apiserver validates *after* defaulting: callers run
//! [`crate::defaults::apply_defaults`] first. Status writes go through
//! [`validate_status_update`], which (as in the apiserver) ignores the spec.
//!
//! Deliberately not enforced, because the real apiserver does not: a DaemonSet with a
//! `hostPort` and a non-zero `maxSurge` is accepted (kubernetes/kubernetes#106417 asked for a
//! rejection that was never added); the surge pod then cannot be placed next to the old one.

mod apps;
mod meta;
mod pod;
mod render;

use serde_json::Value;

use crate::error::ApiError;
use crate::resources::ResourceType;

/// Validates an object about to be created (after defaulting).
///
/// # Errors
/// 422 Invalid listing every problem found.
pub fn validate_create(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let mut errs = FieldErrors::default();
    meta::validate_object_meta(rt, obj, &mut errs);
    match (rt.group, rt.kind) {
        ("", "Pod") => pod::validate_pod_spec(&obj["spec"], "spec", &mut errs),
        ("apps", "DaemonSet") => apps::validate_daemonset(obj, &mut errs),
        ("apps", "ControllerRevision") => apps::validate_controller_revision(obj, &mut errs),
        ("", "ConfigMap") => meta::validate_config_keys(obj, &["data", "binaryData"], &mut errs),
        ("", "Secret") => meta::validate_config_keys(obj, &["data", "stringData"], &mut errs),
        ("coordination.k8s.io", "Lease") => apps::validate_lease(obj, &mut errs),
        _ => {}
    }
    errs.into_result(rt, obj)
}

/// Validates a main-resource update from `old` to `new` (after defaulting; the store has
/// already carried `status` over from `old`).
///
/// # Errors
/// 422 Invalid listing every problem found.
pub fn validate_update(rt: &ResourceType, old: &Value, new: &Value) -> Result<(), ApiError> {
    let mut errs = FieldErrors::default();
    meta::validate_object_meta_update(rt, old, new, &mut errs);
    match (rt.group, rt.kind) {
        ("", "Pod") => {
            pod::validate_pod_spec(&new["spec"], "spec", &mut errs);
            pod::validate_pod_update(&old["spec"], &new["spec"], &mut errs);
        }
        ("apps", "DaemonSet") => apps::validate_daemonset_update(old, new, &mut errs),
        ("apps", "ControllerRevision") => {
            apps::validate_controller_revision(new, &mut errs);
            if old["data"] != new["data"] {
                errs.invalid("data", render::go_value(&new["data"]), "field is immutable");
            }
        }
        ("", "ConfigMap") => {
            meta::validate_config_keys(new, &["data", "binaryData"], &mut errs);
            meta::validate_immutable_data(old, new, &["data", "binaryData"], &mut errs);
        }
        ("", "Secret") => {
            meta::validate_config_keys(new, &["data", "stringData"], &mut errs);
            meta::validate_immutable_data(old, new, &["data"], &mut errs);
            if old["type"] != new["type"] {
                errs.invalid("type", render::go_value(&new["type"]), "field is immutable");
            }
        }
        ("coordination.k8s.io", "Lease") => apps::validate_lease(new, &mut errs),
        _ => {}
    }
    errs.into_result(rt, new)
}

/// Validates a `/status` write: identity must not change and DaemonSet counters must be
/// non-negative; the spec is not looked at.
///
/// # Errors
/// 422 Invalid listing every problem found.
pub fn validate_status_update(rt: &ResourceType, old: &Value, new: &Value) -> Result<(), ApiError> {
    let mut errs = FieldErrors::default();
    meta::validate_object_meta_update(rt, old, new, &mut errs);
    if (rt.group, rt.kind) == ("apps", "DaemonSet") {
        apps::validate_daemonset_status(old, new, &mut errs);
    }
    errs.into_result(rt, new)
}

/// The kinds of field error, with the apiserver's cause type and wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Required,
    Invalid,
    NotSupported,
    Forbidden,
    Duplicate,
    NotFound,
    TooLong,
}

impl Kind {
    fn cause_type(self) -> &'static str {
        match self {
            Kind::Required => "FieldValueRequired",
            Kind::Invalid => "FieldValueInvalid",
            Kind::NotSupported => "FieldValueNotSupported",
            Kind::Forbidden => "FieldValueForbidden",
            Kind::Duplicate => "FieldValueDuplicate",
            Kind::NotFound => "FieldValueNotFound",
            Kind::TooLong => "FieldValueTooLong",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Kind::Required => "Required value",
            Kind::Invalid => "Invalid value",
            Kind::NotSupported => "Unsupported value",
            Kind::Forbidden => "Forbidden",
            Kind::Duplicate => "Duplicate value",
            Kind::NotFound => "Not found",
            Kind::TooLong => "Too long",
        }
    }
}

#[derive(Debug, Clone)]
struct FieldError {
    field: String,
    kind: Kind,
    /// The bad value as Go prints it; not shown for Required, Forbidden and TooLong.
    value: String,
    detail: String,
}

impl FieldError {
    /// `Invalid value: "x": detail`, as `field.Error.ErrorBody` prints it.
    fn body(&self) -> String {
        let mut body = match self.kind {
            Kind::Required | Kind::Forbidden | Kind::TooLong => self.kind.words().to_string(),
            _ => format!("{}: {}", self.kind.words(), self.value),
        };
        if !self.detail.is_empty() {
            body.push_str(": ");
            body.push_str(&self.detail);
        }
        body
    }
}

/// The errors found so far, in the apiserver's order.
#[derive(Debug, Default)]
struct FieldErrors(Vec<FieldError>);

impl FieldErrors {
    fn push(&mut self, field: &str, kind: Kind, value: String, detail: &str) {
        self.0.push(FieldError {
            field: field.to_string(),
            kind,
            value,
            detail: detail.to_string(),
        });
    }

    fn required(&mut self, field: &str, detail: &str) {
        self.push(field, Kind::Required, String::new(), detail);
    }

    fn invalid(&mut self, field: &str, value: String, detail: &str) {
        self.push(field, Kind::Invalid, value, detail);
    }

    fn forbidden(&mut self, field: &str, detail: &str) {
        self.push(field, Kind::Forbidden, String::new(), detail);
    }

    fn duplicate(&mut self, field: &str, value: String) {
        self.push(field, Kind::Duplicate, value, "");
    }

    fn not_found(&mut self, field: &str, value: String) {
        self.push(field, Kind::NotFound, value, "");
    }

    fn too_long(&mut self, field: &str, detail: &str) {
        self.push(field, Kind::TooLong, String::new(), detail);
    }

    fn not_supported(&mut self, field: &str, value: String, supported: &[&str]) {
        let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        self.push(
            field,
            Kind::NotSupported,
            value,
            &format!("supported values: {}", quoted.join(", ")),
        );
    }

    /// `ValidateNonnegativeField`: an integer field, if present, must be ≥ 0.
    fn non_negative(&mut self, field: &str, value: &Value) {
        if value.as_i64().is_some_and(|n| n < 0) {
            self.invalid(
                field,
                value.to_string(),
                "must be greater than or equal to 0",
            );
        }
    }

    fn into_result(self, rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
        if self.0.is_empty() {
            return Ok(());
        }
        // The apiserver drops repeated messages (ErrorList.ToAggregate).
        let mut causes: Vec<(String, String, String)> = Vec::new();
        for e in self.0 {
            let cause = (e.field.clone(), e.kind.cause_type().to_string(), e.body());
            if !causes.iter().any(|c| c.0 == cause.0 && c.2 == cause.2) {
                causes.push(cause);
            }
        }
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        Err(ApiError::invalid(rt, name, &causes))
    }
}

#[cfg(test)]
mod tests;
