//! The object store behind the simulated API server: the "etcd" of the simulation.
//!
//! Objects are JSON keyed by type, namespace and name. One global revision is stamped as
//! `metadata.resourceVersion` on every write; each write leaves one event in a bounded
//! history that watches and consistent list pages replay. HTTP handlers and in-process
//! controllers write through the same methods, so every change is validated, versioned and
//! seen by watchers.

mod admission;
mod binding;
mod delete;
pub(crate) mod gc_plan;
mod list;
mod managed;
pub mod meta;
mod service_account;
mod state;
mod strategy;
mod watch;
mod write;

use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Value, json};

pub use delete::{DeleteOptions, Deletion, Propagation};
pub use list::{ListOptions, ObjectFilter, ObjectList};
pub(crate) use managed::{DataStep, display_data_path};
pub use state::{EventType, ObjectId, StoreEvent};
pub use strategy::Subresource;
pub use watch::{Watch, WatchCursor, WatchEvent, WatchFilter, WatchStart};
pub use write::Written;
pub(crate) use write::check_type_meta;

use crate::error::ApiError;
use crate::resources::{self, ResourceType};
use state::State;
use write::Tracking;

/// How the store is sized.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// How many events the history keeps; watches and list pages older than that get
    /// 410 Expired (the real apiserver's watch cache is bounded the same way).
    pub history_limit: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            history_limit: 10_000,
        }
    }
}

/// Options of a create, update or patch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `dryRun=All`: run every check, store nothing.
    pub dry_run: bool,
    /// The field manager recorded in `managedFields`; `None` leaves ownership unchanged.
    pub field_manager: Option<String>,
}

impl WriteOptions {
    /// Options of a write attributed to `manager` (how in-process controllers write).
    pub fn manager(manager: &str) -> Self {
        WriteOptions {
            dry_run: false,
            field_manager: Some(manager.to_string()),
        }
    }

    fn tracking(&self) -> Tracking<'_> {
        match &self.field_manager {
            Some(m) => Tracking::Update(m),
            None => Tracking::Untracked,
        }
    }
}

/// Options of a server-side apply.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyOptions {
    /// The field manager (required by the API).
    pub field_manager: String,
    /// Take over fields other managers own instead of failing with a conflict.
    pub force: bool,
    /// Store nothing.
    pub dry_run: bool,
}

/// The namespaces every cluster starts with.
pub const INITIAL_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

struct Inner {
    state: Mutex<State>,
    revisions: tokio::sync::watch::Sender<u64>,
}

/// A handle on the store; cheap to clone, shared by the server and in-process controllers.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("revision", &self.revision())
            .finish()
    }
}

impl Store {
    /// A store holding the initial namespaces.
    pub fn new(options: StoreOptions) -> Self {
        let (revisions, _) = tokio::sync::watch::channel(0);
        let store = Store {
            inner: Arc::new(Inner {
                state: Mutex::new(State::new(options.history_limit)),
                revisions,
            }),
        };
        for ns in INITIAL_NAMESPACES {
            let obj = json!({ "metadata": { "name": ns } });
            // Creating a fresh namespace with a valid name in an empty store cannot fail.
            let _ = store.create(&resources::NAMESPACES, "", obj, &WriteOptions::default());
        }
        store
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave a half-applied commit behind (commit
        // does not panic), so the state stays usable.
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs a mutation under the lock and wakes watchers if it committed anything (before
    /// the lock is released, so a watcher cannot miss it).
    fn mutate<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.lock();
        let before = state.revision;
        let out = f(&mut state);
        if state.revision != before {
            self.inner.revisions.send_replace(state.revision);
        }
        out
    }

    /// The current global revision.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// A receiver that changes whenever the revision moves (for controllers that react to
    /// any change).
    pub fn subscribe_revisions(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.revisions.subscribe()
    }

    /// Reads one object (404 `pods "x" not found` when absent).
    pub fn get(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Value>, ApiError> {
        let ns = if rt.namespaced { namespace } else { "" };
        self.lock()
            .get(rt, ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))
    }

    /// Reads one object, `None` when absent.
    pub fn get_opt(&self, rt: &ResourceType, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.get(rt, namespace, name).ok()
    }

    /// Lists objects of one type.
    pub fn list(
        &self,
        rt: &ResourceType,
        options: &ListOptions<'_>,
    ) -> Result<ObjectList, ApiError> {
        list::list(&self.lock(), rt, options)
    }

    /// Creates an object in `namespace` (ignored for cluster-scoped types).
    pub fn create(
        &self,
        rt: &ResourceType,
        namespace: &str,
        obj: Value,
        options: &WriteOptions,
    ) -> Result<Arc<Value>, ApiError> {
        self.mutate(|s| write::create(s, rt, namespace, obj, options.dry_run, options.tracking()))
    }

    /// Replaces an object (PUT). A `metadata.resourceVersion` in `obj` must be current (409
    /// otherwise); without one the update is unconditional.
    pub fn update(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        obj: Value,
        subresource: Subresource,
        options: &WriteOptions,
    ) -> Result<Written, ApiError> {
        self.mutate(|s| {
            write::update(
                s,
                rt,
                namespace,
                name,
                obj,
                subresource,
                options.dry_run,
                options.tracking(),
            )
        })
    }

    /// Read-modify-write under the store lock: `change` gets the current object and returns
    /// the new one, which then takes the update path. Patches and controllers use this; it
    /// cannot conflict with a concurrent writer.
    pub fn modify(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        subresource: Subresource,
        options: &WriteOptions,
        change: impl FnOnce(&Value) -> Result<Value, ApiError>,
    ) -> Result<Written, ApiError> {
        let ns = if rt.namespaced { namespace } else { "" };
        self.mutate(|s| {
            let current = s
                .get(rt, ns, name)
                .cloned()
                .ok_or_else(|| ApiError::not_found(rt, name))?;
            let new = change(&current)?;
            write::update(
                s,
                rt,
                namespace,
                name,
                new,
                subresource,
                options.dry_run,
                options.tracking(),
            )
        })
    }

    /// Server-side apply: creates the object when absent, otherwise merges `applied` into it
    /// with field ownership and conflicts (see the `managed` module for what is simplified).
    pub fn apply(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        applied: Value,
        subresource: Subresource,
        options: &ApplyOptions,
    ) -> Result<Written, ApiError> {
        let mut applied = applied;
        write::check_type_meta(rt, &mut applied)?;
        let body_name = meta::name(&applied).to_string();
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let ns = if rt.namespaced { namespace } else { "" };
        let tracking = Tracking::Apply {
            manager: &options.field_manager,
            applied: &applied,
            force: options.force,
        };
        self.mutate(|s| match s.get(rt, ns, name).cloned() {
            None if subresource == Subresource::Status => Err(ApiError::not_found(rt, name)),
            None => {
                let mut obj = applied.clone();
                meta::metadata_mut(&mut obj).insert("name".into(), json!(name));
                let object = write::create(s, rt, namespace, obj, options.dry_run, tracking)?;
                Ok(Written {
                    object,
                    created: true,
                })
            }
            Some(live) => {
                let mut merged = admission::merge_applied(rt, &live, &applied)?;
                // The applied configuration carries no resourceVersion precondition unless
                // it names one.
                let rv = meta::resource_version(&applied).map(str::to_string);
                let m = meta::metadata_mut(&mut merged);
                match rv {
                    Some(rv) => m.insert("resourceVersion".into(), json!(rv)),
                    None => m.remove("resourceVersion"),
                };
                write::update(
                    s,
                    rt,
                    namespace,
                    name,
                    merged,
                    subresource,
                    options.dry_run,
                    tracking,
                )
            }
        })
    }

    /// Deletes an object; see [`Deletion`] for the two outcomes.
    pub fn delete(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deletion, ApiError> {
        self.mutate(|s| delete::delete(s, rt, namespace, name, options))
    }

    /// Deletes every object a list would return (`deletecollection`), returning each
    /// outcome. Objects that vanish meanwhile are skipped.
    pub fn delete_collection(
        &self,
        rt: &ResourceType,
        list_options: &ListOptions<'_>,
        options: &DeleteOptions,
    ) -> Result<Vec<Deletion>, ApiError> {
        self.mutate(|s| {
            let listed = list::list(s, rt, list_options)?;
            let mut out = Vec::new();
            for obj in listed.items {
                match delete::delete(s, rt, meta::namespace(&obj), meta::name(&obj), options) {
                    Ok(d) => out.push(d),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(out)
        })
    }

    /// The committed events after `revision` (oldest first), or 410 Expired when the
    /// history no longer reaches back that far.
    pub fn events_after(&self, revision: u64) -> Result<Vec<Arc<StoreEvent>>, ApiError> {
        let state = self.lock();
        match state.events_after(revision) {
            Some(events) => Ok(events.cloned().collect()),
            None => Err(ApiError::expired(format!(
                "too old resource version: {revision} ({})",
                state.oldest_servable()
            ))),
        }
    }

    /// Resolves a uid to the object that has it.
    pub fn find_uid(&self, uid: &str) -> Option<ObjectId> {
        self.lock().uids.get(uid).cloned()
    }
}
