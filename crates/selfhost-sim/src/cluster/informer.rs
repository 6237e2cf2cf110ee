//! Informer caches of the in-process controllers: typed copies of the objects they read,
//! filled by a list and kept current from the event history (a watch resuming where it left
//! off), relisting when the history no longer reaches back (410).

use std::collections::{HashMap, HashSet};

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::api::{CallError, ClusterApi, typed};
use crate::resources::ResourceType;
use crate::store::meta;
use crate::store::{EventType, StoreEvent};

/// One type's cache, keyed by `(namespace, name)`. Objects live in one vector (in no
/// particular order) so controllers read them as a slice without copying.
#[derive(Debug)]
pub(crate) struct Cache<K> {
    resource: ResourceType,
    namespace: Option<&'static str>,
    objects: Vec<K>,
    index: HashMap<(String, String), usize>,
    listed_at: u64,
}

impl<K: DeserializeOwned + Clone + kube::Resource> Cache<K> {
    /// A cache of `resource`, in one namespace or all.
    pub(crate) fn new(resource: ResourceType, namespace: Option<&'static str>) -> Self {
        Cache {
            resource,
            namespace,
            objects: Vec::new(),
            index: HashMap::new(),
            listed_at: 0,
        }
    }

    pub(crate) fn get(&self, namespace: &str, name: &str) -> Option<&K> {
        let at = self.index.get(&(namespace.to_string(), name.to_string()))?;
        self.objects.get(*at)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &K> {
        self.objects.iter()
    }

    /// Every object, in no particular order.
    pub(crate) fn as_slice(&self) -> &[K] {
        &self.objects
    }

    fn key(obj: &Value) -> (String, String) {
        (
            meta::namespace(obj).to_string(),
            meta::name(obj).to_string(),
        )
    }

    fn key_of(obj: &K) -> (String, String) {
        let meta = obj.meta();
        (
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    }

    fn insert(&mut self, key: (String, String), obj: K) {
        match self.index.get(&key) {
            Some(at) => self.objects[*at] = obj,
            None => {
                self.index.insert(key, self.objects.len());
                self.objects.push(obj);
            }
        }
    }

    fn remove(&mut self, key: &(String, String)) {
        let Some(at) = self.index.remove(key) else {
            return;
        };
        self.objects.swap_remove(at);
        if let Some(moved) = self.objects.get(at) {
            self.index.insert(Self::key_of(moved), at);
        }
    }
}

/// What the sync routine needs from a cache, whatever its type.
pub(crate) trait Informed {
    /// Replaces the content with a fresh list taken at `revision`.
    fn relist(&mut self, api: &ClusterApi) -> Result<u64, CallError>;
    /// Applies one event; whether it concerned this cache.
    fn apply(&mut self, event: &StoreEvent) -> bool;
    /// The type it caches.
    fn resource(&self) -> ResourceType;
}

impl<K: DeserializeOwned + Clone + kube::Resource> Informed for Cache<K> {
    fn relist(&mut self, api: &ClusterApi) -> Result<u64, CallError> {
        let list = api.list(&self.resource, self.namespace)?;
        self.objects.clear();
        self.index.clear();
        for obj in &list.items {
            if let Some(typed) = typed::<K>(obj) {
                self.insert(Self::key(obj), typed);
            }
        }
        self.listed_at = list.resource_version;
        Ok(list.resource_version)
    }

    fn apply(&mut self, event: &StoreEvent) -> bool {
        if event.resource != self.resource || event.revision <= self.listed_at {
            return false;
        }
        if let Some(ns) = self.namespace
            && meta::namespace(&event.object) != ns
        {
            return false;
        }
        let key = Self::key(&event.object);
        match event.event_type {
            EventType::Deleted => self.remove(&key),
            EventType::Added | EventType::Modified => {
                if let Some(obj) = typed::<K>(&event.object) {
                    self.insert(key, obj);
                }
            }
        }
        true
    }

    fn resource(&self) -> ResourceType {
        self.resource
    }
}

/// Where a set of caches is in the event history.
#[derive(Debug, Default)]
pub(crate) struct Cursor {
    position: Option<u64>,
}

impl Cursor {
    /// Brings every cache up to date; returns the types that changed (all of them after a
    /// relist).
    pub(crate) fn sync(
        &mut self,
        api: &ClusterApi,
        caches: &mut [&mut dyn Informed],
    ) -> Result<HashSet<ResourceType>, CallError> {
        let mut changed = HashSet::new();
        if let Some(position) = self.position {
            match api.events_after(position) {
                Ok(events) => {
                    for event in &events {
                        for cache in caches.iter_mut() {
                            if cache.apply(event) {
                                changed.insert(cache.resource());
                            }
                        }
                    }
                    if let Some(last) = events.last() {
                        self.position = Some(last.revision);
                    }
                    return Ok(changed);
                }
                Err(CallError::Api(e)) if e.code == 410 => self.position = None,
                Err(e) => return Err(e),
            }
        }
        let mut oldest = u64::MAX;
        for cache in caches.iter_mut() {
            oldest = oldest.min(cache.relist(api)?);
            changed.insert(cache.resource());
        }
        self.position = Some(if oldest == u64::MAX { 0 } else { oldest });
        Ok(changed)
    }
}
