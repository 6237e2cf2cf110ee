//! The Lease models of the simulated cluster, driven through kube-rs: leader election of the
//! controller-manager and the scheduler (who holds, renewals, the leaderless gap of a
//! hand-over, deliberate hand-overs, crash loops after an API outage) and the identity Leases
//! of kube-apiserver processes.
//!
//! Timings are [`SimTimings::scaled`] by 100 (a leader Lease lasts 150 ms, renewals every
//! 20 ms) unless a test needs a longer Lease to tell two outcomes apart. Gaps are asserted in
//! bands: never shorter than the model allows, and at most a few lease durations on a loaded
//! machine.

mod election;
mod flags;
mod identity;
mod kubeadm;
mod outage;

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use selfhost_sim::cluster::{
    LEADER_LEASE_NAMESPACE, LeaderElectionTimings, Leadership, ProcessRef, Role, leader_lease_name,
};
use selfhost_sim::{SimCluster, SimTimings};
use tokio::time::Instant;

pub use crate::cluster::{DEADLINE, start};

/// Both roles.
pub const ROLES: [Role; 2] = [Role::ControllerManager, Role::Scheduler];

/// The clock of these tests.
pub fn timings() -> SimTimings {
    SimTimings::scaled(100)
}

/// [`timings`] with a leader Lease of `lease` (renew deadline at two thirds of it), for tests
/// that must tell a Lease duration from a retry period.
pub fn timings_with_lease(lease: Duration) -> SimTimings {
    let mut t = timings();
    t.leader_election = LeaderElectionTimings {
        lease_duration: lease,
        renew_deadline: lease * 2 / 3,
        ..t.leader_election
    };
    t
}

/// Waits until `check` holds, failing after [`DEADLINE`].
pub async fn wait_until(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// The process acting for `role`, if one does.
pub fn holder(cluster: &SimCluster, role: Role) -> Option<ProcessRef> {
    match cluster.leader(role) {
        Leadership::Held(p) => Some(p),
        _ => None,
    }
}

/// Waits until some process acts for `role` and returns it.
pub async fn wait_for_holder(cluster: &SimCluster, role: Role) -> ProcessRef {
    wait_until(&format!("a {} leader", role.binary()), || {
        holder(cluster, role).is_some()
    })
    .await;
    holder(cluster, role).expect("a leader")
}

/// Waits until a process other than `old` acts for `role` and returns it.
pub async fn wait_for_new_holder(cluster: &SimCluster, role: Role, old: &ProcessRef) -> ProcessRef {
    wait_until(&format!("a new {} leader", role.binary()), || {
        holder(cluster, role).is_some_and(|p| p.identity != old.identity)
    })
    .await;
    holder(cluster, role).expect("a leader")
}

/// The role's leader-election Lease, read over HTTP.
pub async fn leader_lease(cluster: &SimCluster, role: Role) -> Option<Lease> {
    let api: Api<Lease> = Api::namespaced(cluster.client(), LEADER_LEASE_NAMESPACE);
    api.get_opt(leader_lease_name(role))
        .await
        .expect("lease get")
}

/// The holder identity a Lease names.
pub fn lease_holder(lease: &Lease) -> Option<String> {
    lease.spec.as_ref()?.holder_identity.clone()
}

/// A static pod manifest of a node, to remove (stopping the pod) and write back.
pub struct Manifest {
    path: PathBuf,
    saved: Vec<u8>,
}

impl Manifest {
    /// Removes `<component>.yaml` from `node`'s manifests directory.
    pub fn remove(cluster: &SimCluster, node: &str, component: &str) -> Manifest {
        let dir = cluster.manifests_dir(node).expect("a manifests directory");
        let path = dir.join(format!("{component}.yaml"));
        let saved = std::fs::read(&path).expect("the manifest exists");
        std::fs::remove_file(&path).expect("the manifest is removed");
        Manifest { path, saved }
    }

    /// Writes it back.
    pub fn restore(self) {
        std::fs::write(&self.path, self.saved).expect("the manifest is written back");
    }
}

/// Asserts `gap` lies within `[low, high]`, naming what it is.
pub fn assert_within(what: &str, gap: Duration, low: Duration, high: Duration) {
    assert!(
        gap >= low && gap <= high,
        "{what}: {gap:?} is outside [{low:?}, {high:?}]"
    );
}
