//! The kinds of object the simulated API server serves, and what it needs to know about each.

/// One served resource type, e.g. `apps/v1 daemonsets`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResourceType {
    /// API group; empty for the core group.
    pub group: &'static str,
    /// API version within the group, e.g. `v1`.
    pub version: &'static str,
    /// Plural resource name used in URLs, e.g. `daemonsets`.
    pub plural: &'static str,
    /// Singular name, e.g. `daemonset` (discovery).
    pub singular: &'static str,
    /// Kind, e.g. `DaemonSet`.
    pub kind: &'static str,
    /// Kind of the list, e.g. `DaemonSetList`.
    pub list_kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// Whether the type has a `/status` subresource (main writes then ignore `status`).
    pub has_status: bool,
    /// Whether spec changes bump `metadata.generation` (types with a `spec`).
    pub has_generation: bool,
    /// kubectl short names (discovery).
    pub short_names: &'static [&'static str],
    /// Discovery categories (`all` makes `kubectl get all` include it).
    pub categories: &'static [&'static str],
    /// Whether an update of a missing object creates it (leases and events, as in the real
    /// registry; every other type answers 404).
    pub allow_create_on_update: bool,
}

impl ResourceType {
    /// `apiVersion` as written in objects: `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The qualified resource name used in error messages: `daemonsets.apps`, or `pods` for core.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// URL prefix of the group version: `/api/v1` or `/apis/apps/v1`.
    pub fn url_prefix(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }
}

// One positional argument per column keeps the constants below readable as a table.
#[allow(clippy::too_many_arguments)]
const fn rt(
    group: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    list_kind: &'static str,
    namespaced: bool,
    has_status: bool,
    has_generation: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
) -> ResourceType {
    ResourceType {
        group,
        version: "v1",
        plural,
        singular,
        kind,
        list_kind,
        namespaced,
        has_status,
        has_generation,
        short_names,
        categories,
        allow_create_on_update: false,
    }
}

/// Namespaces.
pub const NAMESPACES: ResourceType = rt(
    "",
    "namespaces",
    "namespace",
    "Namespace",
    "NamespaceList",
    false,
    true,
    false,
    &["ns"],
    &[],
);
/// Nodes.
pub const NODES: ResourceType = rt(
    "",
    "nodes",
    "node",
    "Node",
    "NodeList",
    false,
    true,
    false,
    &["no"],
    &[],
);
/// Pods.
pub const PODS: ResourceType = rt(
    "",
    "pods",
    "pod",
    "Pod",
    "PodList",
    true,
    true,
    false,
    &["po"],
    &["all"],
);
/// ConfigMaps.
pub const CONFIGMAPS: ResourceType = rt(
    "",
    "configmaps",
    "configmap",
    "ConfigMap",
    "ConfigMapList",
    true,
    false,
    false,
    &["cm"],
    &[],
);
/// Secrets.
pub const SECRETS: ResourceType = rt(
    "",
    "secrets",
    "secret",
    "Secret",
    "SecretList",
    true,
    false,
    false,
    &[],
    &[],
);
/// Events (core/v1).
pub const EVENTS: ResourceType = ResourceType {
    allow_create_on_update: true,
    ..rt(
        "",
        "events",
        "event",
        "Event",
        "EventList",
        true,
        false,
        false,
        &["ev"],
        &[],
    )
};
/// ServiceAccounts.
pub const SERVICEACCOUNTS: ResourceType = rt(
    "",
    "serviceaccounts",
    "serviceaccount",
    "ServiceAccount",
    "ServiceAccountList",
    true,
    false,
    false,
    &["sa"],
    &[],
);
/// DaemonSets.
pub const DAEMONSETS: ResourceType = rt(
    "apps",
    "daemonsets",
    "daemonset",
    "DaemonSet",
    "DaemonSetList",
    true,
    true,
    true,
    &["ds"],
    &["all"],
);
/// ControllerRevisions.
pub const CONTROLLERREVISIONS: ResourceType = rt(
    "apps",
    "controllerrevisions",
    "controllerrevision",
    "ControllerRevision",
    "ControllerRevisionList",
    true,
    false,
    false,
    &[],
    &[],
);
/// Leases.
pub const LEASES: ResourceType = ResourceType {
    allow_create_on_update: true,
    ..rt(
        "coordination.k8s.io",
        "leases",
        "lease",
        "Lease",
        "LeaseList",
        true,
        false,
        false,
        &[],
        &[],
    )
};

/// The RBAC API group.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Roles (rules within one namespace).
pub const ROLES: ResourceType = rt(
    RBAC_GROUP,
    "roles",
    "role",
    "Role",
    "RoleList",
    true,
    false,
    false,
    &[],
    &[],
);
/// ClusterRoles (rules for cluster-scoped resources, non-resource URLs, or every namespace).
pub const CLUSTERROLES: ResourceType = rt(
    RBAC_GROUP,
    "clusterroles",
    "clusterrole",
    "ClusterRole",
    "ClusterRoleList",
    false,
    false,
    false,
    &[],
    &[],
);
/// RoleBindings (grant a Role or ClusterRole within one namespace).
pub const ROLEBINDINGS: ResourceType = rt(
    RBAC_GROUP,
    "rolebindings",
    "rolebinding",
    "RoleBinding",
    "RoleBindingList",
    true,
    false,
    false,
    &[],
    &[],
);
/// ClusterRoleBindings (grant a ClusterRole everywhere).
pub const CLUSTERROLEBINDINGS: ResourceType = rt(
    RBAC_GROUP,
    "clusterrolebindings",
    "clusterrolebinding",
    "ClusterRoleBinding",
    "ClusterRoleBindingList",
    false,
    false,
    false,
    &[],
    &[],
);

/// Every served resource type, in discovery order.
pub const ALL: &[ResourceType] = &[
    NAMESPACES,
    NODES,
    PODS,
    CONFIGMAPS,
    SECRETS,
    EVENTS,
    SERVICEACCOUNTS,
    DAEMONSETS,
    CONTROLLERREVISIONS,
    LEASES,
    CLUSTERROLEBINDINGS,
    CLUSTERROLES,
    ROLEBINDINGS,
    ROLES,
];

/// Finds a served type by group and plural (version is always `v1` today).
pub fn find(group: &str, version: &str, plural: &str) -> Option<ResourceType> {
    ALL.iter()
        .copied()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Finds a served type by its kind and apiVersion (as in an object body).
pub fn find_kind(api_version: &str, kind: &str) -> Option<ResourceType> {
    ALL.iter()
        .copied()
        .find(|r| r.kind == kind && r.api_version() == api_version)
}
