//! What each component should run after the upgrade: rendered from a kubeadm configuration
//! (a file, else the cluster's `kube-system/kubeadm-config`), or — for clusters without one —
//! the live template with the component's image moved to the target version and
//! `--permit-port-sharing=true` added where it lacks it
//! ([`selfhost_core::live_target`]). Either way a kube-apiserver behind the node's API front
//! stays behind it ([`keep_front`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{ConfigMap, PodTemplateSpec};
use kube::Api;
use selfhost_core::Component;
use selfhost_core::component::NAMESPACE;
use selfhost_core::config::{CONFIGMAP_KEY, CONFIGMAP_NAME, ClusterConfig, ConfigError};
use selfhost_core::control_plane::{K8S_CERTS_VOLUME, KUBECONFIG_VOLUME, NodeContext, static_pod};
use selfhost_core::daemonset::{CertsError, DaemonSetOptions, build_daemonset};
use selfhost_core::live_target::{keep_front, live_target};
use selfhost_core::observation::DaemonSetObservation;
use selfhost_core::version::KubeVersion;
use serde::Serialize;

use crate::api_call::{ApiCallError, FailureKind};
use crate::retry::{RetryPolicy, with_retries};

/// Where the target templates come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TemplateSource {
    /// `--config FILE`.
    ConfigFile {
        /// The file.
        path: PathBuf,
    },
    /// The `ClusterConfiguration` in `kube-system/kubeadm-config`.
    ClusterConfigMap,
    /// No configuration: the live templates with the images moved to the target tag and
    /// port sharing added where they lack it.
    LiveTemplates,
}

impl std::fmt::Display for TemplateSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateSource::ConfigFile { path } => {
                write!(f, "the kubeadm configuration file {}", path.display())
            }
            TemplateSource::ClusterConfigMap => {
                write!(
                    f,
                    "the cluster's kubeadm configuration (ConfigMap kube-system/{CONFIGMAP_NAME})"
                )
            }
            TemplateSource::LiveTemplates => write!(
                f,
                "the live DaemonSet templates with the component images moved to the target \
                 version, and --permit-port-sharing=true added where they lack it, as the \
                 hand-over needs (the cluster has no kube-system/{CONFIGMAP_NAME} ConfigMap)"
            ),
        }
    }
}

/// Why no target could be made.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Reading the ConfigMap failed.
    #[error(transparent)]
    Api(#[from] ApiCallError),
    /// The cluster's configuration does not parse.
    #[error(
        "the ClusterConfiguration in ConfigMap kube-system/{CONFIGMAP_NAME} is not valid: {0}; fix it, or pass --config FILE"
    )]
    ClusterConfig(ConfigError),
    /// Certificates in Secrets cannot be kept.
    #[error(transparent)]
    Certs(#[from] CertsError),
    /// A component has no live DaemonSet to take images from.
    #[error("{0}: no live DaemonSet to take the template from")]
    NoLiveTemplate(Component),
}

/// The target templates of all components, and where they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Targets {
    /// The target version.
    pub version: KubeVersion,
    /// Where the templates came from.
    pub source: TemplateSource,
    /// One template per component.
    pub templates: BTreeMap<Component, PodTemplateSpec>,
}

/// Whether a live template mounts its certificates or its kubeconfig from Secrets (then the
/// target must too). The scheduler mounts only its kubeconfig.
fn certs_in_secrets(live: Option<&DaemonSetObservation>) -> bool {
    live.and_then(|ds| ds.template.spec.as_ref())
        .and_then(|spec| spec.volumes.as_ref())
        .is_some_and(|volumes| {
            volumes.iter().any(|v| {
                (v.name == K8S_CERTS_VOLUME && v.projected.is_some())
                    || (v.name == KUBECONFIG_VOLUME && v.secret.is_some())
            })
        })
}

/// The template `component` runs at `version` under `config`, shaped like the live one
/// (certificates from Secrets if the live one has them).
pub fn render_from_config(
    component: Component,
    config: &ClusterConfig,
    version: &KubeVersion,
    live: Option<&DaemonSetObservation>,
) -> Result<PodTemplateSpec, CertsError> {
    let pod = static_pod(component, config, &NodeContext::default(), version);
    let options = DaemonSetOptions {
        certs_in_secrets: certs_in_secrets(live),
    };
    let ds = build_daemonset(component, &pod, &options)?;
    Ok(ds.spec.map(|s| s.template).unwrap_or_default())
}

/// Reads the cluster's kubeadm configuration, if it has one.
pub async fn cluster_config(
    client: &kube::Client,
    policy: &RetryPolicy,
) -> Result<Option<ClusterConfig>, TargetError> {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let found = with_retries(
        &format!("get ConfigMap kube-system/{CONFIGMAP_NAME}"),
        policy,
        || maps.get_opt(CONFIGMAP_NAME),
    )
    .await;
    let map = match found {
        Ok(map) => map,
        // Reading it is optional: without permission, fall back as if there were none.
        Err(e) if e.kind == FailureKind::Forbidden => None,
        Err(e) => return Err(e.into()),
    };
    let Some(text) = map
        .and_then(|m| m.data)
        .and_then(|d| d.get(CONFIGMAP_KEY).cloned())
    else {
        return Ok(None);
    };
    ClusterConfig::from_configmap_data(&text)
        .map(|p| Some(p.config))
        .map_err(TargetError::ClusterConfig)
}

/// The targets of every component.
pub fn targets(
    version: &KubeVersion,
    config: Option<(&ClusterConfig, TemplateSource)>,
    live: &BTreeMap<Component, DaemonSetObservation>,
) -> Result<Targets, TargetError> {
    let mut templates = BTreeMap::new();
    let source = match config {
        Some((config, source)) => {
            for component in Component::ALL {
                let live = live.get(&component);
                let rendered = render_from_config(component, config, version, live)?;
                templates.insert(component, keep_front(component, live, rendered));
            }
            source
        }
        None => {
            for component in Component::ALL {
                let ds = live
                    .get(&component)
                    .ok_or(TargetError::NoLiveTemplate(component))?;
                let rendered = live_target(component, &ds.template, version);
                templates.insert(component, keep_front(component, Some(ds), rendered));
            }
            TemplateSource::LiveTemplates
        }
    };
    Ok(Targets {
        version: version.clone(),
        source,
        templates,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec};
    use selfhost_core::front::{FrontLayout, bound_address, listening_on, readiness_probed_at};
    use selfhost_core::render::template_diff;

    use super::*;

    /// A DaemonSet with `template`.
    fn daemonset(template: PodTemplateSpec) -> DaemonSet {
        DaemonSet {
            spec: Some(DaemonSetSpec {
                template,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The live kube-apiserver DaemonSet of a kubeadm cluster at `version`, moved behind the
    /// node's API front with the default layout.
    fn live_behind_front(config: &ClusterConfig, version: &KubeVersion) -> DaemonSetObservation {
        let mut template =
            render_from_config(Component::ApiServer, config, version, None).expect("a template");
        let layout = FrontLayout::default();
        template.spec = template.spec.map(|s| listening_on(s, layout.backend));
        let mut ds = daemonset(template);
        layout.annotate(&mut ds);
        DaemonSetObservation::from_daemonset(&ds, &[])
    }

    /// Each component mounting its files from Secrets keeps them there in the target rendered
    /// from the kubeadm configuration: the scheduler, which mounts only its kubeconfig, too.
    #[test]
    fn targets_from_the_configuration_keep_files_in_secrets_for_every_component() {
        let from = KubeVersion::parse("v1.33.1").expect("version");
        let to = KubeVersion::parse("v1.34.0").expect("version");
        let config = ClusterConfig::default_for(&from);
        for component in Component::ALL {
            let pod = static_pod(component, &config, &NodeContext::default(), &from);
            let options = DaemonSetOptions {
                certs_in_secrets: true,
            };
            let ds = build_daemonset(component, &pod, &options).expect("a DaemonSet");
            let live = DaemonSetObservation::from_daemonset(&ds, &[]);
            let target = render_from_config(component, &config, &to, Some(&live)).expect("target");
            let diff = template_diff(&live.template, &target).expect("a diff");
            assert!(!diff.contains("hostPath"), "{component}: {diff}");
        }
    }

    /// From a kubeadm configuration (which renders the kube-apiserver on every address) and
    /// from the live templates, a kube-apiserver behind the front stays there, and the plan's
    /// diff shows the version, not a move.
    #[test]
    fn targets_of_a_kube_apiserver_behind_a_front_keep_its_address() {
        let from = KubeVersion::parse("v1.33.1").expect("version");
        let to = KubeVersion::parse("v1.34.0").expect("version");
        let config = ClusterConfig::default_for(&from);
        let live_api = live_behind_front(&config, &from);
        let mut live = BTreeMap::from([(Component::ApiServer, live_api.clone())]);
        for component in [Component::ControllerManager, Component::Scheduler] {
            let template = render_from_config(component, &config, &from, None).expect("a template");
            let ds = daemonset(template);
            live.insert(component, DaemonSetObservation::from_daemonset(&ds, &[]));
        }
        let backend = Some(FrontLayout::default().backend);
        let sources = [
            (
                "the cluster's kubeadm configuration",
                targets(
                    &to,
                    Some((&config, TemplateSource::ClusterConfigMap)),
                    &live,
                ),
            ),
            ("the live templates", targets(&to, None, &live)),
        ];
        for (source, made) in sources {
            let made = made.expect("targets");
            let api = made.templates.get(&Component::ApiServer).expect("api");
            let spec = api.spec.as_ref().expect("spec");
            assert_eq!(bound_address(spec), backend, "{source}");
            assert_eq!(readiness_probed_at(spec), backend, "{source}");
            let diff = template_diff(&live_api.template, api).expect("a diff");
            assert!(!diff.contains("bind-address"), "{source}: {diff}");
            assert!(diff.contains("v1.34.0"), "{source}: {diff}");
            // The others have no front, and keep the wildcard.
            for component in [Component::ControllerManager, Component::Scheduler] {
                let other = made.templates.get(&component).expect("template");
                assert_eq!(
                    other.spec.as_ref().and_then(bound_address),
                    live.get(&component)
                        .and_then(|ds| ds.template.spec.as_ref())
                        .and_then(bound_address),
                    "{source}: {component}"
                );
            }
        }
    }
}
