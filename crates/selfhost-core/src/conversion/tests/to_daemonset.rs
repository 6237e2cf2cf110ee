//! The self-hosted DaemonSet made from a static manifest: gated, sharing its port, and the
//! manifests it cannot be made from.

use super::{kubeadm_pod, spec};
use crate::component::Component;
use crate::config::ExtraArg;
use crate::conversion::{gate_daemonset, is_gated, permits_port_sharing, self_hosted_daemonset};
use crate::daemonset::DaemonSetOptions;

#[test]
fn the_daemonset_is_gated_and_shares_its_port() {
    let no_sharing = vec![ExtraArg::new("permit-port-sharing", "false")];
    for component in Component::ALL {
        let pod = kubeadm_pod(component, 33, no_sharing.clone());
        assert!(!permits_port_sharing(spec(&pod)), "{component}");
        let ds = self_hosted_daemonset(component, &pod, &DaemonSetOptions::default()).expect("ds");
        let template = ds.spec.as_ref().expect("spec").template.spec.as_ref();
        assert!(is_gated(component, template), "{component}");
        assert!(permits_port_sharing(template.expect("spec")), "{component}");
        let strategy = ds.spec.as_ref().and_then(|s| s.update_strategy.clone());
        assert_eq!(
            strategy.and_then(|s| s.type_).as_deref(),
            Some("RollingUpdate"),
            "a new DaemonSet keeps kubeadm's strategy"
        );
    }
}

#[test]
fn gating_a_live_daemonset_stops_it_rolling_by_itself() {
    let pod = kubeadm_pod(Component::ApiServer, 33, vec![]);
    let mut ds = crate::daemonset::build_daemonset(Component::ApiServer, &pod, &Default::default())
        .expect("ds");
    ds.metadata.resource_version = Some("42".into());
    assert!(!is_gated(
        Component::ApiServer,
        ds.spec.as_ref().and_then(|s| s.template.spec.as_ref())
    ));
    let gated = gate_daemonset(Component::ApiServer, ds);
    let spec = gated.spec.expect("spec");
    assert!(is_gated(Component::ApiServer, spec.template.spec.as_ref()));
    assert_eq!(
        spec.update_strategy.and_then(|s| s.type_).as_deref(),
        Some("OnDelete")
    );
}

#[test]
fn manifests_that_cannot_be_converted_say_why() {
    let mut wrong = kubeadm_pod(Component::Scheduler, 33, vec![]);
    let err = self_hosted_daemonset(Component::ApiServer, &wrong, &Default::default())
        .expect_err("a scheduler is not an apiserver");
    assert!(err.to_string().contains("runs \"kube-scheduler\""), "{err}");
    wrong.spec.as_mut().expect("spec").containers.clear();
    let err = self_hosted_daemonset(Component::Scheduler, &wrong, &Default::default())
        .expect_err("no container");
    assert!(err.to_string().contains("no container"), "{err}");
}
