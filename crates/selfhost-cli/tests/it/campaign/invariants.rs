//! What must hold after every run, checked on the store itself (never through the faulty
//! API): who owns what, which versions run, what is left behind, and availability.

use std::collections::BTreeMap;
use std::sync::Arc;

use selfhost_core::Component;
use selfhost_core::component::{BACKUP_LABEL, BACKUP_PREFIX, PREPULL_PREFIX};
use selfhost_sim::SimCluster;
use selfhost_sim::cluster::ProbeReport;
use selfhost_sim::resources::{self, ResourceType};
use selfhost_sim::store::ListOptions;
use serde_json::Value;
use tokio::time::Instant;

/// The ConfigMap the availability prober writes.
pub const PROBER_CONFIG_MAP: &str = "selfhost-prober";

/// How an object not owned by the tool is compared before and after a run.
#[derive(Debug, Clone, PartialEq)]
enum Fingerprint {
    /// Its resourceVersion: nothing at all may change.
    Version(String),
    /// What the tool could change but the cluster's own agents do not: for pods and nodes,
    /// whose status (and, for nodes, condition taints) their kubelet and controllers write.
    Content(Value),
}

/// The objects the tool must leave alone, and each component's original pod template.
#[derive(Debug, Clone)]
pub struct Snapshot {
    foreign: BTreeMap<String, Fingerprint>,
    pub templates: BTreeMap<Component, Value>,
}

pub fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// `None` when the tool owns the object or the cluster's own agents rewrite it all the time.
fn fingerprint(rt: &ResourceType, obj: &Value) -> Option<Fingerprint> {
    let (ns, name) = (
        str_at(obj, "/metadata/namespace"),
        str_at(obj, "/metadata/name"),
    );
    let ours = |n: &str| {
        n.starts_with(selfhost_core::component::SELF_HOSTED_PREFIX)
            || n.starts_with(BACKUP_PREFIX)
            || n.starts_with(PREPULL_PREFIX)
    };
    let labels = obj.pointer("/metadata/labels");
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    match rt.plural {
        // The cluster's log, renewed by kubelets and leaders, handed over by the tool.
        "events" | "leases" => None,
        // The DaemonSet controller's history of the DaemonSets the tool owns.
        "controllerrevisions" if ns == "kube-system" && ours(name) => None,
        "daemonsets" if ns == "kube-system" && ours(name) => None,
        "pods"
            if ns == "kube-system"
                && (label(BACKUP_LABEL).is_some()
                    || label(selfhost_core::component::APP_LABEL).is_some_and(ours)) =>
        {
            None
        }
        "configmaps" if name == PROBER_CONFIG_MAP => None,
        "pods" => {
            let mut metadata = obj.get("metadata").cloned().unwrap_or(Value::Null);
            if let Some(m) = metadata.as_object_mut() {
                m.remove("resourceVersion");
                m.remove("managedFields");
            }
            Some(Fingerprint::Content(serde_json::json!({
                "metadata": metadata,
                "spec": obj.get("spec"),
            })))
        }
        // The node lifecycle controller taints a NotReady node (`node.kubernetes.io/...`) and
        // the kubelet writes its status: the rest is what an operator or a tool would change.
        "nodes" => {
            let taints: Vec<&Value> = obj
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .map(|ts| {
                    ts.iter()
                        .filter(|t| !str_at(t, "/key").starts_with("node.kubernetes.io/"))
                        .collect()
                })
                .unwrap_or_default();
            Some(Fingerprint::Content(serde_json::json!({
                "labels": obj.pointer("/metadata/labels"),
                "annotations": obj.pointer("/metadata/annotations"),
                "unschedulable": obj.pointer("/spec/unschedulable"),
                "taints": taints,
            })))
        }
        _ => Some(Fingerprint::Version(
            str_at(obj, "/metadata/resourceVersion").to_string(),
        )),
    }
}

fn all_objects(sim: &SimCluster) -> Vec<(ResourceType, Arc<Value>)> {
    let mut out = Vec::new();
    for rt in resources::ALL {
        let list = sim
            .store()
            .list(rt, &ListOptions::default())
            .expect("the store lists");
        out.extend(list.items.into_iter().map(|o| (*rt, o)));
    }
    out
}

fn key(rt: &ResourceType, obj: &Value) -> String {
    format!(
        "{} {}/{}",
        rt.plural,
        str_at(obj, "/metadata/namespace"),
        str_at(obj, "/metadata/name")
    )
}

fn daemonset(sim: &SimCluster, name: &str) -> Option<Arc<Value>> {
    sim.store()
        .get_opt(&resources::DAEMONSETS, "kube-system", name)
}

impl Snapshot {
    pub fn take(sim: &SimCluster) -> Snapshot {
        let foreign = all_objects(sim)
            .into_iter()
            .filter_map(|(rt, o)| fingerprint(&rt, &o).map(|f| (key(&rt, &o), f)))
            .collect();
        let templates = Component::ALL
            .into_iter()
            .map(|c| {
                let ds = daemonset(sim, &c.daemonset_name()).expect("the DaemonSet exists");
                (c, ds["spec"]["template"].clone())
            })
            .collect();
        Snapshot { foreign, templates }
    }

    /// Every object the tool does not own is as it was: none changed, none appeared or
    /// disappeared.
    pub fn foreign_changes(&self, sim: &SimCluster) -> Vec<String> {
        let after = Snapshot::take(sim).foreign;
        let mut out = Vec::new();
        for (k, before) in &self.foreign {
            match after.get(k) {
                None => out.push(format!("{k} was deleted")),
                Some(now) if now != before => out.push(format!("{k} changed")),
                Some(_) => {}
            }
        }
        for k in after.keys().filter(|k| !self.foreign.contains_key(*k)) {
            out.push(format!("{k} appeared"));
        }
        out
    }
}

/// The images of a pod spec's containers.
fn images(spec: &Value) -> Vec<String> {
    spec.pointer("/containers")
        .and_then(Value::as_array)
        .map(|cs| cs.iter().map(|c| str_at(c, "/image").to_string()).collect())
        .unwrap_or_default()
}

/// Each component is wholly on the target (`upgraded`) or wholly on its original template:
/// the DaemonSet's template, and every live pod of it, Ready, one per control-plane node.
pub fn version_violations(
    sim: &SimCluster,
    snapshot: &Snapshot,
    upgraded: &[Component],
    to: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    let pods = sim
        .store()
        .list(&resources::PODS, &ListOptions::default())
        .expect("the store lists")
        .items;
    let nodes = sim
        .nodes()
        .iter()
        .filter(|n| n.name.starts_with("cp-"))
        .count();
    for component in Component::ALL {
        let Some(ds) = daemonset(sim, &component.daemonset_name()) else {
            out.push(format!("{component}: its DaemonSet is gone"));
            continue;
        };
        let template = &ds["spec"]["template"];
        let want = images(&template["spec"]);
        let expected_image = format!("registry.k8s.io/{}:{to}", component.name());
        if upgraded.contains(&component) {
            if want != vec![expected_image] {
                out.push(format!(
                    "{component}: expected on {to}, its template runs {want:?}"
                ));
            }
        } else if *template != snapshot.templates[&component] {
            out.push(format!(
                "{component}: expected on its original template, it runs {want:?}"
            ));
        }
        let app = component.app_label_value();
        let live: Vec<_> = pods
            .iter()
            .filter(|p| {
                p.pointer("/metadata/labels/k8s-app")
                    .and_then(Value::as_str)
                    == Some(&app)
                    && p.pointer("/metadata/deletionTimestamp").is_none()
            })
            .collect();
        if live.len() != nodes {
            out.push(format!(
                "{component}: {} live pods on {nodes} control-plane nodes",
                live.len()
            ));
        }
        for p in live {
            let ready = p
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter()
                        .any(|c| c["type"] == "Ready" && c["status"] == "True")
                });
            let running = images(&p["spec"]);
            if running != want || !ready {
                out.push(format!(
                    "{component}: pod {} runs {running:?} (ready: {ready}), the DaemonSet {want:?}",
                    str_at(p, "/metadata/name")
                ));
            }
        }
    }
    let apiserver = if upgraded.contains(&Component::ApiServer) {
        to.to_string()
    } else {
        sim.initial_version().to_string()
    };
    if sim.version() != apiserver {
        out.push(format!(
            "/version says {}, expected {apiserver}",
            sim.version()
        ));
    }
    out
}

/// Whether the cluster has settled after a NotReady window, as an operator checks before
/// running the tool again: every node's Ready condition is True, the node lifecycle
/// controller has lifted its `not-ready`/`unreachable` taints, and every real DaemonSet wants
/// a pod on every control-plane node again and runs none where it should not (while a node
/// is tainted, the DaemonSet controller counts its pod as misscheduled, and preflight refuses
/// an unconverged DaemonSet).
pub fn settled_after_not_ready(sim: &SimCluster) -> bool {
    let nodes = sim
        .store()
        .list(&resources::NODES, &ListOptions::default())
        .expect("the store lists")
        .items;
    let ready = nodes.iter().all(|n| {
        let condition = n
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
        let tainted = n
            .pointer("/spec/taints")
            .and_then(Value::as_array)
            .is_some_and(|ts| {
                ts.iter().any(|t| {
                    matches!(
                        str_at(t, "/key"),
                        "node.kubernetes.io/not-ready" | "node.kubernetes.io/unreachable"
                    )
                })
            });
        condition && !tainted
    });
    let control_plane = sim
        .nodes()
        .iter()
        .filter(|n| n.name.starts_with("cp-"))
        .count() as i64;
    let converged = Component::ALL.into_iter().all(|c| {
        daemonset(sim, &c.daemonset_name()).is_some_and(|ds| {
            let status = |field: &str| {
                ds.pointer(&format!("/status/{field}"))
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            };
            status("desiredNumberScheduled") == control_plane && status("numberMisscheduled") == 0
        })
    });
    ready && converged
}

/// No backup or prepull DaemonSet, and no backup pod, is left.
pub fn leftovers(sim: &SimCluster) -> Vec<String> {
    let mut out = Vec::new();
    for (rt, obj) in all_objects(sim) {
        let name = str_at(&obj, "/metadata/name");
        let leftover = match rt.plural {
            "daemonsets" => name.starts_with(BACKUP_PREFIX) || name.starts_with(PREPULL_PREFIX),
            "pods" => {
                obj.pointer(&format!("/metadata/labels/{BACKUP_LABEL}"))
                    .is_some()
                    || name.starts_with(PREPULL_PREFIX)
            }
            _ => false,
        };
        if leftover {
            out.push(format!("{} {name} left behind", rt.kind));
        }
    }
    out
}

/// Whether `(from, to)` overlaps any window.
fn overlaps(from: Instant, to: Instant, windows: &[(Instant, Instant)]) -> bool {
    windows.iter().any(|(a, b)| from < *b && to > *a)
}

/// The availability the model promises, outside the windows the schedule forced:
/// - the API is never down (the recorder: no moment without a serving apiserver);
/// - with the idealised hand-over, no probe fails at all;
/// - with the measured hand-over on several nodes, at most two failed probes per node (the
///   connections a stopping apiserver closes or a joining one catches; see docs/simulator.md);
///   on one node probes may fail while the port changes hands, but the API is never down.
pub fn availability_violations(
    sim: &SimCluster,
    probes: &ProbeReport,
    from: Instant,
    to: Instant,
    forced: &[(Instant, Instant)],
    measured: bool,
    nodes: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let down: Vec<_> = sim
        .recorder()
        .down_intervals(from, to)
        .into_iter()
        .filter(|(a, b)| !overlaps(*a, *b, forced))
        .collect();
    if !down.is_empty() {
        let longest = down.iter().map(|(a, b)| *b - *a).max().unwrap_or_default();
        out.push(format!(
            "the API was down {} time(s) outside forced windows, longest {longest:?}",
            down.len()
        ));
    }
    let failed: Vec<_> = probes
        .reads
        .samples
        .iter()
        .chain(&probes.writes.samples)
        .filter(|s| !s.ok && !overlaps(s.started, s.finished, forced))
        .collect();
    let allowed = match (measured, nodes) {
        (false, _) => 0,
        (true, 1) => usize::MAX,
        (true, n) => 2 * n,
    };
    if failed.len() > allowed {
        // When, in seconds from the run's start, so that a replay can be lined up with the
        // schedule's windows and the checkpointers' logs.
        let at = |t: Instant| t.saturating_duration_since(from).as_secs_f64();
        let errors: Vec<_> = failed
            .iter()
            .take(3)
            .map(|s| {
                format!(
                    "{:.2}-{:.2} s: {}",
                    at(s.started),
                    at(s.finished),
                    s.error.clone().unwrap_or_default()
                )
            })
            .collect();
        let windows: Vec<_> = forced
            .iter()
            .map(|(a, b)| format!("{:.2}-{:.2} s", at(*a), at(*b)))
            .collect();
        out.push(format!(
            "{} probes failed outside forced windows {windows:?} (allowed {allowed}), e.g. \
             {errors:?}",
            failed.len()
        ));
    }
    out
}
