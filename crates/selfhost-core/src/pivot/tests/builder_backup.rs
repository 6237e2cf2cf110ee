//! The backup DaemonSet in the observation builder.

use std::collections::BTreeMap;

use super::builder::{NEW, Pod, UPDATE_AT, World, t, version};
use crate::backup::{BackupError, BackupOrigin, BackupRecord, backup_labels};
use crate::daemonset::self_hosted_labels;
use crate::observation::{BackupObservation, time};
use crate::pivot::BACKUP_CREATED_AT;

impl World {
    /// Our backup for [`NEW`] of the real DaemonSet's current template, created at `t(1)`,
    /// without pods yet.
    pub(crate) fn backup(self) -> Self {
        self.backup_for(NEW)
    }

    /// Our backup, made by a run towards `v`.
    pub(crate) fn backup_for(self, v: &str) -> Self {
        let original = self.obs.real.as_ref().expect("real").template.clone();
        self.backup_with(Ok(BackupRecord {
            origin: BackupOrigin::Selfhost { target: version(v) },
            original_template: original,
        }))
    }

    /// A backup left by kubeadm (no annotations).
    pub(crate) fn backup_by_kubeadm(self) -> Self {
        let mut original = self.obs.real.as_ref().expect("real").template.clone();
        original
            .metadata
            .get_or_insert_with(Default::default)
            .labels = Some(self_hosted_labels(self.obs.component));
        let mut world = self.backup_with(Ok(BackupRecord {
            origin: BackupOrigin::Kubeadm,
            original_template: original,
        }));
        world.backup_mut().daemonset.annotations.clear();
        world
    }

    /// A backup whose annotations cannot be read.
    pub(crate) fn backup_corrupt(self) -> Self {
        let name = self.obs.component.backup_name();
        self.backup_with(Err(BackupError::CorruptAnnotation {
            name,
            annotation: "selfhost.dev/original-template",
            reason: "expected value at line 1 column 1".into(),
        }))
    }

    fn backup_with(mut self, record: Result<BackupRecord, BackupError>) -> Self {
        let component = self.obs.component;
        let mut ds = self.obs.real.clone().expect("real");
        ds.name = component.backup_name();
        ds.uid = Some("uid-backup".into());
        ds.resource_version = Some("200".into());
        ds.created = Some(t(1));
        ds.annotations = BTreeMap::from([
            (
                "deprecated.daemonset.template.generation".into(),
                "1".into(),
            ),
            (BACKUP_CREATED_AT.into(), time::format(t(1))),
        ]);
        let mut template = ds.template.clone();
        template
            .metadata
            .get_or_insert_with(Default::default)
            .labels = Some(backup_labels(component));
        // Behind a front the backup listens on its own address, and says so as the real
        // DaemonSet does.
        if let Some(layout) = self.front {
            template.spec = template
                .spec
                .map(|spec| crate::front::listening_on(spec, layout.backup));
            ds.annotations.insert(
                crate::front::FRONT_ANNOTATION.into(),
                layout.to_annotation(),
            );
        }
        ds.template = template;
        ds.pods.clear();
        self.obs.backup = Some(BackupObservation {
            daemonset: ds,
            record,
        });
        self
    }

    /// A backup pod on `node`.
    pub(crate) fn backup_pod(mut self, node: &str, state: Pod) -> Self {
        let name = format!("{}-{node}", self.obs.component.backup_name());
        let pod = self.pod(&name, node, 1, state);
        self.backup_mut().daemonset.pods.push(pod);
        self
    }

    /// A backup pod serving on every node, started at `t(2)`.
    pub(crate) fn backup_serving(mut self) -> Self {
        for node in self.nodes() {
            self = self.backup_pod(&node, Pod::Serving { started: 2 });
        }
        self
    }

    /// The backup DaemonSet is being deleted since `t(seconds)`.
    pub(crate) fn backup_deleting(mut self, seconds: i64) -> Self {
        self.backup_mut().daemonset.deleting_since = Some(t(seconds));
        self
    }

    /// The backup pod on `node` is Terminating with `grace` seconds since `UPDATE_AT + 60`.
    pub(crate) fn backup_pod_terminating(mut self, node: &str, grace: i64) -> Self {
        for pod in self
            .backup_mut()
            .daemonset
            .pods
            .iter_mut()
            .filter(|p| p.node.as_deref() == Some(node))
        {
            // The deletion timestamp is when the grace period ends, as the API server sets it.
            pod.deleting_since = Some(t(UPDATE_AT + 60 + grace));
            pod.deletion_grace_seconds = Some(grace);
        }
        self
    }

    pub(crate) fn remove_backup_pods(mut self) -> Self {
        self.backup_mut().daemonset.pods.clear();
        self
    }

    /// The backup is gone entirely.
    pub(crate) fn backup_gone(mut self) -> Self {
        self.obs.backup = None;
        self
    }
}
