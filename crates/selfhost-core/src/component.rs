//! The three control-plane components and every name derived from them.
//!
//! The names are kubeadm's, so that clusters converted or upgraded by kubeadm and habits built
//! on it carry over unchanged.

use std::fmt;
use std::str::FromStr;

/// Namespace of every object selfhost manages.
pub const NAMESPACE: &str = "kube-system";
/// Label on every object selfhost creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "selfhost";
/// Prefix kubeadm gives to self-hosted DaemonSets and their `k8s-app` label.
pub const SELF_HOSTED_PREFIX: &str = "self-hosted-";
/// Prefix kubeadm gives to the temporary backup DaemonSet of the pivot.
pub const BACKUP_PREFIX: &str = "temp-upgrade-";
/// Label (and selector key) of the backup DaemonSet's pods.
pub const BACKUP_LABEL: &str = "temp-upgrade-component";
/// Prefix of the image prepull DaemonSets.
pub const PREPULL_PREFIX: &str = "upgrade-prepull-";
/// Label key of self-hosted and prepull pods.
pub const APP_LABEL: &str = "k8s-app";
/// Annotation kubelets put on mirror pods of static pods.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// A control-plane component that selfhost runs as a DaemonSet.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Component {
    /// kube-apiserver
    #[serde(rename = "kube-apiserver")]
    ApiServer,
    /// kube-controller-manager
    #[serde(rename = "kube-controller-manager")]
    ControllerManager,
    /// kube-scheduler
    #[serde(rename = "kube-scheduler")]
    Scheduler,
}

impl Component {
    /// All components in kubeadm's order, which is also the upgrade order: the API first,
    /// so that the controllers never talk to an older API server than themselves.
    pub const ALL: [Component; 3] = [
        Component::ApiServer,
        Component::ControllerManager,
        Component::Scheduler,
    ];

    /// The component's name, e.g. `kube-apiserver`; also its binary and container name.
    pub fn name(self) -> &'static str {
        match self {
            Component::ApiServer => "kube-apiserver",
            Component::ControllerManager => "kube-controller-manager",
            Component::Scheduler => "kube-scheduler",
        }
    }

    /// Name of the self-hosted DaemonSet: `self-hosted-<c>`.
    pub fn daemonset_name(self) -> String {
        format!("{SELF_HOSTED_PREFIX}{}", self.name())
    }

    /// Value of the `k8s-app` label and selector of the self-hosted DaemonSet.
    pub fn app_label_value(self) -> String {
        self.daemonset_name()
    }

    /// Label selector of the self-hosted pods: `k8s-app=self-hosted-<c>`.
    pub fn label_query(self) -> String {
        format!("{APP_LABEL}={}", self.app_label_value())
    }

    /// Name of the backup DaemonSet of the pivot: `temp-upgrade-self-hosted-<c>`.
    pub fn backup_name(self) -> String {
        format!("{BACKUP_PREFIX}{}", self.daemonset_name())
    }

    /// Label selector of the backup pods: `temp-upgrade-component=<c>`.
    pub fn backup_label_query(self) -> String {
        format!("{BACKUP_LABEL}={}", self.name())
    }

    /// Name of the image prepull DaemonSet: `upgrade-prepull-<c>`.
    pub fn prepull_name(self) -> String {
        format!("{PREPULL_PREFIX}{}", self.name())
    }

    /// File name of the static pod manifest: `<c>.yaml`.
    pub fn manifest_file_name(self) -> String {
        format!("{}.yaml", self.name())
    }

    /// Name of the mirror pod a kubelet publishes for the static pod on `node`.
    pub fn mirror_pod_name(self, node: &str) -> String {
        format!("{}-{node}", self.name())
    }

    /// Name of the Lease used for leader election, if the component elects a leader.
    pub fn leader_lease_name(self) -> Option<&'static str> {
        match self {
            Component::ApiServer => None,
            Component::ControllerManager => Some("kube-controller-manager"),
            Component::Scheduler => Some("kube-scheduler"),
        }
    }

    /// The component's default secure port (`--secure-port`).
    pub fn default_secure_port(self) -> u16 {
        match self {
            Component::ApiServer => 6443,
            Component::ControllerManager => 10257,
            Component::Scheduler => 10259,
        }
    }
}

impl fmt::Display for Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A string that names no component.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown component {0:?}: expected one of kube-apiserver, kube-controller-manager, kube-scheduler"
)]
pub struct UnknownComponent(pub String);

impl FromStr for Component {
    type Err = UnknownComponent;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Component::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownComponent(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_kubeadms() {
        let rows = [
            (
                Component::ApiServer,
                "self-hosted-kube-apiserver",
                "k8s-app=self-hosted-kube-apiserver",
                "temp-upgrade-self-hosted-kube-apiserver",
                "temp-upgrade-component=kube-apiserver",
                "upgrade-prepull-kube-apiserver",
                "kube-apiserver.yaml",
                "kube-apiserver-cp-1",
            ),
            (
                Component::ControllerManager,
                "self-hosted-kube-controller-manager",
                "k8s-app=self-hosted-kube-controller-manager",
                "temp-upgrade-self-hosted-kube-controller-manager",
                "temp-upgrade-component=kube-controller-manager",
                "upgrade-prepull-kube-controller-manager",
                "kube-controller-manager.yaml",
                "kube-controller-manager-cp-1",
            ),
            (
                Component::Scheduler,
                "self-hosted-kube-scheduler",
                "k8s-app=self-hosted-kube-scheduler",
                "temp-upgrade-self-hosted-kube-scheduler",
                "temp-upgrade-component=kube-scheduler",
                "upgrade-prepull-kube-scheduler",
                "kube-scheduler.yaml",
                "kube-scheduler-cp-1",
            ),
        ];
        for (c, ds, query, backup, backup_query, prepull, manifest, mirror) in rows {
            assert_eq!(c.daemonset_name(), ds);
            assert_eq!(c.label_query(), query);
            assert_eq!(c.backup_name(), backup);
            assert_eq!(c.backup_label_query(), backup_query);
            assert_eq!(c.prepull_name(), prepull);
            assert_eq!(c.manifest_file_name(), manifest);
            assert_eq!(c.mirror_pod_name("cp-1"), mirror);
            assert_eq!(c.name().parse::<Component>(), Ok(c));
        }
    }

    #[test]
    fn order_is_apiserver_first() {
        assert_eq!(Component::ALL[0], Component::ApiServer);
        let mut sorted = Component::ALL;
        sorted.sort();
        assert_eq!(sorted, Component::ALL);
    }

    #[test]
    fn unknown_component_names_the_choices() {
        let err = "etcd".parse::<Component>().unwrap_err();
        assert!(
            err.to_string()
                .contains("kube-apiserver, kube-controller-manager")
        );
    }
}
