//! The RBAC objects every Kubernetes cluster starts with (the apiserver's bootstrap policy),
//! as far as a client of this simulator meets them: `cluster-admin` for `system:masters`,
//! health and version for everyone, discovery for the authenticated, and "may I?" reviews
//! for the authenticated (`system:basic-user`).

use serde_json::{Value, json};

use super::{AUTHENTICATED, MASTERS, UNAUTHENTICATED};
use crate::error::ApiError;
use crate::resources::{CLUSTERROLEBINDINGS, CLUSTERROLES};
use crate::store::{Store, WriteOptions};

/// The field manager the bootstrap objects are written as.
const MANAGER: &str = "kube-apiserver";

/// The health and version endpoints (`system:public-info-viewer`).
const PUBLIC_INFO: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "labels": { "kubernetes.io/bootstrapping": "rbac-defaults" },
        "annotations": { "rbac.authorization.kubernetes.io/autoupdate": "true" },
    })
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": metadata(name),
        "rules": rules,
    })
}

fn binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g }))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": metadata(name),
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
        "subjects": subjects,
    })
}

/// The bootstrap ClusterRoles and their ClusterRoleBindings.
pub fn objects() -> Vec<(Value, Value)> {
    let mut discovery: Vec<&str> = vec![
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
        "/openapi",
        "/openapi/*",
    ];
    discovery.extend(PUBLIC_INFO);
    vec![
        (
            cluster_role(
                "cluster-admin",
                json!([
                    { "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] },
                    { "nonResourceURLs": ["*"], "verbs": ["*"] },
                ]),
            ),
            binding("cluster-admin", &[MASTERS]),
        ),
        (
            cluster_role(
                "system:public-info-viewer",
                json!([{ "nonResourceURLs": PUBLIC_INFO, "verbs": ["get"] }]),
            ),
            binding(
                "system:public-info-viewer",
                &[AUTHENTICATED, UNAUTHENTICATED],
            ),
        ),
        (
            cluster_role(
                "system:discovery",
                json!([{ "nonResourceURLs": discovery, "verbs": ["get"] }]),
            ),
            binding("system:discovery", &[AUTHENTICATED]),
        ),
        (
            cluster_role(
                "system:basic-user",
                json!([
                    {
                        "apiGroups": ["authorization.k8s.io"],
                        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                        "verbs": ["create"],
                    },
                    {
                        "apiGroups": ["authentication.k8s.io"],
                        "resources": ["selfsubjectreviews"],
                        "verbs": ["create"],
                    },
                ]),
            ),
            binding("system:basic-user", &[AUTHENTICATED]),
        ),
    ]
}

/// Stores the bootstrap policy (objects that already exist are left as they are).
///
/// # Errors
/// A bootstrap object the store refuses (a bug: they are fixed and valid).
pub fn seed(store: &Store) -> Result<(), ApiError> {
    let options = WriteOptions::manager(MANAGER);
    for (role, role_binding) in objects() {
        for (rt, obj) in [(&CLUSTERROLES, role), (&CLUSTERROLEBINDINGS, role_binding)] {
            match store.create(rt, "", obj, &options) {
                Ok(_) => {}
                Err(e) if e.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}
