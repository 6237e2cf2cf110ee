//! `selfhost convert` under RBAC: it asks about every permission it needs before anything is
//! done (the CONVERT rules of deploy/rbac.yaml, with those of selfhost-viewer and
//! selfhost-upgrader), and with any one of them taken away it refuses with exit 3, naming
//! the verb and resource, with the node's files and the cluster unchanged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use selfhost_sim::SimCluster;
use selfhost_sim::auth::UserInfo;

use super::fixture::*;

const UPGRADER: &str = "selfhost-upgrader";
const CONVERTER: &str = "selfhost-converter";
const VIEWER: &str = "selfhost-viewer";

/// A static one-node cluster enforcing `docs`, and a kubeconfig for the upgrader account.
async fn static_cluster_as(docs: &[serde_json::Value]) -> (SimCluster, tempfile::TempDir, PathBuf) {
    let sim = static_cluster().await;
    load(&sim, docs).await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let kubeconfig = dir.path().join("kubeconfig");
    let yaml = sim
        .kubeconfig_for(UserInfo::service_account("kube-system", UPGRADER))
        .expect("kubeconfig");
    std::fs::write(&kubeconfig, yaml).expect("write kubeconfig");
    (sim, dir, kubeconfig)
}

fn convert_args<'a>(direction: &'a str, manifests: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "convert",
        direction,
        "--node",
        "cp-1",
        "--manifests-dir",
        manifests,
        "--yes",
    ];
    args.extend_from_slice(extra);
    args
}

/// Everything a refused conversion must leave alone: the objects of [`snapshot`], the node's
/// labels, and the files of the manifests directory and beside it.
async fn state(sim: &SimCluster, manifests: &Path) -> (BTreeMap<String, String>, String, String) {
    let node = Api::<Node>::all(sim.client())
        .get("cp-1")
        .await
        .expect("node");
    let labels = format!("{:?}", node.metadata.labels);
    let parent = manifests.parent().expect("parent");
    let mut files: Vec<String> = walkdir(parent);
    files.sort();
    (snapshot(sim).await, labels, files.join("\n"))
}

fn walkdir(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walkdir(&path));
        } else {
            let content = std::fs::read(&path).unwrap_or_default();
            out.push(format!("{} {}", path.display(), content.len()));
        }
    }
    out
}

/// Each rule convert needs, taken away in turn: refused up front, every permission of the
/// rule named, nothing changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_convert_without_each_of_its_rules_refuses_naming_it() {
    let cases: &[(Cut, &str, &[&str], &[&str])] = &[
        (
            Cut::Rule("ClusterRole", CONVERTER, 0),
            "to-self-hosted",
            &[],
            &[r#"get on nodes "cp-1""#, r#"patch on nodes "cp-1""#],
        ),
        (
            Cut::Rule("Role", UPGRADER, 0),
            "to-self-hosted",
            &[],
            &["create on daemonsets.apps in namespace kube-system"],
        ),
        (
            Cut::Name("Role", UPGRADER, 1, "self-hosted-kube-controller-manager"),
            "to-self-hosted",
            &[],
            &[
                r#"update on daemonsets.apps "self-hosted-kube-controller-manager" in namespace kube-system"#,
            ],
        ),
        (
            Cut::Rule("Role", UPGRADER, 5),
            "to-self-hosted",
            &[],
            &[
                r#"delete on leases.coordination.k8s.io "kube-controller-manager" in namespace kube-system"#,
                r#"delete on leases.coordination.k8s.io "kube-scheduler" in namespace kube-system"#,
            ],
        ),
        (
            Cut::Rule("Role", CONVERTER, 0),
            "to-static",
            &[],
            &[
                r#"delete on daemonsets.apps "self-hosted-kube-apiserver" in namespace kube-system"#,
                r#"delete on daemonsets.apps "self-hosted-kube-scheduler" in namespace kube-system"#,
            ],
        ),
        (
            Cut::Rule("Role", CONVERTER, 1),
            "to-self-hosted",
            &["--certs-in-secrets"],
            &["create on secrets in namespace kube-system"],
        ),
        (
            Cut::Name("Role", CONVERTER, 2, "apiserver-etcd-client"),
            "to-self-hosted",
            &["--certs-in-secrets"],
            &[
                r#"get on secrets "apiserver-etcd-client" in namespace kube-system"#,
                r#"update on secrets "apiserver-etcd-client" in namespace kube-system"#,
            ],
        ),
        (
            Cut::Rule("Role", VIEWER, 3),
            "to-self-hosted",
            &[],
            &[r#"get on configmaps "kubeadm-config" in namespace kube-system"#],
        ),
        // The checkpointer's grant: its Role and RoleBinding, and what the Role grants.
        (
            Cut::Rule("Role", CONVERTER, 3),
            "to-self-hosted",
            &[],
            &[
                "create on roles.rbac.authorization.k8s.io in namespace kube-system",
                "create on rolebindings.rbac.authorization.k8s.io in namespace kube-system",
            ],
        ),
        (
            Cut::Rule("Role", CONVERTER, 4),
            "to-static",
            &[],
            &[
                r#"update on rolebindings.rbac.authorization.k8s.io "selfhost:checkpointer" in namespace kube-system"#,
                r#"delete on roles.rbac.authorization.k8s.io "selfhost:checkpointer" in namespace kube-system"#,
            ],
        ),
        (
            Cut::Rule("Role", CONVERTER, 5),
            "to-self-hosted",
            &[],
            &["get on leases.coordination.k8s.io in namespace kube-system"],
        ),
    ];
    for (cut_away, direction, extra, needed) in cases {
        let (sim, _dir, kubeconfig) = static_cluster_as(&cut(manifest(), *cut_away)).await;
        let manifests = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
        let shown = manifests.to_str().expect("UTF-8 path");
        let before = state(&sim, &manifests).await;
        let out = selfhost(&kubeconfig, &convert_args(direction, shown, extra)).await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(3), "{cut_away:?}: {err}");
        assert!(
            err.contains("forbidden: needs ")
                && err.contains("selfhost convert refused before changing anything")
                && err.contains("kubectl apply -f deploy/rbac.yaml"),
            "{cut_away:?}: {err}"
        );
        for permission in *needed {
            assert!(
                err.contains(permission),
                "{cut_away:?}: {permission} in: {err}"
            );
        }
        assert_eq!(
            state(&sim, &manifests).await,
            before,
            "{cut_away:?}: nothing changed"
        );
    }
}

/// With a configuration file, the cluster's kubeadm-config is not read, so its rule is not
/// needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_convert_with_a_config_file_does_not_need_the_kubeadm_config() {
    let (sim, _dir, kubeconfig) =
        static_cluster_as(&cut(manifest(), Cut::Rule("Role", VIEWER, 3))).await;
    let manifests = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let shown = manifests.to_str().expect("UTF-8 path");
    let config = crate::fixture("kubeadm-v1beta4.yaml");
    let out = selfhost(
        &kubeconfig,
        &convert_args("to-self-hosted", shown, &["--dry-run", "--config", &config]),
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("forbidden"), "{}", stderr(&out));
}

/// `--certs-in-secrets` with exactly deploy/rbac.yaml gets past the permission check (the
/// run then stops at reading the host's certificates, which a test cannot provide: bad
/// input, before any change).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_convert_with_certs_in_secrets_has_every_permission_it_asks_for() {
    let (sim, _dir, kubeconfig) = static_cluster_as(&manifest()).await;
    let manifests = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let shown = manifests.to_str().expect("UTF-8 path");
    let before = state(&sim, &manifests).await;
    let out = selfhost(
        &kubeconfig,
        &convert_args("to-self-hosted", shown, &["--certs-in-secrets"]),
    )
    .await;
    let err = stderr(&out);
    assert!(!err.contains("forbidden"), "{err}");
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot read"), "{err}");
    assert_eq!(state(&sim, &manifests).await, before, "nothing changed");
}
