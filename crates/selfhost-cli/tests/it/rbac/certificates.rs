//! The `certificates` preflight check under RBAC, on a control plane that keeps kubeadm's
//! certificates in Secrets: the upgrader account may read them (its converter Role) and the
//! check passes; without that rule, or as the viewer (never granted Secrets), `plan` still
//! plans and says which Secret it may not read and how to let it.

use std::time::Duration;

use selfhost_sim::SimCluster;
use selfhost_sim::auth::UserInfo;
use selfhost_sim::node_pki::NodePki;

use super::fixture::*;

const UPGRADER: &str = "selfhost-upgrader";
const CONVERTER: &str = "selfhost-converter";
const VIEWER: &str = "selfhost-viewer";
/// The converter Role's rule that grants get on the certificate Secrets.
const SECRETS_RULE: usize = 2;

/// A one-node cluster converted to self-hosted with its certificates in Secrets, enforcing
/// `docs`, and a kubeconfig for `account`.
async fn in_secrets_as(
    docs: &[serde_json::Value],
    account: &str,
) -> (SimCluster, tempfile::TempDir, std::path::PathBuf) {
    let sim = static_cluster().await;
    let root = sim.node_root("cp-1").expect("cp-1's root");
    NodePki::new().write(&root).expect("the certificates");
    let dir = tempfile::tempdir().expect("temporary directory");
    let write = |name: &str, who: &str| {
        let path = dir.path().join(name);
        let yaml = sim
            .kubeconfig_for(UserInfo::service_account("kube-system", who))
            .expect("kubeconfig");
        std::fs::write(&path, yaml).expect("write kubeconfig");
        path
    };
    let converter = write("converter", UPGRADER);
    load(&sim, &manifest()).await;
    let root = root.to_str().expect("UTF-8 path").to_string();
    let out = selfhost(
        &converter,
        &[
            "convert",
            "to-self-hosted",
            "--node",
            "cp-1",
            "--host-root",
            &root,
            "--manifests-dir",
            "/etc/kubernetes/manifests",
            "--no-checkpointer",
            "--certs-in-secrets",
            "--yes",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The roles under test replace the shipped ones.
    if docs != manifest().as_slice() {
        replace(&sim, docs).await;
    }
    let kubeconfig = write("kubeconfig", account);
    (sim, dir, kubeconfig)
}

/// Puts `docs`' Roles in place of the shipped ones.
async fn replace(sim: &SimCluster, docs: &[serde_json::Value]) {
    use k8s_openapi::api::rbac::v1::Role;
    use kube::Api;
    let roles: Api<Role> = Api::namespaced(sim.client(), "kube-system");
    for doc in docs.iter().filter(|d| d["kind"] == "Role") {
        let name = doc["metadata"]["name"].as_str().expect("a name");
        let mut role: Role = serde_json::from_value(doc.clone()).expect("a Role");
        let live = roles.get(name).await.expect("the shipped Role");
        role.metadata.resource_version = live.metadata.resource_version;
        roles
            .replace(name, &Default::default(), &role)
            .await
            .expect("replaced");
    }
}

/// The checks `id` of `plan TO -o json` run with `kubeconfig`.
async fn checks(kubeconfig: &std::path::Path, id: &str) -> Vec<serde_json::Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = selfhost(kubeconfig, &["-o", "json", "plan", TO]).await;
        let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        // Right after the conversion a component may still be settling; plan says so and
        // exits 3 until it has.
        if out.status.code() == Some(0) {
            return plan["preflight"]["checks"]
                .as_array()
                .expect("checks")
                .iter()
                .filter(|c| c["id"] == id)
                .cloned()
                .collect();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "plan proceeds within 60 s: {}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_the_upgrader_reads_the_certificates_kept_in_secrets() {
    let (_sim, _dir, kubeconfig) = in_secrets_as(&manifest(), UPGRADER).await;
    let found = checks(&kubeconfig, "certificates").await;
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0]["verdict"], "pass", "{found:?}");
    // The roles also let it ask the kube-apiserver about etcd (/readyz/etcd).
    let etcd = checks(&kubeconfig, "etcd").await;
    assert_eq!(etcd[0]["verdict"], "pass", "{etcd:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_without_the_secrets_rule_or_as_the_viewer_the_plan_says_which_secret_it_may_not_read()
{
    let docs = cut(manifest(), Cut::Rule("Role", CONVERTER, SECRETS_RULE));
    let (sim, dir, kubeconfig) = in_secrets_as(&docs, UPGRADER).await;
    let viewer = dir.path().join("viewer");
    let yaml = sim
        .kubeconfig_for(UserInfo::service_account("kube-system", VIEWER))
        .expect("kubeconfig");
    std::fs::write(&viewer, yaml).expect("write kubeconfig");
    for (who, kubeconfig) in [(UPGRADER, &kubeconfig), (VIEWER, &viewer)] {
        let checks = checks(kubeconfig, "certificates").await;
        assert!(!checks.is_empty(), "{who}");
        assert!(
            checks.iter().all(|c| c["verdict"] == "warn"),
            "{who}: {checks:?}"
        );
        let words = format!("{} | {}", checks[0]["message"], checks[0]["fix"]);
        assert!(
            words.contains("this account may not get Secret kube-system/")
                && words.contains("selfhost-upgrader"),
            "{who}: {words}"
        );
    }
}
