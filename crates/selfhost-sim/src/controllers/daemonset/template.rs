//! The pods a DaemonSet creates, and which nodes should run one (upstream `NewPod`,
//! `NodeShouldRunDaemonPod`, `CreatePodTemplate`, `AddOrUpdateDaemonPodTolerations`,
//! `ReplaceDaemonSetPodNodeNameNodeAffinity`, `GetTargetNodeName`, `IsPodUpdated`).

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{
    Affinity, Node, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
    PodSpec, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::controllers::affinity::{self, NODE_NAME_FIELD};
use crate::controllers::objects::{
    self, CONTROLLER_REVISION_HASH_LABEL, POD_TEMPLATE_GENERATION_LABEL,
    TEMPLATE_GENERATION_ANNOTATION,
};
use crate::controllers::taints::{self, effect, key};

/// The controller reference every object a DaemonSet owns carries.
pub fn daemon_set_reference(
    ds: &DaemonSet,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
    objects::controller_reference("apps/v1", "DaemonSet", &ds.metadata)
}

/// The DaemonSet's template generation, from the annotation the apiserver maintains; `None`
/// when absent or unparsable (upstream then relies on the hash alone).
pub fn template_generation(ds: &DaemonSet) -> Option<i64> {
    objects::annotations(&ds.metadata)
        .get(TEMPLATE_GENERATION_ANNOTATION)?
        .parse()
        .ok()
}

/// Adds the tolerations every DaemonSet pod gets, so node problems neither evict it nor keep
/// it off a node: not-ready and unreachable (`NoExecute`, forever), disk/memory/PID pressure
/// and unschedulable (`NoSchedule`), and network-unavailable for hostNetwork pods.
pub fn add_default_tolerations(spec: &mut PodSpec) {
    let mut wanted = vec![
        (key::NOT_READY, effect::NO_EXECUTE),
        (key::UNREACHABLE, effect::NO_EXECUTE),
        (key::DISK_PRESSURE, effect::NO_SCHEDULE),
        (key::MEMORY_PRESSURE, effect::NO_SCHEDULE),
        (key::PID_PRESSURE, effect::NO_SCHEDULE),
        (key::UNSCHEDULABLE, effect::NO_SCHEDULE),
    ];
    if spec.host_network == Some(true) {
        wanted.push((key::NETWORK_UNAVAILABLE, effect::NO_SCHEDULE));
    }
    let tolerations = spec.tolerations.get_or_insert_default();
    for (k, e) in wanted {
        taints::add_or_update_toleration(tolerations, taints::exists_toleration(k, e));
    }
}

/// Replaces the required node affinity with the single term `metadata.name In [node]`, which
/// makes the default scheduler bind the pod to that node. Other affinity kinds are kept.
pub fn pin_to_node(affinity: Option<Affinity>, node_name: &str) -> Affinity {
    let selector = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: NODE_NAME_FIELD.into(),
                operator: "In".into(),
                values: Some(vec![node_name.to_string()]),
            }]),
        }],
    };
    let mut affinity = affinity.unwrap_or_default();
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    node_affinity.required_during_scheduling_ignored_during_execution = Some(selector);
    affinity
}

/// The node a DaemonSet pod is for: `spec.nodeName` once bound, else the node its
/// `matchFields metadata.name In [one node]` names.
pub fn target_node(pod: &Pod) -> Option<&str> {
    let spec = pod.spec.as_ref()?;
    if let Some(name) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(name);
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.as_deref().unwrap_or_default())
        .find(|r| r.key == NODE_NAME_FIELD && r.operator == "In")
        .and_then(|r| match r.values.as_deref() {
            Some([only]) => Some(only.as_str()),
            _ => None,
        })
}

/// Whether the pod belongs to the current template: its hash label equals `hash`, or its
/// template-generation label equals the DaemonSet's generation.
pub fn is_pod_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let labels = objects::labels(&pod.metadata);
    let hash_matches = !hash.is_empty()
        && labels
            .get(CONTROLLER_REVISION_HASH_LABEL)
            .map(String::as_str)
            == Some(hash);
    let generation_matches = generation.is_some_and(|g| {
        labels
            .get(POD_TEMPLATE_GENERATION_LABEL)
            .map(String::as_str)
            == Some(&g.to_string())
    });
    hash_matches || generation_matches
}

/// The pod template with the DaemonSet's additions: default tolerations, and the
/// `controller-revision-hash` and `pod-template-generation` labels.
pub fn pod_template(ds: &DaemonSet, hash: &str) -> PodTemplateSpec {
    let mut template = ds.spec.clone().unwrap_or_default().template;
    add_default_tolerations(template.spec.get_or_insert_default());
    let labels = template
        .metadata
        .get_or_insert_default()
        .labels
        .get_or_insert_default();
    if let Some(generation) = template_generation(ds) {
        labels.insert(POD_TEMPLATE_GENERATION_LABEL.into(), generation.to_string());
    }
    if !hash.is_empty() {
        labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.to_string());
    }
    template
}

/// The pod to create for `node_name`, as `PodControl.CreatePods` builds it: template labels,
/// annotations and finalizers, `generateName: <ds>-`, the controller reference, and the node
/// pinned through node affinity (the scheduler does the binding).
pub fn new_pod(ds: &DaemonSet, template: &PodTemplateSpec, node_name: &str) -> Pod {
    let meta = template.metadata.clone().unwrap_or_default();
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.affinity = Some(pin_to_node(spec.affinity.take(), node_name));
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!(
                "{}-",
                ds.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: ds.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![daemon_set_reference(ds)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// Whether the node should run a pod of the DaemonSet (`should_run`) and whether a pod already
/// there may stay (`should_continue_running`), as upstream `NodeShouldRunDaemonPod`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    /// A pod should be created here if none exists.
    pub should_run: bool,
    /// An existing pod may keep running here.
    pub should_continue_running: bool,
}

/// Decides [`Placement`] for one node: the template's `nodeName` and node affinity must match;
/// `NoSchedule`/`NoExecute` taints not tolerated (after the default tolerations) stop new
/// pods, and only untolerated `NoExecute` taints remove running ones.
pub fn placement(ds: &DaemonSet, node: &Node) -> Placement {
    let mut spec = ds
        .spec
        .clone()
        .unwrap_or_default()
        .template
        .spec
        .unwrap_or_default();
    add_default_tolerations(&mut spec);
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let nowhere = Placement {
        should_run: false,
        should_continue_running: false,
    };
    if spec
        .node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != node_name)
    {
        return nowhere;
    }
    if !affinity::node_matches(&spec, node) {
        return nowhere;
    }
    let node_taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let tolerations = spec.tolerations.as_deref().unwrap_or_default();
    if taints::find_untolerated(node_taints, tolerations, taints::blocks_scheduling).is_some() {
        return Placement {
            should_run: false,
            should_continue_running: taints::find_untolerated(
                node_taints,
                tolerations,
                taints::evicts,
            )
            .is_none(),
        };
    }
    Placement {
        should_run: true,
        should_continue_running: true,
    }
}
