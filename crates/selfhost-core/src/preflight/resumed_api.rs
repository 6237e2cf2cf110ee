//! The API's health on a resume, when `/readyz` says no.
//!
//! A fresh run needs `/readyz` ok: nothing of ours is moving, so a failing check is the
//! cluster's own trouble. A resumed run is different: it was stopped in the middle of the
//! apiserver's pivot, and its own hand-over has processes on the shared port that answer
//! `/readyz` with 500 on purpose — an old kube-apiserver in its `--shutdown-delay-duration`
//! ("[-]shutdown failed", so that load balancers drain it while it still serves every
//! request), or a new one that has not finished starting ("informer-sync",
//! "poststarthook/..."). One such answer must not refuse the run that would finish or roll
//! back that very hand-over.
//!
//! So on a resume — our backup for this very target exists for some component — preflight
//! judges the API by what it can prove instead: the API answered the reads this preflight
//! is made of (an observation exists only when it did), and some kube-apiserver serves by
//! its own identity Lease, renewed within [`IDENTITY_FRESHNESS`] (a process renews it only
//! while it serves). On a cluster that publishes no identity Leases (as the pivot's own
//! fallback judges it: none renewed while apiservers have run longer than the freshness
//! window), a Ready apiserver pod whose process has run longer than the default soak stands in. Anything
//! less refuses, as before. The pivot itself then proves every pod it relies on again
//! before it acts.

use crate::component::Component;
use crate::observation::{IDENTITY_FRESHNESS, Observation, time};
use crate::observation::{IdentityPublishing, identity_publishing};
use crate::pivot::DEFAULT_IDENTITY_FALLBACK_SOAK;
use crate::version::KubeVersion;

use super::{ClusterObservation, resuming};

/// On a resume towards `version`, what shows that the API serves although `/readyz` said
/// no; `None` on a fresh run or without such evidence.
pub(super) fn serves_despite_readyz(
    cluster: &ClusterObservation,
    version: &KubeVersion,
) -> Option<String> {
    if !cluster.components.iter().any(|o| resuming(o, version)) {
        return None;
    }
    let obs = cluster.component(Component::ApiServer)?;
    let mut holders: Vec<&str> = obs
        .identity_leases
        .iter()
        .filter(|s| s.is_fresh(obs.now))
        .map(|s| s.holder.as_str())
        .collect();
    holders.sort_unstable();
    holders.dedup();
    if !holders.is_empty() {
        return Some(format!(
            "the API answers reads, and {} kube-apiserver process(es) renewed their identity \
             Lease within the last {} s",
            holders.len(),
            IDENTITY_FRESHNESS.as_secs()
        ));
    }
    if identity_publishing(obs) != IdentityPublishing::NotPublished {
        return None;
    }
    let soaked = soaked_apiservers(obs);
    (soaked > 0).then(|| {
        format!(
            "the API answers reads, and {soaked} kube-apiserver pod(s) are Ready with their \
             process running for over {} s (this cluster publishes no identity Leases)",
            DEFAULT_IDENTITY_FALLBACK_SOAK.as_secs()
        )
    })
}

/// Running kube-apiserver pods that are Ready and whose process has run for longer than the
/// default soak.
fn soaked_apiservers(obs: &Observation) -> usize {
    let name = Component::ApiServer.name();
    obs.all_pods()
        .filter(|pod| pod.ready && !pod.is_terminating())
        .filter_map(|pod| pod.process_started_at(name))
        .filter(|started| time::age(obs.now, *started) >= DEFAULT_IDENTITY_FALLBACK_SOAK)
        .count()
}
