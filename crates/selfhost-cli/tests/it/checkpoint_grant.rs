//! The checkpointer's access to kube-system Leases, on a simulated cluster that authorizes
//! every request by RBAC: a node's kubelet credentials (`system:node:<node>` in
//! `system:nodes`) may read those Leases, and write none, only while `selfhost checkpoint
//! install` has granted it, and not once `selfhost checkpoint remove` took the
//! checkpointer away; each node's grant leaves the others', and an operator's, as they are.

use std::path::PathBuf;
use std::process::Output;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use selfhost_sim::auth::UserInfo;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::{SimCluster, SimTimings};

const IMAGE: &str = "registry.example/selfhost:grant";
const GRANT: &str = "selfhost:checkpointer";
const MANIFESTS: &str = "/etc/kubernetes/manifests";

/// Two self-hosted control-plane nodes, RBAC deciding, the checkpointer's image available.
async fn cluster() -> SimCluster {
    SimCluster::builder()
        .rbac(true)
        .control_plane_nodes(2)
        .version("v1.33.1")
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(100))
        .image(IMAGE, ImageBehaviour::default())
        .start()
        .await
        .expect("cluster starts")
}

/// Runs `selfhost checkpoint <args> --node <node>` on `node`'s files with `kubeconfig`.
async fn checkpoint(
    sim: &SimCluster,
    kubeconfig: PathBuf,
    node: &str,
    args: &[&str],
) -> (Output, String) {
    let root = sim.node_root(node).expect("a node directory");
    let mut command = crate::selfhost();
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("checkpoint")
        .args(args)
        .args(["--node", node, "--manifests-dir", MANIFESTS, "--host-root"])
        .arg(root);
    let out = tokio::task::spawn_blocking(move || command.output().expect("selfhost runs"))
        .await
        .expect("joined");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

/// The admin's `selfhost checkpoint <args>` on `node`, which must succeed; what it said.
async fn as_admin(sim: &SimCluster, node: &str, args: &[&str]) -> String {
    let (out, stderr) = checkpoint(sim, sim.kubeconfig_path().to_path_buf(), node, args).await;
    assert_eq!(out.status.code(), Some(0), "{args:?} on {node}: {stderr}");
    stderr
}

/// A client with `node`'s kubelet credentials.
async fn as_node(sim: &SimCluster, node: &str) -> kube::Client {
    sim.client_for(UserInfo::user(
        &format!("system:node:{node}"),
        &["system:nodes"],
    ))
    .await
    .expect("a client")
}

fn forbidden<T>(result: &Result<T, kube::Error>) -> bool {
    matches!(result, Err(kube::Error::Api(status)) if status.code == 403)
}

/// Whether the node may list the Leases of kube-system; any failure but a denial fails.
async fn may_list_leases(node: &kube::Client) -> bool {
    let leases: Api<Lease> = Api::namespaced(node.clone(), "kube-system");
    let result = leases.list(&ListParams::default()).await;
    assert!(result.is_ok() || forbidden(&result), "{:?}", result.err());
    result.is_ok()
}

/// Whether the node may delete the Lease `name` of kube-system, asked as a dry run so that no
/// leader loses its Lease; any failure but a denial fails.
async fn may_delete_lease(node: &kube::Client, name: &str) -> bool {
    let leases: Api<Lease> = Api::namespaced(node.clone(), "kube-system");
    let params = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };
    let result = leases.delete(name, &params).await;
    assert!(
        result.is_ok() || forbidden(&result),
        "{name}: {:?}",
        result.err()
    );
    result.is_ok()
}

/// The subjects of the grant's RoleBinding as `kind/name`, or `None` without one.
async fn subjects(sim: &SimCluster) -> Option<Vec<String>> {
    let bindings: Api<RoleBinding> = Api::namespaced(sim.client(), "kube-system");
    let binding = bindings.get_opt(GRANT).await.expect("read")?;
    Some(
        binding
            .subjects
            .unwrap_or_default()
            .iter()
            .map(|s| format!("{}/{}", s.kind, s.name))
            .collect(),
    )
}

async fn role_exists(sim: &SimCluster) -> bool {
    let roles: Api<Role> = Api::namespaced(sim.client(), "kube-system");
    roles.get_opt(GRANT).await.expect("read").is_some()
}

/// Sets the subjects of the grant's RoleBinding as an operator would.
async fn operator_sets_subjects(sim: &SimCluster, subjects: Vec<Subject>) {
    let bindings: Api<RoleBinding> = Api::namespaced(sim.client(), "kube-system");
    let mut binding = bindings.get(GRANT).await.expect("the binding");
    binding.subjects = Some(subjects);
    bindings
        .replace(GRANT, &PostParams::default(), &binding)
        .await
        .expect("the operator's write");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_install_grants_its_node_the_leases_and_remove_takes_them_away() {
    let sim = cluster().await;
    let (cp1, cp2) = (as_node(&sim, "cp-1").await, as_node(&sim, "cp-2").await);
    // A Lease that is no leader's: the node may read it.
    let other = Lease {
        metadata: ObjectMeta {
            name: Some("someone-else".into()),
            ..ObjectMeta::default()
        },
        ..Lease::default()
    };
    Api::<Lease>::namespaced(sim.client(), "kube-system")
        .create(&PostParams::default(), &other)
        .await
        .expect("a Lease");
    assert!(
        !may_list_leases(&cp1).await,
        "a node may not read kube-system Leases by default"
    );

    let said = as_admin(
        &sim,
        "cp-1",
        &["install", "--checkpointer-image", IMAGE, "--dry-run"],
    )
    .await;
    assert!(
        said.contains("would grant node cp-1 read access to kube-system Leases"),
        "{said}"
    );
    assert_eq!(subjects(&sim).await, None, "a dry run grants nothing");
    assert!(!may_list_leases(&cp1).await);

    let said = as_admin(&sim, "cp-1", &["install", "--checkpointer-image", IMAGE]).await;
    assert!(said.contains("the checkpointer runs (wrote"), "{said}");
    assert!(
        said.contains("granted node cp-1 read access to kube-system Leases"),
        "{said}"
    );
    assert!(may_list_leases(&cp1).await, "granted by the install");
    let leases: Api<Lease> = Api::namespaced(cp1.clone(), "kube-system");
    leases
        .get("someone-else")
        .await
        .expect("cp-1 reads one Lease");
    // Leader Leases are released with the component's own credentials: the node writes none.
    for lease in ["kube-scheduler", "kube-controller-manager", "someone-else"] {
        assert!(!may_delete_lease(&cp1, lease).await, "{lease}");
    }
    assert!(!may_list_leases(&cp2).await, "cp-2 has no checkpointer yet");

    as_admin(&sim, "cp-2", &["install", "--checkpointer-image", IMAGE]).await;
    assert_eq!(
        subjects(&sim).await,
        Some(vec![
            "User/system:node:cp-1".into(),
            "User/system:node:cp-2".into()
        ]),
        "both nodes' subjects kept"
    );
    assert!(may_list_leases(&cp1).await && may_list_leases(&cp2).await);
    let said = as_admin(&sim, "cp-1", &["install", "--checkpointer-image", IMAGE]).await;
    assert!(
        said.contains("unchanged") && said.contains("node cp-1 already had read access"),
        "a re-run changes nothing: {said}"
    );

    // An operator binds a group of their own as well: removals leave it.
    let mut kept: Vec<Subject> = Vec::new();
    for name in ["system:node:cp-1", "system:node:cp-2", "ops"] {
        kept.push(Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: if name == "ops" { "Group" } else { "User" }.into(),
            name: name.into(),
            namespace: None,
        });
    }
    operator_sets_subjects(&sim, kept).await;

    let said = as_admin(&sim, "cp-1", &["remove", "--dry-run"]).await;
    assert!(
        said.contains("would revoke node cp-1's read access"),
        "{said}"
    );
    assert!(may_list_leases(&cp1).await, "a dry run revokes nothing");

    let said = as_admin(&sim, "cp-1", &["remove"]).await;
    assert!(said.contains("removed the checkpointer"), "{said}");
    assert!(said.contains("revoked node cp-1's read access"), "{said}");
    let manifests = sim.manifests_dir("cp-1").expect("dir");
    assert!(!manifests.join("selfhost-checkpointer.yaml").exists());
    assert!(!may_list_leases(&cp1).await, "revoked by the removal");
    assert!(!may_delete_lease(&cp1, "kube-scheduler").await);
    assert!(may_list_leases(&cp2).await, "cp-2 keeps its access");
    assert_eq!(
        subjects(&sim).await,
        Some(vec!["Group/ops".into(), "User/system:node:cp-2".into()])
    );

    // Once no subject is left, neither object is.
    operator_sets_subjects(&sim, Vec::new()).await;
    as_admin(&sim, "cp-2", &["install", "--checkpointer-image", IMAGE]).await;
    as_admin(&sim, "cp-2", &["remove"]).await;
    assert_eq!(subjects(&sim).await, None, "the RoleBinding is gone");
    assert!(!role_exists(&sim).await, "the Role is gone");
    assert!(!may_list_leases(&cp2).await);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_install_without_the_rbac_permissions_refuses_before_any_change() {
    let sim = cluster().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    let yaml = sim
        .kubeconfig_for(UserInfo::service_account("kube-system", "nobody"))
        .expect("kubeconfig");
    std::fs::write(&kubeconfig, yaml).expect("write kubeconfig");
    let (out, said) = checkpoint(
        &sim,
        kubeconfig.clone(),
        "cp-1",
        &["install", "--checkpointer-image", IMAGE],
    )
    .await;
    assert_eq!(out.status.code(), Some(3), "{said}");
    for needed in [
        "create on roles.rbac.authorization.k8s.io in namespace kube-system",
        r#"update on rolebindings.rbac.authorization.k8s.io "selfhost:checkpointer" in namespace kube-system"#,
        "get on leases.coordination.k8s.io in namespace kube-system",
        "selfhost checkpoint install refused before changing anything",
    ] {
        assert!(said.contains(needed), "{needed:?} in {said}");
    }
    let manifests = sim.manifests_dir("cp-1").expect("dir");
    assert!(!manifests.join("selfhost-checkpointer.yaml").exists());
    assert!(!role_exists(&sim).await && subjects(&sim).await.is_none());
    let (out, said) = checkpoint(&sim, kubeconfig, "cp-1", &["remove"]).await;
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(
        said.contains(r#"delete on roles.rbac.authorization.k8s.io "selfhost:checkpointer""#),
        "{said}"
    );

    // A copy the node may be running on is never taken away by a removal.
    let copy = manifests.join("selfhost-checkpoint-kube-scheduler.yaml");
    std::fs::write(&copy, "").expect("a copy");
    let admin = sim.kubeconfig_path().to_path_buf();
    let (out, said) = checkpoint(&sim, admin, "cp-1", &["remove"]).await;
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(said.contains("a checkpoint's copy is active"), "{said}");
    assert!(copy.exists(), "nothing removed");
    std::fs::remove_file(&copy).expect("removed");
    sim.shutdown().await;
}
