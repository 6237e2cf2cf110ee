//! The seam between the store's write path and the per-type rules kept in their own
//! modules: server-side defaulting, validation and the merge used by server-side apply.

use serde_json::Value;

use super::strategy::Subresource;
use crate::error::ApiError;
use crate::resources::ResourceType;

/// Server-side defaulting, as the real apiserver applies it when decoding a write.
pub(crate) fn default(rt: &ResourceType, obj: &mut Value) {
    crate::defaults::apply_defaults(rt, obj);
}

/// The mutating admission a real apiserver runs on a new object (after defaulting): the
/// ServiceAccount admission's for pods.
pub(crate) fn admit_create(rt: &ResourceType, obj: &mut Value) {
    if (rt.group, rt.kind) == ("", "Pod") {
        super::service_account::admit_pod(obj);
    }
}

/// Validation of a new object (after defaulting).
pub(crate) fn validate_create(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    crate::validation::validate_create(rt, obj)
}

/// Validation of a change (after defaulting and the subresource rules).
pub(crate) fn validate_update(
    rt: &ResourceType,
    old: &Value,
    new: &Value,
    sub: Subresource,
) -> Result<(), ApiError> {
    match sub {
        Subresource::Main => crate::validation::validate_update(rt, old, new),
        Subresource::Status | Subresource::Finalize => {
            crate::validation::validate_status_update(rt, old, new)
        }
    }
}

/// Merges an applied configuration into the live object (keyed lists merge by key).
pub(crate) fn merge_applied(
    rt: &ResourceType,
    live: &Value,
    applied: &Value,
) -> Result<Value, ApiError> {
    crate::strategic::strategic_merge_patch(live, applied, rt).map_err(|e| e.to_api_error())
}
