//! The status manager of one pod: writes what the pod worker reports to the pod in the API
//! (or to a static pod's mirror pod) as soon as it changes, retries while the API is down,
//! never writes what is already there, and deletes a gracefully deleted pod once its worker
//! has stopped every process (grace period 0, uid precondition), as the kubelet does.

use k8s_openapi::api::core::v1::PodStatus;
use kube::Client;
use tokio::sync::watch;

use super::api::{Outage, PodTarget, delete_pod, write_status};
use super::config::timing;
use super::worker::PodReport;

/// Where the status goes, as the agent sees it now.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StatusTarget {
    pub pod: PodTarget,
    /// The status the API holds, as last watched.
    pub observed: Option<PodStatus>,
    /// The pod is being deleted: remove it once the worker has finished.
    pub delete_when_finished: bool,
}

/// What to do next, given the latest report and target and what was done already.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    Write(PodTarget, Box<PodStatus>),
    Delete(PodTarget),
    Idle,
}

/// Decides the next API request.
pub(crate) fn next_step(
    report: Option<&PodReport>,
    target: Option<&StatusTarget>,
    written: Option<&(String, PodStatus)>,
    deleted: Option<&str>,
) -> Step {
    let (Some(report), Some(target)) = (report, target) else {
        return Step::Idle;
    };
    let uid = &target.pod.uid;
    let already = written
        .is_some_and(|(w_uid, w_status)| w_uid == uid && *w_status == report.status)
        || target.observed.as_ref() == Some(&report.status);
    if !already {
        return Step::Write(target.pod.clone(), Box::new(report.status.clone()));
    }
    if report.finished && target.delete_when_finished && deleted != Some(uid.as_str()) {
        return Step::Delete(target.pod.clone());
    }
    Step::Idle
}

/// Runs until both the worker and the agent let go of the pod.
pub(crate) async fn run(
    client: Client,
    label: String,
    mut reports: watch::Receiver<Option<PodReport>>,
    mut targets: watch::Receiver<Option<StatusTarget>>,
) {
    let mut written: Option<(String, PodStatus)> = None;
    let mut deleted: Option<String> = None;
    let mut outage = Outage::default();
    let (mut reports_open, mut targets_open) = (true, true);
    loop {
        let report = reports.borrow_and_update().clone();
        let target = targets.borrow_and_update().clone();
        let step = next_step(
            report.as_ref(),
            target.as_ref(),
            written.as_ref(),
            deleted.as_deref(),
        );
        let retry = match step {
            Step::Write(pod, status) => match write_status(&client, &pod, &status).await {
                Ok(()) => {
                    outage.succeeded("write a pod status");
                    tracing::debug!(pod = %label, phase = ?status.phase, "status written");
                    written = Some((pod.uid, *status));
                    // Maybe a deletion follows at once.
                    continue;
                }
                // Gone, or replaced by a pod with another uid: wait for the agent's news.
                Err(e) if matches!(e.api_status(), Some(404 | 409 | 422)) => {
                    tracing::debug!(pod = %label, error = %e, "status not written");
                    written = Some((pod.uid, *status));
                    false
                }
                Err(error) => {
                    outage.failed(&error);
                    true
                }
            },
            Step::Delete(pod) => match delete_pod(&client, &pod).await {
                Ok(()) => {
                    outage.succeeded("delete a pod");
                    tracing::info!(pod = %label, "deleted the pod from the API");
                    deleted = Some(pod.uid);
                    false
                }
                Err(error) => {
                    outage.failed(&error);
                    true
                }
            },
            Step::Idle => false,
        };
        if !reports_open && !targets_open {
            return;
        }
        tokio::select! {
            changed = reports.changed(), if reports_open => reports_open = changed.is_ok(),
            changed = targets.changed(), if targets_open => targets_open = changed.is_ok(),
            () = tokio::time::sleep(timing::API_RETRY), if retry => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(phase: &str) -> PodStatus {
        PodStatus {
            phase: Some(phase.into()),
            ..PodStatus::default()
        }
    }

    fn target(uid: &str, observed: Option<PodStatus>, delete: bool) -> StatusTarget {
        StatusTarget {
            pod: PodTarget {
                namespace: "ns".into(),
                name: "p".into(),
                uid: uid.into(),
            },
            observed,
            delete_when_finished: delete,
        }
    }

    #[test]
    fn writes_what_changed_and_deletes_when_finished() {
        let running = PodReport {
            status: status("Running"),
            finished: false,
        };
        let finished = PodReport {
            status: status("Running"),
            finished: true,
        };
        let written = ("u1".to_string(), status("Running"));
        let cases = [
            (None, Some(target("u1", None, false)), None, None, "idle"),
            (Some(&running), None, None, None, "idle"),
            (
                Some(&running),
                Some(target("u1", None, false)),
                None,
                None,
                "write",
            ),
            (
                Some(&running),
                Some(target("u1", None, false)),
                Some(&written),
                None,
                "idle",
            ),
            // The API holds it already (a restarted kubelet).
            (
                Some(&running),
                Some(target("u1", Some(status("Running")), false)),
                None,
                None,
                "idle",
            ),
            // A new mirror pod gets the status again.
            (
                Some(&running),
                Some(target("u2", None, false)),
                Some(&written),
                None,
                "write",
            ),
            (
                Some(&finished),
                Some(target("u1", None, true)),
                Some(&written),
                None,
                "delete",
            ),
            (
                Some(&finished),
                Some(target("u1", None, true)),
                Some(&written),
                Some("u1"),
                "idle",
            ),
            (
                Some(&finished),
                Some(target("u1", None, false)),
                Some(&written),
                None,
                "idle",
            ),
        ];
        for (i, (report, target, written, deleted, expected)) in cases.into_iter().enumerate() {
            let step = next_step(report, target.as_ref(), written, deleted);
            let kind = match step {
                Step::Write(..) => "write",
                Step::Delete(_) => "delete",
                Step::Idle => "idle",
            };
            assert_eq!(kind, expected, "case {i}");
        }
    }
}
