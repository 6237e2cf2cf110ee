//! The target template of a component on a cluster without a kubeadm configuration (no
//! `--config`, no `kube-system/kubeadm-config`): the live DaemonSet's template with the
//! component's image moved to the target version and, where the live template lacks it,
//! `--permit-port-sharing=true`.
//!
//! The flag is what lets the new pods bind their port next to the backup's (the backup gets
//! it from the same version check, see [`crate::pivot::backup_daemonset`]): a target without
//! it could never be rolled out by the pivot. It cannot be added to the live DaemonSet by hand
//! instead: editing a self-hosted controller-manager's or scheduler's template rolls it out
//! by deleting its pods, and on one node the deleted pod is the only process that could
//! recreate (or schedule) its replacement. So the target carries it, as every DaemonSet
//! selfhost renders does, and the upgrade's own pivot rolls it out; the plan's diff shows it.

use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::component::Component;
use crate::control_plane::supports_port_sharing;
use crate::disruption::permits_port_sharing;
use crate::pivot::with_port_sharing;
use crate::version::KubeVersion;

/// The target of `component` at `version` made from its `live` template: [`bump_images`],
/// with `--permit-port-sharing=true` added when the live template does not pass it and
/// `version` knows the flag.
pub fn live_target(
    component: Component,
    live: &PodTemplateSpec,
    version: &KubeVersion,
) -> PodTemplateSpec {
    let target = bump_images(component, live, version);
    if permits_port_sharing(&target, component) || !supports_port_sharing(version) {
        return target;
    }
    with_port_sharing(target, component)
}

/// Whether [`live_target`] added `--permit-port-sharing=true` to what the live template runs.
pub fn adds_port_sharing(
    component: Component,
    live: &PodTemplateSpec,
    target: &PodTemplateSpec,
) -> bool {
    !permits_port_sharing(live, component) && permits_port_sharing(target, component)
}

/// The live template with the component's image tag moved to `version`; every other field is
/// kept as it is.
pub fn bump_images(
    component: Component,
    live: &PodTemplateSpec,
    version: &KubeVersion,
) -> PodTemplateSpec {
    let mut template = live.clone();
    let suffix = format!("/{}", component.name());
    for container in template
        .spec
        .iter_mut()
        .flat_map(|s| s.containers.iter_mut())
    {
        let Some(image) = container.image.as_mut() else {
            continue;
        };
        let (repository, _) = image.rsplit_once(':').unwrap_or((image.as_str(), ""));
        if repository.ends_with(&suffix) || repository == component.name() {
            *image = format!("{repository}:{}", version.image_tag());
        }
    }
    template
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    use super::*;
    use crate::command_line;

    fn version(v: &str) -> KubeVersion {
        KubeVersion::parse(v).expect("version")
    }

    /// A live template of the controller-manager at v1.32.4, its flags in `command` or `args`.
    fn live(command: &[&str], args: &[&str]) -> PodTemplateSpec {
        let words = |w: &[&str]| (!w.is_empty()).then(|| w.iter().map(|s| s.to_string()).collect());
        PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "kube-controller-manager".into(),
                    image: Some("registry.k8s.io/kube-controller-manager:v1.32.4".into()),
                    command: words(command),
                    args: words(args),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
        }
    }

    fn words(template: &PodTemplateSpec) -> (Vec<String>, Vec<String>) {
        let c = &template.spec.as_ref().expect("spec").containers[0];
        (
            c.command.clone().unwrap_or_default(),
            c.args.clone().unwrap_or_default(),
        )
    }

    /// (case, live command, live args, target version) → (command, args) of the target.
    #[test]
    fn the_target_moves_the_image_and_shares_the_port() {
        let cm = Component::ControllerManager;
        type Line = &'static [&'static str];
        let cases: [(&str, Line, Line, &str, Line, Line); 5] = [
            (
                "kubeadm's style: flags in the command",
                &["kube-controller-manager", "--leader-elect=true"],
                &[],
                "v1.33.1",
                &[
                    "kube-controller-manager",
                    "--leader-elect=true",
                    "--permit-port-sharing=true",
                ],
                &[],
            ),
            (
                "flags in the args",
                &["kube-controller-manager"],
                &["--leader-elect=true"],
                "v1.33.1",
                &["kube-controller-manager"],
                &["--leader-elect=true", "--permit-port-sharing=true"],
            ),
            (
                "already there: kept as it is",
                &["kube-controller-manager", "--permit-port-sharing=true"],
                &[],
                "v1.33.1",
                &["kube-controller-manager", "--permit-port-sharing=true"],
                &[],
            ),
            (
                "turned off: turned on, the target could not roll out otherwise",
                &["kube-controller-manager", "--permit-port-sharing=false"],
                &[],
                "v1.33.1",
                &["kube-controller-manager", "--permit-port-sharing=true"],
                &[],
            ),
            (
                "a target before 1.19 does not know the flag: left out",
                &["kube-controller-manager"],
                &[],
                "v1.18.20",
                &["kube-controller-manager"],
                &[],
            ),
        ];
        for (case, command, args, to, want_command, want_args) in cases {
            let live = live(command, args);
            let target = live_target(cm, &live, &version(to));
            let (got_command, got_args) = words(&target);
            assert_eq!(
                (got_command, got_args),
                (
                    want_command.iter().map(|s| s.to_string()).collect(),
                    want_args.iter().map(|s| s.to_string()).collect(),
                ),
                "{case}"
            );
            let image = target.spec.as_ref().expect("spec").containers[0]
                .image
                .clone();
            assert_eq!(
                image.as_deref(),
                Some(format!("registry.k8s.io/kube-controller-manager:{to}").as_str()),
                "{case}"
            );
            let added = command_line::template_flag(&live, cm.name(), "permit-port-sharing")
                .as_deref()
                != Some("true")
                && to != "v1.18.20";
            assert_eq!(adds_port_sharing(cm, &live, &target), added, "{case}");
            assert_eq!(
                live_target(cm, &target, &version(to)),
                target,
                "{case}: a second run renders the same target"
            );
        }
    }
}
