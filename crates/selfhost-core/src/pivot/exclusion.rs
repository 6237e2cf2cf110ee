//! Excluding nodes from the backup: the node affinity that keeps its pods off them, and the
//! record of which nodes are excluded. The backup's removal node by node (`drain.rs`) and the
//! vacating of each node during the held rollout (`vacate.rs`) both write it.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PodTemplateSpec,
};

use super::annotations::{BACKUP_DRAIN_STEP_AT, BACKUP_DRAINED_NODES};
use crate::observation::BackupObservation;

/// The node field a required node affinity can select on.
const NODE_NAME_FIELD: &str = "metadata.name";

/// The nodes recorded as excluded from the backup.
pub(super) fn drained_nodes(backup: &BackupObservation) -> BTreeSet<String> {
    backup
        .daemonset
        .annotation(BACKUP_DRAINED_NODES)
        .map(|nodes| {
            nodes
                .split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `template` with every node of `nodes` excluded from its required node affinity: each term
/// (terms are alternatives) gets `metadata.name NotIn [node]` for each node it lacks. A
/// template without required node affinity gets one term with only those requirements.
/// Idempotent, and it keeps whatever the template selected before.
pub fn exclude_nodes(template: &PodTemplateSpec, nodes: &BTreeSet<String>) -> PodTemplateSpec {
    let mut template = template.clone();
    let spec = template.spec.get_or_insert_with(Default::default);
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let required = node_affinity
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(|| NodeSelector {
            node_selector_terms: Vec::new(),
        });
    if required.node_selector_terms.is_empty() {
        required
            .node_selector_terms
            .push(NodeSelectorTerm::default());
    }
    for term in &mut required.node_selector_terms {
        let fields = term.match_fields.get_or_insert_with(Vec::new);
        for node in nodes {
            let present = fields.iter().any(|r| {
                r.key == NODE_NAME_FIELD
                    && r.operator == "NotIn"
                    && r.values.as_deref() == Some(std::slice::from_ref(node))
            });
            if !present {
                fields.push(NodeSelectorRequirement {
                    key: NODE_NAME_FIELD.to_string(),
                    operator: "NotIn".to_string(),
                    values: Some(vec![node.clone()]),
                });
            }
        }
    }
    template
}

/// Whether `backup` runs no pod because every node it would run on was vacated during the
/// rollout (a record-only backup, or one whose pods have all left before their nodes' turns),
/// not because its removal at the end has begun.
pub fn runs_as_record_only(backup: &BackupObservation) -> bool {
    backup.daemonset.pods.is_empty()
        && backup.daemonset.annotation(BACKUP_DRAINED_NODES).is_some()
        && backup.daemonset.annotation(BACKUP_DRAIN_STEP_AT).is_none()
}
