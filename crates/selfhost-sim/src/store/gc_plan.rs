//! What the garbage collector should do next, read from the store's indices under one lock:
//! the decisions of the real GC's `attemptToDeleteItem` and `processDeletingDependentsItem`,
//! plus the namespace controller's cleanup of terminating namespaces.

use std::collections::{HashMap, HashSet};

use super::Store;
use super::delete::Propagation;
use super::meta;
use super::state::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER, ObjectId};
use crate::resources;

/// One step of garbage collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GcAction {
    /// Delete a dependent whose owners are all gone or being deleted in the foreground.
    DeleteDependent {
        id: ObjectId,
        uid: String,
        propagation: Propagation,
    },
    /// Strip references to owners that are gone, orphaning or being deleted.
    RemoveOwnerReferences {
        id: ObjectId,
        owner_uids: Vec<String>,
    },
    /// Remove a GC finalizer from an owner whose dependents were handled.
    RemoveFinalizer {
        id: ObjectId,
        finalizer: &'static str,
    },
    /// Delete an object of a terminating namespace.
    DeleteNamespaced { id: ObjectId, uid: String },
    /// A terminating namespace is empty: let it go.
    FinalizeNamespace { name: String },
}

impl Store {
    /// The garbage collector's next actions (empty when there is nothing to do).
    pub(crate) fn garbage(&self) -> Vec<GcAction> {
        let state = self.lock();
        let mut actions = Vec::new();
        // Owners that some object points at, and the dependents of each owner uid.
        let mut dependents: HashMap<&str, Vec<(&ObjectId, bool)>> = HashMap::new();
        let mut owned_objects = Vec::new();
        for id in &state.owned {
            let Some(obj) = state.get_id(id) else {
                continue;
            };
            let refs = meta::owner_references(obj);
            owned_objects.push((id, obj, refs));
        }
        for (id, _, refs) in &owned_objects {
            for r in refs {
                dependents
                    .entry(r.uid.as_str())
                    .or_default()
                    .push((*id, r.block_owner_deletion));
            }
        }
        let has_dependents: HashSet<&str> = dependents.keys().copied().collect();

        for (id, obj, refs) in &owned_objects {
            let mut solid = false;
            let mut waiting = Vec::new();
            let mut dangling = Vec::new();
            let mut orphaning = Vec::new();
            for r in refs {
                let owner = state.uids.get(&r.uid).and_then(|oid| state.get_id(oid));
                match owner {
                    None => dangling.push(r.uid.clone()),
                    Some(o) if meta::deletion_timestamp(o).is_some() => {
                        let f = meta::finalizers(o);
                        if f.iter().any(|x| x == ORPHAN_FINALIZER) {
                            orphaning.push(r.uid.clone());
                        } else if f.iter().any(|x| x == FOREGROUND_FINALIZER) {
                            waiting.push(r.uid.clone());
                        } else {
                            solid = true;
                        }
                    }
                    Some(_) => solid = true,
                }
            }
            let deleting = meta::deletion_timestamp(obj).is_some();
            if solid || !orphaning.is_empty() {
                let mut remove = orphaning;
                if solid {
                    remove.extend(dangling);
                    remove.extend(waiting);
                }
                if !remove.is_empty() {
                    actions.push(GcAction::RemoveOwnerReferences {
                        id: (*id).clone(),
                        owner_uids: remove,
                    });
                }
                continue;
            }
            if deleting || (dangling.is_empty() && waiting.is_empty()) {
                continue;
            }
            let uid = meta::uid(obj).to_string();
            // A dependent of a foreground deletion that has dependents of its own is deleted
            // in the foreground too, so that the whole chain blocks the owner.
            let propagation = if !waiting.is_empty() && has_dependents.contains(uid.as_str()) {
                Propagation::Foreground
            } else {
                Propagation::Background
            };
            actions.push(GcAction::DeleteDependent {
                id: (*id).clone(),
                uid,
                propagation,
            });
        }

        for id in &state.gc_pending {
            let Some(obj) = state.get_id(id) else {
                continue;
            };
            if id.resource == resources::NAMESPACES {
                let mut empty = true;
                for rt in resources::ALL.iter().filter(|rt| rt.namespaced) {
                    let start = (id.name.clone(), String::new());
                    for ((ns, name), o) in state.objects(rt).range(start..) {
                        if *ns != id.name {
                            break;
                        }
                        empty = false;
                        if meta::deletion_timestamp(o).is_none() {
                            actions.push(GcAction::DeleteNamespaced {
                                id: ObjectId {
                                    resource: *rt,
                                    namespace: ns.clone(),
                                    name: name.clone(),
                                },
                                uid: meta::uid(o).to_string(),
                            });
                        }
                    }
                }
                if empty {
                    actions.push(GcAction::FinalizeNamespace {
                        name: id.name.clone(),
                    });
                }
                continue;
            }
            let uid = meta::uid(obj);
            let deps = dependents.get(uid).map(Vec::as_slice).unwrap_or(&[]);
            let finalizers = meta::finalizers(obj);
            if finalizers.iter().any(|f| f == ORPHAN_FINALIZER) && deps.is_empty() {
                actions.push(GcAction::RemoveFinalizer {
                    id: id.clone(),
                    finalizer: ORPHAN_FINALIZER,
                });
            } else if finalizers.iter().any(|f| f == FOREGROUND_FINALIZER)
                && !deps.iter().any(|(_, blocking)| *blocking)
            {
                actions.push(GcAction::RemoveFinalizer {
                    id: id.clone(),
                    finalizer: FOREGROUND_FINALIZER,
                });
            }
        }
        actions
    }
}
