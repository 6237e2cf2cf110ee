//! `--prepull`: runs the prepull DaemonSets of `selfhost_core::prepull` and removes them again,
//! in every case.
//!
//! The order: remove any leftover of an earlier run (ours after a SIGKILL, or kubeadm's, which
//! has the same names); create one DaemonSet per component whose image changes; watch their
//! pods until each is Ready on every node its DaemonSet wants, or a node reports a pull error,
//! or the deadline passes, or the user interrupts; then delete them in the foreground and wait
//! until they and their pods are gone. Nothing else in the cluster is touched.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, PostParams, PropagationPolicy};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use selfhost_core::Component;
use selfhost_core::component::NAMESPACE;
use selfhost_core::prepull::{
    PREPULL_LABEL, PrepullImage, PrepullOutcome, PrepullState, images_pullable_check, judge,
    pause_image, prepull_daemonset,
};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api_call::{ApiCallError, FailureKind};
use crate::cluster_view::{Shared, spawn_reflector, spawn_reflector_with};
use crate::plan::Plan;
use crate::retry::{RetryPolicy, with_retries};
use crate::target::Targets;

/// How long the removal of the prepull DaemonSets may take. Their pods have no grace period,
/// so this only covers the garbage collector's and the kubelets' latency.
pub const CLEANUP_DEADLINE: Duration = Duration::from_secs(120);

/// How a prepull runs.
#[derive(Debug, Clone, Copy)]
pub struct PrepullOptions {
    /// How long the images may take to be on every node.
    pub deadline: Duration,
    /// How long the removal may take.
    pub cleanup_deadline: Duration,
    /// Retries of single API calls.
    pub retry: RetryPolicy,
}

impl Default for PrepullOptions {
    fn default() -> Self {
        PrepullOptions {
            deadline: selfhost_core::prepull::DEFAULT_PREPULL_DEADLINE,
            cleanup_deadline: CLEANUP_DEADLINE,
            retry: RetryPolicy::default(),
        }
    }
}

/// What a running prepull reports, for progress displays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrepullProgress {
    /// The images about to be pulled (none: nothing to prove, every pod runs them already).
    Starting {
        /// The images.
        images: Vec<String>,
    },
    /// A prepull DaemonSet was created.
    Created {
        /// Its component.
        component: Component,
        /// The image it pulls.
        image: String,
    },
    /// What is still missing changed.
    Waiting {
        /// One entry per missing node or condition.
        pending: Vec<String>,
    },
    /// The DaemonSets are being removed.
    Removing,
    /// They and their pods are gone.
    Removed,
}

/// A prepull that could not be carried out (as opposed to one that found a node unable to
/// pull, which is a [`PrepullOutcome::Failed`]).
#[derive(Debug, thiserror::Error)]
pub enum PrepullError {
    /// An API call failed for good; the DaemonSets were removed.
    #[error("image prepull: {0}")]
    Api(#[from] ApiCallError),
    /// The DaemonSets could not be removed.
    #[error(
        "the prepull DaemonSets were not removed: {reason}{}; remove them with `kubectl -n kube-system delete ds -l {PREPULL_LABEL}`",
        run.as_ref().map(|e| format!(" (and the prepull itself failed: {e})")).unwrap_or_default()
    )]
    Cleanup {
        /// Why.
        reason: String,
        /// The error that ended the prepull itself, if one did.
        run: Option<Box<PrepullError>>,
    },
}

/// The images worth prepulling for a plan: each component's target image, unless every pod
/// of the component runs it already (an image running on the nodes needs no proof).
pub fn images_to_prepull(plan: &Plan, targets: &Targets) -> Vec<PrepullImage> {
    plan.components
        .iter()
        .filter_map(|c| {
            let image = PrepullImage::of(c.component, targets.templates.get(&c.component)?)?;
            let everywhere =
                !c.running.is_empty() && c.running.iter().all(|p| p.image == image.image);
            (!everywhere).then_some(image)
        })
        .collect()
}

/// Adds the `images-pullable` check to a plan's preflight, and whether `apply` proceeds.
pub fn record(plan: &mut Plan, outcome: &PrepullOutcome) {
    plan.preflight.checks.push(images_pullable_check(outcome));
    plan.proceeds = plan.preflight.allows();
}

/// Records the `images-pullable` check as not run, and why.
pub fn skip(plan: &mut Plan, reason: &str) {
    record(
        plan,
        &PrepullOutcome::NotRun {
            reason: reason.to_string(),
        },
    );
}

/// Proves every node can pull and run `images`, and leaves nothing behind.
///
/// # Errors
/// An API call failed for good (the DaemonSets are removed first), or the removal failed.
pub async fn prepull(
    client: &kube::Client,
    targets: &Targets,
    images: &[PrepullImage],
    options: &PrepullOptions,
    cancel: &CancellationToken,
    progress: &mut (dyn FnMut(PrepullProgress) + Send),
) -> Result<PrepullOutcome, PrepullError> {
    if images.is_empty() {
        return Ok(PrepullOutcome::Pulled {
            images: Vec::new(),
            nodes: BTreeMap::new(),
        });
    }
    let mut view = PrepullView::start(client);
    let run = run(
        client, targets, images, options, cancel, progress, &mut view,
    )
    .await;
    progress(PrepullProgress::Removing);
    let cleanup = remove(client, &Component::ALL, options, &mut view).await;
    match (run, cleanup) {
        (run, Ok(())) => {
            progress(PrepullProgress::Removed);
            run
        }
        (run, Err(reason)) => Err(PrepullError::Cleanup {
            reason,
            run: run.err().map(Box::new),
        }),
    }
}

async fn run(
    client: &kube::Client,
    targets: &Targets,
    images: &[PrepullImage],
    options: &PrepullOptions,
    cancel: &CancellationToken,
    progress: &mut (dyn FnMut(PrepullProgress) + Send),
    view: &mut PrepullView,
) -> Result<PrepullOutcome, PrepullError> {
    let started = Instant::now();
    let deadline = started + options.deadline;
    let components: Vec<Component> = images.iter().map(|i| i.component).collect();
    // Leftovers first (of every component: a killed run may have prepulled others): a
    // DaemonSet of the same name would make the create fail, and one from an older run may
    // pull an older image.
    remove(client, &Component::ALL, options, view)
        .await
        .map_err(|reason| PrepullError::Cleanup { reason, run: None })?;
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    for image in images {
        let Some(template) = targets.templates.get(&image.component) else {
            continue;
        };
        let daemonset = prepull_daemonset(
            image,
            &pause_image(&image.image, &targets.version),
            template,
        );
        let name = image.component.prepull_name();
        let post = PostParams::default();
        let created = with_retries(
            &format!("create DaemonSet kube-system/{name}"),
            &options.retry,
            || api.create(&post, &daemonset),
        )
        .await;
        match created {
            Ok(_) => {}
            // A retried create whose first attempt got through.
            Err(e) if e.kind == FailureKind::AlreadyExists && e.attempts > 1 => {}
            Err(e) => return Err(e.into()),
        }
        progress(PrepullProgress::Created {
            component: image.component,
            image: image.image.clone(),
        });
    }
    let mut last_pending = Vec::new();
    loop {
        let states: Vec<(Component, PrepullState)> =
            components.iter().map(|c| (*c, view.judge(*c))).collect();
        let mut failures = Vec::new();
        let mut pending = Vec::new();
        let mut nodes = BTreeMap::new();
        for (component, state) in states {
            match state {
                PrepullState::Pulled { nodes: on } => {
                    nodes.insert(component, on);
                }
                PrepullState::Waiting { pending: p } => pending.extend(p),
                PrepullState::Failed { failures: f } => failures.extend(f),
            }
        }
        if !failures.is_empty() {
            return Ok(PrepullOutcome::Failed { failures });
        }
        if pending.is_empty() {
            return Ok(PrepullOutcome::Pulled {
                images: images.to_vec(),
                nodes,
            });
        }
        if pending != last_pending {
            progress(PrepullProgress::Waiting {
                pending: pending.clone(),
            });
            last_pending = pending.clone();
        }
        tokio::select! {
            () = cancel.cancelled() => return Ok(PrepullOutcome::Interrupted),
            changed = view.next_change(deadline) => if !changed {
                let mut pending = pending;
                if let Some(error) = view.last_error() {
                    pending.push(format!("last error from the API: {error}"));
                }
                return Ok(PrepullOutcome::TimedOut {
                    waited_seconds: started.elapsed().as_secs(),
                    pending,
                });
            },
        }
    }
}

/// Deletes the prepull DaemonSets of `components` in the foreground and waits until they and
/// their pods are gone. The error says what is left.
async fn remove(
    client: &kube::Client,
    components: &[Component],
    options: &PrepullOptions,
    view: &mut PrepullView,
) -> Result<(), String> {
    let deadline = Instant::now() + options.cleanup_deadline;
    view.ready(deadline).await?;
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..DeleteParams::default()
    };
    // Every one is deleted, seen or not: the watch may not have shown a fresh create yet.
    let mut deleting = Vec::new();
    for component in components {
        let name = component.prepull_name();
        let deleted = with_retries(
            &format!("delete DaemonSet kube-system/{name}"),
            &options.retry,
            || api.delete(&name, &params),
        )
        .await;
        match deleted {
            // Still there, with the garbage collector's foreground finalizer.
            Ok(deleted) if deleted.is_left() => deleting.push(name),
            Ok(_) => {}
            Err(e) if e.kind == FailureKind::NotFound => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    loop {
        let left = view.left(components, &deleting);
        if left.is_empty() {
            return Ok(());
        }
        if !view.next_change(deadline).await {
            // The watch may have missed a short-lived object across a relist; ask directly
            // before reporting anything left.
            let mut still = Vec::new();
            for name in &deleting {
                match with_retries(
                    &format!("get DaemonSet kube-system/{name}"),
                    &options.retry,
                    || api.get_opt(name),
                )
                .await
                {
                    Ok(None) => {}
                    Ok(Some(_)) => still.push(format!("DaemonSet {name}")),
                    Err(e) => still.push(format!("DaemonSet {name} ({e})")),
                }
            }
            if still.is_empty() && left.iter().all(|l| l.starts_with("DaemonSet ")) {
                return Ok(());
            }
            return Err(format!(
                "{} still present after {:?}",
                left.join(", "),
                options.cleanup_deadline
            ));
        }
    }
}

/// Watched caches of kube-system's DaemonSets (all of them: a kubeadm leftover of the same name
/// carries none of our labels) and of the prepull pods, kept by the engine view's reflectors
/// (`view::spawn_reflector`): the same relist and backoff behaviour after a dropped watch or
/// a 410.
struct PrepullView {
    daemonsets: Store<DaemonSet>,
    /// Names of the DaemonSets the watch has shown at least once: a deletion is seen through
    /// only for an object the watch knew.
    seen: Arc<Mutex<BTreeSet<String>>>,
    pods: Store<Pod>,
    shared: Arc<Shared>,
    changes: watch::Receiver<u64>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for PrepullView {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl PrepullView {
    fn start(client: &kube::Client) -> PrepullView {
        let (sender, changes) = watch::channel(0);
        let shared = Arc::new(Shared {
            changes: sender,
            last_error: Arc::new(Mutex::new(None)),
            reachability: Arc::default(),
        });
        let seen = Arc::new(Mutex::new(BTreeSet::new()));
        let record = Arc::clone(&seen);
        let (daemonsets, t1) = spawn_reflector_with(
            Api::<DaemonSet>::namespaced(client.clone(), NAMESPACE),
            watcher::Config::default(),
            &shared,
            move |daemonset: &DaemonSet| {
                if let Ok(mut seen) = record.lock() {
                    seen.insert(daemonset.name_any());
                }
            },
        );
        let (pods, t2) = spawn_reflector(
            Api::<Pod>::namespaced(client.clone(), NAMESPACE),
            watcher::Config::default().labels(PREPULL_LABEL),
            &shared,
        );
        PrepullView {
            daemonsets,
            seen,
            pods,
            shared,
            changes,
            tasks: vec![t1, t2],
        }
    }

    async fn ready(&self, deadline: Instant) -> Result<(), String> {
        let both = async {
            let _ = self.daemonsets.wait_until_ready().await;
            let _ = self.pods.wait_until_ready().await;
        };
        tokio::time::timeout_at(deadline, both).await.map_err(|_| {
            format!(
                "the DaemonSets and pods of kube-system could not be listed{}",
                self.last_error()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            )
        })
    }

    fn last_error(&self) -> Option<String> {
        self.shared.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// Waits until something changed since the last call returned, or until `deadline`;
    /// returns whether something changed. Since the last call *returned*, not since this one
    /// began: a change that lands while the caller judges the caches must wake the next wait.
    /// Once every prepull pod is Ready nothing changes any more, so a change missed there
    /// (the second of two events a watch delivers back to back, as it does when it resumes
    /// after a drop or relists after a 410) stalled the wait until its deadline.
    async fn next_change(&mut self, deadline: Instant) -> bool {
        matches!(
            tokio::time::timeout_at(deadline, self.changes.changed()).await,
            Ok(Ok(()))
        )
    }

    fn has_daemonset(&self, name: &str) -> bool {
        self.daemonsets
            .state()
            .iter()
            .any(|d| d.metadata.name.as_deref() == Some(name))
    }

    fn pods_of(&self, component: Component) -> Vec<Pod> {
        self.pods
            .state()
            .iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(PREPULL_LABEL))
                    .is_some_and(|v| v == component.name())
            })
            .map(|p| (**p).clone())
            .collect()
    }

    fn judge(&self, component: Component) -> PrepullState {
        let name = component.prepull_name();
        let daemonset = self
            .daemonsets
            .state()
            .into_iter()
            .find(|d| d.metadata.name.as_deref() == Some(name.as_str()));
        judge(component, daemonset.as_deref(), &self.pods_of(component))
    }

    /// The prepull DaemonSets and pods of `components` still present; a DaemonSet being
    /// deleted counts until the watch has shown it and then shown it gone.
    fn left(&self, components: &[Component], deleting: &[String]) -> Vec<String> {
        let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        let mut left = Vec::new();
        for component in components {
            let name = component.prepull_name();
            if self.has_daemonset(&name) || (deleting.contains(&name) && !seen.contains(&name)) {
                left.push(format!("DaemonSet {name}"));
            }
            let pods = self.pods_of(*component);
            if !pods.is_empty() {
                left.push(format!("{} pod(s) of {name}", pods.len()));
            }
        }
        left
    }
}
