//! A stopping kube-apiserver's shutdown delay: how long it keeps its port, failing `/readyz`
//! on purpose, before it leaves. The held rollout (`vacate.rs`) and the shortening of a
//! lingering pod's grace (`linger.rs`) both wait it out.

use std::time::Duration;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::decision_inputs::Pivot;
use super::own_address::template_of;
use crate::command_line::template_flag;
use crate::component::Component;
use crate::config::go_duration;
use crate::daemonset::SHUTDOWN_DELAY;
use crate::observation::{PodObservation, time};

/// The kube-apiserver flag that keeps a stopping process serving, `/readyz` failing.
const SHUTDOWN_DELAY_FLAG: &str = "shutdown-delay-duration";

impl Pivot<'_> {
    /// When a Terminating pod's shutdown delay is over: its deletion (the deletion timestamp
    /// less the grace it was given) plus its `--shutdown-delay-duration`.
    pub(super) fn delay_over_at(&self, pod: &PodObservation) -> Option<Timestamp> {
        let ends = pod.deleting_since?;
        let grace = pod.deletion_grace_seconds.unwrap_or(0);
        let deleted = ends.checked_sub(SignedDuration::from_secs(grace)).ok()?;
        Some(time::after(deleted, self.shutdown_delay(pod)))
    }

    /// The grace to delete `old` with where nothing on its node needs it once its shutdown
    /// delay is over: that delay, in whole seconds rounded up (a grace must not end inside
    /// it), plus the shortened grace, at most its own grace. With the delay in seconds.
    pub(super) fn delay_then_shortened_grace(&self, old: &PodObservation) -> (i64, i64) {
        let own = old
            .termination_grace_seconds
            .unwrap_or(crate::daemonset::APISERVER_GRACE_SECONDS);
        let delay = self.shutdown_delay(old);
        let delay = i64::try_from(delay.as_secs() + u64::from(delay.subsec_nanos() > 0))
            .unwrap_or(i64::MAX);
        (
            own.min(delay.saturating_add(self.shortened_grace_seconds())),
            delay,
        )
    }

    /// `pod`'s `--shutdown-delay-duration`, read from the template it was created from (the
    /// real DaemonSet's for its current pods, the saved original for its old ones, the
    /// backup's for the backup's): none when the template sets no flag (the kube-apiserver's
    /// own default); the delay selfhost's templates set when the template is not known or its
    /// value cannot be read.
    pub(super) fn shutdown_delay(&self, pod: &PodObservation) -> Duration {
        template_of(self.obs, pod)
            .and_then(|t| template_shutdown_delay(t, self.component()))
            .unwrap_or_else(|| go_duration(SHUTDOWN_DELAY).unwrap_or(Duration::from_secs(5)))
    }
}

/// The `--shutdown-delay-duration` a template's component runs with: zero without the flag;
/// `None` when its value cannot be read.
fn template_shutdown_delay(template: &PodTemplateSpec, component: Component) -> Option<Duration> {
    let Some(value) = template_flag(template, component.name(), SHUTDOWN_DELAY_FLAG) else {
        return Some(Duration::ZERO);
    };
    if value.trim() == "0" || value.trim() == "0s" {
        return Some(Duration::ZERO);
    }
    go_duration(&value).ok()
}
