//! The kubeadm configuration a conversion checks the node against: `--config FILE`, else the
//! cluster's `kube-system/kubeadm-config`, else none.
//!
//! What runs wins. A conversion moves the component that runs on the node from one kind of
//! pod to the other and changes nothing else: the DaemonSet is built from the static manifest
//! on disk (to self-hosted) and the static manifest from the DaemonSet's template (to static),
//! as kubeadm's `convert-from-staticpods` built its DaemonSets from the manifests on disk. A
//! setting the configuration would change is an upgrade in disguise, made without the pivot's
//! rollback, so it is not made here: the configuration is rendered with the upgrade's
//! renderer ([`static_pod`]) at the version that runs, and every place where it disagrees with
//! what runs is listed in the plan, so the operator sees it before `selfhost apply` (which
//! renders from the configuration) would change it.
//!
//! The configuration supplies what a node cannot tell: the node's name when `--node` is not
//! given (an InitConfiguration's `nodeRegistration.name` in the file), before the host name.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use selfhost_core::Component;
use selfhost_core::command_line::flag_value;
use selfhost_core::config::{CONFIGMAP_NAME, ClusterConfig};
use selfhost_core::control_plane::{NodeContext, PERMIT_PORT_SHARING, static_pod};
use selfhost_core::daemonset::LEADER_ELECTION_FLAGS;
use selfhost_core::version::KubeVersion;
use serde::Serialize;

use crate::retry::RetryPolicy;
use crate::target::{TargetError, cluster_config};

/// Flags selfhost adds to what it runs itself; their absence from a configuration is no
/// disagreement.
const SELFHOST_FLAGS: [&str; 3] = [
    PERMIT_PORT_SHARING,
    "shutdown-delay-duration",
    "shutdown-send-retry-after",
];

/// Where the configuration a conversion checks against came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ConfigSource {
    /// `--config FILE`.
    ConfigFile {
        /// The file.
        path: PathBuf,
    },
    /// The `ClusterConfiguration` in `kube-system/kubeadm-config`.
    ClusterConfigMap,
    /// Neither: the manifests and templates are converted as they are, unchecked.
    None,
}

impl std::fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigSource::ConfigFile { path } => {
                write!(f, "the kubeadm configuration file {}", path.display())
            }
            ConfigSource::ClusterConfigMap => write!(
                f,
                "the cluster's kubeadm configuration (ConfigMap kube-system/{CONFIGMAP_NAME})"
            ),
            ConfigSource::None => write!(
                f,
                "no kubeadm configuration (no --config, and the cluster has no \
                 kube-system/{CONFIGMAP_NAME} ConfigMap): what runs is converted unchecked"
            ),
        }
    }
}

/// The configuration of a run: `file` if given, else the cluster's, else none.
pub async fn resolve(
    client: &kube::Client,
    file: Option<&(PathBuf, ClusterConfig)>,
    policy: &RetryPolicy,
) -> Result<(Option<ClusterConfig>, ConfigSource), TargetError> {
    if let Some((path, config)) = file {
        return Ok((
            Some(config.clone()),
            ConfigSource::ConfigFile { path: path.clone() },
        ));
    }
    Ok(match cluster_config(client, policy).await? {
        Some(config) => (Some(config), ConfigSource::ClusterConfigMap),
        None => (None, ConfigSource::None),
    })
}

/// The `--name` → value pairs of a command line (a bare `--name` is `true`).
fn flags(command: &[String]) -> BTreeMap<&str, &str> {
    command
        .iter()
        .filter_map(|arg| arg.strip_prefix("--"))
        .filter_map(|flag| {
            let name = flag.split_once('=').map_or(flag, |(name, _)| name);
            Some((name, flag_value(command, name)?))
        })
        .collect()
}

/// The version a pod runs, from its image tag.
fn running_version(pod: &Pod) -> Option<KubeVersion> {
    let image = pod.spec.as_ref()?.containers.first()?.image.as_deref()?;
    let (_, tag) = image.rsplit_once(':')?;
    KubeVersion::parse(tag).ok()
}

/// Where the configuration and what runs disagree for `component`, in words: each flag the
/// two set differently (or only one of them sets), the image, and the version the
/// configuration names. `running` is the static pod on disk (or the DaemonSet's template as a
/// static pod). Empty when they agree.
pub fn disagreements(component: Component, running: &Pod, config: &ClusterConfig) -> Vec<String> {
    let Some(container) = running.spec.as_ref().and_then(|s| s.containers.first()) else {
        return Vec::new();
    };
    let command = container.command.clone().unwrap_or_default();
    let mut found = Vec::new();
    let version = match (running_version(running), &config.kubernetes_version) {
        (Some(runs), Some(named)) => {
            if runs.to_string() != named.to_string() {
                found.push(format!(
                    "the configuration names kubernetesVersion {named}, the node runs {runs}"
                ));
            }
            runs
        }
        (Some(runs), None) => runs,
        (None, Some(named)) => named.clone(),
        (None, None) => return found,
    };
    // The node's own address, as the running command line has it: the configuration names
    // only the address of the node `kubeadm init` ran on.
    let node = NodeContext {
        advertise_address: flag_value(&command, "advertise-address")
            .and_then(|a| a.parse::<IpAddr>().ok()),
        ..NodeContext::default()
    };
    let rendered = static_pod(component, config, &node, &version);
    let Some(wanted) = rendered.spec.as_ref().and_then(|s| s.containers.first()) else {
        return found;
    };
    if wanted.image != container.image {
        found.push(format!(
            "image: the node runs {}, the configuration renders {}",
            container.image.as_deref().unwrap_or("none"),
            wanted.image.as_deref().unwrap_or("none")
        ));
    }
    let wanted_command = wanted.command.clone().unwrap_or_default();
    let (runs, renders) = (flags(&command), flags(&wanted_command));
    let names: std::collections::BTreeSet<&str> =
        runs.keys().chain(renders.keys()).copied().collect();
    for name in names {
        if SELFHOST_FLAGS.contains(&name) {
            continue;
        }
        // The leader-election clock selfhost writes into its templates, absent from the
        // configuration, is no disagreement either; another value in the configuration is.
        let selfhost_value = LEADER_ELECTION_FLAGS
            .iter()
            .find(|(flag, _)| *flag == name)
            .map(|(_, value)| *value);
        if selfhost_value.is_some()
            && runs.get(name).copied() == selfhost_value
            && !renders.contains_key(name)
        {
            continue;
        }
        match (runs.get(name), renders.get(name)) {
            (Some(a), Some(b)) if a != b => found.push(format!(
                "--{name}: the node runs {a:?}, the configuration renders {b:?}"
            )),
            (Some(a), None) => found.push(format!(
                "--{name}={a} runs on the node but is not in the configuration"
            )),
            (None, Some(b)) => found.push(format!(
                "--{name}={b} is in the configuration but does not run on the node"
            )),
            _ => {}
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(image: &str, command: &[&str]) -> Pod {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
            "spec": {"containers": [{"name": "kube-scheduler", "image": image, "command": command}]},
        }))
        .expect("a pod")
    }

    fn rendered(config: &ClusterConfig, version: &str) -> Pod {
        let version = KubeVersion::parse(version).expect("version");
        static_pod(
            Component::Scheduler,
            config,
            &NodeContext::default(),
            &version,
        )
    }

    #[test]
    fn what_the_configuration_renders_agrees_with_it() {
        let version = KubeVersion::parse("v1.33.1").expect("version");
        let config = ClusterConfig::default_for(&version);
        let mut running = rendered(&config, "v1.33.1");
        // selfhost's own flags are no disagreement.
        if let Some(c) = running.spec.as_mut().map(|s| &mut s.containers[0]) {
            let command = c.command.take().unwrap_or_default();
            c.command = Some(selfhost_core::command_line::set_flag(
                &command,
                PERMIT_PORT_SHARING,
                "true",
            ));
        }
        running.spec = running.spec.map(selfhost_core::daemonset::elect_promptly);
        assert_eq!(
            disagreements(Component::Scheduler, &running, &config),
            Vec::<String>::new()
        );
        // Another leader-election clock than selfhost's is what the node runs, and named.
        if let Some(c) = running.spec.as_mut().map(|s| &mut s.containers[0]) {
            let command = c.command.take().unwrap_or_default();
            c.command = Some(selfhost_core::command_line::set_flag(
                &command,
                "leader-elect-retry-period",
                "2s",
            ));
        }
        assert_eq!(
            disagreements(Component::Scheduler, &running, &config),
            ["--leader-elect-retry-period=2s runs on the node but is not in the configuration"]
        );
    }

    #[test]
    fn every_kind_of_disagreement_is_named() {
        let version = KubeVersion::parse("v1.33.1").expect("version");
        let config = ClusterConfig::default_for(&version);
        let base = rendered(&config, "v1.33.1");
        let command: Vec<String> = base.spec.as_ref().expect("spec").containers[0]
            .command
            .clone()
            .expect("command");
        let mut edited: Vec<&str> = command
            .iter()
            .map(String::as_str)
            .filter(|a| !a.starts_with("--bind-address"))
            .map(|a| {
                if a.starts_with("--leader-elect") {
                    "--leader-elect=false"
                } else {
                    a
                }
            })
            .collect();
        edited.push("--v=4");
        let running = pod("example.org/kube-scheduler:v1.33.2", &edited);
        let found = disagreements(Component::Scheduler, &running, &config);
        let expected = [
            "the configuration names kubernetesVersion v1.33.1, the node runs v1.33.2",
            "image: the node runs example.org/kube-scheduler:v1.33.2, the configuration renders registry.k8s.io/kube-scheduler:v1.33.2",
            "--bind-address=127.0.0.1 is in the configuration but does not run on the node",
            "--leader-elect: the node runs \"false\", the configuration renders \"true\"",
            "--v=4 runs on the node but is not in the configuration",
        ];
        for line in expected {
            assert!(found.iter().any(|f| f == line), "{line:?} in {found:#?}");
        }
        assert_eq!(found.len(), expected.len(), "{found:#?}");
    }
}
