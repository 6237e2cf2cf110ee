//! Who a request comes from and what it may do: bearer-token authentication and the RBAC
//! authorizer, as kube-apiserver runs them in front of every handler.
//!
//! - Authentication ([`Authenticator`]): static bearer tokens, each mapped to a user (a name
//!   and groups). The simulator's own kubeconfig carries the token of `kubernetes-admin` in
//!   `system:masters` (kubeadm's `admin.conf`); tests mint more with
//!   [`Authenticator::mint`], e.g. for a service account
//!   ([`UserInfo::service_account`]: `system:serviceaccount:<ns>:<name>` in
//!   `system:serviceaccounts`, `system:serviceaccounts:<ns>` and `system:authenticated`).
//! - Authorization ([`rbac`]): Roles, ClusterRoles, RoleBindings and ClusterRoleBindings
//!   (`rbac.authorization.k8s.io/v1`) stored as ordinary objects, evaluated on each request
//!   from its [`attributes`] (verb, API group, resource, subresource, namespace, name, or
//!   a non-resource path). `system:masters` may do anything, as the apiserver's
//!   privileged-group authorizer allows. A denial is the apiserver's 403 Status.
//! - `SelfSubjectAccessReview` ([`review`]): "can I?" questions answered by the same
//!   authorizer, which `kubectl auth can-i` and a cautious tool ask before acting.
//!
//! RBAC is off by default (every authenticated request is allowed, as before); with it on
//! the store is seeded with the bootstrap roles every cluster has ([`bootstrap`]).

pub mod attributes;
pub mod bootstrap;
pub mod protobuf;
pub mod rbac;
pub mod review;

#[cfg(test)]
mod attributes_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::RwLock;

use http::HeaderMap;

pub use attributes::{Attributes, ResourceAttributes};
pub use rbac::{Decision, Policy};

use crate::error::ApiError;
use crate::store::Store;

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of requests without credentials.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The group whose members may do anything (kubeadm's admin is in it).
pub const MASTERS: &str = "system:masters";
/// The user kubeadm's `admin.conf` authenticates as.
pub const ADMIN_USER: &str = "kubernetes-admin";

/// An authenticated identity: the user name and its groups.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserInfo {
    /// The user name, e.g. `system:serviceaccount:kube-system:selfhost`.
    pub name: String,
    /// Its groups, `system:authenticated` included.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// A user with `groups` (plus `system:authenticated`, which every token user is in).
    pub fn user(name: &str, groups: &[&str]) -> UserInfo {
        let mut all: Vec<String> = groups.iter().map(|g| (*g).to_string()).collect();
        if !all.iter().any(|g| g == AUTHENTICATED) {
            all.push(AUTHENTICATED.to_string());
        }
        UserInfo {
            name: name.to_string(),
            groups: all,
        }
    }

    /// The service account `namespace/name`, as its tokens authenticate.
    pub fn service_account(namespace: &str, name: &str) -> UserInfo {
        let namespaced = format!("system:serviceaccounts:{namespace}");
        UserInfo::user(
            &format!("system:serviceaccount:{namespace}:{name}"),
            &["system:serviceaccounts", &namespaced],
        )
    }

    /// kubeadm's administrator (`kubernetes-admin` in `system:masters`).
    pub fn admin() -> UserInfo {
        UserInfo::user(ADMIN_USER, &[MASTERS])
    }

    /// A request without credentials (`system:anonymous`).
    pub fn anonymous() -> UserInfo {
        UserInfo {
            name: "system:anonymous".to_string(),
            groups: vec![UNAUTHENTICATED.to_string()],
        }
    }

    /// The service account this user is, as `(namespace, name)`, if it is one.
    pub fn as_service_account(&self) -> Option<(&str, &str)> {
        self.name
            .strip_prefix("system:serviceaccount:")?
            .split_once(':')
    }
}

/// What a request's credentials say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authentication {
    /// A known token.
    User(UserInfo),
    /// No `Authorization` header.
    Anonymous,
    /// A header that is not a known bearer token.
    Invalid,
}

/// The token table and whether RBAC decides.
pub struct Authenticator {
    tokens: RwLock<HashMap<String, UserInfo>>,
    rbac: bool,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Tokens are credentials: only say how many there are.
        let count = self.tokens.read().map_or(0, |t| t.len());
        f.debug_struct("Authenticator")
            .field("tokens", &count)
            .field("rbac", &self.rbac)
            .finish()
    }
}

impl Authenticator {
    /// An authenticator knowing `admin_token` (if any) as [`UserInfo::admin`]; with `rbac`,
    /// requests are authorized by the stored RBAC objects.
    pub fn new(admin_token: Option<&str>, rbac: bool) -> Authenticator {
        let mut tokens = HashMap::new();
        if let Some(token) = admin_token {
            tokens.insert(token.to_string(), UserInfo::admin());
        }
        Authenticator {
            tokens: RwLock::new(tokens),
            rbac,
        }
    }

    /// Whether RBAC decides what authenticated users may do.
    pub fn rbac(&self) -> bool {
        self.rbac
    }

    /// A new random bearer token for `user`. Callers must not log it.
    pub fn mint(&self, user: UserInfo) -> String {
        let token = crate::tls::generate_token();
        self.tokens
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token.clone(), user);
        token
    }

    /// Who the `Authorization` header says the request comes from.
    pub fn authenticate(&self, headers: &HeaderMap) -> Authentication {
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return Authentication::Anonymous;
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        let tokens = self.tokens.read().unwrap_or_else(|e| e.into_inner());
        match token.and_then(|t| tokens.get(t)) {
            Some(user) => Authentication::User(user.clone()),
            None => Authentication::Invalid,
        }
    }

    /// Whether `user` may make the request `attrs` describes: always with RBAC off,
    /// otherwise as the stored roles and bindings say.
    pub fn authorize(&self, store: &Store, user: &UserInfo, attrs: &Attributes) -> Decision {
        if !self.rbac {
            return Decision::allow("RBAC is off: every authenticated request is allowed");
        }
        Policy::load(store, attrs.namespace()).decide(user, attrs)
    }
}

/// The 403 the apiserver answers a denied request with:
/// `pods is forbidden: User "x" cannot list resource "pods" in API group "" in the namespace
/// "kube-system"` (the details name the group, the resource as `kind` and the object).
pub fn forbidden(user: &UserInfo, attrs: &Attributes) -> ApiError {
    match attrs {
        Attributes::NonResource { verb, path } => ApiError {
            details: Some(serde_json::json!({})),
            ..ApiError::forbidden(format!(
                "forbidden: User {:?} cannot {verb} path {path:?}",
                user.name
            ))
        },
        Attributes::Resource(r) => {
            let resource = match &r.subresource {
                Some(sub) => format!("{}/{sub}", r.resource),
                None => r.resource.clone(),
            };
            let scope = match &r.namespace {
                Some(ns) => format!("in the namespace {ns:?}"),
                None => "at the cluster scope".to_string(),
            };
            let why = format!(
                "User {:?} cannot {} resource {resource:?} in API group {:?} {scope}",
                user.name, r.verb, r.group
            );
            let qualified = if r.group.is_empty() {
                r.resource.clone()
            } else {
                format!("{}.{}", r.resource, r.group)
            };
            let message = match &r.name {
                Some(name) => format!("{qualified} {name:?} is forbidden: {why}"),
                None => format!("{qualified} is forbidden: {why}"),
            };
            let mut details = serde_json::json!({ "group": r.group, "kind": r.resource });
            if let Some(name) = &r.name {
                details["name"] = serde_json::json!(name);
            }
            ApiError {
                details: Some(details),
                ..ApiError::forbidden(message)
            }
        }
    }
}
