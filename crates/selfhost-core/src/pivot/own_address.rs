//! A kube-apiserver that listens on an address of its own answers its own probes.
//!
//! The kubelet's readiness probe of a host-network pod reaches whatever listens at the
//! address it asks. On a shared port that can be another process (`serving.rs`), which is why
//! Ready alone proves nothing there. Behind the node's API front the DaemonSet's pods listen
//! on one loopback address and the backup's on another, each with its probes aimed at its own
//! ([`crate::front::listening_on`]): where no other kube-apiserver process of the node may
//! listen at a pod's address, its Ready is its own answer, and so its own `/readyz` passing.
//!
//! Where a pod listens is read from the template it was made from: the backup's for the
//! backup's pods, the real DaemonSet's for its current pods, the original template the backup
//! records for the real DaemonSet's older pods. A pod whose template is not known (a
//! conversion's static pods, a real pod with no readable record beside it) listens where
//! nothing can tell, and so may listen anywhere.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::component::Component;
use crate::front::{bound_address, readiness_probed_at};
use crate::observation::{ContainerState, Observation, PodObservation};

/// The template `pod` was made from, if the observation tells.
pub(super) fn template_of<'a>(
    obs: &'a Observation,
    pod: &PodObservation,
) -> Option<&'a PodTemplateSpec> {
    let is = |p: &PodObservation| p.uid == pod.uid && p.name == pod.name;
    if let Some(backup) = obs.backup.as_ref()
        && backup.daemonset.pods.iter().any(is)
    {
        return Some(&backup.daemonset.template);
    }
    let real = obs.real.as_ref()?;
    if !real.pods.iter().any(is) {
        return None;
    }
    if real.is_current(pod) {
        return Some(&real.template);
    }
    obs.backup
        .as_ref()
        .and_then(|b| b.record.as_ref().ok())
        .map(|record| &record.original_template)
}

/// The address `pod`'s kube-apiserver answers its readiness probe on by itself, if it does:
/// its template binds a specific address and aims the readiness probe there, and no other
/// kube-apiserver process of its node may listen at that address.
pub(super) fn own_address(obs: &Observation, pod: &PodObservation) -> Option<IpAddr> {
    if obs.component != Component::ApiServer {
        return None;
    }
    let address = listening_address(obs, pod)?;
    let node = pod.node.as_deref()?;
    let shared = obs
        .all_pods()
        .filter(|other| !(other.uid == pod.uid && other.name == pod.name))
        .filter(|other| other.node.as_deref() == Some(node) && may_listen(obs, other))
        .any(|other| listening_address(obs, other).is_none_or(|a| a == address));
    (!shared).then_some(address)
}

/// Where `pod`'s kube-apiserver listens and is probed, when both are one specific address.
fn listening_address(obs: &Observation, pod: &PodObservation) -> Option<IpAddr> {
    let spec = template_of(obs, pod)?.spec.as_ref()?;
    let address = bound_address(spec)?;
    (readiness_probed_at(spec) == Some(address)).then_some(address)
}

/// Whether `pod`'s main process may be listening: it runs, or its state is unknown.
fn may_listen(obs: &Observation, pod: &PodObservation) -> bool {
    pod.main_container(obs.component.name()).is_none_or(|c| {
        matches!(
            c.state,
            ContainerState::Running { .. } | ContainerState::Unknown
        )
    })
}
