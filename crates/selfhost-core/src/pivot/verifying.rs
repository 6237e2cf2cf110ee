//! The verifying phase: no backup, and the real DaemonSet on the target — the end of a pivot,
//! or a component that needed none. Its rollout completes, a dead leader's Lease is handed
//! over, and the component is verified: `/readyz` and `/version` for the kube-apiserver, a
//! leader that is a new process for the others (`new_leader.rs`).

use super::decision_inputs::{Pivot, describe};
use super::leader::{leader_record, lease_hand_over};
use super::new_leader::leader_is_new_process;
use super::step::{Step, Wait, Watch};
use crate::component::Component;
use crate::rollout::{failure_signals, rollout_progress};
use crate::version::KubeVersion;

impl Pivot<'_> {
    /// The real DaemonSet is on the target and no backup exists: the end of a pivot, or a
    /// component that needed none.
    pub(super) fn verifying(&self) -> Step {
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
}
