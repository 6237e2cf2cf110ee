//! The backup DaemonSet of the pivot, and how to read one back.
//!
//! While the real DaemonSet rolls, a copy of it under another name and selector keeps every
//! node served. kubeadm made that copy with a shallow struct copy that wrote through to the
//! live object's selector; here the live object is only borrowed and the backup is a new
//! value. The backup also remembers what it is a backup of: the target version of the run that
//! made it and the original pod template, so that a resumed run knows where it was going and a
//! rollback knows exactly what to restore.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::component::{BACKUP_LABEL, Component, NAMESPACE};
use crate::daemonset::self_hosted_labels;
use crate::version::KubeVersion;

/// Prefix of every annotation selfhost writes.
pub const ANNOTATION_PREFIX: &str = "selfhost.dev/";
/// Annotation on the backup: the version the run that created it upgrades to.
pub const TARGET_VERSION_ANNOTATION: &str = "selfhost.dev/target-version";
/// Annotation on the backup: the real DaemonSet's pod template before the upgrade, as JSON.
pub const ORIGINAL_TEMPLATE_ANNOTATION: &str = "selfhost.dev/original-template";

/// Annotations the API server or kubectl maintain on a DaemonSet; copying them to another
/// object would make them lie.
const SERVER_MANAGED_ANNOTATIONS: &[&str] = &[
    "deprecated.daemonset.template.generation",
    "kubectl.kubernetes.io/last-applied-configuration",
];

/// Labels of the backup DaemonSet, its selector and its pods: `temp-upgrade-component=<c>`.
pub fn backup_labels(component: Component) -> BTreeMap<String, String> {
    BTreeMap::from([(BACKUP_LABEL.to_string(), component.name().to_string())])
}

/// Why a backup could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackupError {
    /// The live DaemonSet has no spec to copy.
    #[error("DaemonSet {name} has no spec; it cannot be backed up")]
    NoSpec {
        /// Name of the DaemonSet.
        name: String,
    },
    /// The saved template annotation is not a pod template.
    #[error(
        "backup DaemonSet {name} has an unreadable {annotation} annotation ({reason}); it was edited \
         by hand or by another tool. Inspect it with `kubectl -n kube-system get ds {name} -o yaml`"
    )]
    CorruptAnnotation {
        /// Name of the backup DaemonSet.
        name: String,
        /// The annotation that could not be read.
        annotation: &'static str,
        /// What was wrong with it.
        reason: String,
    },
}

/// Where a backup came from, which decides what a run may do with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BackupOrigin {
    /// Created by selfhost for an upgrade to this version.
    Selfhost {
        /// The target version recorded on the backup.
        target: KubeVersion,
    },
    /// Created by kubeadm's self-hosted upgrade (no annotations): a copy of the template that
    /// was current when it was made.
    Kubeadm,
}

/// What a backup DaemonSet says about the upgrade that made it.
#[derive(Debug, Clone, PartialEq)]
pub struct BackupRecord {
    /// Who made it and for which target.
    pub origin: BackupOrigin,
    /// The real DaemonSet's pod template before the upgrade.
    pub original_template: PodTemplateSpec,
}

/// Derives the backup DaemonSet `temp-upgrade-self-hosted-<c>` from the live real one.
///
/// The copy keeps the pod spec, update strategy and user annotations; it drops server-set
/// metadata (uid, resourceVersion, generation, ownerReferences, managedFields...) and status;
/// its labels, selector and pod labels are exactly kubeadm's `temp-upgrade-component=<c>`, so
/// that its pods are never counted as the real DaemonSet's.
pub fn derive_backup(
    live: &DaemonSet,
    component: Component,
    target: &KubeVersion,
) -> Result<DaemonSet, BackupError> {
    let spec = live.spec.as_ref().ok_or_else(|| BackupError::NoSpec {
        name: live
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| component.daemonset_name()),
    })?;
    let original = spec.template.clone();
    // Serialising a PodTemplateSpec cannot fail: it holds only strings, numbers, maps and
    // lists with string keys.
    let original_json = serde_json::to_string(&original).unwrap_or_default();

    let mut annotations: BTreeMap<String, String> = live
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| {
            !SERVER_MANAGED_ANNOTATIONS.contains(&key.as_str())
                && !key.starts_with(ANNOTATION_PREFIX)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.insert(TARGET_VERSION_ANNOTATION.to_string(), target.to_string());
    annotations.insert(ORIGINAL_TEMPLATE_ANNOTATION.to_string(), original_json);

    let mut template = original;
    template
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels = Some(backup_labels(component));

    Ok(DaemonSet {
        metadata: ObjectMeta {
            name: Some(component.backup_name()),
            namespace: Some(NAMESPACE.to_string()),
            labels: Some(backup_labels(component)),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(backup_labels(component)),
                match_expressions: None,
            },
            template,
            update_strategy: spec.update_strategy.clone(),
            min_ready_seconds: spec.min_ready_seconds,
            revision_history_limit: spec.revision_history_limit,
        }),
        status: None,
    })
}

/// Whether `ds` is the backup DaemonSet of `component` (by name and label).
pub fn is_backup_of(ds: &DaemonSet, component: Component) -> bool {
    ds.metadata.name.as_deref() == Some(component.backup_name().as_str())
        && ds
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(BACKUP_LABEL))
            .map(String::as_str)
            == Some(component.name())
}

/// Reads back what a backup records: its origin and the original pod template.
///
/// A backup without our annotations was left by kubeadm; kubeadm copied the template that was
/// current, so that template with the real DaemonSet's labels restored is the original.
pub fn read_backup(backup: &DaemonSet, component: Component) -> Result<BackupRecord, BackupError> {
    let name = backup
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| component.backup_name());
    let annotations = backup.metadata.annotations.clone().unwrap_or_default();
    let corrupt = |annotation: &'static str, reason: String| BackupError::CorruptAnnotation {
        name: name.clone(),
        annotation,
        reason,
    };

    match (
        annotations.get(ORIGINAL_TEMPLATE_ANNOTATION),
        annotations.get(TARGET_VERSION_ANNOTATION),
    ) {
        (Some(template), Some(target)) => {
            let original_template = serde_json::from_str(template)
                .map_err(|e| corrupt(ORIGINAL_TEMPLATE_ANNOTATION, e.to_string()))?;
            let target = KubeVersion::parse(target)
                .map_err(|e| corrupt(TARGET_VERSION_ANNOTATION, e.to_string()))?;
            Ok(BackupRecord {
                origin: BackupOrigin::Selfhost { target },
                original_template,
            })
        }
        (None, None) => {
            let spec = backup
                .spec
                .as_ref()
                .ok_or_else(|| BackupError::NoSpec { name: name.clone() })?;
            let mut template = spec.template.clone();
            template
                .metadata
                .get_or_insert_with(ObjectMeta::default)
                .labels = Some(self_hosted_labels(component));
            Ok(BackupRecord {
                origin: BackupOrigin::Kubeadm,
                original_template: template,
            })
        }
        (Some(_), None) => Err(corrupt(TARGET_VERSION_ANNOTATION, "missing".into())),
        (None, Some(_)) => Err(corrupt(ORIGINAL_TEMPLATE_ANNOTATION, "missing".into())),
    }
}

#[cfg(test)]
mod tests;
