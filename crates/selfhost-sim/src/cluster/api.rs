//! How the simulated control plane's own components reach the API: through the store, on the
//! same write path as HTTP requests (defaulting, validation, resource versions, watches), and
//! only while the API server answers. A component whose apiserver is down gets
//! [`CallError::Unreachable`] and must try again later, as a real one would.
//!
//! Request-level faults injected for HTTP clients do not apply here; a server that is down
//! (no apiserver serves in the self-hosting model, crashed, or in a `down_for` fault) is down
//! for everyone.

use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::process_table::ProcessTable;
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::server::SimServer;
use crate::store::{
    DeleteOptions, Deletion, ListOptions, ObjectList, Store, StoreEvent, Subresource, WriteOptions,
};

/// Why an in-process call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub(crate) enum CallError {
    /// The API server does not answer.
    #[error("the API server is unreachable")]
    Unreachable,
    /// The API server refused the request.
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl CallError {
    /// The HTTP status code of a refusal (`None` when unreachable).
    pub(crate) fn code(&self) -> Option<u16> {
        match self {
            CallError::Unreachable => None,
            CallError::Api(e) => Some(e.code),
        }
    }

    /// 404: the object is gone.
    pub(crate) fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// 409: a conflict, a failed precondition or an existing name.
    pub(crate) fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }
}

/// How often a component checks again whether a server it found down answers (a down_for
/// fault does not announce its end).
pub(crate) const RETRY_WHEN_DOWN: Duration = Duration::from_millis(25);

/// The in-process API client (cheap to clone).
#[derive(Clone)]
pub(crate) struct ClusterApi {
    store: Store,
    server: Arc<SimServer>,
    process_table: Arc<ProcessTable>,
}

impl std::fmt::Debug for ClusterApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterApi")
            .field("up", &self.is_up())
            .finish()
    }
}

impl ClusterApi {
    pub(crate) fn new(server: Arc<SimServer>, process_table: Arc<ProcessTable>) -> Self {
        ClusterApi {
            store: server.store().clone(),
            server,
            process_table,
        }
    }

    /// Whether the API server answers: the model lets it (decided the moment the last
    /// apiserver process stopped, before the HTTP listener closes) and it listens.
    pub(crate) fn is_up(&self) -> bool {
        self.process_table.api_allowed() && self.server.is_up()
    }

    /// The store itself, for waiting on revisions (no data is read through it).
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    fn reachable(&self) -> Result<(), CallError> {
        if self.is_up() {
            Ok(())
        } else {
            Err(CallError::Unreachable)
        }
    }

    /// Reads one object.
    pub(crate) fn get(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Value>, CallError> {
        self.reachable()?;
        Ok(self.store.get(rt, namespace, name)?)
    }

    /// Lists one type, in one namespace or all.
    pub(crate) fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
    ) -> Result<ObjectList, CallError> {
        self.reachable()?;
        let options = ListOptions {
            namespace,
            ..ListOptions::default()
        };
        Ok(self.store.list(rt, &options)?)
    }

    /// The changes after `revision` (a watch resuming), or 410 when too old.
    pub(crate) fn events_after(&self, revision: u64) -> Result<Vec<Arc<StoreEvent>>, CallError> {
        self.reachable()?;
        Ok(self.store.events_after(revision)?)
    }

    /// Creates an object.
    pub(crate) fn create(
        &self,
        rt: &ResourceType,
        namespace: &str,
        obj: Value,
        manager: &str,
    ) -> Result<Arc<Value>, CallError> {
        self.reachable()?;
        Ok(self
            .store
            .create(rt, namespace, obj, &WriteOptions::manager(manager))?)
    }

    /// Read-modify-write of an object or its status; `change` may refuse with an error.
    pub(crate) fn modify(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        subresource: Subresource,
        manager: &str,
        change: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Arc<Value>, CallError> {
        self.reachable()?;
        let written = self.store.modify(
            rt,
            namespace,
            name,
            subresource,
            &WriteOptions::manager(manager),
            change,
        )?;
        Ok(written.object)
    }

    /// Deletes an object.
    pub(crate) fn delete(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deletion, CallError> {
        self.reachable()?;
        Ok(self.store.delete(rt, namespace, name, options)?)
    }

    /// `pods/binding`.
    pub(crate) fn bind(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        node: &str,
    ) -> Result<Arc<Value>, CallError> {
        self.reachable()?;
        Ok(self.store.bind_pod(namespace, name, Some(uid), node)?)
    }
}

/// A typed copy of a stored object (`None`, with a log line, for one that does not fit the
/// type: the store validated it, so this would be a simulator bug, never a crash).
pub(crate) fn typed<K: DeserializeOwned>(obj: &Value) -> Option<K> {
    match serde_json::from_value(obj.clone()) {
        Ok(k) => Some(k),
        Err(e) => {
            tracing::warn!(error = %e, "a stored object does not decode");
            None
        }
    }
}

/// The 409 a write refuses with when the object's uid is not the expected one.
pub(crate) fn uid_mismatch(rt: &ResourceType, name: &str, expected: &str, found: &str) -> ApiError {
    ApiError::conflict(
        rt,
        name,
        &format!(
            "Precondition failed: UID in precondition: {expected}, UID in object meta: {found}"
        ),
    )
}
