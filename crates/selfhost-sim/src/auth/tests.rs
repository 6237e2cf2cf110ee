//! Table-driven tests of the RBAC authorizer, tokens, reviews and the 403 wording.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;

pub(super) fn resource(
    verb: &str,
    group: &str,
    resource: &str,
    sub: Option<&str>,
    ns: Option<&str>,
    name: Option<&str>,
) -> Attributes {
    Attributes::Resource(ResourceAttributes {
        verb: verb.into(),
        group: group.into(),
        version: "v1".into(),
        resource: resource.into(),
        subresource: sub.map(Into::into),
        namespace: ns.map(Into::into),
        name: name.map(Into::into),
    })
}

fn role(kind: &str, ns: Option<&str>, name: &str, rules: Value) -> Arc<Value> {
    let mut meta = json!({ "name": name });
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    Arc::new(json!({ "kind": kind, "metadata": meta, "rules": rules }))
}

fn binding(
    kind: &str,
    ns: Option<&str>,
    role_kind: &str,
    role: &str,
    subjects: Value,
) -> Arc<Value> {
    let mut meta = json!({ "name": format!("{role}-binding") });
    if let Some(ns) = ns {
        meta["namespace"] = json!(ns);
    }
    Arc::new(json!({
        "kind": kind,
        "metadata": meta,
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role },
        "subjects": subjects,
    }))
}

/// A policy shaped like a least-privilege deployment: a ClusterRole for nodes and health, a
/// Role in kube-system for DaemonSets (writes restricted by name), a wildcard role for a
/// group, an aggregated role, and a binding to a role that does not exist.
fn policy() -> Policy {
    let sa = json!([{ "kind": "ServiceAccount", "name": "tool", "namespace": "kube-system" }]);
    Policy {
        cluster_roles: vec![
            role(
                "ClusterRole",
                None,
                "tool-cluster",
                json!([
                    { "apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"] },
                    { "nonResourceURLs": ["/readyz", "/healthz/*"], "verbs": ["get"] },
                ]),
            ),
            role(
                "ClusterRole",
                None,
                "everything",
                json!([{ "apiGroups": ["*"], "resources": ["*"], "verbs": ["*"] }]),
            ),
            role(
                "ClusterRole",
                None,
                "status-writer",
                json!([{ "apiGroups": [""], "resources": ["*/status"], "verbs": ["update"] }]),
            ),
            Arc::new(json!({
                "kind": "ClusterRole",
                "metadata": { "name": "aggregate" },
                "aggregationRule": { "clusterRoleSelectors": [{ "matchLabels": { "agg": "yes" } }] },
                "rules": [],
            })),
            Arc::new(json!({
                "kind": "ClusterRole",
                "metadata": { "name": "part", "labels": { "agg": "yes" } },
                "rules": [{ "apiGroups": [""], "resources": ["secrets"], "verbs": ["get"] }],
            })),
        ],
        cluster_role_bindings: vec![
            binding(
                "ClusterRoleBinding",
                None,
                "ClusterRole",
                "tool-cluster",
                sa.clone(),
            ),
            binding(
                "ClusterRoleBinding",
                None,
                "ClusterRole",
                "everything",
                json!([{ "kind": "Group", "name": "admins" }]),
            ),
            binding(
                "ClusterRoleBinding",
                None,
                "ClusterRole",
                "aggregate",
                json!([{ "kind": "User", "name": "carol" }]),
            ),
            binding(
                "ClusterRoleBinding",
                None,
                "ClusterRole",
                "missing",
                json!([{ "kind": "User", "name": "dave" }]),
            ),
        ],
        roles: vec![role(
            "Role",
            Some("kube-system"),
            "tool",
            json!([
                { "apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["list", "watch", "create"] },
                { "apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["update", "delete"], "resourceNames": ["real", "backup"] },
            ]),
        )],
        role_bindings: vec![
            binding(
                "RoleBinding",
                Some("kube-system"),
                "Role",
                "tool",
                json!([{ "kind": "ServiceAccount", "name": "tool" }]),
            ),
            binding(
                "RoleBinding",
                Some("kube-system"),
                "ClusterRole",
                "status-writer",
                json!([{ "kind": "User", "name": "erin" }]),
            ),
        ],
    }
}

#[test]
fn the_authorizer_allows_exactly_what_bound_rules_grant() {
    let tool = UserInfo::service_account("kube-system", "tool");
    let other_sa = UserInfo::service_account("default", "tool");
    let admin_group = UserInfo::user("bob", &["admins"]);
    let carol = UserInfo::user("carol", &[]);
    let dave = UserInfo::user("dave", &[]);
    let erin = UserInfo::user("erin", &[]);
    let admin = UserInfo::admin();
    let anonymous = UserInfo::anonymous();
    let ks = Some("kube-system");
    let ds = |verb: &str, ns: Option<&str>, name: Option<&str>| {
        resource(verb, "apps", "daemonsets", None, ns, name)
    };
    let get_path = |path: &str| Attributes::NonResource {
        verb: "get".into(),
        path: path.into(),
    };
    let rows: Vec<(&str, &UserInfo, Attributes, bool)> = vec![
        (
            "cluster role grants nodes",
            &tool,
            resource("list", "", "nodes", None, None, None),
            true,
        ),
        (
            "verbs are exact",
            &tool,
            resource("get", "", "nodes", None, None, Some("n1")),
            false,
        ),
        (
            "core group is the empty string",
            &tool,
            resource("list", "apps", "nodes", None, None, None),
            false,
        ),
        (
            "role grants in its namespace",
            &tool,
            ds("list", ks, None),
            true,
        ),
        (
            "role grants nothing elsewhere",
            &tool,
            ds("list", Some("default"), None),
            false,
        ),
        (
            "role grants nothing cluster-wide",
            &tool,
            ds("list", None, None),
            false,
        ),
        ("create needs no name", &tool, ds("create", ks, None), true),
        (
            "resourceNames allow the named object",
            &tool,
            ds("update", ks, Some("real")),
            true,
        ),
        (
            "resourceNames deny another object",
            &tool,
            ds("update", ks, Some("other")),
            false,
        ),
        (
            "resourceNames deny a nameless request",
            &tool,
            ds("delete", ks, None),
            false,
        ),
        (
            "verb not granted",
            &tool,
            ds("patch", ks, Some("real")),
            false,
        ),
        (
            "subresource needs its own rule",
            &tool,
            resource("list", "apps", "daemonsets", Some("status"), ks, None),
            false,
        ),
        (
            "a same-named service account elsewhere is someone else",
            &other_sa,
            ds("list", ks, None),
            false,
        ),
        ("non-resource exact path", &tool, get_path("/readyz"), true),
        (
            "non-resource prefix with *",
            &tool,
            get_path("/healthz/etcd"),
            true,
        ),
        (
            "non-resource prefix does not cover its parent",
            &tool,
            get_path("/healthz"),
            false,
        ),
        (
            "non-resource path not granted",
            &tool,
            get_path("/version"),
            false,
        ),
        (
            "wildcards for a group member",
            &admin_group,
            resource(
                "deletecollection",
                "example.com",
                "widgets",
                None,
                Some("x"),
                None,
            ),
            true,
        ),
        (
            "a resource wildcard does not cover paths",
            &admin_group,
            get_path("/readyz"),
            false,
        ),
        (
            "aggregated rules count",
            &carol,
            resource("get", "", "secrets", None, ks, Some("s")),
            true,
        ),
        (
            "aggregation adds only what it selects",
            &carol,
            resource("get", "", "configmaps", None, ks, Some("c")),
            false,
        ),
        (
            "binding to a missing role grants nothing",
            &dave,
            resource("get", "", "pods", None, ks, Some("p")),
            false,
        ),
        (
            "*/status matches any status",
            &erin,
            resource("update", "", "pods", Some("status"), ks, Some("p")),
            true,
        ),
        (
            "*/status does not match the object",
            &erin,
            resource("update", "", "pods", None, ks, Some("p")),
            false,
        ),
        (
            "a ClusterRole in a RoleBinding grants only there",
            &erin,
            resource(
                "update",
                "",
                "pods",
                Some("status"),
                Some("default"),
                Some("p"),
            ),
            false,
        ),
        (
            "system:masters may do anything",
            &admin,
            get_path("/anything"),
            true,
        ),
        (
            "anonymous gets nothing",
            &anonymous,
            get_path("/readyz"),
            false,
        ),
    ];
    let policy = policy();
    for (case, user, request, want) in rows {
        assert_eq!(
            policy.decide(user, &request).allowed,
            want,
            "{case}: {request:?}"
        );
    }
}

#[test]
fn denials_are_worded_as_the_apiserver_words_them() {
    let user = UserInfo::service_account("kube-system", "tool");
    let rows = [
        (
            resource("list", "", "pods", None, Some("kube-system"), None),
            r#"pods is forbidden: User "system:serviceaccount:kube-system:tool" cannot list resource "pods" in API group "" in the namespace "kube-system""#,
            json!({ "group": "", "kind": "pods" }),
        ),
        (
            resource(
                "update",
                "apps",
                "daemonsets",
                None,
                Some("kube-system"),
                Some("d"),
            ),
            r#"daemonsets.apps "d" is forbidden: User "system:serviceaccount:kube-system:tool" cannot update resource "daemonsets" in API group "apps" in the namespace "kube-system""#,
            json!({ "group": "apps", "kind": "daemonsets", "name": "d" }),
        ),
        (
            resource("watch", "", "nodes", None, None, None),
            r#"nodes is forbidden: User "system:serviceaccount:kube-system:tool" cannot watch resource "nodes" in API group "" at the cluster scope"#,
            json!({ "group": "", "kind": "nodes" }),
        ),
        (
            resource("patch", "", "nodes", Some("status"), None, Some("n1")),
            r#"nodes "n1" is forbidden: User "system:serviceaccount:kube-system:tool" cannot patch resource "nodes/status" in API group "" at the cluster scope"#,
            json!({ "group": "", "kind": "nodes", "name": "n1" }),
        ),
        (
            Attributes::NonResource {
                verb: "get".into(),
                path: "/readyz".into(),
            },
            r#"forbidden: User "system:serviceaccount:kube-system:tool" cannot get path "/readyz""#,
            json!({}),
        ),
    ];
    for (request, message, details) in rows {
        let err = forbidden(&user, &request);
        assert_eq!(err.code, 403);
        assert_eq!(err.reason, "Forbidden");
        assert_eq!(err.message, message);
        assert_eq!(err.details, Some(details), "{message}");
    }
}

#[test]
fn tokens_authenticate_their_users_and_nothing_else() {
    let auth = Authenticator::new(Some("admin-token"), true);
    let sa = UserInfo::service_account("kube-system", "tool");
    let token = auth.mint(sa.clone());
    let header = |value: &str| {
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, value.parse().unwrap());
        headers
    };
    assert_eq!(
        auth.authenticate(&header(&format!("Bearer {token}"))),
        Authentication::User(sa.clone())
    );
    assert_eq!(
        auth.authenticate(&header("Bearer admin-token")),
        Authentication::User(UserInfo::admin())
    );
    assert_eq!(
        auth.authenticate(&header("Bearer nope")),
        Authentication::Invalid
    );
    assert_eq!(
        auth.authenticate(&header(&format!("Basic {token}"))),
        Authentication::Invalid
    );
    assert_eq!(
        auth.authenticate(&http::HeaderMap::new()),
        Authentication::Anonymous
    );
    assert!(
        sa.groups
            .iter()
            .any(|g| g == "system:serviceaccounts:kube-system")
    );
    assert!(sa.groups.iter().any(|g| g == AUTHENTICATED));
    assert!(
        !format!("{auth:?}").contains(&token),
        "tokens never show in Debug"
    );
}

#[test]
fn the_bootstrap_policy_lets_everyone_probe_health_and_review_access() {
    let store = Store::new(crate::store::StoreOptions::default());
    bootstrap::seed(&store).unwrap();
    bootstrap::seed(&store).unwrap();
    let auth = Authenticator::new(None, true);
    let sa = UserInfo::service_account("kube-system", "tool");
    let can = |user: &UserInfo, a: Attributes| auth.authorize(&store, user, &a).allowed;
    let get = |p: &str| Attributes::NonResource {
        verb: "get".into(),
        path: p.into(),
    };
    let review = resource(
        "create",
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        None,
        None,
        None,
    );
    assert!(can(&sa, get("/readyz")));
    assert!(can(&sa, get("/version")));
    assert!(can(&sa, get("/apis/apps/v1")));
    assert!(can(&sa, review.clone()));
    assert!(can(&UserInfo::anonymous(), get("/livez")));
    assert!(!can(&UserInfo::anonymous(), get("/apis")));
    assert!(!can(&UserInfo::anonymous(), review));
    assert!(!can(
        &sa,
        resource("list", "", "pods", None, Some("kube-system"), None)
    ));
    assert!(can(
        &UserInfo::admin(),
        resource("delete", "", "nodes", None, None, Some("n"))
    ));
    let off = Authenticator::new(None, false);
    assert!(
        off.authorize(
            &store,
            &sa,
            &resource("delete", "", "nodes", None, None, Some("n"))
        )
        .allowed
    );
}

#[test]
fn reviews_answer_for_the_asker() {
    let store = Store::new(crate::store::StoreOptions::default());
    bootstrap::seed(&store).unwrap();
    let auth = Authenticator::new(None, true);
    let sa = UserInfo::service_account("kube-system", "tool");
    let ask = |spec: Value| {
        review::answer(
            &auth,
            &store,
            &sa,
            "application/json",
            json!({ "spec": spec }).to_string().as_bytes(),
        )
    };
    let pods = ask(json!({ "resourceAttributes": { "verb": "list", "resource": "pods", "namespace": "kube-system" } })).unwrap();
    assert_eq!(pods["status"]["allowed"], false);
    assert_eq!(pods["kind"], "SelfSubjectAccessReview");
    let readyz =
        ask(json!({ "nonResourceAttributes": { "verb": "get", "path": "/readyz" } })).unwrap();
    assert_eq!(readyz["status"]["allowed"], true);
    assert_eq!(ask(json!({})).unwrap_err().code, 422);
    assert_eq!(
        review::answer(&auth, &store, &sa, "application/json", b"{not json")
            .unwrap_err()
            .code,
        400
    );
}
