//! Building the core's [`Observation`] from the watched view and the probe client.
//!
//! Every decision reads the cluster afresh: the view's caches (kept current by watches, so
//! this costs no request) and the API's health (the last probe, sampled in the background
//! so that no decision waits for it; the executor probes afresh for the one decision that
//! reads it).
//! The only memory is the identity tracker, fed by its own watch (see `identity.rs`), the
//! processes seen stopped (see `stopped.rs`), and the record of what the run cost (see
//! `measure.rs`), which decides nothing.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use selfhost_core::Component;
use selfhost_core::observation::{
    ApiHealth, BackupObservation, DaemonSetObservation, IDENTITY_LABEL, LeaderLease,
    NodeObservation, Observation,
};
use selfhost_core::preflight::ClusterObservation;
use selfhost_core::skew::{ApiServerVersion, KubeletVersion};
use selfhost_core::version::KubeVersion;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::api_call::ApiCallError;
use crate::client::Clients;
use crate::cluster_view::{ClusterView, ViewTimeout};
use crate::health;
use crate::identity::LeaseWatch;
use crate::measure::{MeasuredDisruption, ProbeOutcome, Recorder};
use crate::retry::{RetryPolicy, with_retries};
use crate::stopped::StopTracker;

/// How stale a health probe may be when a decision is made.
pub const HEALTH_MAX_AGE: Duration = Duration::from_millis(500);
/// Fresh probes that must agree before [`Observer::cluster`] reports the API unhealthy.
const HEALTH_CONFIRMATIONS: usize = 2;
/// The pause before each of them.
const HEALTH_CONFIRMATION_PAUSE: Duration = Duration::from_millis(500);
/// How long preflight waits for a kube-apiserver that is shutting down to stop: a pod's
/// default grace period (30 s), after which the kubelet kills it, and a margin.
const DRAINING_PATIENCE: Duration = Duration::from_secs(40);

/// The engine's eyes: the watched view, the probe client and the identity memory.
pub struct Observer {
    /// The watched caches.
    pub view: ClusterView,
    api: kube::Client,
    probe: kube::Client,
    leases: LeaseWatch,
    /// The processes seen stopped.
    stops: StopTracker,
    /// The leader Leases this run deleted to hand them over: component and the Lease's uid.
    handed_over: Vec<(Component, String)>,
    /// The latest probe: when it was sent, and what it said.
    health: Arc<Mutex<Option<(Instant, ApiHealth)>>>,
    /// The background probe in flight, if one is.
    sampling: Option<JoinHandle<()>>,
    /// The steady prober, once [`Observer::probe_steadily`] started it.
    steady: Option<JoinHandle<()>>,
}

impl Drop for Observer {
    fn drop(&mut self) {
        for task in self.sampling.iter().chain(&self.steady) {
            task.abort();
        }
    }
}

/// Probes `/readyz`, and `/version` when ready.
async fn probe_health(probe: &kube::Client) -> ApiHealth {
    let ready = health::readyz(probe).await;
    let git_version = if ready.healthy {
        probe
            .apiserver_version()
            .await
            .ok()
            .map(|info| info.git_version)
    } else {
        None
    };
    ApiHealth {
        readyz_ok: ready.healthy,
        readyz_detail: ready.problem,
        git_version,
        unreachable_until: None,
    }
}

/// Keeps a probe's answer unless a later-sent one is already there (a slow probe must not
/// overwrite a fresher answer), and adds it to the run's record.
fn keep(
    latest: &Mutex<Option<(Instant, ApiHealth)>>,
    recorder: &Mutex<Recorder>,
    sent: Instant,
    health: &ApiHealth,
) {
    if let Ok(mut recorder) = recorder.lock() {
        recorder.probe(Instant::now(), health);
    }
    if let Ok(mut latest) = latest.lock()
        && latest.as_ref().is_none_or(|(at, _)| *at <= sent)
    {
        *latest = Some((sent, health.clone()));
    }
}

/// The pods among `pods` whose owner references name `owner_uid`.
pub(crate) fn owned_by<'a>(pods: &'a [Arc<Pod>], owner_uid: Option<&'a str>) -> Vec<Pod> {
    pods.iter()
        .filter(|pod| {
            pod.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|r| Some(r.uid.as_str()) == owner_uid)
        })
        .map(|pod| (**pod).clone())
        .collect()
}

impl Observer {
    /// Starts watching the cluster behind `clients`.
    pub fn start(clients: &Clients) -> Observer {
        Observer {
            view: ClusterView::start(&clients.api),
            api: clients.api.clone(),
            probe: clients.probe.clone(),
            leases: LeaseWatch::start(&clients.api),
            stops: StopTracker::default(),
            handed_over: Vec::new(),
            health: Arc::new(Mutex::new(None)),
            sampling: None,
            steady: None,
        }
    }

    /// From now on, probes the API's health every [`HEALTH_MAX_AGE`] in the background,
    /// whether or not the engine is deciding — also while it waits for a write to show or for
    /// an API call's retries. An availability budget is measured by these probes: sampled
    /// only while deciding, an outage during such a wait would go unseen.
    pub fn probe_steadily(&mut self) {
        if self.steady.is_some() {
            return;
        }
        let (probe, latest) = (self.probe.clone(), Arc::clone(&self.health));
        let recorder = Arc::clone(self.leases.recorder());
        self.steady = Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(HEALTH_MAX_AGE);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let sent = Instant::now();
                let health = probe_health(&probe).await;
                keep(&latest, &recorder, sent, &health);
            }
        }));
    }

    /// Waits for a change of anything watched since the last observation (the identity
    /// Leases' every change included), or until `deadline`; returns whether something changed.
    pub async fn next_change(&mut self, deadline: Instant) -> bool {
        tokio::select! {
            changed = self.view.next_change(deadline) => changed,
            () = self.leases.changed() => true,
        }
    }

    /// Waits until the watches have listed everything once, the identity Leases' own watch
    /// included (a hand-over before it lists is not seen).
    pub async fn ready(&self, timeout: Duration) -> Result<(), ViewTimeout> {
        let started = Instant::now();
        self.view.ready(timeout).await?;
        let left = timeout.saturating_sub(started.elapsed());
        tokio::time::timeout(left, self.leases.listed())
            .await
            .map_err(|_| {
                self.view
                    .timeout("the first list of the identity Leases", timeout)
            })
    }

    /// The latest probe's answer, with when it was sent.
    fn latest_health(&self) -> Option<(Instant, ApiHealth)> {
        self.health.lock().ok().and_then(|h| h.clone())
    }

    /// The API's health, probed anew (and waited for) if the last probe is older than
    /// `max_age`.
    pub async fn api_health(&mut self, max_age: Duration) -> ApiHealth {
        if let Some((at, health)) = self.latest_health()
            && at.elapsed() <= max_age
        {
            return health;
        }
        let sent = Instant::now();
        let health = probe_health(&self.probe).await;
        keep(&self.health, self.leases.recorder(), sent, &health);
        health
    }

    /// Starts a probe in the background if the last one is older than [`HEALTH_MAX_AGE`] and
    /// none is in flight: the run's record samples the API's health while the engine decides
    /// (every half second at most), without any decision waiting for a probe.
    fn sample_health(&mut self) {
        let fresh = self
            .latest_health()
            .is_some_and(|(at, _)| at.elapsed() <= HEALTH_MAX_AGE);
        let in_flight = self.sampling.as_ref().is_some_and(|t| !t.is_finished());
        if fresh || in_flight {
            return;
        }
        let (probe, latest) = (self.probe.clone(), Arc::clone(&self.health));
        let recorder = Arc::clone(self.leases.recorder());
        self.sampling = Some(tokio::spawn(async move {
            let sent = Instant::now();
            let health = probe_health(&probe).await;
            keep(&latest, &recorder, sent, &health);
        }));
    }

    /// What the engine saw of the API's health and of leader changes in `[from, to]`.
    pub fn measured(&self, from: Instant, to: Instant) -> MeasuredDisruption {
        match self.leases.recorder().lock() {
            Ok(recorder) => recorder.measure(from, to),
            // Never poisoned (nothing panics while it is held); an empty record then.
            Err(_) => Recorder::default().measure(from, to),
        }
    }

    /// The cached DaemonSet `name` in kube-system, if it exists.
    pub fn daemonset(&self, name: &str) -> Option<Arc<DaemonSet>> {
        self.view
            .daemonsets
            .state()
            .into_iter()
            .find(|d| d.metadata.name.as_deref() == Some(name))
    }

    /// Records that this run deleted `component`'s leader Lease of uid `uid` to hand it over:
    /// a Lease of that name with another uid is then known to be acquired while the engine
    /// watched ([`Observation::handed_over`]).
    pub fn handed_over(&mut self, component: Component, uid: &str) {
        self.handed_over.push((component, uid.to_string()));
    }

    /// How long ago the latest answered probe of the API's health was sent (`None`: never).
    pub fn health_age(&self) -> Option<Duration> {
        self.latest_health().map(|(at, _)| at.elapsed())
    }

    /// One observation of `component`, as the state machine takes it. The API's health in it
    /// is the last probe's, of any age (probed now only if there was none): only the
    /// apiserver's verification reads it, and the executor makes sure that decision has a
    /// fresh one ([`Observer::health_age`]). Probing on every observation would hold every
    /// decision up for a probe's round trip — up to its timeout while an apiserver hands over.
    pub async fn observe(&mut self, component: Component) -> Observation {
        self.sample_health();
        let mut api = match self.latest_health() {
            Some((_, health)) => health,
            None => self.api_health(HEALTH_MAX_AGE).await,
        };
        // From here on, any change wakes the next wait: it may not be in what is read below.
        self.view.mark_seen();
        let now = Timestamp::now();
        api.unreachable_until = self.view.unreachable_until(now);
        let pods = self.view.pods.state();
        let backup_pods = self.view.backup_pods.state();
        let real = self.daemonset(&component.daemonset_name()).map(|ds| {
            DaemonSetObservation::from_daemonset(&ds, &owned_by(&pods, ds.metadata.uid.as_deref()))
        });
        let backup = self.daemonset(&component.backup_name()).map(|ds| {
            let owned = owned_by(&backup_pods, ds.metadata.uid.as_deref());
            BackupObservation::from_daemonset(&ds, &owned, component)
        });
        let present: std::collections::BTreeSet<&str> = pods
            .iter()
            .chain(backup_pods.iter())
            .filter_map(|pod| pod.metadata.uid.as_deref())
            .collect();
        let seen = real
            .iter()
            .flat_map(|ds| ds.pods.iter())
            .chain(backup.iter().flat_map(|b| b.daemonset.pods.iter()));
        // Only the leader hand-over reads it (see `pivot/leader.rs`).
        let stopped = if component.leader_lease_name().is_some() {
            self.stops.record(component, seen, &present, now)
        } else {
            Vec::new()
        };
        let nodes = self
            .view
            .nodes
            .state()
            .iter()
            .map(|n| NodeObservation::from_node(n))
            .collect();
        let leases = self.view.leases.state();
        let identity: Vec<_> = leases
            .iter()
            .filter(|l| {
                l.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|labels| labels.contains_key(IDENTITY_LABEL))
            })
            .cloned()
            .collect();
        let identity_leases = self.leases.observe(&identity, now);
        let leader_lease = component.leader_lease_name().and_then(|name| {
            leases
                .iter()
                .find(|l| l.metadata.name.as_deref() == Some(name))
                .map(|l| LeaderLease::from_lease(l))
        });
        Observation {
            component,
            now,
            real,
            backup,
            nodes,
            api,
            identity_leases,
            leader_lease,
            known_starts: Vec::new(),
            stopped,
            handed_over: self
                .handed_over
                .iter()
                .filter(|(c, _)| *c == component)
                .map(|(_, uid)| uid.clone())
                .collect(),
            // The run's measure of this component, which only its upgrade knows the start of.
            availability: Default::default(),
        }
    }

    /// What preflight needs: every component, the apiservers' versions (from the images their
    /// pods run) and every node's kubelet version (one paged list of all nodes).
    pub async fn cluster(
        &mut self,
        policy: &RetryPolicy,
    ) -> Result<ClusterObservation, ApiCallError> {
        // Preflight judges the API by this probe. One slow or dropped answer from a busy
        // server is not an unhealthy API, so an unhealthy answer must be confirmed by fresh
        // probes before it stands (each observation below reuses the last one).
        let mut health = self.api_health(HEALTH_MAX_AGE).await;
        for _ in 0..HEALTH_CONFIRMATIONS {
            if health.readyz_ok && health.git_version.is_some() {
                break;
            }
            tokio::time::sleep(HEALTH_CONFIRMATION_PAUSE).await;
            health = self.api_health(Duration::ZERO).await;
        }
        // A kube-apiserver that was told to stop (a checkpoint copy retired, a pod replaced)
        // fails only its `shutdown` check until it exits, and keeps the connections it has,
        // while its successor on the same address already serves. That is not an unhealthy
        // API: wait for the stopping one to go, within its grace period.
        let draining_until = tokio::time::Instant::now() + DRAINING_PATIENCE;
        let mut said = false;
        while ProbeOutcome::of(&health) == ProbeOutcome::Draining
            && tokio::time::Instant::now() < draining_until
        {
            if !said {
                tracing::warn!(
                    "a kube-apiserver answering this address is shutting down (/readyz fails \
                     only its shutdown check); waiting up to {}s for it to stop",
                    DRAINING_PATIENCE.as_secs()
                );
                said = true;
            }
            tokio::time::sleep(HEALTH_CONFIRMATION_PAUSE).await;
            health = self.api_health(Duration::ZERO).await;
        }
        let mut components = Vec::new();
        for component in Component::ALL {
            let mut observation = self.observe(component).await;
            // Judged by the confirmed health, not by a background sample that may have
            // answered since (one unconfirmed failure must not refuse the run).
            observation.api = health.clone();
            components.push(observation);
        }
        let apiserver_versions = components
            .iter()
            .filter(|o| o.component == Component::ApiServer)
            .flat_map(|o| o.all_pods().cloned().collect::<Vec<_>>())
            .filter_map(|pod| {
                let image = &pod.containers.first()?.image;
                let tag = image.rsplit_once(':')?.1.to_string();
                let version = KubeVersion::parse(&tag).ok()?;
                Some(ApiServerVersion {
                    name: pod.node.clone().unwrap_or(pod.name.clone()),
                    version,
                })
            })
            .collect::<Vec<ApiServerVersion>>();
        let mut apiserver_versions = apiserver_versions;
        apiserver_versions.sort_by(|a, b| a.name.cmp(&b.name));
        let nodes: Api<Node> = Api::all(self.api.clone());
        let mut kubelets = Vec::new();
        let mut params = ListParams::default().limit(500);
        loop {
            let page = with_retries("list nodes", policy, || nodes.list(&params)).await?;
            kubelets.extend(page.items.iter().map(|node| {
                KubeletVersion {
                    node: node.metadata.name.clone().unwrap_or_default(),
                    version: node
                        .status
                        .as_ref()
                        .and_then(|s| s.node_info.as_ref())
                        .map(|i| i.kubelet_version.clone())
                        .unwrap_or_default(),
                }
            }));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        Ok(ClusterObservation {
            components,
            apiserver_versions,
            kubelets,
            api_usage: None,
            certificates: None,
            etcd: None,
        })
    }
}
