//! The garbage collector (and the namespace cleanup) of the simulated controller-manager.
//!
//! It follows `ownerReferences`: dependents of a deleted owner go away (Background), an owner
//! deleted in the Foreground stays readable with the `foregroundDeletion` finalizer until its
//! blocking dependents are gone, and Orphan strips the references before the owner goes.
//! It runs as a task that can be paused, because in a self-hosted cluster it only works
//! while a kube-controller-manager is up.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::ApiError;
use crate::resources;
use crate::store::gc_plan::GcAction;
use crate::store::{DeleteOptions, Store, Subresource, WriteOptions, meta};

/// The field manager of the collector's own writes.
const MANAGER: &str = "generic-garbage-collector";

/// Runs one pass of garbage collection, returning how many actions it took. Races with
/// other writers are fine: an action that no longer applies fails with 404/409 and the next
/// pass decides again.
pub fn collect_garbage(store: &Store) -> usize {
    let actions = store.garbage();
    let mut done = 0;
    for action in actions {
        match run(store, action) {
            Ok(()) => done += 1,
            Err(e) if e.code == 404 || e.code == 409 => {}
            Err(e) => tracing::warn!(error = %e, "garbage collector action failed"),
        }
    }
    done
}

fn run(store: &Store, action: GcAction) -> Result<(), ApiError> {
    let manager = WriteOptions::manager(MANAGER);
    match action {
        GcAction::DeleteDependent {
            id,
            uid,
            propagation,
        } => {
            let opts = DeleteOptions {
                propagation_policy: Some(propagation),
                precondition_uid: Some(uid),
                ..DeleteOptions::default()
            };
            store.delete(&id.resource, &id.namespace, &id.name, &opts)?;
        }
        GcAction::DeleteNamespaced { id, uid } => {
            let opts = DeleteOptions {
                precondition_uid: Some(uid),
                ..DeleteOptions::default()
            };
            store.delete(&id.resource, &id.namespace, &id.name, &opts)?;
        }
        GcAction::RemoveOwnerReferences { id, owner_uids } => {
            store.modify(
                &id.resource,
                &id.namespace,
                &id.name,
                Subresource::Main,
                &manager,
                |cur| {
                    let mut obj = cur.clone();
                    for uid in &owner_uids {
                        meta::remove_owner_reference(&mut obj, uid);
                    }
                    Ok(obj)
                },
            )?;
        }
        GcAction::RemoveFinalizer { id, finalizer } => {
            store.modify(
                &id.resource,
                &id.namespace,
                &id.name,
                Subresource::Main,
                &manager,
                |cur| {
                    let mut obj = cur.clone();
                    let rest: Vec<String> = meta::finalizers(&obj)
                        .into_iter()
                        .filter(|f| f != finalizer)
                        .collect();
                    meta::set_finalizers(&mut obj, &rest);
                    Ok(obj)
                },
            )?;
        }
        GcAction::FinalizeNamespace { name } => {
            store.modify(
                &resources::NAMESPACES,
                "",
                &name,
                Subresource::Finalize,
                &manager,
                |cur| {
                    let mut obj = cur.clone();
                    obj["spec"]["finalizers"] = Value::Array(Vec::new());
                    Ok(obj)
                },
            )?;
        }
    }
    Ok(())
}

/// The running collector: a task reacting to every store change while enabled.
#[derive(Debug)]
pub struct GarbageCollector {
    enabled: Arc<watch::Sender<bool>>,
    task: JoinHandle<()>,
}

impl GarbageCollector {
    /// Starts the collector on `store`, running or paused.
    pub fn spawn(store: Store, enabled: bool) -> Self {
        let (tx, mut rx) = watch::channel(enabled);
        let enabled = Arc::new(tx);
        let task = tokio::spawn(async move {
            let mut revisions = store.subscribe_revisions();
            loop {
                if *rx.borrow_and_update() {
                    // Marked seen before the pass: a change during it (ours included) wakes
                    // the next one.
                    revisions.borrow_and_update();
                    collect_garbage(&store);
                    tokio::select! {
                        r = revisions.changed() => if r.is_err() { return },
                        r = rx.changed() => if r.is_err() { return },
                    }
                } else if rx.changed().await.is_err() {
                    return;
                }
            }
        });
        GarbageCollector { enabled, task }
    }

    /// Pauses (`false`) or resumes (`true`) collection.
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.send_replace(enabled);
    }

    /// Whether the collector is running.
    pub fn is_enabled(&self) -> bool {
        *self.enabled.borrow()
    }
}

impl Drop for GarbageCollector {
    fn drop(&mut self) {
        self.task.abort();
    }
}
