//! The data behind the store lock: objects, the global revision, the event history and the
//! indices the garbage collector reads. Every change goes through [`State::commit`], so each
//! write bumps the revision exactly once and leaves exactly one event in the history.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use serde_json::Value;

use super::meta;
use crate::resources::{self, ResourceType};

/// What happened to an object, as watch events name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object changed.
    Modified,
    /// The object is gone.
    Deleted,
}

impl EventType {
    /// The name used on the wire: `ADDED`, `MODIFIED`, `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change, kept in the bounded history that watches replay.
#[derive(Debug, Clone)]
pub struct StoreEvent {
    /// The revision this change created.
    pub revision: u64,
    /// The type of the object.
    pub resource: ResourceType,
    /// What happened.
    pub event_type: EventType,
    /// The object after the change; for a deletion, its last state stamped with the
    /// deletion's revision (as the real apiserver sends it).
    pub object: Arc<Value>,
    /// The object before the change (`None` for a creation).
    pub previous: Option<Arc<Value>>,
}

/// Where an object lives: its type, namespace (empty for cluster-scoped types) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectId {
    /// The object's type.
    pub resource: ResourceType,
    /// Its namespace; empty for cluster-scoped types.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// Objects of one type, ordered by `(namespace, name)` like the keys of etcd.
pub(crate) type TypeObjects = BTreeMap<(String, String), Arc<Value>>;

/// Finalizers the garbage collector acts on.
pub(crate) const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// Finalizer asking the garbage collector to orphan dependents.
pub(crate) const ORPHAN_FINALIZER: &str = "orphan";

pub(crate) struct State {
    pub(crate) revision: u64,
    objects: HashMap<ResourceType, TypeObjects>,
    pub(crate) history: VecDeque<Arc<StoreEvent>>,
    history_limit: usize,
    /// uid → object: how owner references are resolved.
    pub(crate) uids: HashMap<String, ObjectId>,
    /// Objects with owner references (the garbage collector's dependents).
    pub(crate) owned: HashSet<ObjectId>,
    /// Objects being deleted that wait for the garbage collector: GC finalizers, or a
    /// terminating namespace.
    pub(crate) gc_pending: HashSet<ObjectId>,
    empty: TypeObjects,
}

impl State {
    pub(crate) fn new(history_limit: usize) -> Self {
        State {
            revision: 0,
            objects: HashMap::new(),
            history: VecDeque::new(),
            history_limit: history_limit.max(1),
            uids: HashMap::new(),
            owned: HashSet::new(),
            gc_pending: HashSet::new(),
            empty: BTreeMap::new(),
        }
    }

    pub(crate) fn objects(&self, rt: &ResourceType) -> &TypeObjects {
        self.objects.get(rt).unwrap_or(&self.empty)
    }

    pub(crate) fn get(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Option<&Arc<Value>> {
        self.objects
            .get(rt)?
            .get(&(namespace.to_string(), name.to_string()))
    }

    pub(crate) fn get_id(&self, id: &ObjectId) -> Option<&Arc<Value>> {
        self.get(&id.resource, &id.namespace, &id.name)
    }

    /// The oldest revision whose successors are all still in the history: a watch or a
    /// snapshot from any revision at or after it can be served.
    pub(crate) fn oldest_servable(&self) -> u64 {
        match self.history.front() {
            Some(e) => e.revision.saturating_sub(1),
            None => self.revision,
        }
    }

    /// Events after `revision`, in order; `None` when some of them were already evicted.
    pub(crate) fn events_after(
        &self,
        revision: u64,
    ) -> Option<impl Iterator<Item = &Arc<StoreEvent>>> {
        if revision < self.oldest_servable() {
            return None;
        }
        let start = self.history.partition_point(|e| e.revision <= revision);
        Some(self.history.range(start..))
    }

    /// Whether a namespace exists and is not being deleted; `Err(true)` when it is terminating.
    pub(crate) fn namespace_state(&self, namespace: &str) -> Result<(), bool> {
        match self.get(&resources::NAMESPACES, "", namespace) {
            None => Err(false),
            Some(ns) if meta::deletion_timestamp(ns).is_some() => Err(true),
            Some(_) => Ok(()),
        }
    }

    /// Applies one change: stamps the new revision as `metadata.resourceVersion`, stores (or
    /// removes) the object, updates the indices and appends the event to the history.
    pub(crate) fn commit(
        &mut self,
        rt: ResourceType,
        namespace: &str,
        name: &str,
        new: Option<Value>,
    ) -> Arc<StoreEvent> {
        self.revision += 1;
        let revision = self.revision;
        let key = (namespace.to_string(), name.to_string());
        let objects = self.objects.entry(rt).or_default();
        let previous = objects.get(&key).cloned();
        let id = ObjectId {
            resource: rt,
            namespace: key.0.clone(),
            name: key.1.clone(),
        };
        let (event_type, object) = match new {
            Some(mut obj) => {
                stamp(&mut obj, revision);
                let obj = Arc::new(obj);
                objects.insert(key, obj.clone());
                let kind = if previous.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (kind, obj)
            }
            None => {
                objects.remove(&key);
                let mut last = previous.as_deref().cloned().unwrap_or(Value::Null);
                stamp(&mut last, revision);
                (EventType::Deleted, Arc::new(last))
            }
        };
        self.index(
            &id,
            (event_type != EventType::Deleted).then_some(&*object),
            previous.as_deref(),
        );
        let event = Arc::new(StoreEvent {
            revision,
            resource: rt,
            event_type,
            object,
            previous,
        });
        self.history.push_back(event.clone());
        while self.history.len() > self.history_limit {
            self.history.pop_front();
        }
        event
    }

    fn index(&mut self, id: &ObjectId, now: Option<&Value>, before: Option<&Value>) {
        if let Some(before) = before {
            self.uids.remove(meta::uid(before));
        }
        self.owned.remove(id);
        self.gc_pending.remove(id);
        let Some(obj) = now else { return };
        self.uids.insert(meta::uid(obj).to_string(), id.clone());
        if meta::has_owner_references(obj) {
            self.owned.insert(id.clone());
        }
        if meta::deletion_timestamp(obj).is_some() {
            let waits_for_gc = id.resource == resources::NAMESPACES
                || meta::finalizers(obj)
                    .iter()
                    .any(|f| f == FOREGROUND_FINALIZER || f == ORPHAN_FINALIZER);
            if waits_for_gc {
                self.gc_pending.insert(id.clone());
            }
        }
    }
}

fn stamp(obj: &mut Value, revision: u64) {
    if obj.is_object() {
        meta::metadata_mut(obj).insert(
            "resourceVersion".into(),
            Value::String(revision.to_string()),
        );
    }
}
