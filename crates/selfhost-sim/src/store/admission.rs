//! The seam between the store's write path and the per-type rules kept in their own
//! modules: server-side defaulting, validation and the merge used by server-side apply.

use serde_json::Value;

use crate::error::ApiError;
use crate::resources::ResourceType;

/// Server-side defaulting, as the real apiserver applies it when decoding a write.
pub(crate) fn default(rt: &ResourceType, obj: &mut Value) {
    let _ = (rt, obj);
}

/// Validation of a new object.
pub(crate) fn validate_create(rt: &ResourceType, obj: &Value) -> Result<(), ApiError> {
    let _ = (rt, obj);
    Ok(())
}

/// Validation of a change.
pub(crate) fn validate_update(rt: &ResourceType, old: &Value, new: &Value) -> Result<(), ApiError> {
    let _ = (rt, old, new);
    Ok(())
}

/// Merges an applied configuration into the live object (keyed lists merge by key).
pub(crate) fn merge_applied(
    rt: &ResourceType,
    live: &Value,
    applied: &Value,
) -> Result<Value, ApiError> {
    crate::strategic::strategic_merge_patch(live, applied, rt).map_err(|e| e.to_api_error())
}
