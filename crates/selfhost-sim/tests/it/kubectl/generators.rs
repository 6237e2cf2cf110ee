//! kubectl's generator commands (`kubectl create namespace|configmap|secret|serviceaccount`)
//! send their objects as protobuf; the simulator decodes them and answers in JSON, which
//! kubectl reads back. The objects are checked through kube-rs.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use kube::Api;
use selfhost_sim::{SimServer, SimServerOptions};

use super::Kubectl;

async fn sim() -> SimServer {
    SimServer::start(SimServerOptions::default())
        .await
        .expect("the simulator starts")
}

#[tokio::test]
async fn create_namespace_sends_protobuf_that_the_server_stores() {
    let sim = sim().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "create namespace") else {
        return;
    };
    let out = kubectl
        .run(&["create", "namespace", "team-a", "-v=8"])
        .await;
    assert!(out.success, "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "namespace/team-a created");
    assert!(
        out.stderr
            .contains("Content-Type: application/vnd.kubernetes.protobuf"),
        "kubectl sent protobuf: {}",
        out.stderr
    );
    let ns = Api::<Namespace>::all(sim.client())
        .get("team-a")
        .await
        .expect("created");
    assert_eq!(
        ns.spec.and_then(|s| s.finalizers),
        Some(vec!["kubernetes".to_string()]),
        "defaulted like any namespace"
    );
}

#[tokio::test]
async fn create_configmap_from_literals_and_files() {
    let sim = sim().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "create configmap") else {
        return;
    };
    let file = kubectl.file("settings.conf", "a = 1\nb = 2\n");
    let from_file = format!("--from-file=settings.conf={}", super::path_arg(&file));
    let out = kubectl
        .ok(&[
            "create",
            "configmap",
            "app-config",
            "-n",
            "kube-system",
            "--from-literal=mode=fast",
            "--from-literal=empty=",
            &from_file,
        ])
        .await;
    assert_eq!(out.trim(), "configmap/app-config created");
    let cm = Api::<ConfigMap>::namespaced(sim.client(), "kube-system")
        .get("app-config")
        .await
        .expect("created");
    let data = cm.data.expect("data");
    assert_eq!(data["mode"], "fast");
    assert_eq!(data["empty"], "");
    assert_eq!(data["settings.conf"], "a = 1\nb = 2\n");
    assert_eq!(data.len(), 3);
}

#[tokio::test]
async fn create_secret_generic_stores_the_bytes() {
    let sim = sim().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "create secret generic") else {
        return;
    };
    let out = kubectl
        .ok(&[
            "create",
            "secret",
            "generic",
            "db",
            "--from-literal=user=admin",
            "--from-literal=password=s3cr=t",
        ])
        .await;
    assert_eq!(out.trim(), "secret/db created");
    let secret = Api::<Secret>::namespaced(sim.client(), "default")
        .get("db")
        .await
        .expect("created");
    assert_eq!(secret.type_.as_deref(), Some("Opaque"));
    let data = secret.data.expect("data");
    assert_eq!(data["user"].0, b"admin");
    assert_eq!(data["password"].0, b"s3cr=t");
}

#[tokio::test]
async fn create_serviceaccount_and_an_existing_name_is_a_conflict() {
    let sim = sim().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "create serviceaccount") else {
        return;
    };
    let out = kubectl.ok(&["create", "serviceaccount", "robot"]).await;
    assert_eq!(out.trim(), "serviceaccount/robot created");
    Api::<ServiceAccount>::namespaced(sim.client(), "default")
        .get("robot")
        .await
        .expect("created");
    let again = kubectl.run(&["create", "serviceaccount", "robot"]).await;
    assert!(!again.success);
    assert_eq!(
        again.stderr.trim(),
        r#"error: failed to create serviceaccount: serviceaccounts "robot" already exists"#
    );
}
