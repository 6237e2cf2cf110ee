//! Watches: a cursor over the event history. A watcher reads the history under the store
//! lock and waits on the revision channel, so nothing can be lost or duplicated between the
//! state a list returned and the watch that follows it.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::watch;

use super::Store;
use super::list::ObjectFilter;
use super::meta;
use super::state::{EventType, State, StoreEvent};
use crate::error::ApiError;
use crate::resources::ResourceType;

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchStart {
    /// `resourceVersion` unset or `0`: synthetic ADDED events for the current state, then
    /// every change after it.
    Now,
    /// Every change after this revision.
    After(u64),
}

/// What a watch selects.
#[derive(Clone, Default)]
pub struct WatchFilter {
    /// Only this namespace; `None` for all.
    pub namespace: Option<String>,
    /// Only objects it accepts; `None` for all.
    pub predicate: Option<Arc<ObjectFilter>>,
}

impl WatchFilter {
    fn accepts(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && meta::namespace(obj) != ns
        {
            return false;
        }
        self.predicate.as_ref().is_none_or(|p| p(obj))
    }
}

/// One event as a watcher sees it (after its filter).
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    /// ADDED, MODIFIED or DELETED.
    pub event_type: EventType,
    /// The object.
    pub object: Arc<Value>,
}

/// A started watch: the initial events (for [`WatchStart::Now`]) and the cursor.
pub struct Watch {
    /// Synthetic ADDED events of the state the watch started from.
    pub initial: Vec<WatchEvent>,
    /// Changes after that state.
    pub cursor: WatchCursor,
}

/// Position of a watcher in the event history.
pub struct WatchCursor {
    store: Store,
    resource: ResourceType,
    filter: WatchFilter,
    position: u64,
    revisions: watch::Receiver<u64>,
}

/// Translates a store event for a filtered watcher, as the apiserver's watch cache does: an
/// object entering the selection is ADDED, one leaving it is DELETED.
fn for_watcher(event: &StoreEvent, filter: &WatchFilter) -> Option<WatchEvent> {
    let now = filter.accepts(&event.object);
    let before = event.previous.as_deref().is_some_and(|p| filter.accepts(p));
    let (event_type, object) = match (event.event_type, before, now) {
        (EventType::Deleted, true, _) => (EventType::Deleted, event.object.clone()),
        (EventType::Deleted, false, _) => return None,
        (_, false, true) => (EventType::Added, event.object.clone()),
        (_, true, true) => (EventType::Modified, event.object.clone()),
        (_, true, false) => {
            // The previous state, at the new revision.
            let mut gone = event.previous.as_deref().cloned().unwrap_or(Value::Null);
            meta::metadata_mut(&mut gone).insert(
                "resourceVersion".into(),
                Value::String(event.revision.to_string()),
            );
            (EventType::Deleted, Arc::new(gone))
        }
        (_, false, false) => return None,
    };
    Some(WatchEvent { event_type, object })
}

fn expired(position: u64, state: &State) -> ApiError {
    ApiError::expired(format!(
        "too old resource version: {position} ({})",
        state.oldest_servable()
    ))
}

impl Store {
    /// Starts a watch of one type.
    pub fn watch(&self, rt: &ResourceType, filter: WatchFilter, start: WatchStart) -> Watch {
        let revisions = self.subscribe_revisions();
        let state = self.lock();
        let (initial, position) = match start {
            WatchStart::Now => {
                let initial = state
                    .objects(rt)
                    .values()
                    .filter(|o| filter.accepts(o))
                    .map(|o| WatchEvent {
                        event_type: EventType::Added,
                        object: o.clone(),
                    })
                    .collect();
                (initial, state.revision)
            }
            WatchStart::After(rv) => (Vec::new(), rv),
        };
        drop(state);
        Watch {
            initial,
            cursor: WatchCursor {
                store: self.clone(),
                resource: *rt,
                filter,
                position,
                revisions,
            },
        }
    }
}

impl WatchCursor {
    /// The revision up to which every matching event was delivered (a bookmark's version).
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The events since the last call, without waiting (possibly none); 410 Expired when
    /// the watcher fell behind the bounded history.
    pub fn try_next(&mut self) -> Result<Vec<WatchEvent>, ApiError> {
        self.revisions.borrow_and_update();
        let state = self.store.lock();
        let Some(events) = state.events_after(self.position) else {
            return Err(expired(self.position, &state));
        };
        let out = events
            .filter(|e| e.resource == self.resource)
            .filter_map(|e| for_watcher(e, &self.filter))
            .collect();
        self.position = self.position.max(state.revision);
        Ok(out)
    }

    /// Waits for the next matching events. Cancel-safe: dropping the future loses nothing.
    pub async fn next(&mut self) -> Result<Vec<WatchEvent>, ApiError> {
        loop {
            let events = self.try_next()?;
            if !events.is_empty() {
                return Ok(events);
            }
            if self.revisions.changed().await.is_err() {
                // The store is gone; nothing will ever happen again.
                std::future::pending::<()>().await;
            }
        }
    }
}
