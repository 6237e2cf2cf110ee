//! The RBAC authorizer: the stored roles and bindings that apply to a request, and whether
//! any rule of a role bound to the user allows it.
//!
//! Semantics kept from Kubernetes (`plugin/pkg/auth/authorizer/rbac`):
//! - ClusterRoleBindings grant a ClusterRole everywhere; RoleBindings grant a Role of their
//!   own namespace, or a ClusterRole, within their namespace only.
//! - Subjects: `User` by name, `Group` by membership, `ServiceAccount` by namespace and name
//!   (its user name is `system:serviceaccount:<ns>:<name>`).
//! - A rule matches a resource request when its `verbs`, `apiGroups` (`""` is core) and
//!   `resources` (`pods`, `pods/status`, `*/status` or `*`) contain the request's, and its
//!   `resourceNames`, if any, contain the object's name (a request without a name, such as
//!   `create` or an unfiltered `list`, never matches a rule with `resourceNames`). `*` is a
//!   wildcard in verbs, groups and resources.
//! - Non-resource rules match by `nonResourceURLs`: the exact path, `*`, or a prefix ending
//!   in `*` (`/healthz/*`).
//! - A ClusterRole with an `aggregationRule` also has the rules of every ClusterRole whose
//!   labels match one of its selectors (the controller that copies them is instantaneous
//!   here).
//! - `system:masters` may do anything (the apiserver's privileged-group authorizer).
//! - A binding to a role that does not exist grants nothing.

use std::sync::Arc;

use serde_json::Value;

use super::attributes::{Attributes, ResourceAttributes};
use super::{MASTERS, UserInfo};
use crate::resources::{CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES, ResourceType};
use crate::store::{ListOptions, Store};

/// An authorization decision and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may go on.
    pub allowed: bool,
    /// Which binding allowed it, or that none did.
    pub reason: String,
}

impl Decision {
    /// An allowing decision.
    pub fn allow(reason: impl Into<String>) -> Decision {
        Decision {
            allowed: true,
            reason: reason.into(),
        }
    }

    fn deny() -> Decision {
        Decision {
            allowed: false,
            reason: String::new(),
        }
    }
}

/// The RBAC objects that can apply to a request in one namespace (or none).
#[derive(Debug, Clone, Default)]
pub struct Policy {
    /// Every ClusterRole.
    pub cluster_roles: Vec<Arc<Value>>,
    /// Every ClusterRoleBinding.
    pub cluster_role_bindings: Vec<Arc<Value>>,
    /// The Roles of the request's namespace.
    pub roles: Vec<Arc<Value>>,
    /// The RoleBindings of the request's namespace.
    pub role_bindings: Vec<Arc<Value>>,
}

fn list(store: &Store, rt: &ResourceType, namespace: Option<&str>) -> Vec<Arc<Value>> {
    let options = ListOptions {
        namespace,
        ..ListOptions::default()
    };
    store
        .list(rt, &options)
        .map(|l| l.items)
        .unwrap_or_default()
}

fn strings<'a>(value: &'a Value, field: &str) -> impl Iterator<Item = &'a str> {
    value[field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

fn name_of(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or_default()
}

impl Policy {
    /// Reads the cluster-wide RBAC objects and those of `namespace`.
    pub fn load(store: &Store, namespace: Option<&str>) -> Policy {
        let namespaced = |rt: &ResourceType| match namespace {
            Some(ns) => list(store, rt, Some(ns)),
            None => Vec::new(),
        };
        Policy {
            cluster_roles: list(store, &CLUSTERROLES, None),
            cluster_role_bindings: list(store, &CLUSTERROLEBINDINGS, None),
            roles: namespaced(&ROLES),
            role_bindings: namespaced(&ROLEBINDINGS),
        }
    }

    /// Whether `user` may do what `attrs` describes.
    pub fn decide(&self, user: &UserInfo, attrs: &Attributes) -> Decision {
        if user.groups.iter().any(|g| g == MASTERS) {
            return Decision::allow(format!("{MASTERS} may do anything"));
        }
        for binding in &self.cluster_role_bindings {
            if !binds(binding, user) || binding["roleRef"]["kind"] != "ClusterRole" {
                continue;
            }
            let role = binding["roleRef"]["name"].as_str().unwrap_or_default();
            if self
                .cluster_role_rules(role)
                .iter()
                .any(|r| rule_allows(r, attrs))
            {
                return Decision::allow(format!(
                    "RBAC: allowed by ClusterRoleBinding {:?} of ClusterRole {role:?} to {}",
                    name_of(binding),
                    user.name
                ));
            }
        }
        let Some(namespace) = attrs.namespace() else {
            return Decision::deny();
        };
        for binding in &self.role_bindings {
            if binding["metadata"]["namespace"] != namespace || !binds(binding, user) {
                continue;
            }
            let role = binding["roleRef"]["name"].as_str().unwrap_or_default();
            let allowed = match binding["roleRef"]["kind"].as_str() {
                Some("ClusterRole") => self
                    .cluster_role_rules(role)
                    .iter()
                    .any(|r| rule_allows(r, attrs)),
                Some("Role") => self
                    .roles
                    .iter()
                    .filter(|r| r["metadata"]["namespace"] == namespace && name_of(r) == role)
                    .flat_map(|r| r["rules"].as_array().into_iter().flatten())
                    .any(|r| rule_allows(r, attrs)),
                _ => false,
            };
            if allowed {
                return Decision::allow(format!(
                    "RBAC: allowed by RoleBinding {:?} of {} {role:?} to {} in namespace {namespace:?}",
                    name_of(binding),
                    binding["roleRef"]["kind"].as_str().unwrap_or_default(),
                    user.name
                ));
            }
        }
        Decision::deny()
    }

    /// The rules of the ClusterRole `name`, with those of the ClusterRoles it aggregates.
    fn cluster_role_rules(&self, name: &str) -> Vec<&Value> {
        let Some(role) = self.cluster_roles.iter().find(|r| name_of(r) == name) else {
            return Vec::new();
        };
        let mut rules: Vec<&Value> = role["rules"].as_array().into_iter().flatten().collect();
        let selectors: Vec<&Value> = role["aggregationRule"]["clusterRoleSelectors"]
            .as_array()
            .into_iter()
            .flatten()
            .collect();
        if !selectors.is_empty() {
            for other in self.cluster_roles.iter().filter(|o| name_of(o) != name) {
                if selectors
                    .iter()
                    .any(|s| selector_matches(s, &other["metadata"]["labels"]))
                {
                    rules.extend(other["rules"].as_array().into_iter().flatten());
                }
            }
        }
        rules
    }
}

/// Whether a binding names `user` among its subjects.
fn binds(binding: &Value, user: &UserInfo) -> bool {
    let binding_ns = binding["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|subject| {
            let name = subject["name"].as_str().unwrap_or_default();
            match subject["kind"].as_str() {
                Some("User") => user.name == name,
                Some("Group") => user.groups.iter().any(|g| g == name),
                Some("ServiceAccount") => {
                    // A RoleBinding's subject without a namespace means the binding's own.
                    let ns = subject["namespace"]
                        .as_str()
                        .filter(|n| !n.is_empty())
                        .unwrap_or(binding_ns);
                    user.as_service_account() == Some((ns, name))
                }
                _ => false,
            }
        })
}

/// Whether a label selector (`matchLabels`, `matchExpressions`) accepts `labels`.
fn selector_matches(selector: &Value, labels: &Value) -> bool {
    let label = |key: &str| labels[key].as_str();
    let exact = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = strings(e, "values").collect();
            match e["operator"].as_str() {
                Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                _ => false,
            }
        });
    exact && expressions
}

/// Whether one policy rule allows the request.
pub fn rule_allows(rule: &Value, attrs: &Attributes) -> bool {
    match attrs {
        Attributes::Resource(r) => resource_rule_allows(rule, r),
        Attributes::NonResource { verb, path } => {
            has(rule, "verbs", verb)
                && strings(rule, "nonResourceURLs").any(|url| {
                    url == "*"
                        || url == path
                        || url
                            .strip_suffix('*')
                            .is_some_and(|prefix| path.starts_with(prefix))
                })
        }
    }
}

fn has(rule: &Value, field: &str, wanted: &str) -> bool {
    strings(rule, field).any(|v| v == "*" || v == wanted)
}

fn resource_rule_allows(rule: &Value, r: &ResourceAttributes) -> bool {
    let combined = match &r.subresource {
        Some(sub) => format!("{}/{sub}", r.resource),
        None => r.resource.clone(),
    };
    let resource = strings(rule, "resources").any(|res| {
        res == "*"
            || res == combined
            || r.subresource.as_deref().is_some_and(|sub| {
                res.strip_prefix("*/")
                    .is_some_and(|rule_sub| rule_sub == sub)
            })
    });
    let mut names = strings(rule, "resourceNames").peekable();
    let named = names.peek().is_none()
        || r.name
            .as_deref()
            .is_some_and(|n| names.any(|allowed| allowed == n));
    has(rule, "verbs", &r.verb) && has(rule, "apiGroups", &r.group) && resource && named
}
