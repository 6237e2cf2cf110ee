//! A backup this run did not make: left by kubeadm's self-hosted upgrade, made by a run
//! towards another version, or one whose record cannot be read. kubeadm's is adopted: our
//! annotations are written onto it, recording the template it copied. The others are taken
//! over only with `--force`; without it the run refuses.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::annotations::BACKUP_CREATED_AT;
use super::decision_inputs::Pivot;
use super::step::Step;
use crate::backup::{
    BackupError, BackupRecord, ORIGINAL_TEMPLATE_ANNOTATION, TARGET_VERSION_ANNOTATION,
};
use crate::daemonset::self_hosted_labels;
use crate::observation::{BackupObservation, time};
use crate::version::KubeVersion;

/// A backup this run takes over.
pub(super) enum Adoption<'a> {
    /// kubeadm's self-hosted upgrade left it, recording the template it copied.
    Kubeadm(&'a BackupRecord),
    /// Its record cannot be read, and `--force` takes it over as a backup of its own template.
    Unreadable(&'a BackupError),
    /// A run towards this other version made it, and `--force` takes it over.
    OtherTarget(&'a KubeVersion, &'a BackupRecord),
}

/// A backup this run must not take over without `--force`.
pub(super) enum Blocking<'a> {
    /// Its record cannot be read.
    Unreadable(&'a BackupError),
    /// A run towards this other version made it: that upgrade is in progress.
    OtherTarget(&'a KubeVersion),
}

impl Pivot<'_> {
    /// Takes the backup over: our annotations, recording the target and the template it is a
    /// backup of, written onto it.
    pub(super) fn adopting(&self, backup: &BackupObservation, adoption: Adoption<'_>) -> Step {
        match adoption {
            Adoption::Kubeadm(record) => self.adopt(
                backup,
                &record.original_template,
                "left by kubeadm's self-hosted upgrade (no annotations): adopted as a backup of \
                 the template it copied"
                    .into(),
            ),
            Adoption::Unreadable(error) => {
                let mut original = backup.daemonset.template.clone();
                original
                    .metadata
                    .get_or_insert_with(Default::default)
                    .labels = Some(self_hosted_labels(self.component()));
                self.adopt(
                    backup,
                    &original,
                    format!(
                        "its record is unreadable ({error}); taken over with --force as a \
                         backup of its own template"
                    ),
                )
            }
            Adoption::OtherTarget(target, record) => self.adopt(
                backup,
                &record.original_template,
                format!(
                    "made for {target}; taken over for {} with --force",
                    self.version()
                ),
            ),
        }
    }

    /// Refuses a backup this run must not take over without `--force`.
    pub(super) fn blocked_by_backup(
        &self,
        backup: &BackupObservation,
        blocking: Blocking<'_>,
    ) -> Step {
        let name = &backup.daemonset.name;
        match blocking {
            Blocking::Unreadable(error) => Step::Refuse {
                reason: error.to_string(),
                fix: format!(
                    "if no upgrade is running and every {} pod is Ready, delete it \
                     (`kubectl -n kube-system delete ds {name}`); or re-run with --force \
                     to treat it as a backup of its own template",
                    self.real.name
                ),
            },
            Blocking::OtherTarget(target) => Step::Refuse {
                reason: format!(
                    "an upgrade of {} to {target} is in progress (backup {name} exists)",
                    self.component()
                ),
                fix: format!(
                    "finish it with `selfhost apply {target}`, or take it over with \
                     `selfhost apply {} --force` (a rollback still restores the template \
                     it saved)",
                    self.version()
                ),
            },
        }
    }

    fn adopt(&self, backup: &BackupObservation, original: &PodTemplateSpec, why: String) -> Step {
        // Serialising a PodTemplateSpec cannot fail (strings, numbers, maps, lists only).
        let original = serde_json::to_string(original).unwrap_or_default();
        Step::AdoptBackup {
            name: backup.daemonset.name.clone(),
            resource_version: backup.daemonset.resource_version.clone(),
            annotations: BTreeMap::from([
                (
                    TARGET_VERSION_ANNOTATION.to_string(),
                    self.version().to_string(),
                ),
                (ORIGINAL_TEMPLATE_ANNOTATION.to_string(), original),
                (BACKUP_CREATED_AT.to_string(), time::format(self.now())),
            ]),
            why,
        }
    }
}
