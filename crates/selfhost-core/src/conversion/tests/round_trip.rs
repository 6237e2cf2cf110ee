//! static → DaemonSet → static: what a round trip keeps, for kubeadm's manifests and as a law
//! for any extra flags.

use k8s_openapi::api::core::v1::Pod;
use proptest::prelude::*;

use super::{kubeadm_pod, spec};
use crate::command_line;
use crate::component::Component;
use crate::config::ExtraArg;
use crate::conversion::{self_hosted_daemonset, static_pod_from_template};
use crate::daemonset::DaemonSetOptions;

fn command(pod: &Pod) -> Vec<String> {
    spec(pod).containers[0].command.clone().unwrap_or_default()
}

/// Flags the DaemonSet changes on purpose and the static pod written back keeps.
const NORMALISED_FLAGS: [&str; 7] = [
    "permit-port-sharing",
    "advertise-address",
    "shutdown-delay-duration",
    "shutdown-send-retry-after",
    "leader-elect-lease-duration",
    "leader-elect-renew-deadline",
    "leader-elect-retry-period",
];

fn without_normalised(command: &[String]) -> Vec<String> {
    NORMALISED_FLAGS.iter().fold(command.to_vec(), |c, flag| {
        command_line::remove_flag(&c, flag)
    })
}

fn round_trip(component: Component, pod: &Pod, certs_in_secrets: bool) -> (Pod, Pod) {
    let options = DaemonSetOptions { certs_in_secrets };
    let ds = self_hosted_daemonset(component, pod, &options).expect("to DaemonSet");
    let template = ds.spec.expect("spec").template;
    let back = static_pod_from_template(component, &template).expect("to static");
    let again = self_hosted_daemonset(component, &back, &options).expect("to DaemonSet again");
    let again = static_pod_from_template(component, &again.spec.expect("spec").template)
        .expect("to static again");
    (back, again)
}

/// static → DaemonSet → static keeps the image, every volume and mount (host paths and their
/// types, also when certificates came from Secrets), the labels and every flag except the
/// documented seven; and a second round trip changes nothing.
fn check_round_trip(component: Component, pod: &Pod, certs_in_secrets: bool) {
    let (back, again) = round_trip(component, pod, certs_in_secrets);
    assert_eq!(
        back, again,
        "{component}: a second round trip changed the pod"
    );
    let (before, after) = (spec(pod), spec(&back));
    assert_eq!(after.containers[0].image, before.containers[0].image);
    assert_eq!(after.volumes, before.volumes, "{component} volumes");
    assert_eq!(
        after.containers[0].volume_mounts, before.containers[0].volume_mounts,
        "{component} mounts"
    );
    assert_eq!(
        without_normalised(&command(&back)),
        without_normalised(&command(pod)),
        "{component} flags"
    );
    assert_eq!(
        command_line::flag_value(&command(&back), "permit-port-sharing"),
        Some("true")
    );
    assert_eq!(back.metadata.labels, pod.metadata.labels);
    assert_eq!(back.metadata.name.as_deref(), Some(component.name()));
    assert_eq!(after.node_selector, None);
    assert_eq!(after.tolerations, None);
    assert_eq!(after.dns_policy, None);
    assert_eq!(after.host_network, Some(true));
}

#[test]
fn static_to_daemonset_to_static_keeps_what_matters() {
    for component in Component::ALL {
        for certs_in_secrets in [false, true] {
            for minor in [31, 33, 34] {
                check_round_trip(
                    component,
                    &kubeadm_pod(component, minor, vec![]),
                    certs_in_secrets,
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn round_trip_law_holds_for_any_extra_flags(
        component in prop::sample::select(Component::ALL.to_vec()),
        minor in 30u32..=34,
        certs_in_secrets in any::<bool>(),
        flags in prop::collection::btree_map("[a-z]{1,8}(-[a-z]{1,6})?", "[a-z0-9.]{0,8}", 0..4),
    ) {
        let extra = flags
            .into_iter()
            .filter(|(name, _)| !NORMALISED_FLAGS.contains(&name.as_str()))
            .map(|(n, v)| ExtraArg::new(n, v))
            .collect();
        check_round_trip(component, &kubeadm_pod(component, minor, extra), certs_in_secrets);
    }
}
