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
//!
//! Whatever the source, a kube-apiserver whose live DaemonSet listens behind the node's API
//! front keeps listening there ([`keep_front`]).

use k8s_openapi::api::core::v1::PodTemplateSpec;

use crate::component::Component;
use crate::control_plane::supports_port_sharing;
use crate::disruption::permits_port_sharing;
use crate::front::{FrontLayout, listening_on};
use crate::observation::DaemonSetObservation;
use crate::pivot::with_port_sharing;
use crate::version::KubeVersion;

/// `target` (rendered from a kubeadm configuration, or from the live template) kept behind the
/// node's API front where the live DaemonSet is: the kube-apiserver whose DaemonSet's
/// annotation names a layout listens on the layout's address for the DaemonSet's pods, with
/// its probes aimed there ([`listening_on`]). A configuration renders the kube-apiserver on
/// every address, and the upgrade would otherwise take it off the front; the annotation
/// itself stays, as the update writes the template only. An unreadable annotation leaves
/// `target` as it is: the pivot's expected disruption refuses it with the fix
/// ([`crate::disruption::FrontShape`]).
pub fn keep_front(
    component: Component,
    live: Option<&DaemonSetObservation>,
    mut target: PodTemplateSpec,
) -> PodTemplateSpec {
    let layout = live
        .filter(|_| component == Component::ApiServer)
        .and_then(|ds| FrontLayout::of_annotations(&ds.annotations).ok().flatten());
    if let Some(layout) = layout
        && let Some(spec) = target.spec.take()
    {
        target.spec = Some(listening_on(spec, layout.backend));
    }
    target
}

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

    /// A kube-apiserver behind the front keeps its address in the target, from either source:
    /// the live template (which listens there already) or a configuration's rendering (which
    /// listens on every address); the plan's diff then shows no change of address.
    #[test]
    fn the_target_of_a_kube_apiserver_behind_a_front_stays_behind_it() {
        use crate::front::{FRONT_ANNOTATION, bound_address, readiness_probed_at};
        use crate::observation::builder::{NEW, World, template};
        let api = Component::ApiServer;
        let world = World::steady(api, 1).behind_front();
        let live = world.obs.real.clone().expect("real");
        let backend = Some(crate::front::FrontLayout::default().backend);
        // As a configuration renders it: the target version, kubeadm's probes, no
        // --bind-address.
        let mut rendered = live_target(api, &live.template, &version(NEW));
        let spec = rendered.spec.as_mut().expect("spec");
        if let Some(command) = spec.containers[0].command.as_mut() {
            command.retain(|arg| !arg.starts_with("--bind-address"));
        }
        if let Some(get) = spec.containers[0]
            .readiness_probe
            .as_mut()
            .and_then(|p| p.http_get.as_mut())
        {
            get.host = None;
        }
        assert_eq!(bound_address(spec), None);
        let sources = [
            (
                "the live template",
                live_target(api, &live.template, &version(NEW)),
            ),
            ("a configuration", rendered),
        ];
        for (source, target) in sources {
            let kept = keep_front(api, Some(&live), target);
            let spec = kept.spec.as_ref().expect("spec");
            assert_eq!(bound_address(spec), backend, "{source}");
            assert_eq!(readiness_probed_at(spec), backend, "{source}");
            let diff = crate::render::template_diff(&live.template, &kept).expect("diff");
            assert!(!diff.contains("bind-address"), "{source}: {diff}");
            assert!(!diff.contains("host:"), "{source}: {diff}");
            assert!(diff.contains(NEW), "{source}: {diff}");
        }

        // Nothing else is moved: another component, no annotation, an unreadable one (the
        // pivot refuses it with its fix).
        let mut unreadable = live.clone();
        unreadable
            .annotations
            .insert(FRONT_ANNOTATION.into(), "127.0.0.1".into());
        let plain = World::steady(api, 1).obs.real.expect("real");
        let scheduler = World::steady(Component::Scheduler, 1).behind_front();
        let mut scheduler_ds = scheduler.obs.real.clone().expect("real");
        scheduler_ds.template = template(Component::Scheduler, NEW, true);
        for (case, component, ds) in [
            ("no annotation", api, &plain),
            ("unreadable", api, &unreadable),
            ("the scheduler", Component::Scheduler, &scheduler_ds),
        ] {
            let target = template(component, NEW, true);
            assert_eq!(
                keep_front(component, Some(ds), target.clone()),
                target,
                "{case}"
            );
        }
    }
}
