//! Where the pivot has nothing to work on: no real DaemonSet, or one that runs on no node.

use super::decision_inputs::Pivot;
use super::step::Step;
use crate::backup::ORIGINAL_TEMPLATE_ANNOTATION;
use crate::observation::Observation;

/// The real DaemonSet does not exist: the component is not self-hosted, or only its backup
/// is left.
pub(super) fn missing_real(obs: &Observation) -> Step {
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

impl Pivot<'_> {
    /// The real DaemonSet runs on no node: there is nothing to hand over.
    pub(super) fn no_pods(&self) -> Step {
        Step::Refuse {
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
        }
    }
}
