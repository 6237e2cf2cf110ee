//! Carrying out the state machine's actions against the API, each with its precondition and
//! bounded retries. A 409 or a 404 is not an error here: it means the cluster moved on since
//! the observation, and the next observation decides again.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use selfhost_core::component::NAMESPACE;
use selfhost_core::pivot::{Step, Update};
use serde_json::json;

use crate::api_call::{ApiCallError, FailureKind};
use crate::retry::{RetryPolicy, with_retries};

/// The field manager selfhost writes as.
pub const FIELD_MANAGER: &str = "selfhost";

/// What an action did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// It was written; the object now has this resourceVersion (if the answer said).
    Written {
        /// What kind of object was written.
        kind: Kind,
        /// The object's name.
        name: String,
        /// Its new resourceVersion.
        resource_version: Option<String>,
    },
    /// The cluster had moved on (409/404): nothing written; observe again.
    Superseded {
        /// Why.
        why: String,
    },
}

fn superseded_or<T>(
    result: Result<T, ApiCallError>,
    ok: impl FnOnce(T) -> Applied,
) -> Result<Applied, ApiCallError> {
    match result {
        Ok(value) => Ok(ok(value)),
        Err(e)
            if matches!(
                e.kind,
                FailureKind::Conflict | FailureKind::NotFound | FailureKind::AlreadyExists
            ) =>
        {
            Ok(Applied::Superseded { why: e.message })
        }
        Err(e) => Err(e),
    }
}

/// The kinds of object the engine writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A DaemonSet.
    DaemonSet,
    /// A Pod.
    Pod,
    /// A Lease.
    Lease,
}

impl Kind {
    /// The kind as the API names it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::DaemonSet => "DaemonSet",
            Kind::Pod => "Pod",
            Kind::Lease => "Lease",
        }
    }
}

/// How many times an update that met a metadata-only conflict is applied again to the object
/// as the API has it (see the DaemonSet update in [`perform`]).
const CONFLICT_REREADS: usize = 5;

/// Performs an action step; `None` for steps that are not actions (waits and ends).
/// `live` is the cached real DaemonSet an [`Update`] applies to.
pub async fn perform(
    client: &kube::Client,
    step: &Step,
    live: impl Fn(&str) -> Option<DaemonSet>,
    policy: &RetryPolicy,
    dry_run: bool,
) -> Option<Result<Applied, ApiCallError>> {
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let post = PostParams {
        dry_run,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    let delete = |uid: Option<&String>, rv: Option<&String>| DeleteParams {
        dry_run,
        preconditions: Some(Preconditions {
            uid: uid.cloned(),
            resource_version: rv.cloned(),
        }),
        ..DeleteParams::default()
    };
    let written = |kind: Kind, name: &str| {
        let name = name.to_string();
        move |rv: Option<String>| Applied::Written {
            kind,
            name,
            resource_version: rv,
        }
    };
    Some(match step {
        Step::CreateBackup { daemonset } => {
            let name = daemonset.metadata.name.clone().unwrap_or_default();
            let result = with_retries(
                &format!("create DaemonSet kube-system/{name}"),
                policy,
                || daemonsets.create(&post, daemonset),
            )
            .await;
            superseded_or(
                result.map(|ds| ds.metadata.resource_version),
                written(Kind::DaemonSet, &name),
            )
        }
        Step::AdoptBackup {
            name,
            resource_version,
            annotations,
            ..
        } => {
            let patch = json!({ "metadata": { "resourceVersion": resource_version, "annotations": annotations } });
            let merge = Patch::Merge(&patch);
            let params = PatchParams {
                dry_run,
                field_manager: Some(FIELD_MANAGER.into()),
                ..PatchParams::default()
            };
            let result = with_retries(
                &format!("annotate DaemonSet kube-system/{name}"),
                policy,
                || daemonsets.patch(name, &params, &merge),
            )
            .await;
            superseded_or(
                result.map(|ds| ds.metadata.resource_version),
                written(Kind::DaemonSet, name),
            )
        }
        Step::UpdateReal(update)
        | Step::RollBack { update, .. }
        | Step::DrainBackupNode { update, .. } => {
            let Some(current) = live(&update.name) else {
                return Some(Ok(Applied::Superseded {
                    why: format!("DaemonSet {} is gone", update.name),
                }));
            };
            let result = replace_daemonset(&daemonsets, &post, policy, current, |ds, rv| {
                updated(ds, update, rv)
            })
            .await;
            superseded_or(
                result.map(|ds| ds.metadata.resource_version),
                written(Kind::DaemonSet, &update.name),
            )
        }
        // PUTs of the live object, not patches: the upgrader's role may only update the real
        // DaemonSets (deploy/rbac.yaml).
        Step::RestoreUpdateStrategy {
            name,
            resource_version,
            ..
        }
        | Step::RecordLeader {
            name,
            resource_version,
            ..
        } => {
            let change = |ds: &mut DaemonSet| change_in_place(step, ds);
            let result = replace_live(
                &daemonsets,
                &post,
                policy,
                live(name),
                name,
                resource_version,
                change,
            )
            .await;
            superseded_or(result, written(Kind::DaemonSet, name))
        }
        Step::DeleteOldPod {
            pod,
            uid,
            grace_period_seconds,
            ..
        } => {
            let mut params = delete(uid.as_ref(), None);
            params.grace_period_seconds = grace_period_seconds.and_then(|g| u32::try_from(g).ok());
            delete_pod(client, policy, pod, &params).await
        }
        Step::StopPossibleLeaseHolder { pod, uid, .. } => {
            delete_pod(client, policy, pod, &delete(uid.as_ref(), None)).await
        }
        Step::HandOverLease {
            lease,
            uid,
            resource_version,
            ..
        } => {
            let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
            let params = delete(uid.as_ref(), Some(resource_version));
            let result = with_retries(&format!("delete Lease kube-system/{lease}"), policy, || {
                leases.delete(lease, &params)
            })
            .await;
            superseded_or(result.map(|_| None), written(Kind::Lease, lease))
        }
        Step::RemoveBackup { name, uid } => {
            let mut params = delete(uid.as_ref(), None);
            params.propagation_policy = Some(kube::api::PropagationPolicy::Foreground);
            let result = with_retries(
                &format!("delete DaemonSet kube-system/{name}"),
                policy,
                || daemonsets.delete(name, &params),
            )
            .await;
            let result =
                result.map(|deleted| deleted.left().and_then(|d| d.metadata.resource_version));
            superseded_or(result, written(Kind::DaemonSet, name))
        }
        _ => return None,
    })
}

/// PUTs `change(current, None)` — the live DaemonSet as the decision saw it, with the
/// decision's precondition — and, after a 409, `change(fresh, Some(rv))` to the object as the
/// API has it, as long as its spec is still the one decided on.
///
/// A 409 because someone changed only the DaemonSet's metadata since our view (a GitOps
/// controller or an operator annotating it every few hundred milliseconds) is not a reason to
/// decide again: while the view lags behind such a writer, every decision would meet the next
/// 409 (a rollback superseded for as long as the writer keeps writing). The writer's metadata is
/// kept. Bounded: a writer faster than a read and a write gets the executor's own handling of
/// a superseded action.
/// Deletes one pod (`params`: its preconditions, grace period and dry run).
async fn delete_pod(
    client: &kube::Client,
    policy: &RetryPolicy,
    pod: &str,
    params: &DeleteParams,
) -> Result<Applied, ApiCallError> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let result = with_retries(&format!("delete Pod kube-system/{pod}"), policy, || {
        pods.delete(pod, params)
    })
    .await;
    // A pod being deleted gracefully comes back with its new deletion time and
    // resourceVersion: the watch must show that before the next decision.
    let result = result.map(|deleted| deleted.left().and_then(|p| p.metadata.resource_version));
    superseded_or(result, |resource_version| Applied::Written {
        kind: Kind::Pod,
        name: pod.to_string(),
        resource_version,
    })
}

async fn replace_daemonset(
    daemonsets: &Api<DaemonSet>,
    post: &PostParams,
    policy: &RetryPolicy,
    current: DaemonSet,
    change: impl Fn(DaemonSet, Option<String>) -> DaemonSet,
) -> Result<DaemonSet, ApiCallError> {
    let name = current.metadata.name.clone().unwrap_or_default();
    let what = format!("update DaemonSet kube-system/{name}");
    let object = change(current.clone(), None);
    let mut result = with_retries(&what, policy, || daemonsets.replace(&name, post, &object)).await;
    for _ in 0..CONFLICT_REREADS {
        if !result
            .as_ref()
            .is_err_and(|e| e.kind == FailureKind::Conflict)
        {
            break;
        }
        let Ok(fresh) = with_retries(
            &format!("read DaemonSet kube-system/{name}"),
            policy,
            || daemonsets.get(&name),
        )
        .await
        else {
            break;
        };
        if fresh.spec != current.spec {
            break;
        }
        let rv = fresh.metadata.resource_version.clone();
        let object = change(fresh, rv);
        result = with_retries(&what, policy, || daemonsets.replace(&name, post, &object)).await;
    }
    result
}

/// What a step that changes no pod template does to the live DaemonSet: writes the update
/// strategy back and drops the record of the hold, or adds the leader's record.
fn change_in_place(step: &Step, ds: &mut DaemonSet) {
    match step {
        Step::RestoreUpdateStrategy {
            strategy,
            remove_annotations,
            ..
        } => {
            if let Some(annotations) = ds.metadata.annotations.as_mut() {
                for key in remove_annotations {
                    annotations.remove(key);
                }
            }
            if let Some(spec) = ds.spec.as_mut() {
                spec.update_strategy = Some((**strategy).clone());
            }
        }
        Step::RecordLeader { annotations, .. } => {
            ds.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .extend(annotations.clone());
        }
        _ => {}
    }
}

/// PUTs the live DaemonSet `current` changed by `change` (metadata or strategy, never the
/// template), with the decision's `resource_version` as precondition (see
/// [`replace_daemonset`] for a conflict); the new resourceVersion, or NotFound when it is
/// gone from the cache.
async fn replace_live(
    daemonsets: &Api<DaemonSet>,
    post: &PostParams,
    policy: &RetryPolicy,
    current: Option<DaemonSet>,
    name: &str,
    resource_version: &Option<String>,
    change: impl Fn(&mut DaemonSet),
) -> Result<Option<String>, ApiCallError> {
    let Some(current) = current else {
        // Not found, as the API would say: the caller takes it as superseded.
        return Err(ApiCallError {
            what: format!("update DaemonSet kube-system/{name}"),
            kind: FailureKind::NotFound,
            message: format!("DaemonSet {name} is gone"),
            attempts: 0,
            source: None,
        });
    };
    let result = replace_daemonset(daemonsets, post, policy, current, |mut ds, rv| {
        ds.metadata.resource_version = rv.or_else(|| resource_version.clone());
        ds.metadata.managed_fields = None;
        change(&mut ds);
        ds.status = None;
        ds
    })
    .await;
    result.map(|ds| ds.metadata.resource_version)
}

/// The live DaemonSet with the update's template, strategy and annotations, and as
/// precondition `resource_version` if given, else the update's (a PUT with a stale one gets
/// 409).
fn updated(mut ds: DaemonSet, update: &Update, resource_version: Option<String>) -> DaemonSet {
    ds.metadata.resource_version = resource_version.or_else(|| update.resource_version.clone());
    ds.metadata.managed_fields = None;
    let annotations: &mut BTreeMap<String, String> =
        ds.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for key in &update.remove_annotations {
        annotations.remove(key);
    }
    annotations.extend(update.set_annotations.clone());
    if let Some(spec) = ds.spec.as_mut() {
        spec.template = (*update.template).clone();
        if let Some(strategy) = &update.update_strategy {
            spec.update_strategy = Some(strategy.clone());
        }
    }
    ds.status = None;
    ds
}
