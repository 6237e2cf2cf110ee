//! `next_step`: the decision, in the order the pivot moves.
//!
//! Without a backup:
//! 1. real on target → hand a dead leader's Lease over, wait for the rollout, verify, done;
//! 2. real not on target → a rollback made by this run ends it ([`Step::RolledBack`]);
//!    otherwise the start checks (pods, nodes, convergence, port sharing) and the backup.
//!
//! With a backup (see `phases.rs`; the old pods replaced in `replacing.rs`):
//! 1. being deleted → wait until gone (shortening what can safely be shortened);
//! 2. unreadable, kubeadm's, or for another target → refuse, or adopt (kubeadm's; `--force`);
//! 3. a rollback of ours newer than the backup, real back on the original → finish it;
//! 4. real on target → rollout (the apiserver's held node by node, each node vacated of the
//!    backup first: `vacate.rs`): fail → roll back; complete → remove the backup;
//! 5. otherwise → wait until the backup serves everywhere, then update the real DaemonSet
//!    (a record-only backup, the kube-apiserver's on two nodes or more, runs no pod: nothing
//!    to wait for, `vacate.rs`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;

use super::annotations::{
    APPLIED_OVER_GENERATION, APPLIED_TEMPLATE_HASH, BACKUP_CREATED_AT, BACKUP_DRAIN_STEP_AT,
    BACKUP_IDENTITIES, HELD_UPDATE_STRATEGY, ROLLBACK_REASON, ROLLBACK_STARTED_AT,
    UPDATE_STARTED_AT, template_applied,
};
use super::backup_template::backup_daemonset;
use super::leader::{leader_record, lease_hand_over};
use super::new_leader::leader_is_new_process;
use super::recorded::RecordedIdentity;
use super::serving::{Serving, pod_serves};
use super::step::{Step, Update, Wait, Watch};
use super::target::Target;
use crate::backup::{BackupOrigin, ORIGINAL_TEMPLATE_ANNOTATION, TARGET_VERSION_ANNOTATION};
use crate::component::Component;
use crate::daemonset::self_hosted_labels;
use crate::disruption::{ClusterShape, expected_disruption};
use crate::observation::{
    BackupObservation, DaemonSetObservation, IDENTITY_LABEL, IDENTITY_LABEL_VALUE, NodeReadiness,
    Observation, time,
};
use crate::rollout::{
    SignalPolicy, exits_count_after, failure_signals, rollout_progress, stuck, template_hash,
};
use crate::version::KubeVersion;

/// The one thing to do next for the observed component to reach `target`.
pub fn next_step(obs: &Observation, target: &Target) -> Step {
    let Some(real) = obs.real.as_ref() else {
        return missing_real(obs);
    };
    let cx = Cx { obs, target, real };
    match obs.backup.as_ref() {
        None => cx.without_backup(),
        Some(backup) => cx.with_backup(backup),
    }
}

fn missing_real(obs: &Observation) -> Step {
    let name = obs.component.daemonset_name();
    match &obs.backup {
        None => Step::Refuse {
            reason: format!(
                "DaemonSet kube-system/{name} does not exist: {} is not self-hosted",
                obs.component
            ),
            fix: "convert the control plane first: `selfhost convert to-self-hosted`".into(),
        },
        Some(backup) => Step::Refuse {
            reason: format!(
                "the backup {} exists but the real DaemonSet kube-system/{name} is gone; the \
                 backup is what keeps {} running",
                backup.daemonset.name, obs.component
            ),
            fix: format!(
                "recreate {name} from the backup's {ORIGINAL_TEMPLATE_ANNOTATION} annotation \
                 (`kubectl -n kube-system get ds {} -o yaml`), then re-run",
                backup.daemonset.name
            ),
        },
    }
}

/// The observation and target of one decision, with the helpers every phase uses.
pub(super) struct Cx<'a> {
    pub(super) obs: &'a Observation,
    pub(super) target: &'a Target,
    pub(super) real: &'a DaemonSetObservation,
}

impl<'a> Cx<'a> {
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

    /// The update to the target, starting the rollout clock, recording which identity holder
    /// is each backup pod's (for a run that resumes this one: `recorded.rs`), and holding the
    /// rollout where the controller must not pace it (see `hold.rs`).
    pub(super) fn update_to_target(&self, backup: &BackupObservation) -> Step {
        let mut set = vec![(UPDATE_STARTED_AT, time::format(self.now()))];
        let mut remove = vec![ROLLBACK_STARTED_AT, ROLLBACK_REASON];
        match backup_identities(self.obs, self.target, backup) {
            Some(record) => set.push((BACKUP_IDENTITIES, record)),
            // A record left by an earlier upgrade names pods long gone; drop it.
            None => remove.push(BACKUP_IDENTITIES),
        }
        let hold = self.hold_on_update();
        if let Some((_, recorded)) = &hold {
            set.push((HELD_UPDATE_STRATEGY, recorded.clone()));
        }
        let mut update = self.update(&self.target.template, &set, &remove);
        update.update_strategy = hold.map(|(strategy, _)| strategy);
        Step::UpdateReal(update)
    }

    /// The update that restores `original`, recording the rollback and why; a held rollout
    /// gets its own strategy back in the same write, so the DaemonSet controller replaces the
    /// failed pods by itself.
    pub(super) fn roll_back(&self, original: &PodTemplateSpec, reason: String) -> Step {
        let recorded: String = reason.chars().take(1024).collect();
        let held = self.held_strategy();
        let release: &[&str] = if held.is_some() {
            &[HELD_UPDATE_STRATEGY]
        } else {
            &[]
        };
        let mut update = self.update(
            original,
            &[
                (ROLLBACK_STARTED_AT, time::format(self.now())),
                (ROLLBACK_REASON, recorded),
            ],
            release,
        );
        update.update_strategy = held;
        Step::RollBack { update, reason }
    }

    fn without_backup(&self) -> Step {
        // A hold with no backup beside it (the backup removed by hand mid-rollout): the
        // controller must pace the rollout again, whatever comes next.
        if let Some(step) = self.release_hold(
            "the rollout was held for the backup's sake, and no backup exists any more",
        ) {
            return step;
        }
        // Before the check for pods: a pod of a rolled-back DaemonSet may be between its
        // deletion and its re-creation.
        if let Some(at) = self
            .real
            .annotation(ROLLBACK_STARTED_AT)
            .and_then(time::parse)
            && at >= self.target.run_started_at
        {
            return self.finish_rolled_back(at);
        }
        if self.real.pods.is_empty() || self.real.status.desired == 0 {
            return Step::Refuse {
                reason: format!(
                    "{} has no pods: {} runs on no node, so there is nothing to hand over",
                    self.real.name,
                    self.component()
                ),
                fix: format!(
                    "check the DaemonSet's node selector, tolerations and events: `kubectl -n \
                     kube-system describe ds {}`",
                    self.real.name
                ),
            };
        }
        if template_applied(self.real, &self.target.template) {
            return self.finish_without_backup();
        }
        if let Some(refusal) = self.start_refusal() {
            return refusal;
        }
        match backup_daemonset(self.real, self.component(), self.version(), self.now()) {
            // On two nodes or more the kube-apiserver's backup is a record only (`vacate.rs`).
            Ok(daemonset) if self.backup_runs_no_pod() => Step::CreateBackup {
                daemonset: Box::new(self.record_only(daemonset)),
            },
            Ok(daemonset) => Step::CreateBackup {
                daemonset: Box::new(daemonset),
            },
            Err(error) => Step::Refuse {
                reason: error.to_string(),
                fix: format!("repair {} first", self.real.name),
            },
        }
    }

    /// The real DaemonSet is on the target and no backup exists: the end of a pivot, or a
    /// component that needed none.
    fn finish_without_backup(&self) -> Step {
        if let Some(step) = lease_hand_over(self.obs) {
            return step;
        }
        let progress = rollout_progress(self.obs, self.real);
        let base = self.update_started_at();
        if !progress.is_complete() {
            let current = self
                .real
                .pods
                .iter()
                .filter(|pod| self.real.is_current(pod));
            let signals = failure_signals(current, self.strict_signals());
            let deadline = self.deadline_after(base, 1);
            let failure = if !signals.is_empty() {
                Some(describe(&signals))
            } else if self.now() >= deadline {
                Some(format!(
                    "the rollout did not complete by {deadline}: {}",
                    progress.pending.join("; ")
                ))
            } else {
                None
            };
            if let Some(reason) = failure {
                return Step::Failed {
                    reason,
                    state: format!(
                        "{} is on the target template but not healthy, and no backup exists, \
                         so there is nothing to roll back to",
                        self.real.name
                    ),
                    resume: format!(
                        "repair the failing pods (`kubectl -n kube-system describe ds {}`), \
                         then `{}`",
                        self.real.name,
                        self.resume_command()
                    ),
                };
            }
            return Step::WaitForRollout(Wait {
                condition: format!(
                    "every pod of {} on the target template and Ready",
                    self.real.name
                ),
                pending: progress.pending,
                watch: self.watches(false),
                recheck_at: Some(deadline),
                deadline: Some(deadline),
            });
        }
        let deadline = self.deadline_after(base, 2);
        match self.verification() {
            Ok(summary) => leader_record(self.obs, self.real).unwrap_or(Step::Done { summary }),
            Err(pending) if self.now() >= deadline => Step::Failed {
                reason: format!("verification did not pass by {deadline}: {pending}"),
                state: format!(
                    "{} runs the target template on every node, but {} is not verified",
                    self.real.name,
                    self.component()
                ),
                resume: self.resume_command(),
            },
            Err(pending) => Step::Verify(Wait {
                condition: match self.component() {
                    Component::ApiServer => {
                        format!("/readyz answers ok and /version reports {}", self.version())
                    }
                    _ => format!("the {} leader is a new process", self.component()),
                },
                pending: vec![pending],
                watch: match self.component() {
                    Component::ApiServer => vec![Watch::ApiHealth],
                    _ => self.watches(false),
                },
                recheck_at: Some(deadline),
                deadline: Some(deadline),
            }),
        }
    }

    fn verification(&self) -> Result<String, String> {
        match self.component() {
            Component::ApiServer => {
                let api = &self.obs.api;
                if !api.readyz_ok {
                    return Err(format!(
                        "/readyz is not ok{}",
                        api.readyz_detail
                            .as_deref()
                            .map(|d| format!(": {d}"))
                            .unwrap_or_default()
                    ));
                }
                let reported = api.git_version.as_deref().unwrap_or("nothing");
                match KubeVersion::from_git_version(reported) {
                    Ok(version) if &version == self.version() => Ok(format!(
                        "{} runs {} on every node; /readyz ok, /version {reported}",
                        self.component(),
                        self.version()
                    )),
                    _ => Err(format!(
                        "/version reports {reported}, not {}",
                        self.version()
                    )),
                }
            }
            Component::ControllerManager | Component::Scheduler => {
                leader_is_new_process(self.obs, self.target, self.real).map(|()| {
                    format!(
                        "{} runs {} on every node, led by a new process",
                        self.component(),
                        self.version()
                    )
                })
            }
        }
    }

    /// Why the pivot must not start, or not yet (a wait), if so: checked only before the
    /// backup exists.
    fn start_refusal(&self) -> Option<Step> {
        let not_ready: Vec<String> = self
            .obs
            .nodes
            .iter()
            .filter(|node| node.ready != NodeReadiness::Ready)
            .map(|node| match &node.ready {
                NodeReadiness::NotReady { reason: Some(r) } => format!("{} ({r})", node.name),
                _ => node.name.clone(),
            })
            .collect();
        if !not_ready.is_empty() {
            return Some(Step::Refuse {
                reason: format!(
                    "control-plane node(s) not Ready: {}; a hand-over there could not be \
                     verified",
                    not_ready.join(", ")
                ),
                fix: "bring the node(s) back (check the kubelet) or remove them from the \
                      cluster, then re-run"
                    .into(),
            });
        }
        let progress = rollout_progress(self.obs, self.real);
        if !progress.is_complete() {
            // Pods that restart on their own (a controller whose node's kube-apiserver was
            // just replaced exits and is restarted) converge by waiting; a pod that cannot
            // start, or a wait past the deadline, needs the operator.
            let stuck = self.real.pods.iter().find_map(stuck);
            let deadline = self.deadline_after(None, 1);
            if stuck.is_none() && self.now() < deadline {
                return Some(Step::WaitForRollout(Wait {
                    condition: format!("{} converged before its pivot starts", self.real.name),
                    pending: progress.pending,
                    watch: self.watches(false),
                    recheck_at: Some(deadline),
                    deadline: Some(deadline),
                }));
            }
            return Some(Step::Refuse {
                reason: format!(
                    "{} has not converged: {}",
                    self.real.name,
                    progress.pending.join("; ")
                ),
                fix: format!(
                    "wait for it or repair the failing pods (`kubectl -n kube-system rollout \
                     status ds/{}`), then re-run",
                    self.real.name
                ),
            });
        }
        let shape = ClusterShape::observe(self.obs, &self.target.template);
        let expected = expected_disruption(self.component(), &shape);
        if let Some(blocked) = expected.blocked {
            return Some(Step::Refuse {
                reason: blocked,
                fix: expected.fix.unwrap_or_default(),
            });
        }
        if expected.requires_accept_downtime && !self.target.options.accept_downtime {
            return Some(Step::Refuse {
                reason: expected.explanation.join("; "),
                fix: expected.fix.unwrap_or_default(),
            });
        }
        None
    }

    fn with_backup(&self, backup: &BackupObservation) -> Step {
        if backup.daemonset.deleting_since.is_some() {
            return self.backup_going(backup);
        }
        if backup.daemonset.annotation(BACKUP_DRAIN_STEP_AT).is_some() {
            return self.draining(backup);
        }
        let name = &backup.daemonset.name;
        let record = match &backup.record {
            Ok(record) => record,
            Err(error) if self.target.options.force => {
                let mut original = backup.daemonset.template.clone();
                original
                    .metadata
                    .get_or_insert_with(Default::default)
                    .labels = Some(self_hosted_labels(self.component()));
                return self.adopt(
                    backup,
                    &original,
                    format!(
                        "its record is unreadable ({error}); taken over with --force as a \
                         backup of its own template"
                    ),
                );
            }
            Err(error) => {
                return Step::Refuse {
                    reason: error.to_string(),
                    fix: format!(
                        "if no upgrade is running and every {} pod is Ready, delete it \
                         (`kubectl -n kube-system delete ds {name}`); or re-run with --force \
                         to treat it as a backup of its own template",
                        self.real.name
                    ),
                };
            }
        };
        match &record.origin {
            BackupOrigin::Kubeadm => {
                return self.adopt(
                    backup,
                    &record.original_template,
                    "left by kubeadm's self-hosted upgrade (no annotations): adopted as a backup \
                     of the template it copied"
                        .into(),
                );
            }
            BackupOrigin::Selfhost { target } if target != self.version() => {
                if self.target.options.force {
                    return self.adopt(
                        backup,
                        &record.original_template,
                        format!(
                            "made for {target}; taken over for {} with --force",
                            self.version()
                        ),
                    );
                }
                return Step::Refuse {
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
                };
            }
            BackupOrigin::Selfhost { .. } => {}
        }
        let original = &record.original_template;
        let created = backup
            .daemonset
            .annotation(BACKUP_CREATED_AT)
            .and_then(time::parse)
            .or(backup.daemonset.created);
        let rollback_at = self
            .real
            .annotation(ROLLBACK_STARTED_AT)
            .and_then(time::parse);
        let rolling_back = rollback_at.is_some_and(|at| created.is_none_or(|c| at >= c))
            && template_applied(self.real, original);
        if rolling_back {
            self.rolling_back(backup, rollback_at)
        } else if template_applied(self.real, &self.target.template) {
            self.rolling_out(backup, original)
        } else {
            self.backing_up(backup, original, created)
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

/// The signals as one line.
pub(super) fn describe(signals: &[crate::rollout::FailureSignal]) -> String {
    signals
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The record of every backup pod that serves by an attributed identity now (or by a record
/// that still holds): the value of [`BACKUP_IDENTITIES`], `None` when there is none.
fn backup_identities(
    obs: &Observation,
    target: &Target,
    backup: &BackupObservation,
) -> Option<String> {
    let name = obs.component.name();
    let records: Vec<RecordedIdentity> = backup
        .daemonset
        .pods
        .iter()
        .filter(|pod| !pod.is_terminating())
        .filter_map(|pod| {
            let (lease, holder) = match pod_serves(obs, target, pod) {
                Ok(Serving::Identity { lease, holder } | Serving::Recorded { lease, holder }) => {
                    (lease, holder)
                }
                _ => return None,
            };
            Some(RecordedIdentity {
                pod_uid: pod.uid.clone()?,
                node: pod.node.clone()?,
                process_started_at: time::format(pod.process_started_at(name)?),
                restarts: pod.main_container(name)?.restart_count,
                lease,
                holder,
            })
        })
        .collect();
    if records.is_empty() {
        return None;
    }
    // Serialising strings and integers cannot fail.
    serde_json::to_string(&records).ok()
}
