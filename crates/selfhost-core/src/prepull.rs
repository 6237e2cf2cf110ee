//! Image prepull: proving, before anything is changed, that every control-plane node can pull
//! and run the target image of each component.
//!
//! kubeadm did this with one DaemonSet per component that ran the new image with
//! `/bin/sleep 3600`. It had no selector in v1.9 (so its creation failed validation), ignored
//! every error, waited with a one-minute cap, and left the DaemonSets behind on a timeout. It
//! also stopped working once the control-plane images became distroless: they hold the
//! component's binary and nothing else, no `sleep`, no shell (kubernetes/kubeadm#1862, fixed in
//! kubernetes/kubernetes#90320).
//!
//! Ours, per component: `upgrade-prepull-<c>` in kube-system, with labels and a selector of
//! our own, placed exactly where the target template places the component (plus the
//! control-plane node selector and taint tolerations). The target image runs as an *init
//! container* whose command is the component's own binary with `--version`: it pulls the image
//! and proves the binary executes on this node's architecture, then exits 0 without starting
//! any component process. The pod is then held Running by a `pause` container, an image every
//! node already has for its pod sandboxes. A pod that is Ready on a node therefore means: the
//! image is there and runs. A pull error is reported with the kubelet's own message, per
//! node; the engine removes the DaemonSets in every case.
//!
//! Everything here is pure: building the DaemonSet, and judging its pods.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerStatus, Pod, PodSpec, PodTemplateSpec, SecurityContext,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use serde::Serialize;

use crate::component::{Component, NAMESPACE};
pub use crate::component::{MANAGED_BY, MANAGED_BY_LABEL};
use crate::daemonset::{select_control_plane_nodes, tolerate_control_plane_taints};
use crate::preflight::{Check, CheckId, Verdict};
use crate::version::KubeVersion;

/// Label (and selector key) of the prepull DaemonSets and their pods; its value is the
/// component. Selecting on the key alone finds every prepull object.
pub const PREPULL_LABEL: &str = "selfhost.dev/prepull";
/// Name of the container that holds a prepull pod Running once its image is pulled.
pub const PAUSE_CONTAINER: &str = "pause";
/// How long a prepull may take unless told otherwise: pulls of a few tens of megabytes on
/// every control-plane node, behind whatever registry mirror the cluster uses.
pub const DEFAULT_PREPULL_DEADLINE: Duration = Duration::from_secs(300);

/// The kubelet's waiting reasons that mean an image cannot be pulled (or will not be).
const PULL_FAILURES: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "RegistryUnavailable",
    "SignatureValidationFailed",
];

/// What one component's prepull pulls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PrepullImage {
    /// The component.
    pub component: Component,
    /// Its target image.
    pub image: String,
    /// The binary the init container runs with `--version`: the target container's
    /// `command[0]`, else the component's name (the binary of the official images, on their
    /// `PATH`).
    pub binary: String,
}

impl PrepullImage {
    /// The component's image in a target template: the container named after the component,
    /// else the first. `None` when the template runs no image.
    pub fn of(component: Component, template: &PodTemplateSpec) -> Option<PrepullImage> {
        let containers = &template.spec.as_ref()?.containers;
        let container = containers
            .iter()
            .find(|c| c.name == component.name())
            .or_else(|| containers.first())?;
        let image = container.image.clone().filter(|i| !i.is_empty())?;
        let binary = container
            .command
            .as_ref()
            .and_then(|c| c.first())
            .cloned()
            .unwrap_or_else(|| component.name().to_string());
        Some(PrepullImage {
            component,
            image,
            binary,
        })
    }
}

/// The `pause` image to hold prepull pods Running: the one kubeadm installs beside this
/// Kubernetes release, from the registry the component image comes from (so that a cluster
/// pulling through a mirror finds it there too). Nodes normally have it already: it is their
/// pod sandbox image.
pub fn pause_image(component_image: &str, version: &KubeVersion) -> String {
    // The tag kubeadm's constants pair with each release line.
    let tag = match version.minor() {
        0..=29 => "3.9",
        30..=33 => "3.10",
        _ => "3.10.1",
    };
    format!("{}/pause:{tag}", image_repository(component_image))
}

/// The repository part of an image reference: everything before the last `/`
/// (`registry.k8s.io` for `registry.k8s.io/kube-apiserver:v1.33.1`). An image without one is
/// a Docker Hub library image; its pause image is registry.k8s.io's.
fn image_repository(image: &str) -> &str {
    // Strip a digest first: it may contain no '/', but the tag separator logic below must not
    // see it.
    let name = image.split('@').next().unwrap_or(image);
    match name.rsplit_once('/') {
        Some((repository, _)) => repository,
        None => "registry.k8s.io",
    }
}

/// Labels of a component's prepull DaemonSet and pods (also its selector).
pub fn prepull_labels(component: Component) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string()),
        (PREPULL_LABEL.to_string(), component.name().to_string()),
    ])
}

/// The prepull DaemonSet of one component, placed where `target` (the component's target
/// template) will run it, on control-plane nodes only.
pub fn prepull_daemonset(
    image: &PrepullImage,
    pause_image: &str,
    target: &PodTemplateSpec,
) -> DaemonSet {
    let labels = prepull_labels(image.component);
    let placement = target.spec.clone().unwrap_or_default();
    let locked_down = || SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_string()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    };
    let spec = PodSpec {
        // Where the component will run: its node selector, affinity and tolerations...
        node_selector: placement.node_selector,
        affinity: placement.affinity,
        tolerations: placement.tolerations,
        init_containers: Some(vec![Container {
            name: image.component.name().to_string(),
            image: Some(image.image.clone()),
            image_pull_policy: Some("IfNotPresent".to_string()),
            command: Some(vec![image.binary.clone(), "--version".to_string()]),
            security_context: Some(locked_down()),
            ..Container::default()
        }]),
        containers: vec![Container {
            name: PAUSE_CONTAINER.to_string(),
            image: Some(pause_image.to_string()),
            image_pull_policy: Some("IfNotPresent".to_string()),
            security_context: Some(locked_down()),
            ..Container::default()
        }],
        // Nothing here talks to the API, and nothing is worth waiting for on deletion.
        automount_service_account_token: Some(false),
        termination_grace_period_seconds: Some(0),
        ..PodSpec::default()
    };
    // ... and only on control-plane nodes, whose taints it tolerates.
    let spec = tolerate_control_plane_taints(select_control_plane_nodes(spec));
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(image.component.prepull_name()),
            namespace: Some(NAMESPACE.to_string()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(spec),
            },
            ..DaemonSetSpec::default()
        }),
        status: None,
    }
}

/// One node that cannot pull or run an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PullFailure {
    /// The component.
    pub component: Component,
    /// The node.
    pub node: String,
    /// The image.
    pub image: String,
    /// The kubelet's reason (`ErrImagePull`, `ImagePullBackOff`, ...) or, for a binary that
    /// did not run, `exit code N`.
    pub reason: String,
    /// The kubelet's message, if it gave one.
    pub message: Option<String>,
}

impl fmt::Display for PullFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {} cannot pull {} ({}",
            self.node, self.image, self.reason
        )?;
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        f.write_str(")")
    }
}

/// Where one component's prepull stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrepullState {
    /// Ready on every node the DaemonSet wants: the image is on all of them and runs.
    Pulled {
        /// The nodes.
        nodes: Vec<String>,
    },
    /// Still going; what is missing, in words.
    Waiting {
        /// One entry per missing node or condition.
        pending: Vec<String>,
    },
    /// At least one node cannot pull or run the image.
    Failed {
        /// Per node.
        failures: Vec<PullFailure>,
    },
}

/// Judges a component's prepull from its DaemonSet (as last read) and its pods.
pub fn judge(component: Component, daemonset: Option<&DaemonSet>, pods: &[Pod]) -> PrepullState {
    let Some(daemonset) = daemonset else {
        return PrepullState::Waiting {
            pending: vec![format!("{}: not created yet", component.prepull_name())],
        };
    };
    let name = component.prepull_name();
    let status = daemonset.status.as_ref();
    let observed = status.and_then(|s| s.observed_generation);
    if daemonset
        .metadata
        .generation
        .is_some_and(|g| observed < Some(g))
        || status.is_none()
    {
        return PrepullState::Waiting {
            pending: vec![format!(
                "{name}: the DaemonSet controller has not seen it yet"
            )],
        };
    }
    let desired = status.map_or(0, |s| s.desired_number_scheduled);
    let mut failures = Vec::new();
    let mut ready = BTreeSet::new();
    let mut pending = Vec::new();
    for pod in pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let node = pod_node(pod);
        let pod_failures = pod_failures(component, &node, pod);
        if !pod_failures.is_empty() {
            failures.extend(pod_failures);
        } else if pod_ready(pod) {
            ready.insert(node);
        } else {
            pending.push(format!("{node}: {}", pod_waiting(pod)));
        }
    }
    if !failures.is_empty() {
        failures.sort_by(|a, b| a.node.cmp(&b.node));
        return PrepullState::Failed { failures };
    }
    if desired == 0 {
        // Nothing to wait for would pass silently; say why instead.
        return PrepullState::Failed {
            failures: vec![PullFailure {
                component,
                node: "(none)".to_string(),
                image: image_of(daemonset).unwrap_or_default(),
                reason: "no node selected".to_string(),
                message: Some(format!(
                    "{name} selects no control-plane node: check the nodes' labels and taints"
                )),
            }],
        };
    }
    if ready.len() >= usize::try_from(desired).unwrap_or(usize::MAX) {
        return PrepullState::Pulled {
            nodes: ready.into_iter().collect(),
        };
    }
    let missing = usize::try_from(desired)
        .unwrap_or(0)
        .saturating_sub(ready.len() + pending.len());
    if missing > 0 {
        pending.push(format!("{missing} pod(s) not created yet"));
    }
    pending.sort();
    PrepullState::Waiting {
        pending: pending
            .into_iter()
            .map(|p| format!("{component}: {p}"))
            .collect(),
    }
}

/// The image the prepull DaemonSet pulls (its init container's).
fn image_of(daemonset: &DaemonSet) -> Option<String> {
    daemonset
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .init_containers
        .as_ref()?
        .first()?
        .image
        .clone()
}

/// The pod's node: where it is bound, else the node the DaemonSet controller meant it for
/// (its required node affinity on `metadata.name`), else its own name.
fn pod_node(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    let bound = spec.and_then(|s| s.node_name.clone());
    let meant = || {
        spec?
            .affinity
            .as_ref()?
            .node_affinity
            .as_ref()?
            .required_during_scheduling_ignored_during_execution
            .as_ref()?
            .node_selector_terms
            .iter()
            .flat_map(|t| t.match_fields.iter().flatten())
            .find(|f| f.key == "metadata.name" && f.operator == "In")
            .and_then(|f| f.values.as_ref()?.first().cloned())
    };
    bound.or_else(meant).unwrap_or_else(|| {
        format!(
            "pod {} (not scheduled)",
            pod.metadata.name.as_deref().unwrap_or("?")
        )
    })
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What a pod that is neither Ready nor failed is doing, for the pending list.
fn pod_waiting(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    let statuses = status
        .into_iter()
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .filter_map(|c| {
            let reason = c.state.as_ref()?.waiting.as_ref()?.reason.clone()?;
            Some(format!("{} {reason}", c.name))
        })
        .collect::<Vec<_>>();
    if statuses.is_empty() {
        status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".to_string())
    } else {
        statuses.join(", ")
    }
}

/// The pull (or run) failures a pod reports: any container waiting for a pull that fails, and
/// an init container whose `--version` did not exit 0 (the binary does not run here, e.g. an
/// image built for another architecture).
fn pod_failures(component: Component, node: &str, pod: &Pod) -> Vec<PullFailure> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let spec_image = |name: &str| -> Option<String> {
        let spec = pod.spec.as_ref()?;
        spec.init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter())
            .find(|c| c.name == name)
            .and_then(|c| c.image.clone())
    };
    let failure = |c: &ContainerStatus, reason: String, message: Option<String>| PullFailure {
        component,
        node: node.to_string(),
        // The spec's name is the one the user wrote; the status may show a resolved form.
        image: spec_image(&c.name).unwrap_or_else(|| c.image.clone()),
        reason,
        message: message.filter(|m| !m.is_empty()),
    };
    let mut out = Vec::new();
    let init = status.init_container_statuses.iter().flatten();
    let regular = status.container_statuses.iter().flatten();
    for (c, is_init) in init.map(|c| (c, true)).chain(regular.map(|c| (c, false))) {
        let state = c.state.as_ref();
        if let Some(waiting) = state.and_then(|s| s.waiting.as_ref())
            && let Some(reason) = waiting
                .reason
                .as_deref()
                .filter(|r| PULL_FAILURES.contains(r))
        {
            out.push(failure(c, reason.to_string(), waiting.message.clone()));
            continue;
        }
        if !is_init {
            continue;
        }
        // An init container that ran and failed: now terminated, or back-off waiting with the
        // failure in its last state.
        let terminated = state
            .and_then(|s| s.terminated.as_ref())
            .or_else(|| c.last_state.as_ref().and_then(|s| s.terminated.as_ref()));
        if let Some(terminated) = terminated.filter(|t| t.exit_code != 0) {
            let message = terminated
                .message
                .clone()
                .or_else(|| terminated.reason.clone());
            out.push(failure(
                c,
                format!("`--version` exited {}", terminated.exit_code),
                message,
            ));
        }
    }
    out
}

/// The result of a prepull, or why none ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum PrepullOutcome {
    /// Not run; `reason` says why and how to run it.
    NotRun {
        /// Why, and how to run it.
        reason: String,
    },
    /// Every image is on every node it will run on.
    Pulled {
        /// The images pulled.
        images: Vec<PrepullImage>,
        /// The nodes, per component.
        nodes: BTreeMap<Component, Vec<String>>,
    },
    /// Some node cannot pull or run an image.
    Failed {
        /// Per node.
        failures: Vec<PullFailure>,
    },
    /// The deadline passed first.
    TimedOut {
        /// How long it waited.
        waited_seconds: u64,
        /// What was still missing.
        pending: Vec<String>,
    },
    /// Stopped by the user; nothing is left behind.
    Interrupted,
}

/// Failures in words, one phrase per image and cause with every node it concerns (the same
/// missing image on every node is one sentence, not one per node and component).
pub fn describe_failures(failures: &[PullFailure]) -> String {
    let mut grouped: BTreeMap<(&str, &str, Option<&str>), BTreeSet<&str>> = BTreeMap::new();
    for f in failures {
        grouped
            .entry((f.image.as_str(), f.reason.as_str(), f.message.as_deref()))
            .or_default()
            .insert(f.node.as_str());
    }
    grouped
        .into_iter()
        .map(|((image, reason, message), nodes)| {
            let nodes: Vec<&str> = nodes.into_iter().collect();
            let who = if nodes.len() == 1 {
                format!("node {}", nodes[0])
            } else {
                format!("nodes {}", nodes.join(", "))
            };
            let message = message.map(|m| format!(": {m}")).unwrap_or_default();
            format!("{who} cannot pull {image} ({reason}{message})")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The `images-pullable` preflight check for an outcome.
pub fn images_pullable_check(outcome: &PrepullOutcome) -> Check {
    let (verdict, message, fix) = match outcome {
        PrepullOutcome::NotRun { reason } => (Verdict::NotRun, reason.clone(), None),
        PrepullOutcome::Pulled { images, nodes } => {
            let count: BTreeSet<&String> = nodes.values().flatten().collect();
            let names: Vec<&str> = images.iter().map(|i| i.image.as_str()).collect();
            (
                Verdict::Pass,
                if names.is_empty() {
                    "no component changes its image; nothing to pull".to_string()
                } else {
                    format!(
                        "{} pulled and runs on {} node(s)",
                        names.join(", "),
                        count.len()
                    )
                },
                None,
            )
        }
        PrepullOutcome::Failed { failures } => (
            Verdict::Fail,
            describe_failures(failures),
            Some(
                "make the image(s) available to those nodes (name, tag, registry access, pull secrets, architecture), or render the target from a --config whose imageRepository has them"
                    .to_string(),
            ),
        ),
        PrepullOutcome::TimedOut {
            waited_seconds,
            pending,
        } => (
            Verdict::Fail,
            format!(
                "the images were not pulled on every node within {waited_seconds}s; still waiting for {}",
                pending.join("; ")
            ),
            Some(format!(
                "check the nodes' registry access and pull speed (`kubectl -n kube-system get pods -l {PREPULL_LABEL}` while it runs); `apply --timeout` also bounds the prepull"
            )),
        ),
        PrepullOutcome::Interrupted => (
            Verdict::Fail,
            "interrupted before every image was pulled".to_string(),
            Some("run it again".to_string()),
        ),
    };
    Check {
        id: CheckId::ImagesPullable,
        component: None,
        verdict,
        message,
        fix,
    }
}
