//! Token authentication and RBAC through kube-rs, as a client of a real cluster meets them:
//! a service account may do what its bindings grant and gets the apiserver's 403 Status for
//! anything else; bindings take effect (and stop) at once; reviews answer for the caller;
//! with RBAC off nothing changes.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use selfhost_sim::SimServerOptions;
use selfhost_sim::auth::UserInfo;
use serde_json::json;

use crate::common::{configmap, object, pod, sim_with};

async fn rbac_sim() -> selfhost_sim::SimServer {
    sim_with(SimServerOptions {
        rbac: true,
        ..SimServerOptions::default()
    })
    .await
}

fn tool() -> UserInfo {
    UserInfo::service_account("kube-system", "tool")
}

/// A Role in kube-system and its binding to the `tool` service account.
async fn grant(admin: &Client, rules: serde_json::Value) {
    let roles: Api<Role> = Api::namespaced(admin.clone(), "kube-system");
    roles
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": { "name": "tool" },
                "rules": rules,
            })),
        )
        .await
        .expect("create the Role");
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), "kube-system");
    bindings
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": { "name": "tool" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tool" },
                "subjects": [{ "kind": "ServiceAccount", "name": "tool", "namespace": "kube-system" }],
            })),
        )
        .await
        .expect("create the RoleBinding");
}

fn forbidden(result: Result<impl std::fmt::Debug, kube::Error>) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => *status,
        other => panic!("expected a 403, got {other:?}"),
    }
}

#[tokio::test]
async fn rbac_a_service_account_may_do_what_its_role_grants_and_gets_the_real_403_otherwise() {
    let sim = rbac_sim().await;
    let admin = sim.client();
    grant(
        &admin,
        json!([
            { "apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"] },
            { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["allowed"] },
        ]),
    )
    .await;
    let client = sim.client_for(tool()).await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    pods.list(&ListParams::default())
        .await
        .expect("listing pods in kube-system is granted");

    let status = forbidden(
        Api::<Pod>::namespaced(client.clone(), "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(
        status.message,
        r#"pods is forbidden: User "system:serviceaccount:kube-system:tool" cannot list resource "pods" in API group "" in the namespace "default""#
    );
    let details = status.details.expect("details");
    assert_eq!(
        (details.group.as_str(), details.kind.as_str()),
        ("", "pods")
    );

    let status = forbidden(
        pods.create(&PostParams::default(), &pod("p", json!({}), None))
            .await,
    );
    assert!(
        status.message.contains(r#"cannot create resource "pods""#),
        "{}",
        status.message
    );

    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    match maps.get("allowed").await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404, "authorized, then not found"),
        other => panic!("expected 404 for the named ConfigMap, got {other:?}"),
    }
    let status = forbidden(maps.get("other").await);
    assert_eq!(
        status.message,
        r#"configmaps "other" is forbidden: User "system:serviceaccount:kube-system:tool" cannot get resource "configmaps" in API group "" in the namespace "kube-system""#
    );
    assert_eq!(status.details.expect("details").name, "other");

    let status = forbidden(
        Api::<ClusterRole>::all(client)
            .list(&ListParams::default())
            .await,
    );
    assert!(
        status.message.ends_with(
            r#"cannot list resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope"#
        ),
        "{}",
        status.message
    );
}

#[tokio::test]
async fn rbac_resource_names_cover_a_list_limited_to_that_name() {
    let sim = rbac_sim().await;
    let admin = sim.client();
    Api::<ConfigMap>::namespaced(admin.clone(), "kube-system")
        .create(&PostParams::default(), &configmap("only", "v"))
        .await
        .expect("create");
    grant(
        &admin,
        json!([{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"], "resourceNames": ["only"] }]),
    )
    .await;
    let maps: Api<ConfigMap> =
        Api::namespaced(sim.client_for(tool()).await.expect("client"), "kube-system");
    let named = maps
        .list(&ListParams::default().fields("metadata.name=only"))
        .await
        .expect("a list limited to the named object is allowed");
    assert_eq!(named.items.len(), 1);
    forbidden(maps.list(&ListParams::default()).await);
}

#[tokio::test]
async fn rbac_bindings_take_effect_at_once_and_deleting_one_revokes_it() {
    let sim = rbac_sim().await;
    let admin = sim.client();
    let pods: Api<Pod> =
        Api::namespaced(sim.client_for(tool()).await.expect("client"), "kube-system");
    forbidden(pods.list(&ListParams::default()).await);
    grant(
        &admin,
        json!([{ "apiGroups": [""], "resources": ["pods"], "verbs": ["list"] }]),
    )
    .await;
    pods.list(&ListParams::default())
        .await
        .expect("granted now");
    Api::<RoleBinding>::namespaced(admin, "kube-system")
        .delete("tool", &DeleteParams::default())
        .await
        .expect("delete the binding");
    forbidden(pods.list(&ListParams::default()).await);
}

#[tokio::test]
async fn rbac_reviews_answer_for_the_caller() {
    let sim = rbac_sim().await;
    grant(
        &sim.client(),
        json!([{ "apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["update"], "resourceNames": ["real"] }]),
    )
    .await;
    let reviews: Api<SelfSubjectAccessReview> =
        Api::all(sim.client_for(tool()).await.expect("client"));
    let ask = |name: &str| SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some("update".into()),
                group: Some("apps".into()),
                resource: Some("daemonsets".into()),
                namespace: Some("kube-system".into()),
                name: Some(name.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    for (name, allowed) in [("real", true), ("other", false)] {
        let answer = reviews
            .create(&PostParams::default(), &ask(name))
            .await
            .expect("reviews are open to every authenticated user");
        assert_eq!(
            answer.status.map(|s| s.allowed),
            Some(allowed),
            "update daemonsets/{name}"
        );
    }
}

#[tokio::test]
async fn rbac_unknown_tokens_are_401_and_health_is_public() {
    let sim = rbac_sim().await;
    let address = sim.address();
    // Raw HTTP, so that exactly the credentials given (or none) are sent.
    let http = |path: &str, token: Option<&str>| {
        let mut raw = format!("GET {path} HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n");
        if let Some(t) = token {
            raw.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        raw.push_str("\r\n");
        async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            tokio::time::timeout(Duration::from_secs(10), async move {
                let mut socket = tokio::net::TcpStream::connect(address)
                    .await
                    .expect("connect");
                socket.write_all(raw.as_bytes()).await.expect("write");
                let mut answer = String::new();
                socket.read_to_string(&mut answer).await.expect("read");
                answer
            })
            .await
            .expect("answered in time")
        }
    };
    assert!(http("/readyz", None).await.starts_with("HTTP/1.1 200"));
    assert!(http("/version", None).await.starts_with("HTTP/1.1 200"));
    assert!(
        http("/api/v1/namespaces", None)
            .await
            .starts_with("HTTP/1.1 401")
    );
    assert!(
        http("/api/v1/namespaces", Some("not-a-token"))
            .await
            .starts_with("HTTP/1.1 401")
    );
}

#[tokio::test]
async fn rbac_off_every_authenticated_user_may_do_anything() {
    let sim = sim_with(SimServerOptions::default()).await;
    assert!(!sim.rbac());
    let pods: Api<Pod> =
        Api::namespaced(sim.client_for(tool()).await.expect("client"), "kube-system");
    pods.create(&PostParams::default(), &pod("p", json!({}), None))
        .await
        .expect("without RBAC nothing is forbidden");
}

#[tokio::test]
async fn rbac_kinds_are_discovered_and_the_bootstrap_policy_is_stored() {
    let sim = rbac_sim().await;
    let client = sim.client();
    let group = kube::discovery::group(&client, "rbac.authorization.k8s.io")
        .await
        .expect("the RBAC group is discovered");
    let mut kinds: Vec<String> = group
        .recommended_resources()
        .into_iter()
        .map(|(r, _)| r.kind)
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"]
    );
    let roles: Vec<String> = Api::<ClusterRole>::all(client)
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|r| r.metadata.name)
        .collect();
    for name in [
        "cluster-admin",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
    ] {
        assert!(roles.iter().any(|r| r == name), "{name} in {roles:?}");
    }
}
