//! Leadership around every step of a conversion: the step a phase decides gives way to a
//! Lease's hand-over, or waits for a leader.

use super::node_component::NodeComponent;
use super::step::ConvertStep;
use super::wait::wait;

/// Leadership comes first: a Lease whose holder is confirmed gone is handed over before any
/// other step but a refusal (every moment it stays held is a moment without a leader, and
/// the DaemonSet controller and garbage collector this run relies on are the leader's), and
/// nothing is done (or put back) while no leader holds the Lease.
pub(super) fn with_leader(obs: &NodeComponent, step: ConvertStep) -> ConvertStep {
    if matches!(step, ConvertStep::Refuse { .. }) {
        return step;
    }
    if let Some(hand_over) = &obs.lease_hand_over {
        return ConvertStep::HandOverLease(hand_over.clone());
    }
    if let Some(wait) = leader_too_new_to_stop(obs, &step) {
        return wait;
    }
    match (&step, &obs.leader) {
        (ConvertStep::Done { .. } | ConvertStep::RolledBack { .. }, Err(why)) => wait(
            obs,
            &format!("a leader of {}", obs.component),
            vec![why.clone()],
        ),
        _ => step,
    }
}

/// A step that stops a process of the component on the node waits while the leader there
/// acquired its Lease within the current second. The kubelet reports container start times
/// in whole seconds, so a process started in that same second could not be told from the
/// holder, and the Lease of a holder that is not proven gone is never handed over: stopping
/// it now would leave the Lease to expire (a whole lease duration without a leader). From the
/// next second on, any process that starts is provably newer.
fn leader_too_new_to_stop(obs: &NodeComponent, step: &ConvertStep) -> Option<ConvertStep> {
    let stops_a_process = matches!(
        step,
        ConvertStep::AddPortSharing
            | ConvertStep::MoveManifestAside
            | ConvertStep::RestoreManifest
            | ConvertStep::RemoveManifest
            | ConvertStep::UnlabelNode { .. }
    );
    let acquired = obs.leader_here_acquired?;
    if !stops_a_process || acquired.as_second() != obs.now.as_second() {
        return None;
    }
    Some(wait(
        obs,
        &format!(
            "the {} leader on {} to hold its Lease into the next second before it is stopped",
            obs.component, obs.node
        ),
        vec![format!(
            "it acquired the Lease at {acquired}: a process started within that second could not \
             be told from it by whole-second start times, and its Lease would be left to expire"
        )],
    ))
}
