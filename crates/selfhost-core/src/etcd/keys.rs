//! Where the API server keeps objects in etcd: `<prefix>/<resource>/<namespace>/<name>`, the
//! resource without its group (`/registry/daemonsets/kube-system/self-hosted-kube-apiserver`),
//! under the `--etcd-prefix` it was started with (`/registry` by default).

/// kube-apiserver's default `--etcd-prefix`.
pub const DEFAULT_PREFIX: &str = "/registry";

/// The kinds `selfhost recover` reads, with the resource their keys are named by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StoredKind {
    /// apps/v1 DaemonSet.
    DaemonSet,
    /// v1 Secret.
    Secret,
    /// v1 ConfigMap.
    ConfigMap,
}

impl StoredKind {
    /// The resource in the key (`daemonsets`).
    pub fn resource(self) -> &'static str {
        match self {
            StoredKind::DaemonSet => "daemonsets",
            StoredKind::Secret => "secrets",
            StoredKind::ConfigMap => "configmaps",
        }
    }

    /// The kind's name (`DaemonSet`).
    pub fn kind(self) -> &'static str {
        match self {
            StoredKind::DaemonSet => "DaemonSet",
            StoredKind::Secret => "Secret",
            StoredKind::ConfigMap => "ConfigMap",
        }
    }
}

/// The key of one object: `prefix` with or without its trailing slash.
pub fn object_key(prefix: &str, kind: StoredKind, namespace: &str, name: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    format!("{prefix}/{}/{namespace}/{name}", kind.resource())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_api_servers_layout() {
        assert_eq!(
            object_key(
                "/registry",
                StoredKind::DaemonSet,
                "kube-system",
                "self-hosted-kube-apiserver"
            ),
            "/registry/daemonsets/kube-system/self-hosted-kube-apiserver"
        );
        assert_eq!(
            object_key("/custom/", StoredKind::Secret, "kube-system", "ca"),
            "/custom/secrets/kube-system/ca"
        );
        assert_eq!(
            object_key("/registry", StoredKind::ConfigMap, "kube-system", "x"),
            "/registry/configmaps/kube-system/x"
        );
    }
}
