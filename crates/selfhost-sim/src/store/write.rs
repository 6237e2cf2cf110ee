//! The create and update paths every write takes, from HTTP handlers and in-process
//! controllers alike: type checks, identity, admission (defaults, validation), the status
//! and generation rules, optimistic concurrency, field ownership, then one commit.

use std::sync::Arc;

use serde_json::{Value, json};

use super::admission;
use super::managed;
use super::meta;
use super::state::State;
use super::strategy::{self, Subresource};
use crate::error::ApiError;
use crate::resources::{self, ResourceType};

/// How a write is attributed in `managedFields`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Tracking<'a> {
    /// No manager given (in-process writes that don't name one): ownership is unchanged.
    Untracked,
    /// An Update by this manager: the fields it changes become its own.
    Update(&'a str),
    /// A server-side apply of `applied` by `manager`.
    Apply {
        manager: &'a str,
        applied: &'a Value,
        force: bool,
    },
}

/// The result of a write.
#[derive(Debug, Clone)]
pub struct Written {
    /// The object as stored (or as it would be stored, for a dry run).
    pub object: Arc<Value>,
    /// Whether the write created the object (HTTP 201).
    pub created: bool,
}

/// Checks `apiVersion`/`kind` of a body (when present) against the URL's type and stamps them.
pub(crate) fn check_type_meta(rt: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(format!(
            "the body of the request is not a {} object",
            rt.kind
        )));
    };
    let api_version = rt.api_version();
    if let Some(v) = map.get("apiVersion").and_then(Value::as_str)
        && !v.is_empty()
        && v != api_version
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({v}) does not match the expected API version ({api_version})"
        )));
    }
    if let Some(k) = map.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            rt.kind
        )));
    }
    map.insert("apiVersion".into(), json!(api_version));
    map.insert("kind".into(), json!(rt.kind));
    Ok(())
}

/// Makes the body's namespace agree with the URL's (400 when it names another one).
fn check_namespace(rt: &ResourceType, namespace: &str, obj: &mut Value) -> Result<(), ApiError> {
    let body_ns = meta::namespace(obj).to_string();
    let meta = meta::metadata_mut(obj);
    if rt.namespaced {
        if !body_ns.is_empty() && body_ns != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        meta.insert("namespace".into(), json!(namespace));
    } else {
        meta.remove("namespace");
    }
    Ok(())
}

/// 404 for a missing namespace, 403 for one being deleted.
pub(crate) fn check_namespace_open(
    state: &State,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
) -> Result<(), ApiError> {
    if !rt.namespaced {
        return Ok(());
    }
    match state.namespace_state(namespace) {
        Ok(()) => Ok(()),
        Err(false) => Err(ApiError::not_found(&resources::NAMESPACES, namespace)),
        Err(true) => Err(ApiError::forbidden_in_terminating_namespace(
            rt, name, namespace,
        )),
    }
}

/// Creates an object.
pub(crate) fn create(
    state: &mut State,
    rt: &ResourceType,
    namespace: &str,
    mut obj: Value,
    dry_run: bool,
    tracking: Tracking<'_>,
) -> Result<Arc<Value>, ApiError> {
    check_type_meta(rt, &mut obj)?;
    check_namespace(rt, namespace, &mut obj)?;
    if meta::resource_version(&obj).is_some() {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let mut name = meta::name(&obj).to_string();
    if name.is_empty() {
        let prefix = meta::metadata(&obj)
            .and_then(|m| m.get("generateName"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if prefix.is_empty() {
            return Err(ApiError::invalid(
                rt,
                "",
                &[(
                    "metadata.name".into(),
                    "FieldValueRequired".into(),
                    "Required value: name or generateName is required".into(),
                )],
            ));
        }
        name = format!("{prefix}{}", meta::generated_suffix());
        for _ in 0..8 {
            if state.get(rt, namespace, &name).is_none() {
                break;
            }
            name = format!("{prefix}{}", meta::generated_suffix());
        }
        meta::metadata_mut(&mut obj).insert("name".into(), json!(name));
    }
    check_namespace_open(state, rt, namespace, &name)?;
    let ns_key = if rt.namespaced { namespace } else { "" };
    if state.get(rt, ns_key, &name).is_some() {
        return Err(ApiError::already_exists(rt, &name));
    }
    admission::default(rt, &mut obj);
    admission::admit_create(rt, &mut obj);
    strategy::prepare_for_create(rt, &mut obj);
    {
        let m = meta::metadata_mut(&mut obj);
        m.insert("uid".into(), json!(meta::new_uid()));
        m.insert("creationTimestamp".into(), json!(meta::now()));
    }
    admission::validate_create(rt, &obj)?;
    match tracking {
        Tracking::Untracked => {}
        Tracking::Update(manager) => {
            managed::record_update(rt, Subresource::Main, manager, None, &mut obj)
        }
        Tracking::Apply {
            manager,
            applied,
            force,
        } => obj = managed::apply(rt, Subresource::Main, manager, force, None, applied, obj)?,
    }
    if dry_run {
        return Ok(Arc::new(obj));
    }
    Ok(state.commit(*rt, ns_key, &name, Some(obj)).object.clone())
}

/// Whether an update finished a deletion: the object is marked deleted, has no finalizers
/// left and no grace period to wait for.
pub(crate) fn completes_deletion(obj: &Value) -> bool {
    let namespace_finalizers = obj
        .get("spec")
        .and_then(|s| s.get("finalizers"))
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty());
    meta::deletion_timestamp(obj).is_some()
        && meta::finalizers(obj).is_empty()
        && meta::deletion_grace_period(obj).unwrap_or(0) == 0
        && !namespace_finalizers
}

/// Updates an existing object (or creates it where the type allows create-on-update).
#[allow(clippy::too_many_arguments)]
pub(crate) fn update(
    state: &mut State,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    mut new: Value,
    sub: Subresource,
    dry_run: bool,
    tracking: Tracking<'_>,
) -> Result<Written, ApiError> {
    check_type_meta(rt, &mut new)?;
    let ns_key = if rt.namespaced { namespace } else { "" };
    let Some(old) = state.get(rt, ns_key, name).cloned() else {
        if rt.allow_create_on_update && sub == Subresource::Main {
            let object = create(state, rt, namespace, new, dry_run, tracking)?;
            return Ok(Written {
                object,
                created: true,
            });
        }
        return Err(ApiError::not_found(rt, name));
    };
    check_namespace(rt, namespace, &mut new)?;
    let body_name = meta::name(&new);
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    meta::metadata_mut(&mut new).insert("name".into(), json!(name));
    if let Some(rv) = meta::resource_version(&new)
        && Some(rv) != meta::resource_version(&old)
    {
        return Err(ApiError::stale(rt, name));
    }
    let body_uid = meta::uid(&new);
    if !body_uid.is_empty() && body_uid != meta::uid(&old) {
        return Err(ApiError::conflict(
            rt,
            name,
            &format!(
                "Precondition failed: UID in precondition: {body_uid}, UID in object meta: {}",
                meta::uid(&old)
            ),
        ));
    }
    strategy::keep_system_fields(&old, &mut new);
    if let Tracking::Apply {
        manager,
        applied,
        force,
    } = tracking
    {
        new = managed::apply(rt, sub, manager, force, Some(&old), applied, new)?;
    }
    admission::default(rt, &mut new);
    strategy::prepare_for_update(rt, &old, &mut new, sub);
    if meta::deletion_timestamp(&old).is_some() {
        let before = meta::finalizers(&old);
        let added: Vec<String> = meta::finalizers(&new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                rt,
                name,
                &[(
                    "metadata.finalizers".into(),
                    "FieldValueForbidden".into(),
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                    ),
                )],
            ));
        }
    }
    admission::validate_update(rt, &old, &new, sub)?;
    if let Tracking::Update(manager) = tracking {
        managed::record_update(rt, sub, manager, Some(&old), &mut new);
    }
    // The stored version is the one compared: an unchanged object is not written again.
    if let Some(rv) = meta::resource_version(&old) {
        meta::metadata_mut(&mut new).insert("resourceVersion".into(), json!(rv));
    }
    if new == *old {
        return Ok(Written {
            object: old,
            created: false,
        });
    }
    if dry_run {
        return Ok(Written {
            object: Arc::new(new),
            created: false,
        });
    }
    let event = if completes_deletion(&new) {
        state.commit(*rt, ns_key, name, None)
    } else {
        state.commit(*rt, ns_key, name, Some(new))
    };
    Ok(Written {
        object: event.object.clone(),
        created: false,
    })
}
