//! # REFERENCE ONLY — not product code
//!
//! kubeadm's self-hosted control-plane upgrade (`phases/upgrade/selfhosted.go`, v1.9–v1.12),
//! rewritten against kube-rs so that the tests and the benchmarks can run it on the same
//! simulated cluster as selfhost's engine and compare the two. Nothing in the `selfhost`
//! product uses it; it is included from the test binary and the benches by `#[path]`.
//!
//! The algorithm, per component in kubeadm's order (apiserver, controller-manager,
//! scheduler), after reading every component's pods and DaemonSet first:
//! 1. create the backup `temp-upgrade-self-hosted-<c>`, a copy of the live DaemonSet whose
//!    labels, selector and pod labels are exactly `temp-upgrade-component=<c>`;
//! 2. poll every 500 ms (`APICallRetryInterval`) until the backup's pods exist and are all in
//!    phase `Running` — not Ready: phase Running also holds while a container crash-loops;
//! 3. update the real DaemonSet to the target template, unconditionally (no resourceVersion);
//! 4. poll until the old pods are gone (GET → 404), then until the pods of the real DaemonSet
//!    are all `Running`;
//! 5. delete the backup with foreground propagation (without waiting for it to go);
//! 6. poll `/healthz` until it answers 200.
//!
//! API calls are retried as kubeadm's `TryRunCommand` does (exponential back-off from 5 s,
//! doubling, ten attempts); poll conditions swallow errors. kubeadm never looks at the
//! controller-manager's or scheduler's Lease, nor at the apiserver's identity Lease.
//!
//! Where this differs from kubeadm, and why:
//! - kubeadm refused more than one pod per component (and panicked on none); to run on
//!   several control-plane nodes the reference waits for every old pod to disappear instead of
//!   the first one, and returns an error on none.
//! - A real kubelet writes a container's start into the pod's status only at its next relist
//!   (PLEG, every second): the status a sync computes is the one from before it started the
//!   containers. The simulated kubelet writes it at once, so the reference counts a pod as
//!   Running one relist after the API first showed it Running — when kubeadm could have seen
//!   it on a real node.
//! - Every interval is divided by the simulation's time scale ([`KubeadmTimings::scaled`]), so
//!   that kubeadm's waits keep their proportion to the simulated pod latencies.
//! - kubeadm built its target DaemonSets from its own configuration; the reference takes the
//!   target pod templates as input, and [`kubeadm_template`] removes from one of selfhost's
//!   what kubeadm's templates never had (the apiserver's graceful-shutdown flags).

#![allow(dead_code)] // each including target uses a part of it

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams, PropagationPolicy};
use tokio::time::Instant;

/// kubeadm's namespace for everything.
const NAMESPACE: &str = "kube-system";
/// kubeadm's `upgradeTempDSPrefix`.
const TEMP_PREFIX: &str = "temp-upgrade-";
/// kubeadm's `upgradeTempLabel`.
const TEMP_LABEL: &str = "temp-upgrade-component";
/// kubeadm's `selfHostingFailureThreshold` of the upgrade.
const FAILURE_THRESHOLD: u32 = 10;
/// The flags kubeadm's kube-apiserver template never had (selfhost adds them so that an old
/// apiserver keeps serving while its successor joins).
const GRACEFUL_SHUTDOWN_FLAGS: [&str; 2] =
    ["--shutdown-delay-duration", "--shutdown-send-retry-after"];

/// kubeadm's intervals, on the simulation's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeadmTimings {
    /// `APICallRetryInterval`: every wait polls this often (500 ms).
    pub poll: Duration,
    /// The first sleep of `TryRunCommand`'s back-off (5 s), doubled after each failure.
    pub retry: Duration,
    /// `selfHostingWaitTimeout`: how long each wait may take (2 min).
    pub wait_timeout: Duration,
    /// The kubelet's relist period (PLEG, 1 s): how long after the API shows a pod Running a
    /// real kubelet would have reported it.
    pub relist: Duration,
}

impl KubeadmTimings {
    /// kubeadm's real intervals.
    pub fn real() -> Self {
        KubeadmTimings {
            poll: Duration::from_millis(500),
            retry: Duration::from_secs(5),
            wait_timeout: Duration::from_secs(120),
            relist: Duration::from_secs(1),
        }
    }

    /// kubeadm's intervals `factor` times shorter, for a cluster whose latencies are `factor`
    /// times shorter than real (`SimTimings::scaled(factor)`). The wait timeout is kept: it is
    /// a safety net, not part of the timing.
    pub fn scaled(factor: u32) -> Self {
        let real = Self::real();
        KubeadmTimings {
            poll: real.poll / factor,
            retry: real.retry / factor,
            relist: real.relist / factor,
            ..real
        }
    }
}

/// One component to upgrade: its name (`kube-apiserver`) and the pod template its real
/// DaemonSet gets.
#[derive(Debug, Clone)]
pub struct KubeadmTarget {
    /// The component, as kubeadm names it.
    pub component: String,
    /// The target pod template.
    pub template: PodTemplateSpec,
}

/// Why the reference stopped (kubeadm has no rollback: the cluster is left as it is).
#[derive(Debug)]
pub enum KubeadmError {
    /// A wait ran out of `wait_timeout`.
    Timeout(String),
    /// A call failed `FAILURE_THRESHOLD` times (kubeadm threw the error away; we keep it).
    Api(String, kube::Error),
    /// A component has no pod (kubeadm panicked here).
    NoPods(String),
}

impl fmt::Display for KubeadmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeadmError::Timeout(what) => write!(f, "timed out waiting for {what}"),
            KubeadmError::Api(what, e) => write!(f, "{what}: {e}"),
            KubeadmError::NoPods(c) => write!(f, "no pod of {c} found"),
        }
    }
}

/// How long each component took, in order.
#[derive(Debug, Clone, Default)]
pub struct KubeadmRun {
    /// `(component, duration)`.
    pub components: Vec<(String, Duration)>,
}

/// The template kubeadm would have written for the same target: selfhost's without the
/// apiserver's graceful-shutdown flags (kubeadm's templates never set them).
pub fn kubeadm_template(ours: &PodTemplateSpec) -> PodTemplateSpec {
    let mut template = ours.clone();
    if let Some(spec) = template.spec.as_mut() {
        for container in &mut spec.containers {
            if let Some(command) = container.command.as_mut() {
                command.retain(|f| !GRACEFUL_SHUTDOWN_FLAGS.iter().any(|g| f.starts_with(g)));
            }
        }
    }
    template
}

/// The live state kubeadm reads before changing anything.
struct Live {
    daemonset: DaemonSet,
    pods: Vec<String>,
}

/// Runs kubeadm's self-hosted upgrade of `targets`, in order, through `client`.
pub async fn upgrade(
    client: &kube::Client,
    targets: &[KubeadmTarget],
    timings: &KubeadmTimings,
) -> Result<KubeadmRun, KubeadmError> {
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    // kubeadm reads every component before changing any (`getCurrentControlPlaneComponentResources`).
    let mut live = Vec::new();
    for target in targets {
        let real = format!("self-hosted-{}", target.component);
        let params = ListParams::default().labels(&format!("k8s-app={real}"));
        let listed = try_run("listing the pods", timings, || pods.list(&params)).await?;
        let names: Vec<String> = listed
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        if names.is_empty() {
            return Err(KubeadmError::NoPods(target.component.clone()));
        }
        let daemonset = try_run("reading the DaemonSet", timings, || daemonsets.get(&real)).await?;
        live.push(Live {
            daemonset,
            pods: names,
        });
    }
    let mut run = KubeadmRun::default();
    for (target, live) in targets.iter().zip(live) {
        let started = Instant::now();
        upgrade_component(client, target, live, timings).await?;
        run.components
            .push((target.component.clone(), started.elapsed()));
    }
    Ok(run)
}

async fn upgrade_component(
    client: &kube::Client,
    target: &KubeadmTarget,
    live: Live,
    timings: &KubeadmTimings,
) -> Result<(), KubeadmError> {
    let daemonsets: Api<DaemonSet> = Api::namespaced(client.clone(), NAMESPACE);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let component = &target.component;
    let temp = backup_of(&live.daemonset, component);
    let temp_name = temp.metadata.name.clone().unwrap_or_default();
    try_run("creating the backup DaemonSet", timings, || async {
        match daemonsets.create(&PostParams::default(), &temp).await {
            Err(kube::Error::Api(e)) if e.code == 409 => {
                daemonsets
                    .replace(&temp_name, &PostParams::default(), &temp)
                    .await
            }
            other => other,
        }
    })
    .await?;
    wait_for_pods_running(&pods, &format!("{TEMP_LABEL}={component}"), timings).await?;

    let real_name = live.daemonset.metadata.name.clone().unwrap_or_default();
    let mut updated = live.daemonset.clone();
    updated.metadata.resource_version = None;
    updated.status = None;
    if let Some(spec) = updated.spec.as_mut() {
        spec.template = target.template.clone();
    }
    let post = PostParams::default();
    try_run("updating the self-hosted DaemonSet", timings, || {
        daemonsets.replace(&real_name, &post, &updated)
    })
    .await?;
    for old in &live.pods {
        wait_for_pod_to_disappear(&pods, old, timings).await?;
    }
    wait_for_pods_running(&pods, &format!("k8s-app={real_name}"), timings).await?;

    let foreground = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..DeleteParams::default()
    };
    try_run("deleting the backup DaemonSet", timings, || async {
        daemonsets.delete(&temp_name, &foreground).await.map(|_| ())
    })
    .await?;
    wait_for_api(client, timings).await
}

/// kubeadm's `mutateTempDaemonSet` on a deep copy: the new name and labels, and only the name,
/// namespace, labels and annotations kept of the metadata.
fn backup_of(live: &DaemonSet, component: &str) -> DaemonSet {
    let labels: BTreeMap<String, String> = [(TEMP_LABEL.to_string(), component.to_string())].into();
    let mut temp = DaemonSet {
        metadata: Default::default(),
        spec: live.spec.clone(),
        status: None,
    };
    temp.metadata.name = Some(format!(
        "{TEMP_PREFIX}{}",
        live.metadata.name.as_deref().unwrap_or_default()
    ));
    temp.metadata.namespace = Some(NAMESPACE.to_string());
    temp.metadata.labels = Some(labels.clone());
    temp.metadata.annotations = live.metadata.annotations.clone();
    if let Some(spec) = temp.spec.as_mut() {
        spec.selector.match_labels = Some(labels.clone());
        spec.selector.match_expressions = None;
        spec.template
            .metadata
            .get_or_insert_with(Default::default)
            .labels = Some(labels);
    }
    temp
}

/// `TryRunCommand`: up to ten attempts, sleeping 5 s, 10 s, 20 s, … (scaled) between them.
async fn try_run<T, F>(
    what: &str,
    timings: &KubeadmTimings,
    mut call: impl FnMut() -> F,
) -> Result<T, KubeadmError>
where
    F: Future<Output = Result<T, kube::Error>>,
{
    let mut sleep = timings.retry;
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(e) if attempt >= FAILURE_THRESHOLD => {
                return Err(KubeadmError::Api(what.to_string(), e));
            }
            Err(_) => {
                tokio::time::sleep(sleep).await;
                sleep *= 2;
                attempt += 1;
            }
        }
    }
}

/// `wait.PollImmediate(poll, timeout, condition)`: the caller checks its condition at once,
/// then after each [`Poll::next`], which fails once the timeout has passed.
struct Poll {
    what: String,
    deadline: Instant,
    ticks: tokio::time::Interval,
}

impl Poll {
    fn new(what: String, timings: &KubeadmTimings) -> Poll {
        let mut ticks = tokio::time::interval(timings.poll);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The interval's first tick is immediate; the condition has just been checked.
        ticks.reset();
        Poll {
            what,
            deadline: Instant::now() + timings.wait_timeout,
            ticks,
        }
    }

    async fn next(&mut self) -> Result<(), KubeadmError> {
        if Instant::now() >= self.deadline {
            return Err(KubeadmError::Timeout(std::mem::take(&mut self.what)));
        }
        self.ticks.tick().await;
        Ok(())
    }
}

/// `WaitForPodsWithLabel`: some pods match, and every one is in phase Running (as a real
/// kubelet would have reported it: a relist after the simulated one did).
async fn wait_for_pods_running(
    pods: &Api<Pod>,
    selector: &str,
    timings: &KubeadmTimings,
) -> Result<(), KubeadmError> {
    let params = ListParams::default().labels(selector);
    let mut poll = Poll::new(format!("the pods {selector} Running"), timings);
    let mut running_since: HashMap<String, Instant> = HashMap::new();
    loop {
        if let Ok(listed) = pods.list(&params).await {
            let now = Instant::now();
            let all_running = !listed.items.is_empty()
                && listed.items.iter().all(|pod| {
                    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                    if phase != Some("Running") {
                        return false;
                    }
                    let uid = pod.metadata.uid.clone().unwrap_or_default();
                    let since = *running_since.entry(uid).or_insert(now);
                    now.duration_since(since) >= timings.relist
                });
            if all_running {
                return Ok(());
            }
        }
        poll.next().await?;
    }
}

/// `WaitForPodToDisappear`: a GET of the pod answers 404; any other error means "not yet".
async fn wait_for_pod_to_disappear(
    pods: &Api<Pod>,
    name: &str,
    timings: &KubeadmTimings,
) -> Result<(), KubeadmError> {
    let mut poll = Poll::new(format!("the old pod {name} to disappear"), timings);
    while !matches!(pods.get(name).await, Err(kube::Error::Api(e)) if e.code == 404) {
        poll.next().await?;
    }
    Ok(())
}

/// `WaitForAPI`: `/healthz` answers 200 (its body is not read).
async fn wait_for_api(client: &kube::Client, timings: &KubeadmTimings) -> Result<(), KubeadmError> {
    let mut poll = Poll::new("the API server's /healthz".to_string(), timings);
    while !healthz(client).await {
        poll.next().await?;
    }
    Ok(())
}

async fn healthz(client: &kube::Client) -> bool {
    let Ok(request) = http::Request::get("/healthz").body(kube::client::Body::empty()) else {
        return false;
    };
    client
        .send(request)
        .await
        .is_ok_and(|response| response.status() == http::StatusCode::OK)
}
