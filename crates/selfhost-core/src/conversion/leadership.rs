//! The leader Lease of a controller-manager or scheduler whose process has gone, handed over
//! by a conversion as the upgrade hands it over: the same rule ([`crate::pivot::lease_hand_over`])
//! and the same step for the engine's executor.

use serde::Serialize;

/// A leader Lease to delete (with its resourceVersion as precondition) because its holder's
/// process is confirmed gone: a standby then takes it on its next retry instead of after a
/// whole lease duration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseHandOver {
    /// The Lease.
    pub lease: String,
    /// Precondition: its uid, if known.
    pub uid: Option<String>,
    /// Precondition: its resourceVersion as observed.
    pub resource_version: String,
    /// The holder whose process is gone.
    pub holder: String,
    /// The evidence that it is gone.
    pub why: String,
}

impl LeaseHandOver {
    /// The hand-over the upgrade's rule finds in `obs`, if any (see
    /// [`crate::pivot::lease_hand_over`]).
    pub fn find(obs: &crate::observation::Observation) -> Option<LeaseHandOver> {
        match crate::pivot::lease_hand_over(obs)? {
            crate::pivot::Step::HandOverLease {
                lease,
                uid,
                resource_version,
                holder,
                why,
            } => Some(LeaseHandOver {
                lease,
                uid,
                resource_version,
                holder,
                why,
            }),
            _ => None,
        }
    }

    /// The same hand-over as the upgrade's step, for its executor.
    pub fn to_step(&self) -> crate::pivot::Step {
        crate::pivot::Step::HandOverLease {
            lease: self.lease.clone(),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            holder: self.holder.clone(),
            why: self.why.clone(),
        }
    }
}
