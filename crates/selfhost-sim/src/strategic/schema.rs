//! The patch metadata strategic merge patch needs: for each field of the built-in types we
//! serve, whether its list merges (and by which key) or is replaced.
//!
//! The apiserver reads this from the `patchStrategy`/`patchMergeKey` struct tags of the Go
//! types; we keep the subset that matters for the kinds in [`crate::resources::ALL`]. Fields
//! not listed here behave as untagged Go fields do: maps merge key by key, lists are replaced.

use crate::resources::ResourceType;

/// A Go type whose fields carry patch metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Schema {
    /// A type (or map) without tagged fields below it.
    Untagged,
    ObjectMeta,
    Pod,
    PodSpec,
    PodStatus,
    PodTemplateSpec,
    Container,
    DaemonSet,
    DaemonSetSpec,
    DaemonSetStatus,
    Node,
    NodeSpec,
    NodeStatus,
    Namespace,
    NamespaceStatus,
    ServiceAccount,
    /// Top level of a kind whose only tagged field is `metadata`.
    Object,
}

/// How a list field is patched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListStrategy {
    /// Untagged: the patch's list replaces the original.
    Replace,
    /// `patchStrategy:"merge"` on a list of scalars: a set union.
    MergeScalars,
    /// `patchStrategy:"merge" patchMergeKey:"<key>"`: items with the same key merge.
    MergeByKey(&'static str),
}

impl ListStrategy {
    /// The merge key, or `""` for scalar and replaced lists (as the apiserver passes it).
    pub(crate) fn merge_key(self) -> &'static str {
        match self {
            ListStrategy::MergeByKey(key) => key,
            _ => "",
        }
    }

    /// Whether the list merges rather than being replaced.
    pub(crate) fn merges(self) -> bool {
        self != ListStrategy::Replace
    }
}

/// The metadata of one field: the schema of its value (or of its items) and its list strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) schema: Schema,
    pub(crate) list: ListStrategy,
}

const fn field(schema: Schema, list: ListStrategy) -> Field {
    Field { schema, list }
}

const UNTAGGED: Field = field(Schema::Untagged, ListStrategy::Replace);

impl Schema {
    /// The schema of a whole object of `rt`.
    pub(crate) fn root(rt: &ResourceType) -> Schema {
        match (rt.group, rt.kind) {
            ("", "Pod") => Schema::Pod,
            ("", "Node") => Schema::Node,
            ("", "Namespace") => Schema::Namespace,
            ("", "ServiceAccount") => Schema::ServiceAccount,
            ("apps", "DaemonSet") => Schema::DaemonSet,
            _ => Schema::Object,
        }
    }

    /// The metadata of field `name` of this type.
    pub(crate) fn field(self, name: &str) -> Field {
        use ListStrategy::{MergeByKey, MergeScalars};
        use Schema as S;
        let merge_by = |schema, key| field(schema, MergeByKey(key));
        match (self, name) {
            (
                S::Pod
                | S::PodTemplateSpec
                | S::DaemonSet
                | S::Node
                | S::Namespace
                | S::ServiceAccount
                | S::Object,
                "metadata",
            ) => field(S::ObjectMeta, ListStrategy::Replace),
            (S::ObjectMeta, "finalizers") => field(S::Untagged, MergeScalars),
            (S::ObjectMeta, "ownerReferences") => merge_by(S::Untagged, "uid"),

            (S::Pod, "spec") | (S::PodTemplateSpec, "spec") => {
                field(S::PodSpec, ListStrategy::Replace)
            }
            (S::Pod, "status") => field(S::PodStatus, ListStrategy::Replace),
            (S::PodSpec, "containers" | "initContainers" | "ephemeralContainers") => {
                merge_by(S::Container, "name")
            }
            (S::PodSpec, "volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims") => {
                merge_by(S::Untagged, "name")
            }
            (S::PodSpec, "hostAliases") => merge_by(S::Untagged, "ip"),
            (S::PodSpec, "topologySpreadConstraints") => merge_by(S::Untagged, "topologyKey"),
            (S::Container, "ports") => merge_by(S::Untagged, "containerPort"),
            (S::Container, "env") => merge_by(S::Untagged, "name"),
            (S::Container, "volumeMounts") => merge_by(S::Untagged, "mountPath"),
            (S::Container, "volumeDevices") => merge_by(S::Untagged, "devicePath"),
            (S::PodStatus, "conditions") => merge_by(S::Untagged, "type"),
            (S::PodStatus, "podIPs" | "hostIPs") => merge_by(S::Untagged, "ip"),
            (S::PodStatus, "resourceClaimStatuses") => merge_by(S::Untagged, "name"),

            (S::DaemonSet, "spec") => field(S::DaemonSetSpec, ListStrategy::Replace),
            (S::DaemonSet, "status") => field(S::DaemonSetStatus, ListStrategy::Replace),
            (S::DaemonSetSpec, "template") => field(S::PodTemplateSpec, ListStrategy::Replace),
            (S::DaemonSetStatus, "conditions") => merge_by(S::Untagged, "type"),

            (S::Node, "spec") => field(S::NodeSpec, ListStrategy::Replace),
            (S::Node, "status") => field(S::NodeStatus, ListStrategy::Replace),
            (S::NodeSpec, "podCIDRs") => field(S::Untagged, MergeScalars),
            (S::NodeStatus, "conditions" | "addresses") => merge_by(S::Untagged, "type"),

            (S::Namespace, "status") => field(S::NamespaceStatus, ListStrategy::Replace),
            (S::NamespaceStatus, "conditions") => merge_by(S::Untagged, "type"),

            (S::ServiceAccount, "secrets") => merge_by(S::Untagged, "name"),
            _ => UNTAGGED,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{CONFIGMAPS, DAEMONSETS, PODS};

    #[test]
    fn the_fields_kubectl_patches_have_their_go_tags() {
        let pod_spec = Schema::root(&DAEMONSETS)
            .field("spec")
            .schema
            .field("template")
            .schema
            .field("spec")
            .schema;
        assert_eq!(pod_spec, Schema::PodSpec);
        assert_eq!(
            pod_spec.field("containers").list,
            ListStrategy::MergeByKey("name")
        );
        assert_eq!(pod_spec.field("tolerations").list, ListStrategy::Replace);
        let container = pod_spec.field("containers").schema;
        assert_eq!(
            container.field("volumeMounts").list.merge_key(),
            "mountPath"
        );
        assert_eq!(container.field("ports").list.merge_key(), "containerPort");
        assert_eq!(container.field("command").list, ListStrategy::Replace);
        let meta = Schema::root(&CONFIGMAPS).field("metadata").schema;
        assert_eq!(meta.field("finalizers").list, ListStrategy::MergeScalars);
        assert_eq!(meta.field("ownerReferences").list.merge_key(), "uid");
        assert_eq!(
            Schema::root(&PODS)
                .field("status")
                .schema
                .field("conditions")
                .list
                .merge_key(),
            "type"
        );
        assert_eq!(
            Schema::root(&CONFIGMAPS).field("data").schema,
            Schema::Untagged
        );
    }
}
