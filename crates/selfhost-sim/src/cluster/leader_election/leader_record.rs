//! What a leader-election Lease says, read from and written to the Lease's spec.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// What a leader-election Lease says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaderRecord {
    pub holder: String,
    pub lease_duration_seconds: i32,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    pub transitions: i32,
}

impl LeaderRecord {
    /// The record a Lease holds (an empty one for a Lease without a spec).
    pub fn of(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        LeaderRecord {
            holder: spec.holder_identity.unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            transitions: spec.lease_transitions.unwrap_or_default(),
        }
    }

    /// The Lease spec that holds this record.
    pub fn spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.transitions),
            ..LeaseSpec::default()
        }
    }

    /// What a releasing holder writes: no holder, a one-second duration, the transitions kept.
    pub fn released(&self, now: Timestamp) -> Self {
        LeaderRecord {
            holder: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(now),
            renew_time: Some(now),
            transitions: self.transitions,
        }
    }
}
