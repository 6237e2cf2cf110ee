//! Applies one DaemonSet sync's decision through the API, in order, as the upstream
//! controller does: claims (ownerReferences with the object's uid as precondition), history,
//! pod deletions and creations (with the events `kubectl describe ds` shows), history
//! cleanup, then the status subresource.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::api::{CallError, ClusterApi, uid_mismatch};
use super::events::{self, Involved, Source};
use super::informer::Cache;
use crate::controllers::daemonset::{Action, Decision};
use crate::controllers::objects::{CONTROLLER_REVISION_HASH_LABEL, controller_reference};
use crate::error::ApiError;
use crate::resources::{CONTROLLERREVISIONS, DAEMONSETS, PODS, ResourceType};
use crate::store::{DeleteOptions, Subresource, meta};

/// The field manager of the controller-manager's writes.
pub(crate) const MANAGER: &str = "kube-controller-manager";
const SOURCE: Source<'static> = Source {
    component: "daemonset-controller",
    host: None,
};

/// What applying a decision left to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Applied {
    /// A write met a changed object: sync again at once with fresh reads.
    pub stale: bool,
}

/// Applies `decision` for `ds`; `pods` resolves pod names to uids for preconditions.
pub(crate) fn apply(
    api: &ClusterApi,
    ds: &DaemonSet,
    pods: &Cache<Pod>,
    decision: Decision,
) -> Result<Applied, CallError> {
    let namespace = ds.metadata.namespace.clone().unwrap_or_default();
    let name = ds.metadata.name.clone().unwrap_or_default();
    let ds_uid = ds.metadata.uid.clone().unwrap_or_default();
    let involved = Involved {
        api_version: "apps/v1",
        kind: "DaemonSet",
        namespace: namespace.clone(),
        name: name.clone(),
        uid: ds_uid.clone(),
    };
    let pod_uid = |pod: &str| {
        pods.get(&namespace, pod)
            .and_then(|p| p.metadata.uid.clone())
    };
    let mut applied = Applied::default();
    let mut outcome = |result: Result<(), CallError>, what: &str| -> Result<(), CallError> {
        match result {
            Ok(()) => Ok(()),
            Err(CallError::Unreachable) => Err(CallError::Unreachable),
            Err(e) if e.is_not_found() || e.is_conflict() => {
                applied.stale = true;
                Ok(())
            }
            Err(e) => {
                tracing::warn!(daemonset = %name, error = %e, what, "DaemonSet controller write refused");
                Ok(())
            }
        }
    };
    for event in &decision.events {
        events::record(
            api,
            SOURCE,
            &involved,
            event.warning,
            event.reason,
            &event.message,
        );
    }
    for action in decision.actions {
        match action {
            Action::AdoptPod { name: pod } => {
                let owner = serde_json::to_value(controller_reference(
                    "apps/v1",
                    "DaemonSet",
                    &ds.metadata,
                ))
                .unwrap_or(Value::Null);
                let uid = pod_uid(&pod);
                let r = change(api, &PODS, &namespace, &pod, uid.as_deref(), |obj| {
                    add_owner(obj, &owner)
                });
                outcome(r, "adopt pod")?;
            }
            Action::ReleasePod { name: pod } => {
                let uid = pod_uid(&pod);
                let r = change(api, &PODS, &namespace, &pod, uid.as_deref(), |obj| {
                    meta::remove_owner_reference(obj, &ds_uid);
                    Ok(())
                });
                outcome(r, "release pod")?;
            }
            Action::AdoptRevision { name: revision } => {
                let owner = serde_json::to_value(controller_reference(
                    "apps/v1",
                    "DaemonSet",
                    &ds.metadata,
                ))
                .unwrap_or(Value::Null);
                let r = change(
                    api,
                    &CONTROLLERREVISIONS,
                    &namespace,
                    &revision,
                    None,
                    |obj| add_owner(obj, &owner),
                );
                outcome(r, "adopt revision")?;
            }
            Action::ReleaseRevision { name: revision } => {
                let r = change(
                    api,
                    &CONTROLLERREVISIONS,
                    &namespace,
                    &revision,
                    None,
                    |obj| {
                        meta::remove_owner_reference(obj, &ds_uid);
                        Ok(())
                    },
                );
                outcome(r, "release revision")?;
            }
            Action::LabelRevision {
                name: revision,
                hash,
            } => {
                let r = change(
                    api,
                    &CONTROLLERREVISIONS,
                    &namespace,
                    &revision,
                    None,
                    |obj| {
                        set_label(obj, CONTROLLER_REVISION_HASH_LABEL, &hash);
                        Ok(())
                    },
                );
                outcome(r, "label revision")?;
            }
            Action::CreateRevision(revision) => {
                let body = serde_json::to_value(*revision).unwrap_or(Value::Null);
                let r = api
                    .create(&CONTROLLERREVISIONS, &namespace, body, MANAGER)
                    .map(|_| ());
                outcome(r, "create revision")?;
            }
            Action::SetRevisionNumber {
                name: revision,
                revision: number,
            } => {
                let r = change(
                    api,
                    &CONTROLLERREVISIONS,
                    &namespace,
                    &revision,
                    None,
                    |obj| {
                        obj["revision"] = json!(number);
                        Ok(())
                    },
                );
                outcome(r, "renumber revision")?;
            }
            Action::DeleteRevision { name: revision } => {
                let r = api
                    .delete(
                        &CONTROLLERREVISIONS,
                        &namespace,
                        &revision,
                        &DeleteOptions::default(),
                    )
                    .map(|_| ());
                outcome(r, "delete revision")?;
            }
            Action::LabelPod { name: pod, hash } => {
                let uid = pod_uid(&pod);
                let r = change(api, &PODS, &namespace, &pod, uid.as_deref(), |obj| {
                    set_label(obj, CONTROLLER_REVISION_HASH_LABEL, &hash);
                    Ok(())
                });
                outcome(r, "label pod")?;
            }
            Action::DeletePod { name: pod, .. } => {
                let options = DeleteOptions {
                    precondition_uid: pod_uid(&pod),
                    ..DeleteOptions::default()
                };
                let r = api.delete(&PODS, &namespace, &pod, &options).map(|_| ());
                if r.is_ok() {
                    let message = format!("Deleted pod: {pod}");
                    events::record(api, SOURCE, &involved, false, "SuccessfulDelete", &message);
                }
                outcome(r, "delete pod")?;
            }
            Action::CreatePod(pod) => {
                let body = serde_json::to_value(*pod).unwrap_or(Value::Null);
                match api.create(&PODS, &namespace, body, MANAGER) {
                    Ok(created) => {
                        let message = format!("Created pod: {}", meta::name(&created));
                        events::record(api, SOURCE, &involved, false, "SuccessfulCreate", &message);
                    }
                    Err(CallError::Unreachable) => return Err(CallError::Unreachable),
                    Err(CallError::Api(e)) => {
                        let message = format!("Error creating: {}", e.message);
                        events::record(api, SOURCE, &involved, true, "FailedCreate", &message);
                    }
                }
            }
            Action::UpdateStatus(status) => {
                let status = omit_empty(serde_json::to_value(*status).unwrap_or(Value::Null));
                let r = api
                    .modify(
                        &DAEMONSETS,
                        &namespace,
                        &name,
                        Subresource::Status,
                        MANAGER,
                        |cur| {
                            if meta::uid(cur) != ds_uid {
                                return Err(uid_mismatch(
                                    &DAEMONSETS,
                                    &name,
                                    &ds_uid,
                                    meta::uid(cur),
                                ));
                            }
                            let mut new = cur.clone();
                            new["status"] = status;
                            Ok(new)
                        },
                    )
                    .map(|_| ());
                outcome(r, "status")?;
            }
        }
    }
    Ok(applied)
}

/// Read-modify-write of an object's metadata, refused (409) when its uid is not `uid`.
fn change(
    api: &ClusterApi,
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    uid: Option<&str>,
    edit: impl FnOnce(&mut Value) -> Result<(), ApiError>,
) -> Result<(), CallError> {
    api.modify(rt, namespace, name, Subresource::Main, MANAGER, |cur| {
        if let Some(uid) = uid
            && meta::uid(cur) != uid
        {
            return Err(uid_mismatch(rt, name, uid, meta::uid(cur)));
        }
        let mut new = cur.clone();
        edit(&mut new)?;
        Ok(new)
    })
    .map(|_| ())
}

/// Adds a controller reference, unless another controller owns the object (409).
fn add_owner(obj: &mut Value, owner: &Value) -> Result<(), ApiError> {
    let name = meta::name(obj).to_string();
    let refs = meta::metadata_mut(obj)
        .entry("ownerReferences")
        .or_insert_with(|| json!([]));
    if !refs.is_array() {
        *refs = json!([]);
    }
    let Some(list) = refs.as_array_mut() else {
        return Ok(());
    };
    if list
        .iter()
        .any(|r| r["controller"] == true && r["uid"] != owner["uid"])
    {
        return Err(ApiError::conflict(
            &PODS,
            &name,
            "the object already has a controller",
        ));
    }
    if !list.iter().any(|r| r["uid"] == owner["uid"]) {
        list.push(owner.clone());
    }
    Ok(())
}

/// The status as the apiserver stores it: Go's `omitempty` drops zero counters that are
/// optional (`numberAvailable: 0` is absent on a real cluster), while the required ones stay.
fn omit_empty(mut status: Value) -> Value {
    if let Some(fields) = status.as_object_mut() {
        for optional in [
            "numberAvailable",
            "numberUnavailable",
            "updatedNumberScheduled",
            "observedGeneration",
            "collisionCount",
        ] {
            if fields.get(optional) == Some(&json!(0)) {
                fields.remove(optional);
            }
        }
        if fields.get("conditions").is_some_and(|c| c == &json!([])) {
            fields.remove("conditions");
        }
    }
    status
}

fn set_label(obj: &mut Value, key: &str, value: &str) {
    let labels = meta::metadata_mut(obj)
        .entry("labels")
        .or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    labels[key] = json!(value);
}
