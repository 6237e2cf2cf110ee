//! Deletion as the real registry does it: preconditions, propagation finalizers for the
//! garbage collector, graceful pod deletion, and immediate removal when nothing waits.

use std::sync::Arc;

use serde_json::{Value, json};

use super::meta;
use super::state::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER, State};
use super::write::completes_deletion;
use crate::error::ApiError;
use crate::resources::{self, ResourceType};

/// What happens to the dependents of a deleted object (`propagationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Delete the owner now; the garbage collector deletes dependents afterwards (the API's
    /// default for every type served here).
    Background,
    /// Keep the owner, readable and marked deleted, until its blocking dependents are gone.
    Foreground,
    /// Delete the owner and strip its references from dependents, which stay.
    Orphan,
}

impl Propagation {
    /// Parses the wire value (`Background`, `Foreground`, `Orphan`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Background" => Some(Propagation::Background),
            "Foreground" => Some(Propagation::Foreground),
            "Orphan" => Some(Propagation::Orphan),
            _ => None,
        }
    }
}

/// `DeleteOptions` as the store understands them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DeleteOptions {
    /// Requested grace period; only pods honour it. 0 deletes at once.
    pub grace_period_seconds: Option<i64>,
    /// Propagation policy; `None` keeps what the object already asked for (or Background).
    pub propagation_policy: Option<Propagation>,
    /// Precondition on `metadata.uid`.
    pub precondition_uid: Option<String>,
    /// Precondition on `metadata.resourceVersion`.
    pub precondition_resource_version: Option<String>,
    /// Compute the result without changing anything.
    pub dry_run: bool,
}

/// The outcome of a delete.
#[derive(Debug, Clone)]
pub enum Deletion {
    /// The object still exists, marked with `deletionTimestamp` (finalizers or a grace period).
    Pending(Arc<Value>),
    /// The object is gone; this is its last state.
    Deleted(Arc<Value>),
}

impl Deletion {
    /// The object in either case.
    pub fn object(&self) -> &Arc<Value> {
        match self {
            Deletion::Pending(o) | Deletion::Deleted(o) => o,
        }
    }
}

/// Namespaces the apiserver refuses to delete.
const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

/// The grace period of a pod deletion: none for pods no kubelet runs (unbound or finished),
/// otherwise the request's, the pod's `terminationGracePeriodSeconds`, or 30 s.
fn pod_grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let bound = pod
        .get("spec")
        .and_then(|s| s.get("nodeName"))
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase = pod
        .get("status")
        .and_then(|s| s.get("phase"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if !bound || phase == "Succeeded" || phase == "Failed" {
        return 0;
    }
    let spec = pod
        .get("spec")
        .and_then(|s| s.get("terminationGracePeriodSeconds"))
        .and_then(Value::as_i64);
    requested.or(spec).unwrap_or(30).max(0)
}

fn check_preconditions(
    rt: &ResourceType,
    obj: &Value,
    opts: &DeleteOptions,
) -> Result<(), ApiError> {
    let (ns, name) = (meta::namespace(obj), meta::name(obj));
    if let Some(uid) = &opts.precondition_uid
        && uid != meta::uid(obj)
    {
        let why = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta::uid(obj)
        );
        return Err(ApiError::precondition_failed(rt, ns, name, &why));
    }
    if let Some(rv) = &opts.precondition_resource_version
        && Some(rv.as_str()) != meta::resource_version(obj)
    {
        let why = format!(
            "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
            meta::resource_version(obj).unwrap_or("")
        );
        return Err(ApiError::precondition_failed(rt, ns, name, &why));
    }
    Ok(())
}

/// Deletes one object.
pub(crate) fn delete(
    state: &mut State,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Deletion, ApiError> {
    let ns_key = if rt.namespaced { namespace } else { "" };
    let Some(current) = state.get(rt, ns_key, name).cloned() else {
        return Err(ApiError::not_found(rt, name));
    };
    check_preconditions(rt, &current, opts)?;
    let is_namespace = *rt == resources::NAMESPACES;
    if is_namespace && IMMORTAL_NAMESPACES.contains(&name) {
        return Err(ApiError::forbidden_object(
            rt,
            name,
            "this namespace may not be deleted",
        ));
    }
    let mut obj = (*current).clone();
    let mut finalizers = meta::finalizers(&obj);
    if let Some(policy) = opts.propagation_policy {
        finalizers.retain(|f| f != ORPHAN_FINALIZER && f != FOREGROUND_FINALIZER);
        match policy {
            Propagation::Orphan => finalizers.push(ORPHAN_FINALIZER.into()),
            Propagation::Foreground => finalizers.push(FOREGROUND_FINALIZER.into()),
            Propagation::Background => {}
        }
    }
    let grace = if *rt == resources::PODS {
        pod_grace_period(&obj, opts.grace_period_seconds)
    } else {
        0
    };

    if meta::deletion_timestamp(&obj).is_some() {
        // Already being deleted: a new request may only change the propagation finalizers
        // or shorten a pod's grace period.
        let mut changed = finalizers != meta::finalizers(&obj);
        meta::set_finalizers(&mut obj, &finalizers);
        let current_grace = meta::deletion_grace_period(&obj).unwrap_or(0);
        if *rt == resources::PODS && grace < current_grace {
            let m = meta::metadata_mut(&mut obj);
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
            m.insert(
                "deletionTimestamp".into(),
                json!(meta::timestamp_after(grace)),
            );
            changed = true;
        }
        if opts.dry_run || !changed {
            return Ok(Deletion::Pending(Arc::new(obj)));
        }
        if completes_deletion(&obj) && !is_namespace {
            let event = state.commit(*rt, ns_key, name, None);
            return Ok(Deletion::Deleted(event.object.clone()));
        }
        let event = state.commit(*rt, ns_key, name, Some(obj));
        return Ok(Deletion::Pending(event.object.clone()));
    }

    if finalizers.is_empty() && grace == 0 && !is_namespace {
        if opts.dry_run {
            return Ok(Deletion::Deleted(current));
        }
        let event = state.commit(*rt, ns_key, name, None);
        return Ok(Deletion::Deleted(event.object.clone()));
    }
    meta::set_finalizers(&mut obj, &finalizers);
    let generation = meta::generation(&obj);
    {
        let m = meta::metadata_mut(&mut obj);
        m.insert(
            "deletionTimestamp".into(),
            json!(meta::timestamp_after(grace)),
        );
        if !is_namespace {
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
        }
        if generation > 0 {
            m.insert("generation".into(), json!(generation + 1));
        }
    }
    if is_namespace {
        obj["status"]["phase"] = json!("Terminating");
    }
    if opts.dry_run {
        return Ok(Deletion::Pending(Arc::new(obj)));
    }
    let event = state.commit(*rt, ns_key, name, Some(obj));
    Ok(Deletion::Pending(event.object.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pods_a_kubelet_runs_get_a_grace_period() {
        let cases = [
            (json!({"spec": {}}), None, 0),
            (json!({"spec": {"nodeName": "n1"}}), None, 30),
            (
                json!({"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 5}}),
                None,
                5,
            ),
            (
                json!({"spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 5}}),
                Some(0),
                0,
            ),
            (
                json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Succeeded"}}),
                Some(10),
                0,
            ),
        ];
        for (pod, requested, want) in cases {
            assert_eq!(
                pod_grace_period(&pod, requested),
                want,
                "{pod} {requested:?}"
            );
        }
    }
}
