//! One API permission a command needs, and the RBAC objects that grant them: the words of
//! [`crate::access`]'s checks and of the errors a 403 becomes.

use std::fmt;

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use selfhost_core::component::NAMESPACE;

/// Where `deploy/rbac.yaml` is, for messages.
pub const RBAC_MANIFEST: &str = "deploy/rbac.yaml";

/// The service account of `deploy/rbac.yaml` for `status` and `plan`.
pub const VIEWER: &str = "selfhost-viewer";
/// The service account of `deploy/rbac.yaml` for `apply` and `convert`.
pub const UPGRADER: &str = "selfhost-upgrader";

/// One permission: a verb on a resource (optionally one named object, optionally in a
/// namespace), or a verb on a non-resource path.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Permission {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`.
    pub verb: String,
    /// API group (`""` for core); unused for paths.
    pub group: String,
    /// Resource (plural, `pods/status` for a subresource), or a path such as `/readyz`.
    pub resource: String,
    /// The namespace, for namespaced resources.
    pub namespace: Option<String>,
    /// The one object it is about, if any.
    pub name: Option<String>,
}

impl Permission {
    /// A verb on a resource in kube-system.
    pub fn in_kube_system(verb: &str, group: &str, resource: &str) -> Permission {
        Permission {
            verb: verb.to_string(),
            group: group.to_string(),
            resource: resource.to_string(),
            namespace: Some(NAMESPACE.to_string()),
            name: None,
        }
    }

    /// A verb on a cluster-scoped resource.
    pub fn cluster(verb: &str, group: &str, resource: &str) -> Permission {
        Permission {
            namespace: None,
            ..Permission::in_kube_system(verb, group, resource)
        }
    }

    /// A verb on a non-resource path.
    pub fn path(verb: &str, path: &str) -> Permission {
        Permission::cluster(verb, "", path)
    }

    /// The same permission on one named object.
    pub fn named(mut self, name: &str) -> Permission {
        self.name = Some(name.to_string());
        self
    }

    /// Whether it is about a path rather than a resource.
    pub fn is_path(&self) -> bool {
        self.resource.starts_with('/')
    }

    pub(crate) fn review(&self) -> SelfSubjectAccessReview {
        let spec = if self.is_path() {
            SelfSubjectAccessReviewSpec {
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(self.resource.clone()),
                    verb: Some(self.verb.clone()),
                }),
                ..Default::default()
            }
        } else {
            let (resource, subresource) = match self.resource.split_once('/') {
                Some((r, s)) => (r.to_string(), Some(s.to_string())),
                None => (self.resource.clone(), None),
            };
            SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(self.verb.clone()),
                    group: Some(self.group.clone()),
                    resource: Some(resource),
                    subresource,
                    namespace: self.namespace.clone(),
                    name: self.name.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            }
        };
        SelfSubjectAccessReview {
            spec,
            ..Default::default()
        }
    }
}

/// `update on daemonsets.apps "x" in namespace kube-system`, `list on nodes`,
/// `get on /readyz`.
impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.verb, self.resource)?;
        if !self.group.is_empty() && !self.is_path() {
            write!(f, ".{}", self.group)?;
        }
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        if let Some(ns) = &self.namespace {
            write!(f, " in namespace {ns}")?;
        }
        Ok(())
    }
}
