//! Which control-plane pods the report follows, and which template each runs.

use std::collections::{BTreeMap, BTreeSet};

use super::model::TemplateKind;
use crate::Component;
use crate::component::{APP_LABEL, BACKUP_LABEL};

/// The label the DaemonSet controller puts on every pod: the hash of the template revision
/// it was made from.
pub const REVISION_HASH_LABEL: &str = "controller-revision-hash";

/// Whose pod it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodOwner {
    /// The real self-hosted DaemonSet's (`k8s-app=self-hosted-<c>`).
    Real(Component),
    /// The backup DaemonSet's (`temp-upgrade-component=<c>`).
    Backup(Component),
}

impl PodOwner {
    /// The owner of a pod with these labels, if it is a self-hosted control-plane pod; other
    /// pods (prepull, add-ons, mirror pods of static pods) are not followed.
    pub fn of(labels: &BTreeMap<String, String>) -> Option<PodOwner> {
        if let Some(value) = labels.get(BACKUP_LABEL) {
            return Component::ALL
                .into_iter()
                .find(|c| c.name() == value)
                .map(PodOwner::Backup);
        }
        let value = labels.get(APP_LABEL)?;
        Component::ALL
            .into_iter()
            .find(|c| c.app_label_value() == *value)
            .map(PodOwner::Real)
    }

    /// The component.
    pub fn component(self) -> Component {
        match self {
            PodOwner::Real(c) | PodOwner::Backup(c) => c,
        }
    }

    /// The template a pod of this owner runs: a real pod whose revision hash was running when
    /// the recording started (or that has none to tell) runs the old one, any other real pod
    /// the new one. A rollback restores the old revision, so its pods count as old again.
    pub fn template(
        self,
        labels: &BTreeMap<String, String>,
        original: &BTreeSet<String>,
    ) -> TemplateKind {
        match self {
            PodOwner::Backup(_) => TemplateKind::Backup,
            PodOwner::Real(_) => match labels.get(REVISION_HASH_LABEL) {
                Some(hash) if !original.contains(hash) => TemplateKind::New,
                _ => TemplateKind::Old,
            },
        }
    }
}
