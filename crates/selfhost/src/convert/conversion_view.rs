//! What a conversion sees: watched caches of the objects it decides on, the node's disk, and
//! the serving judgement of the upgrade engine (a kube-apiserver serves once its own identity
//! Lease appears, not when a probe on a shared port says Ready).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use selfhost_core::Component;
use selfhost_core::command_line;
use selfhost_core::component::{APP_LABEL, MIRROR_ANNOTATION, NAMESPACE};
use selfhost_core::control_plane::{COMPONENT_LABEL, TIER_LABEL};
use selfhost_core::conversion::decide::{LeaseHandOver, NodeComponent};
use selfhost_core::conversion::{NODE_GATE_VALUE, is_gated, node_gate_label, permits_port_sharing};
use selfhost_core::daemonset::CONTROL_PLANE_NODE_LABEL;
use selfhost_core::front::FRONT_LABEL;
use selfhost_core::observation::{
    ApiHealth, DaemonSetObservation, IDENTITY_LABEL, IdentitySighting, KnownStart, LeaderLease,
    NodeObservation, Observation, PodObservation,
};
use selfhost_core::pivot::{LEADER_ELECT_FLAG, PivotOptions, Target, pod_serves};
use selfhost_core::version::KubeVersion;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::{ConvertError, ConvertRequest, front};
use crate::checkpoint::NodeDisk;
use crate::cluster_view::{Shared, ViewTimeout, spawn_reflector};
use crate::identity::IdentityTracker;
use crate::measure::Recorder;
use crate::node_files::NodeFiles;
use crate::observer::owned_by;

/// Watches the kube-system Leases into a store, and shows every version of every Lease to the
/// identity tracker (identity Leases) or the recorder (leader Leases) as it arrives. Two
/// kube-apiservers on one host take the same identity Lease over from each other on every
/// renewal; when their renewals fall together, only the watch events show the first writer —
/// the cache holds the last one. A leader change, likewise, is measured from every version.
fn spawn_lease_reflector(
    api: Api<Lease>,
    shared: &Arc<Shared>,
    identities: &Arc<Mutex<IdentityTracker>>,
    recorder: &Arc<Mutex<Recorder>>,
) -> (Store<Lease>, JoinHandle<()>) {
    let (store, writer) = reflector::store::<Lease>();
    let shared = Arc::clone(shared);
    let identities = Arc::clone(identities);
    let recorder = Arc::clone(recorder);
    let task = tokio::spawn(async move {
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .boxed();
        while let Some(item) = stream.next().await {
            match item {
                Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => {
                    let is_identity = lease
                        .metadata
                        .labels
                        .as_ref()
                        .is_some_and(|l| l.contains_key(IDENTITY_LABEL));
                    if is_identity {
                        if let Ok(mut tracker) = identities.lock() {
                            tracker.observe(&[Arc::new(lease)], Timestamp::now());
                        }
                    } else if let Ok(mut recorder) = recorder.lock() {
                        recorder.lease(&lease, Instant::now());
                    }
                    shared.changes.send_modify(|n| *n += 1);
                }
                Ok(watcher::Event::Init | watcher::Event::InitDone) => {}
                Ok(watcher::Event::Delete(_)) => shared.changes.send_modify(|n| *n += 1),
                Err(err) => {
                    if let Ok(mut last) = shared.last_error.lock() {
                        *last = Some(err.to_string());
                    }
                }
            }
        }
    });
    (store, task)
}

/// The watched caches of a conversion.
pub struct ConversionView {
    /// DaemonSets in kube-system.
    pub daemonsets: Store<DaemonSet>,
    /// Pods of the self-hosted DaemonSets.
    pub pods: Store<Pod>,
    /// Control-plane static pods' mirror pods (and anything else labelled `tier=control-plane`).
    pub mirrors: Store<Pod>,
    /// Every node (the gate labels are read from them).
    pub nodes: Store<Node>,
    /// Leases in kube-system (apiserver identities).
    pub leases: Store<Lease>,
    /// The nodes' API fronts' mirror pods.
    pub fronts: Store<Pod>,
    changes: watch::Receiver<u64>,
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    identities: Arc<Mutex<IdentityTracker>>,
    recorder: Arc<Mutex<Recorder>>,
    manifest_writes: Mutex<Vec<ManifestWrite>>,
}

/// A static manifest this run wrote: the static pod the kubelet runs from it started after
/// `at`, a moment known to the millisecond where the kubelet's `startedAt` has whole seconds.
/// That tells a Lease acquired before the write from the new static pod's process when both
/// fall in one second (with fast pod starts the usual case: the previous hand-over's standby
/// acquires moments before the next node's conversion writes its manifest).
struct ManifestWrite {
    component: Component,
    node: String,
    /// The engine's clock just before the write.
    at: Timestamp,
    /// The uids of the component's mirror pods on the node seen before the write: none of
    /// them is the pod of the new file.
    mirrors_before: Vec<String>,
}

impl Drop for ConversionView {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl ConversionView {
    /// Starts the watches.
    pub fn start(client: &kube::Client) -> ConversionView {
        let (sender, changes) = watch::channel(0);
        let shared = Arc::new(Shared {
            changes: sender,
            last_error: Arc::default(),
            reachability: Arc::default(),
        });
        let apps: Vec<String> = Component::ALL.iter().map(|c| c.app_label_value()).collect();
        let in_ns = || Api::<Pod>::namespaced(client.clone(), NAMESPACE);
        let (daemonsets, t1) = spawn_reflector(
            Api::<DaemonSet>::namespaced(client.clone(), NAMESPACE),
            watcher::Config::default(),
            &shared,
        );
        let (pods, t2) = spawn_reflector(
            in_ns(),
            watcher::Config::default().labels(&format!("{APP_LABEL} in ({})", apps.join(","))),
            &shared,
        );
        let (mirrors, t3) = spawn_reflector(
            in_ns(),
            watcher::Config::default().labels(&format!("{TIER_LABEL}=control-plane")),
            &shared,
        );
        let (nodes, t4) = spawn_reflector(
            Api::<Node>::all(client.clone()),
            watcher::Config::default(),
            &shared,
        );
        let identities = Arc::new(Mutex::new(IdentityTracker::default()));
        let recorder = Arc::new(Mutex::new(Recorder::default()));
        let (leases, t5) = spawn_lease_reflector(
            Api::<Lease>::namespaced(client.clone(), NAMESPACE),
            &shared,
            &identities,
            &recorder,
        );
        let (fronts, t6) = spawn_reflector(
            in_ns(),
            watcher::Config::default().labels(&format!("{}={}", FRONT_LABEL.0, FRONT_LABEL.1)),
            &shared,
        );
        ConversionView {
            daemonsets,
            pods,
            mirrors,
            nodes,
            leases,
            fronts,
            changes,
            shared,
            tasks: vec![t1, t2, t3, t4, t5, t6],
            identities,
            recorder,
            manifest_writes: Mutex::default(),
        }
    }

    /// Notes, just before writing it, that this run writes `component`'s static manifest on
    /// `node`.
    pub fn record_manifest_write(&self, component: Component, node: &str) {
        let mirrors_before = self
            .mirrors_of(component)
            .iter()
            .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        let write = ManifestWrite {
            component,
            node: node.to_string(),
            at: Timestamp::now(),
            mirrors_before,
        };
        if let Ok(mut writes) = self.manifest_writes.lock() {
            writes.retain(|w| (w.component, w.node.as_str()) != (component, node));
            writes.push(write);
        }
    }

    /// The static pods of `component` known to come from a manifest this run wrote: a mirror
    /// pod on the node written to that was not there before the write and was not created
    /// before it (its whole-second creation time plus a second is later than the write; a
    /// pod the kubelet ran from an older file was mirrored before).
    fn known_starts(&self, component: Component) -> Vec<KnownStart> {
        let Ok(writes) = self.manifest_writes.lock() else {
            // A panicked writer leaves no record: nothing is known beyond `startedAt`.
            return Vec::new();
        };
        let mirrors = self.mirrors_of(component);
        writes
            .iter()
            .filter(|w| w.component == component)
            .flat_map(|w| {
                mirrors.iter().filter_map(move |p| {
                    let uid = p.metadata.uid.clone()?;
                    let on_node = p.spec.as_ref().and_then(|s| s.node_name.as_deref())
                        == Some(w.node.as_str());
                    let created = p.metadata.creation_timestamp.as_ref()?.0;
                    let not_older = created
                        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(1))
                        .is_ok_and(|end| end > w.at);
                    let new = on_node && not_older && !w.mirrors_before.contains(&uid);
                    new.then_some(KnownStart {
                        pod_uid: uid,
                        not_before: w.at,
                    })
                })
            })
            .collect()
    }

    /// The run's record of leader changes (and of the `/readyz` probes the run adds).
    pub fn recorder(&self) -> &Arc<Mutex<Recorder>> {
        &self.recorder
    }

    /// The leader Lease of `component`, as cached.
    fn leader_lease(&self, component: Component) -> Option<LeaderLease> {
        let name = component.leader_lease_name()?;
        self.leases
            .state()
            .into_iter()
            .find(|l| l.metadata.name.as_deref() == Some(name))
            .map(|l| LeaderLease::from_lease(&l))
    }

    /// Waits until every watch has listed once.
    pub async fn ready(&self, timeout: Duration) -> Result<(), ViewTimeout> {
        let all = async {
            let _ = self.daemonsets.wait_until_ready().await;
            let _ = self.pods.wait_until_ready().await;
            let _ = self.mirrors.wait_until_ready().await;
            let _ = self.nodes.wait_until_ready().await;
            let _ = self.leases.wait_until_ready().await;
            let _ = self.fronts.wait_until_ready().await;
        };
        tokio::time::timeout(timeout, all)
            .await
            .map_err(|_| ViewTimeout {
                what: "the first list of the cluster's control-plane objects".into(),
                waited: timeout,
                last_error: self.shared.last_error.lock().ok().and_then(|e| e.clone()),
            })
    }

    /// Waits for the next change of a watched object, or until `deadline`.
    pub async fn next_change(&mut self, deadline: Instant) {
        self.changes.borrow_and_update();
        let _ = tokio::time::timeout_at(deadline, self.changes.changed()).await;
    }

    /// The cached DaemonSet of `component`.
    pub fn daemonset(&self, component: Component) -> Option<Arc<DaemonSet>> {
        let name = component.daemonset_name();
        self.daemonsets
            .state()
            .into_iter()
            .find(|d| d.metadata.name.as_deref() == Some(name.as_str()))
    }

    /// The cached node `name`.
    pub fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes
            .state()
            .into_iter()
            .find(|n| n.metadata.name.as_deref() == Some(name))
    }

    /// The node's IP, as the kubelet reports it (its first `InternalIP`): what a pod's
    /// `status.hostIP`, and so a template's `$(HOST_IP)`, is on that node.
    pub fn node_ip(&self, name: &str) -> Option<std::net::IpAddr> {
        self.node(name)?
            .status
            .as_ref()?
            .addresses
            .as_ref()?
            .iter()
            .find(|a| a.type_ == "InternalIP")?
            .address
            .parse()
            .ok()
    }

    /// The nodes carrying the gate label of `component`.
    pub fn gated_nodes(&self, component: Component) -> Vec<String> {
        let key = node_gate_label(component);
        let mut names: Vec<String> = self
            .nodes
            .state()
            .iter()
            .filter(|n| {
                n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(&key))
                    .is_some_and(|v| v == NODE_GATE_VALUE)
            })
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The mirror pod of `component`'s static pod on `node`.
    pub fn mirror(&self, component: Component, node: &str) -> Option<Arc<Pod>> {
        self.mirrors_of(component)
            .into_iter()
            .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
    }

    /// The mirror pods of `component`'s static pods, on every node.
    fn mirrors_of(&self, component: Component) -> Vec<Arc<Pod>> {
        self.mirrors
            .state()
            .into_iter()
            .filter(|p| {
                p.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(COMPONENT_LABEL))
                    .is_some_and(|c| c == component.name())
                    && p.metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key(MIRROR_ANNOTATION))
            })
            .collect()
    }

    /// The DaemonSet of `component` with the pods it owns, if it exists.
    fn daemonset_observation(&self, component: Component) -> Option<DaemonSetObservation> {
        let live = self.daemonset(component)?;
        let owned = owned_by(&self.pods.state(), live.metadata.uid.as_deref());
        Some(DaemonSetObservation::from_daemonset(&live, &owned))
    }

    /// What the serving judgement and the Lease hand-over of `component` read. It sees every
    /// process of the component, the DaemonSet pods and the static pods, so that one cannot
    /// vouch for the other, and a leader Lease is handed over only when no process on its
    /// holder's node may be the holder.
    fn judged(
        &self,
        component: Component,
        now: Timestamp,
        nodes: &[NodeObservation],
        identity_leases: &[IdentitySighting],
    ) -> Observation {
        let mut everyone = self
            .daemonset_observation(component)
            .unwrap_or_else(|| DaemonSetObservation::from_daemonset(&DaemonSet::default(), &[]));
        everyone.pods.extend(
            self.mirrors_of(component)
                .iter()
                .map(|p| PodObservation::from_pod(p)),
        );
        Observation {
            component,
            now,
            real: Some(everyone),
            backup: None,
            nodes: nodes.to_vec(),
            api: ApiHealth::default(),
            identity_leases: identity_leases.to_vec(),
            leader_lease: self.leader_lease(component),
            known_starts: self.known_starts(component),
            stopped: Vec::new(),
            // Its waiver rests on `stopped`, which a conversion does not track.
            handed_over: Vec::new(),
            availability: Default::default(),
        }
    }

    /// A leader Lease to hand over first: `judged`'s component's own, else that of any other
    /// leader-elected component. A controller-manager or scheduler leader whose node's
    /// kube-apiserver is being converted cannot renew (it talks to that apiserver) and may
    /// exit; its Lease would keep every standby waiting until it expires, whichever
    /// component the run is converting at that moment.
    fn lease_hand_over(
        &self,
        judged: &Observation,
        nodes: &[NodeObservation],
        identity_leases: &[IdentitySighting],
    ) -> Option<LeaseHandOver> {
        LeaseHandOver::find(judged).or_else(|| {
            Component::ALL
                .into_iter()
                .filter(|other| *other != judged.component && other.leader_lease_name().is_some())
                .find_map(|other| {
                    LeaseHandOver::find(&self.judged(other, judged.now, nodes, identity_leases))
                })
        })
    }

    /// One observation of `component` on the node `request` converts: its files, what the
    /// cluster shows of it, where the node's checkpointer keeps its checkpoints (when one is
    /// to keep the DaemonSet pod before the static manifest moves aside) and its API front.
    pub fn observe(
        &mut self,
        component: Component,
        request: &ConvertRequest,
        files: &NodeFiles,
        deadline: Timestamp,
    ) -> Result<NodeComponent, ConvertError> {
        let node = request.node.as_str();
        let keeper = request.checkpoint_keeper();
        let keeper = keeper.as_ref();
        let now = Timestamp::now();
        let manifest = files.manifest(component)?;
        let backup = files.backup(component)?;
        let live = self.daemonset(component);
        let daemonset = self.daemonset_observation(component);
        let mirror_pod = self.mirror(component, node);
        let mirror_permits_port_sharing = mirror_pod
            .as_ref()
            .and_then(|p| p.spec.as_ref())
            .is_some_and(permits_port_sharing);
        let mirror = mirror_pod.map(|p| PodObservation::from_pod(&p));
        let identity: Vec<Arc<Lease>> = self
            .leases
            .state()
            .into_iter()
            .filter(|l| {
                l.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|labels| labels.contains_key(IDENTITY_LABEL))
            })
            .collect();
        let identity_leases = match self.identities.lock() {
            Ok(mut tracker) => tracker.observe(&identity, now),
            // A panicked watch task leaves no memory: nothing vouches for a new process.
            Err(_) => Vec::new(),
        };
        let nodes: Vec<NodeObservation> = self
            .nodes
            .state()
            .iter()
            .filter(|n| {
                n.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(CONTROL_PLANE_NODE_LABEL))
            })
            .map(|n| NodeObservation::from_node(n))
            .collect();
        let judged = self.judged(component, now, &nodes, &identity_leases);
        let target = Target {
            // Serving is judged without regard to versions; the target only lends its options.
            version: KubeVersion::new(1, 0, 0),
            template: Default::default(),
            run_started_at: now,
            options: PivotOptions::default(),
        };
        let serving = |pod: Option<&PodObservation>, what: &str| match pod {
            None => Err(format!("{node}: no {what} pod")),
            Some(pod) => pod_serves(&judged, &target, pod).map(|_| ()),
        };
        let ds_pod = daemonset
            .as_ref()
            .and_then(|ds| ds.pods_on(node).find(|p| !p.is_terminating()));
        let daemonset_pod_serving = serving(ds_pod, "DaemonSet");
        let checkpoint_kept = keeper.map(|disk| kept(disk, component, ds_pod));
        let mirror_serving = serving(mirror.as_ref(), "static (mirror)");
        let on_disk = manifest.as_ref().or(backup.as_ref());
        let leader_election_off = {
            let template = live
                .as_ref()
                .and_then(|ds| ds.spec.as_ref())
                .and_then(|s| s.template.spec.as_ref());
            let spec = on_disk.and_then(|p| p.spec.as_ref()).or(template);
            spec.and_then(|s| s.containers.first()).is_some_and(|c| {
                let mut line = c.command.clone().unwrap_or_default();
                line.extend(c.args.clone().unwrap_or_default());
                command_line::flag_value(&line, LEADER_ELECT_FLAG) == Some("false")
            })
        };
        let leader = match (&judged.leader_lease, component.leader_lease_name()) {
            (_, None) => Ok(()),
            _ if leader_election_off => Ok(()),
            (Some(lease), Some(_)) if lease.is_held_at(now) => Ok(()),
            (Some(_), Some(name)) => Err(format!("Lease {name} is not held by a live leader")),
            (None, Some(name)) => Err(format!("no Lease {name} yet")),
        };
        Ok(NodeComponent {
            component,
            node: node.to_string(),
            now,
            deadline,
            manifest_on_disk: manifest.is_some(),
            manifest_in_backup: backup.is_some(),
            static_permits_port_sharing: on_disk
                .and_then(|p| p.spec.as_ref())
                .is_some_and(permits_port_sharing),
            static_port_sharing_added: files.port_sharing_added(component)?,
            mirror_permits_port_sharing,
            daemonset_gated: live.as_ref().is_some_and(|ds| {
                is_gated(
                    component,
                    ds.spec.as_ref().and_then(|s| s.template.spec.as_ref()),
                )
            }),
            daemonset,
            gated_nodes: self.gated_nodes(component),
            mirror,
            mirror_serving,
            daemonset_pod_serving,
            checkpoint_kept,
            lease_hand_over: self.lease_hand_over(&judged, &nodes, &identity_leases),
            leader,
            leader_here_acquired: judged
                .leader_lease
                .as_ref()
                .filter(|lease| {
                    lease
                        .holder_hostname()
                        .is_some_and(|host| judged.host_may_be(host, node))
                })
                .and_then(|lease| lease.acquire_time),
            front: front::observe(
                request,
                component,
                live.as_deref(),
                self.front_mirror(node).as_deref(),
                files,
            )?,
        })
    }

    /// The mirror pod of the node's API front.
    fn front_mirror(&self, node: &str) -> Option<Arc<Pod>> {
        self.fronts
            .state()
            .into_iter()
            .find(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
    }
}

/// Whether the node's checkpointer keeps a checkpoint of the revision `pod` runs, or why not.
fn kept(disk: &NodeDisk, component: Component, pod: Option<&PodObservation>) -> Result<(), String> {
    let Some(revision) = pod.and_then(|p| p.revision_hash.as_deref()) else {
        return Err("no DaemonSet pod with a revision to keep".to_string());
    };
    match disk.checkpoint(component) {
        Some(kept) if kept.revision == revision => Ok(()),
        Some(kept) => Err(format!(
            "the checkpoint in {} is of revision {}, the pod runs {revision}",
            disk.checkpoint_dir.display(),
            kept.revision
        )),
        None => Err(format!(
            "no checkpoint in {} yet (a pod is kept once it has served for a while)",
            disk.checkpoint_dir.display()
        )),
    }
}
