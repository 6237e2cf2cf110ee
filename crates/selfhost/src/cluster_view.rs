//! A live view of the objects the engine decides on, kept current by watches.
//!
//! Instead of polling (kubeadm read every object every 500 ms), the engine lists and watches
//! exactly the objects it needs — the kube-system DaemonSets, the control-plane pods (by
//! label, so that a cluster with 100,000 other pods costs nothing), the control-plane nodes and
//! the kube-system Leases — and rebuilds its observation from these caches whenever something
//! changes. The watches retry with backoff (`reconnect.rs`), so they outlive an API server
//! handing over or crashing: they reconnect and relist by themselves.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use selfhost_core::component::{APP_LABEL, BACKUP_LABEL, Component, NAMESPACE};

use crate::api_call::FailureKind;

/// Label of control-plane nodes.
const CONTROL_PLANE_NODE_LABEL: &str = "node-role.kubernetes.io/control-plane";

/// How long each watch request lasts before it is renewed (`timeoutSeconds`). kube-runtime
/// also gives up on a watch that delivered nothing for this long plus 5 s: the default 290 s
/// leaves the engine blind for five minutes when its watch connection reaches an apiserver
/// process that never answers (a rollback then looks carried out again and again while the
/// view never shows it). Renewing five watches every 10 s costs half a request a second.
const WATCH_TIMEOUT_SECS: u32 = 10;

/// The watch configuration every watch of the view starts from.
fn watch_config() -> watcher::Config {
    watcher::Config::default().timeout(WATCH_TIMEOUT_SECS)
}

/// The watched caches, and a change counter that waiters block on.
pub struct ClusterView {
    /// DaemonSets in kube-system.
    pub daemonsets: Store<DaemonSet>,
    /// Pods of the self-hosted DaemonSets.
    pub pods: Store<Pod>,
    /// Pods of backup DaemonSets.
    pub backup_pods: Store<Pod>,
    /// Control-plane nodes.
    pub nodes: Store<Node>,
    /// Leases in kube-system (leader election, apiserver identity).
    pub leases: Store<Lease>,
    changes: watch::Receiver<u64>,
    last_error: Arc<Mutex<Option<String>>>,
    reachability: Arc<Mutex<Reachability>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for ClusterView {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// A wait on the view that ran out of time.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what} did not happen within {waited:?}{}", last_error.as_ref().map(|e| format!("; last error from the API: {e}")).unwrap_or_default())]
pub struct ViewTimeout {
    /// What was waited for.
    pub what: String,
    /// How long.
    pub waited: Duration,
    /// The last error any watch met, if one did.
    pub last_error: Option<String>,
}

pub(crate) struct Shared {
    pub(crate) changes: watch::Sender<u64>,
    pub(crate) last_error: Arc<Mutex<Option<String>>>,
    pub(crate) reachability: Arc<Mutex<Reachability>>,
}

/// What the watches saw of the API's reachability: an outage begins with a watch that cannot
/// connect (refused, cut, timed out) and ends with the next answer any watch gets. The
/// crash-loop judgement needs it: control-plane processes exit when they cannot reach the API.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Reachability {
    down_since: Option<Timestamp>,
    last_outage_end: Option<Timestamp>,
}

impl Reachability {
    fn unreachable(&mut self, at: Timestamp) {
        self.down_since.get_or_insert(at);
    }

    fn answered(&mut self, at: Timestamp) {
        if self.down_since.take().is_some() {
            self.last_outage_end = Some(at);
        }
    }

    /// `now` while an outage lasts, else the end of the last one seen.
    fn unreachable_until(&self, now: Timestamp) -> Option<Timestamp> {
        match self.down_since {
            Some(_) => Some(now),
            None => self.last_outage_end,
        }
    }
}

/// Whether a watch error means the API could not be reached (as opposed to an answer such
/// as 410 Gone or a 5xx, which came from a server that is up).
fn is_unreachable(err: &watcher::Error) -> bool {
    use watcher::Error as W;
    match err {
        W::InitialListFailed(e) | W::WatchStartFailed(e) | W::WatchFailed(e) => matches!(
            FailureKind::of(e),
            FailureKind::Transport | FailureKind::Timeout
        ),
        _ => false,
    }
}

pub(crate) fn spawn_reflector<K>(
    api: Api<K>,
    config: watcher::Config,
    shared: &Arc<Shared>,
) -> (Store<K>, JoinHandle<()>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    spawn_reflector_with(api, config, shared, |_: &K| {})
}

/// [`spawn_reflector`], also handing `delivered` every object a list or watch event delivers,
/// before the change is announced (the prepull view records which DaemonSets it has seen).
pub(crate) fn spawn_reflector_with<K>(
    api: Api<K>,
    config: watcher::Config,
    shared: &Arc<Shared>,
    mut delivered: impl FnMut(&K) + Send + 'static,
) -> (Store<K>, JoinHandle<()>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (store, writer) = reflector::store::<K>();
    let shared = Arc::clone(shared);
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, config)
            .backoff(crate::reconnect::WatchBackoff::new())
            .reflect(writer)
            .boxed();
        while let Some(item) = stream.next().await {
            // `Init` comes before the list request; every other event is an answer.
            if matches!(&item, Ok(e) if !matches!(e, watcher::Event::Init))
                && let Ok(mut r) = shared.reachability.lock()
            {
                r.answered(Timestamp::now());
            }
            match item {
                Ok(watcher::Event::Init) => {}
                // A relist shows in the store only at its InitDone, announced below.
                Ok(watcher::Event::InitApply(object)) => delivered(&object),
                Ok(event) => {
                    if let watcher::Event::Apply(object) = &event {
                        delivered(object);
                    }
                    shared.changes.send_modify(|n| *n += 1);
                }
                Err(err) => {
                    if is_unreachable(&err)
                        && let Ok(mut r) = shared.reachability.lock()
                    {
                        r.unreachable(Timestamp::now());
                    }
                    let text = crate::api_call::describe_watch(&err);
                    tracing::debug!(error = %text, "watch interrupted; it resumes by itself");
                    if let Ok(mut last) = shared.last_error.lock() {
                        *last = Some(text);
                    }
                }
            }
        }
    });
    (store, task)
}

impl ClusterView {
    /// Starts the watches. They fill in the background; see [`ClusterView::ready`].
    pub fn start(client: &kube::Client) -> ClusterView {
        let (changes_tx, changes) = watch::channel(0);
        let last_error = Arc::new(Mutex::new(None));
        let reachability = Arc::new(Mutex::new(Reachability::default()));
        let shared = Arc::new(Shared {
            changes: changes_tx,
            last_error: Arc::clone(&last_error),
            reachability: Arc::clone(&reachability),
        });
        let real_apps: Vec<String> = Component::ALL.iter().map(|c| c.app_label_value()).collect();
        let real_selector = format!("{APP_LABEL} in ({})", real_apps.join(","));

        let ns = |c: &kube::Client| c.clone();
        let (daemonsets, t1) = spawn_reflector(
            Api::<DaemonSet>::namespaced(ns(client), NAMESPACE),
            watch_config(),
            &shared,
        );
        let (pods, t2) = spawn_reflector(
            Api::<Pod>::namespaced(ns(client), NAMESPACE),
            watch_config().labels(&real_selector),
            &shared,
        );
        let (backup_pods, t3) = spawn_reflector(
            Api::<Pod>::namespaced(ns(client), NAMESPACE),
            watch_config().labels(BACKUP_LABEL),
            &shared,
        );
        let (nodes, t4) = spawn_reflector(
            Api::<Node>::all(ns(client)),
            watch_config().labels(CONTROL_PLANE_NODE_LABEL),
            &shared,
        );
        let (leases, t5) = spawn_reflector(
            Api::<Lease>::namespaced(ns(client), NAMESPACE),
            watch_config(),
            &shared,
        );
        ClusterView {
            daemonsets,
            pods,
            backup_pods,
            nodes,
            leases,
            changes,
            last_error,
            reachability,
            tasks: vec![t1, t2, t3, t4, t5],
        }
    }

    /// Waits until every watch has listed its objects once.
    pub async fn ready(&self, timeout: Duration) -> Result<(), ViewTimeout> {
        let all = async {
            let _ = self.daemonsets.wait_until_ready().await;
            let _ = self.pods.wait_until_ready().await;
            let _ = self.backup_pods.wait_until_ready().await;
            let _ = self.nodes.wait_until_ready().await;
            let _ = self.leases.wait_until_ready().await;
        };
        tokio::time::timeout(timeout, all).await.map_err(|_| {
            self.timeout(
                "the first list of the cluster's control-plane objects",
                timeout,
            )
        })
    }

    /// Until when the watches last saw the API unreachable: `now` while they still do, the
    /// moment one got an answer again after the latest outage, or `None` if they saw none.
    pub fn unreachable_until(&self, now: Timestamp) -> Option<Timestamp> {
        self.reachability
            .lock()
            .ok()
            .and_then(|r| r.unreachable_until(now))
    }

    /// The last error a watch met (cleared by nothing: it is for messages, not decisions).
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    pub(crate) fn timeout(&self, what: &str, waited: Duration) -> ViewTimeout {
        ViewTimeout {
            what: what.to_string(),
            waited,
            last_error: self.last_error(),
        }
    }

    /// Waits until `done` holds for the view, re-checking after every change, until
    /// `deadline`. `what` names the condition in the timeout error.
    pub async fn wait_until(
        &mut self,
        what: &str,
        deadline: Instant,
        mut done: impl FnMut(&ClusterView) -> bool,
    ) -> Result<(), ViewTimeout> {
        let started = Instant::now();
        loop {
            self.changes.borrow_and_update();
            if done(self) {
                return Ok(());
            }
            match tokio::time::timeout_at(deadline, self.changes.changed()).await {
                Ok(Ok(())) => {}
                // The sender lives in the watch tasks, which end only when the view is dropped.
                Ok(Err(_)) | Err(_) => return Err(self.timeout(what, started.elapsed())),
            }
        }
    }

    /// Marks every change so far as seen. Called before the caches are read for a decision,
    /// so that a change arriving while the decision is made still wakes the next
    /// [`ClusterView::next_change`] (marking only when starting to wait lost such changes,
    /// and the wait then lasted until some later event).
    pub fn mark_seen(&mut self) {
        self.changes.borrow_and_update();
    }

    /// Waits for a change of any watched object since the last [`ClusterView::mark_seen`]
    /// (at once if one came already), or until `deadline`; returns whether something changed.
    pub async fn next_change(&mut self, deadline: Instant) -> bool {
        matches!(
            tokio::time::timeout_at(deadline, self.changes.changed()).await,
            Ok(Ok(()))
        )
    }
}

impl ClusterView {
    /// Whether the caches show a write of ours: the object at `resource_version` or later; for
    /// a deletion, also the object gone.
    pub fn shows(
        &self,
        kind: crate::api_write::Kind,
        name: &str,
        resource_version: Option<&str>,
        deletion: bool,
    ) -> bool {
        use crate::api_write::Kind;
        let named = |n: &Option<String>| n.as_deref() == Some(name);
        let rv_of = |found: Option<Option<String>>| match (found, resource_version) {
            (Some(cached), Some(rv)) => caught_up(cached.as_deref(), rv),
            (Some(_), None) => false,
            (None, _) => deletion || resource_version.is_none(),
        };
        match kind {
            Kind::DaemonSet => rv_of(
                self.daemonsets
                    .state()
                    .iter()
                    .find(|d| named(&d.metadata.name))
                    .map(|d| d.metadata.resource_version.clone()),
            ),
            Kind::Pod => rv_of(
                self.pods
                    .state()
                    .into_iter()
                    .chain(self.backup_pods.state())
                    .find(|p| named(&p.metadata.name))
                    .map(|p| p.metadata.resource_version.clone()),
            ),
            // A handed-over Lease is usually taken (recreated) by a standby at once; the next
            // decision reads the holder, and a stale precondition only gets a 409.
            Kind::Lease => true,
        }
    }
}

/// Whether a cached object has caught up with a write that returned `written` as its
/// resourceVersion. Resource versions are opaque, but every real apiserver (and ours) hands
/// out increasing integers; if either does not parse, only equality counts.
pub fn caught_up(cached: Option<&str>, written: &str) -> bool {
    match (
        cached.and_then(|c| c.parse::<u64>().ok()),
        written.parse::<u64>().ok(),
    ) {
        (Some(c), Some(w)) => c >= w,
        _ => cached == Some(written),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outage_lasts_from_the_first_unreachable_watch_to_the_next_answer() {
        let at = |s: i64| Timestamp::from_second(1_700_000_000 + s).unwrap();
        let mut r = Reachability::default();
        assert_eq!(r.unreachable_until(at(0)), None, "none seen");
        r.answered(at(1));
        assert_eq!(
            r.unreachable_until(at(2)),
            None,
            "an answer alone ends nothing"
        );
        r.unreachable(at(3));
        r.unreachable(at(4));
        assert_eq!(r.unreachable_until(at(5)), Some(at(5)), "down: until now");
        r.answered(at(6));
        r.answered(at(9));
        assert_eq!(
            r.unreachable_until(at(10)),
            Some(at(6)),
            "the first answer ends it"
        );
    }

    #[test]
    fn caught_up_compares_numbers_when_it_can() {
        assert!(caught_up(Some("12"), "12"));
        assert!(caught_up(Some("13"), "12"));
        assert!(!caught_up(Some("11"), "12"));
        assert!(!caught_up(None, "12"));
        assert!(caught_up(Some("abc"), "abc"));
        assert!(!caught_up(Some("abd"), "abc"));
    }
}
