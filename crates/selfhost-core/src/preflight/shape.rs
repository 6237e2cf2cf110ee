//! `daemonset-shape`: a DaemonSet edited by hand can still be rolling and Ready, yet not be
//! something the pivot can safely take over. Each finding names what was edited and how to
//! undo it.

use std::collections::BTreeSet;

use super::{CheckId, PreflightTarget, Report, Verdict};
use crate::component::APP_LABEL;
use crate::observation::{DaemonSetObservation, Observation};

/// Labels and annotations by which other tools mark what they manage, with the tool's name.
const MANAGER_MARKS: [(&str, &str); 5] = [
    ("meta.helm.sh/release-name", "Helm"),
    ("argocd.argoproj.io/instance", "Argo CD"),
    ("argocd.argoproj.io/tracking-id", "Argo CD"),
    ("kustomize.toolkit.fluxcd.io/name", "Flux"),
    ("helm.toolkit.fluxcd.io/name", "Flux"),
];

/// The conventional label naming the manager; kubeadm and selfhost are at home here.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// Which other tool manages the DaemonSet, with the mark that says so.
fn other_manager(ds: &DaemonSetObservation) -> Option<(String, String)> {
    if let Some(by) = ds.labels.get(MANAGED_BY)
        && !["selfhost", "kubeadm"].contains(&by.to_ascii_lowercase().as_str())
    {
        return Some((by.clone(), format!("label {MANAGED_BY}={by}")));
    }
    MANAGER_MARKS.iter().find_map(|(key, tool)| {
        ds.labels
            .get(*key)
            .or_else(|| ds.annotations.get(*key))
            .map(|value| (tool.to_string(), format!("{key}={value}")))
    })
}

/// Adds the shape check of one component, if its DaemonSet exists.
pub(super) fn check(report: &mut Report, obs: &Observation, target: &PreflightTarget) {
    let Some(real) = &obs.real else { return };
    let component = obs.component;
    let name = &real.name;
    let app = component.app_label_value();
    let mut add = |verdict, message: String, fix: String| {
        report.add(
            CheckId::DaemonSetShape,
            Some(component),
            verdict,
            message,
            Some(fix),
        );
    };
    let restore = format!(
        "restore it from `selfhost manifests {} --as daemonsets`",
        target.version
    );
    let forceable = if target.flags.force {
        Verdict::Warn
    } else {
        Verdict::Fail
    };
    let mut found = false;

    if real.selector.get(APP_LABEL) != Some(&app) {
        found = true;
        let shown: Vec<String> = real
            .selector
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        add(
            Verdict::Fail,
            format!(
                "{name} selects its pods by {{{}}}, not by {APP_LABEL}={app}, the label selfhost \
                 (like kubeadm) finds {component}'s pods by",
                shown.join(", ")
            ),
            format!("recreate it with the selector {APP_LABEL}={app}: {restore}"),
        );
    }

    let containers = real
        .template
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    let component_image = |image: &str| {
        let repository = image.rsplit_once(':').map_or(image, |(r, _)| r);
        repository == component.name() || repository.ends_with(&format!("/{}", component.name()))
    };
    if !containers
        .iter()
        .any(|c| c.image.as_deref().is_some_and(component_image))
    {
        found = true;
        let running: Vec<String> = containers
            .iter()
            .map(|c| format!("{} ({})", c.name, c.image.as_deref().unwrap_or("no image")))
            .collect();
        add(
            Verdict::Fail,
            format!(
                "{name} runs no {component} container (it runs: {})",
                if running.is_empty() {
                    "nothing".to_string()
                } else {
                    running.join(", ")
                }
            ),
            format!("put the {component} container back: {restore}"),
        );
    }

    if let Some(target_spec) = target
        .templates
        .get(&component)
        .and_then(|t| t.spec.as_ref())
    {
        let kept: BTreeSet<&str> = target_spec
            .containers
            .iter()
            .chain(target_spec.init_containers.iter().flatten())
            .map(|c| c.name.as_str())
            .collect();
        let live_init = real
            .template
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_deref())
            .unwrap_or_default();
        let dropped: Vec<String> = containers
            .iter()
            .chain(live_init)
            .filter(|c| !kept.contains(c.name.as_str()))
            .map(|c| format!("{} ({})", c.name, c.image.as_deref().unwrap_or("no image")))
            .collect();
        if !dropped.is_empty() {
            found = true;
            add(
                forceable,
                format!(
                    "{name} runs container(s) the target template does not have, so the upgrade \
                     would remove them: {}",
                    dropped.join(", ")
                ),
                "add them to the target (a kubeadm configuration cannot express them: remove them \
                 by hand first), or pass --force to let the upgrade remove them"
                    .to_string(),
            );
        }
    }

    if let Some((tool, mark)) = other_manager(real) {
        found = true;
        add(
            forceable,
            format!(
                "{name} is managed by {tool} ({mark}): it would undo the upgrade at its next \
                 sync, or the upgrade would undo its change"
            ),
            format!(
                "upgrade through {tool}, or, if it no longer manages {name}, remove the mark or \
                 pass --force"
            ),
        );
    }

    if !found {
        report.add(
            CheckId::DaemonSetShape,
            Some(component),
            Verdict::Pass,
            format!("{name}: its {component} container and selector are as selfhost expects"),
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Container;

    use super::super::{ClusterObservation, PreflightReport, preflight};
    use super::*;
    use crate::component::Component;
    use crate::observation::builder::{NEW, OLD, World, template, version};
    use crate::skew::{ApiServerVersion, KubeletVersion, SUPPORTED_VERSIONS, SkewFlags};

    type Edit = fn(&mut DaemonSetObservation);

    /// A healthy three-node cluster on [`OLD`] whose scheduler DaemonSet `edit` changed.
    fn cluster_with(edit: Edit) -> ClusterObservation {
        let nodes = 1..=3;
        ClusterObservation {
            components: Component::ALL
                .into_iter()
                .map(|c| {
                    let mut world = World::steady(c, 3);
                    if c == Component::Scheduler {
                        edit(world.real_mut());
                    }
                    world.build()
                })
                .collect(),
            apiserver_versions: nodes
                .clone()
                .map(|i| ApiServerVersion {
                    name: format!("cp-{i}"),
                    version: version(OLD),
                })
                .collect(),
            kubelets: nodes
                .map(|i| KubeletVersion {
                    node: format!("cp-{i}"),
                    version: OLD.to_string(),
                })
                .collect(),
            api_usage: None,
            certificates: None,
            etcd: None,
        }
    }

    fn target(force: bool) -> PreflightTarget {
        PreflightTarget {
            version: version(NEW),
            templates: Component::ALL
                .into_iter()
                .map(|c| (c, template(c, NEW, true)))
                .collect(),
            templates_edited_in: None,
            flags: SkewFlags {
                force,
                ..SkewFlags::default()
            },
            accept_downtime: false,
            supported: SUPPORTED_VERSIONS,
            certificate_warning: crate::preflight::DEFAULT_CERTIFICATE_WARNING,
        }
    }

    fn shape_of(report: &PreflightReport, component: Component) -> Vec<(Verdict, String)> {
        report
            .checks
            .iter()
            .filter(|c| c.id == CheckId::DaemonSetShape && c.component == Some(component))
            .map(|c| {
                (
                    c.verdict,
                    format!("{} | {}", c.message, c.fix.clone().unwrap_or_default()),
                )
            })
            .collect()
    }

    #[test]
    fn each_odd_shape_is_named_with_its_fix() {
        let sidecar: Edit = |ds| {
            if let Some(spec) = ds.template.spec.as_mut() {
                spec.containers.push(Container {
                    name: "log-shipper".into(),
                    image: Some("fluent/fluent-bit:3.2".into()),
                    ..Container::default()
                });
            }
        };
        let rows: [(&str, Edit, bool, Verdict, &[&str]); 6] = [
            (
                "sidecar",
                sidecar,
                false,
                Verdict::Fail,
                &["log-shipper (fluent/fluent-bit:3.2)", "--force"],
            ),
            (
                "sidecar, forced",
                sidecar,
                true,
                Verdict::Warn,
                &["would remove them"],
            ),
            (
                "foreign selector",
                |ds| {
                    ds.selector = [("component".to_string(), "kube-scheduler".to_string())].into();
                },
                true,
                Verdict::Fail,
                &[
                    "{component=kube-scheduler}",
                    "k8s-app=self-hosted-kube-scheduler",
                ],
            ),
            (
                "no component container",
                |ds| {
                    if let Some(spec) = ds.template.spec.as_mut() {
                        spec.containers[0].image = Some("registry.k8s.io/pause:3.10".into());
                    }
                },
                false,
                Verdict::Fail,
                &[
                    "runs no kube-scheduler container",
                    "pause:3.10",
                    "selfhost manifests",
                ],
            ),
            (
                "Helm",
                |ds| {
                    ds.labels.insert(MANAGED_BY.into(), "Helm".into());
                },
                false,
                Verdict::Fail,
                &["managed by Helm", "upgrade through Helm"],
            ),
            (
                "Argo CD",
                |ds| {
                    ds.annotations.insert(
                        "argocd.argoproj.io/tracking-id".into(),
                        "cp:apps/DaemonSet:kube-system/x".into(),
                    );
                },
                true,
                Verdict::Warn,
                &["managed by Argo CD"],
            ),
        ];
        for (case, edit, force, verdict, says) in rows {
            let report = preflight(&cluster_with(edit), &target(force));
            let found = shape_of(&report, Component::Scheduler);
            assert!(
                found
                    .iter()
                    .any(|(v, text)| *v == verdict && says.iter().all(|s| text.contains(s))),
                "{case}: {found:?}"
            );
            for other in [Component::ApiServer, Component::ControllerManager] {
                assert_eq!(
                    shape_of(&report, other).first().map(|(v, _)| *v),
                    Some(Verdict::Pass),
                    "{case}: {other}"
                );
            }
        }
    }

    #[test]
    fn kubeadm_and_selfhost_marks_are_at_home() {
        let rows: [Edit; 2] = [
            |ds| {
                ds.labels.insert(MANAGED_BY.into(), "kubeadm".into());
            },
            |ds| {
                ds.labels.insert(MANAGED_BY.into(), "selfhost".into());
            },
        ];
        for edit in rows {
            let report = preflight(&cluster_with(edit), &target(false));
            assert_eq!(
                shape_of(&report, Component::Scheduler),
                vec![(
                    Verdict::Pass,
                    "self-hosted-kube-scheduler: its kube-scheduler container and selector are \
                     as selfhost expects | "
                        .to_string()
                )]
            );
        }
    }
}
