//! The inputs of one pivot decision — what was observed, where the component should go, and
//! its real DaemonSet — as the [`Pivot`] every phase's decision is a method of, with the
//! helpers those decisions share (deadlines, watches, the update of the real DaemonSet).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;

use super::annotations::{APPLIED_OVER_GENERATION, APPLIED_TEMPLATE_HASH, UPDATE_STARTED_AT};
use super::step::{Update, Watch};
use super::target::Target;
use crate::component::Component;
use crate::observation::{
    DaemonSetObservation, IDENTITY_LABEL, IDENTITY_LABEL_VALUE, Observation, time,
};
use crate::rollout::{FailureSignal, SignalPolicy, exits_count_after, template_hash};
use crate::version::KubeVersion;

/// One decision of the pivot of a component whose real DaemonSet exists: the observation, the
/// target, and that DaemonSet.
#[derive(Clone, Copy)]
pub(super) struct Pivot<'a> {
    pub(super) obs: &'a Observation,
    pub(super) target: &'a Target,
    pub(super) real: &'a DaemonSetObservation,
}

impl Pivot<'_> {
    pub(super) fn component(&self) -> Component {
        self.obs.component
    }

    pub(super) fn version(&self) -> &KubeVersion {
        &self.target.version
    }

    pub(super) fn now(&self) -> Timestamp {
        self.obs.now
    }

    pub(super) fn resume_command(&self) -> String {
        format!("selfhost apply {}", self.version())
    }

    /// The crash-loop policy for pods that should be healthy.
    pub(super) fn strict_signals(&self) -> SignalPolicy {
        SignalPolicy {
            crash_loop_restarts: self.target.options.crash_loop_restarts,
            ignore_crash_loops: false,
            exits_count_after: Some(self.exits_count_after()),
        }
    }

    /// From when exits count towards a crash loop: not before this run watched the API, nor
    /// while (or just after) it saw the API unreachable.
    pub(super) fn exits_count_after(&self) -> Timestamp {
        exits_count_after(self.target.run_started_at, self.obs.api.unreachable_until)
    }

    /// `base + deadline`, where the clock never starts before this run did.
    pub(super) fn deadline_after(&self, base: Option<Timestamp>, factor: u32) -> Timestamp {
        let start = base.map_or(self.target.run_started_at, |b| {
            b.max(self.target.run_started_at)
        });
        time::after(start, self.target.options.deadline.saturating_mul(factor))
    }

    /// When selfhost updated the real DaemonSet, from its annotation.
    pub(super) fn update_started_at(&self) -> Option<Timestamp> {
        self.real
            .annotation(UPDATE_STARTED_AT)
            .and_then(time::parse)
    }

    /// The watches common to waits on the real DaemonSet's pods.
    pub(super) fn watches(&self, with_backup: bool) -> Vec<Watch> {
        let component = self.component();
        let mut watch = vec![
            Watch::DaemonSet {
                name: component.daemonset_name(),
            },
            Watch::Pods {
                selector: component.label_query(),
            },
        ];
        if with_backup {
            watch.push(Watch::DaemonSet {
                name: component.backup_name(),
            });
            watch.push(Watch::Pods {
                selector: component.backup_label_query(),
            });
        }
        watch.push(Watch::Nodes);
        watch.extend(self.lease_watch());
        watch
    }

    pub(super) fn lease_watch(&self) -> Option<Watch> {
        match self.component().leader_lease_name() {
            Some(name) => Some(Watch::Lease {
                name: name.to_string(),
            }),
            None => Some(Watch::Leases {
                selector: format!("{IDENTITY_LABEL}={IDENTITY_LABEL_VALUE}"),
            }),
        }
    }

    /// A PUT of the real DaemonSet with `template`, recording that we applied it.
    pub(super) fn update(
        &self,
        template: &PodTemplateSpec,
        set: &[(&str, String)],
        remove: &[&str],
    ) -> Update {
        let over = self
            .real
            .template_generation
            .or(self.real.generation)
            .unwrap_or(0);
        let mut set_annotations = BTreeMap::from([
            (APPLIED_TEMPLATE_HASH.to_string(), template_hash(template)),
            (APPLIED_OVER_GENERATION.to_string(), over.to_string()),
        ]);
        set_annotations.extend(set.iter().map(|(k, v)| (k.to_string(), v.clone())));
        Update {
            name: self.real.name.clone(),
            resource_version: self.real.resource_version.clone(),
            template: Box::new(template.clone()),
            set_annotations,
            remove_annotations: remove.iter().map(|k| k.to_string()).collect(),
            update_strategy: None,
        }
    }

    /// The shortened grace period, in seconds.
    pub(super) fn shortened_grace_seconds(&self) -> i64 {
        i64::try_from(self.target.options.shortened_grace.as_secs()).unwrap_or(i64::MAX)
    }
}

/// The signals as one line.
pub(super) fn describe(signals: &[FailureSignal]) -> String {
    signals
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
