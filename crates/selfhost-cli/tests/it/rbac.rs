//! Least privilege: `status`, `plan` and a full `apply` work on a cluster that enforces RBAC
//! with exactly the roles of `deploy/rbac.yaml`, loaded over the API; with any one rule (or
//! one name of a rule) taken away, the command refuses before changing anything (exit 3,
//! DESIGN §2 "preflight refused"), naming the verb and resource it lacks and the fix.
//!
//! Why exit 3: the permissions are checked up front (SelfSubjectAccessReview), so a missing
//! one is found before any write, like a failed preflight check: nothing was changed and the
//! operator's fix is outside the cluster's state. Exit 1 would claim a failure that was
//! rolled back, and nothing was attempted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use selfhost_sim::auth::UserInfo;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::{SimCluster, SimTimings};
use serde_json::Value;

/// The manifest under test, as shipped.
const RBAC_YAML: &str = include_str!("../../../../deploy/rbac.yaml");
const FROM: &str = "v1.33.1";
const TO: &str = "v1.34.0";

/// The documents of deploy/rbac.yaml.
fn manifest() -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(RBAC_YAML)
        .expect("deploy/rbac.yaml is YAML")
        .into_iter()
        .filter(Value::is_object)
        .collect()
}

fn find<'a>(docs: &'a mut [Value], kind: &str, name: &str) -> &'a mut Value {
    docs.iter_mut()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("deploy/rbac.yaml has a {kind} {name}"))
}

/// One way of weakening the manifest.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// Remove the rule with this index from a role.
    Rule(&'static str, &'static str, usize),
    /// Remove one name from the `resourceNames` of a role's rule.
    Name(&'static str, &'static str, usize, &'static str),
    /// Remove a whole document (a binding).
    Document(&'static str, &'static str),
}

fn cut(mut docs: Vec<Value>, cut: Cut) -> Vec<Value> {
    match cut {
        Cut::Rule(kind, name, index) => {
            let rules = find(&mut docs, kind, name)["rules"]
                .as_array_mut()
                .expect("rules");
            assert!(index < rules.len(), "{kind} {name} has a rule {index}");
            rules.remove(index);
        }
        Cut::Name(kind, name, index, object) => {
            let names = find(&mut docs, kind, name)["rules"][index]["resourceNames"]
                .as_array_mut()
                .expect("resourceNames");
            let before = names.len();
            names.retain(|n| n != object);
            assert_eq!(names.len(), before - 1, "{object} was in the rule");
        }
        Cut::Document(kind, name) => {
            find(&mut docs, kind, name);
            docs.retain(|d| !(d["kind"] == kind && d["metadata"]["name"] == name));
        }
    }
    docs
}

/// Creates the documents through the API as the cluster's administrator.
async fn load(sim: &SimCluster, docs: &[Value]) {
    let client = sim.client();
    for doc in docs {
        let api_version = doc["apiVersion"].as_str().expect("apiVersion");
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = doc["kind"].as_str().expect("kind");
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        let object: DynamicObject = serde_json::from_value(doc.clone()).expect("an object");
        let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create {kind} {:?}: {e}", doc["metadata"]["name"]));
    }
}

async fn cluster() -> SimCluster {
    SimCluster::builder()
        .rbac(true)
        .control_plane_nodes(1)
        .version(FROM)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::fast())
        // The pause image the prepull pods of a v1.34 target run.
        .image("registry.k8s.io/pause:3.10.1", ImageBehaviour::default())
        .start()
        .await
        .expect("cluster starts")
}

/// A cluster with `docs` loaded and a kubeconfig for the service account `account` of
/// deploy/rbac.yaml (the directory holding it lives as long as the returned guard).
async fn cluster_as(docs: &[Value], account: &str) -> (SimCluster, tempfile::TempDir, PathBuf) {
    let sim = cluster().await;
    load(&sim, docs).await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("kubeconfig");
    let yaml = sim
        .kubeconfig_for(UserInfo::service_account("kube-system", account))
        .expect("kubeconfig");
    std::fs::write(&path, yaml).expect("write kubeconfig");
    (sim, dir, path)
}

/// Runs the binary from a blocking thread, so the simulator keeps serving meanwhile.
async fn selfhost(kubeconfig: &Path, args: &[&str]) -> Output {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        crate::selfhost()
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(&args)
            .timeout(Duration::from_secs(120))
            .output()
    })
    .await
    .expect("joined")
    .expect("runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What a refused run must leave alone: each DaemonSet's identity, generation and
/// annotations, each kube-system pod's identity and deletion state.
async fn snapshot(sim: &SimCluster) -> BTreeMap<String, String> {
    let client = sim.client();
    let lp = ListParams::default();
    let mut out = BTreeMap::new();
    for ds in Api::<DaemonSet>::namespaced(client.clone(), "kube-system")
        .list(&lp)
        .await
        .expect("list")
        .items
    {
        let m = &ds.metadata;
        out.insert(
            format!("ds/{}", m.name.clone().unwrap_or_default()),
            format!("{:?} {:?} {:?}", m.uid, m.generation, m.annotations),
        );
    }
    for pod in Api::<Pod>::namespaced(client, "kube-system")
        .list(&lp)
        .await
        .expect("list")
        .items
    {
        let m = &pod.metadata;
        out.insert(
            format!("pod/{}", m.name.clone().unwrap_or_default()),
            format!("{:?} {:?}", m.uid, m.deletion_timestamp),
        );
    }
    out
}

async fn images(sim: &SimCluster) -> Vec<String> {
    Api::<DaemonSet>::namespaced(sim.client(), "kube-system")
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .flat_map(|ds| ds.spec.iter().flat_map(|s| s.template.spec.iter()))
        .flat_map(|spec| spec.containers.iter().filter_map(|c| c.image.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_status_works_with_exactly_the_viewer_role() {
    let (sim, _dir, kubeconfig) = cluster_as(&manifest(), "selfhost-viewer").await;
    let out = selfhost(&kubeconfig, &["status"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("self-hosted-kube-apiserver"), "{stdout}");
    assert!(stdout.contains("ready"), "{stdout}");
    drop(sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_plan_works_with_exactly_the_viewer_role() {
    let (sim, _dir, kubeconfig) = cluster_as(&manifest(), "selfhost-viewer").await;
    let before = snapshot(&sim).await;
    let out = selfhost(&kubeconfig, &["plan", TO]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(TO));
    assert_eq!(snapshot(&sim).await, before, "plan changes nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_works_with_exactly_the_upgrader_roles() {
    let (sim, _dir, kubeconfig) = cluster_as(&manifest(), "selfhost-upgrader").await;
    let out = selfhost(&kubeconfig, &["apply", TO, "--yes"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let images = images(&sim).await;
    assert_eq!(images.len(), 3, "no backup left: {images:?}");
    assert!(images.iter().all(|i| i.ends_with(":v1.34.0")), "{images:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_the_viewer_cannot_apply_and_is_told_every_write_it_lacks() {
    let (sim, _dir, kubeconfig) = cluster_as(&manifest(), "selfhost-viewer").await;
    let before = snapshot(&sim).await;
    let out = selfhost(&kubeconfig, &["apply", TO, "--yes"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    for needed in [
        "forbidden: needs create on daemonsets.apps in namespace kube-system",
        r#"update on daemonsets.apps "self-hosted-kube-apiserver" in namespace kube-system"#,
        r#"delete on daemonsets.apps "temp-upgrade-self-hosted-kube-scheduler" in namespace kube-system"#,
        "delete on pods in namespace kube-system",
        r#"delete on leases.coordination.k8s.io "kube-controller-manager" in namespace kube-system"#,
        "kubectl apply -f deploy/rbac.yaml",
        "kube-system/selfhost-upgrader",
    ] {
        assert!(err.contains(needed), "{needed:?} in: {err}");
    }
    assert_eq!(snapshot(&sim).await, before, "nothing changed");
}

/// Takes `cut` away from deploy/rbac.yaml, runs `args` as `account`, and checks the refusal:
/// exit 3, every `needed` permission named, nothing else of ours, nothing changed.
async fn refused_without(
    cut_away: Cut,
    account: &str,
    args: &[&str],
    needed: &[&str],
    not_named: &[&str],
) {
    let (sim, _dir, kubeconfig) = cluster_as(&cut(manifest(), cut_away), account).await;
    let before = snapshot(&sim).await;
    let out = selfhost(&kubeconfig, args).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{cut_away:?}: {err}");
    assert!(err.contains("forbidden: needs "), "{cut_away:?}: {err}");
    assert!(err.contains("kubectl apply -f deploy/rbac.yaml"), "{err}");
    for permission in needed {
        assert!(
            err.contains(permission),
            "{cut_away:?}: {permission:?} in: {err}"
        );
    }
    for permission in not_named {
        assert!(
            !err.contains(permission),
            "{cut_away:?}: {permission:?} not in: {err}"
        );
    }
    assert_eq!(
        snapshot(&sim).await,
        before,
        "{cut_away:?}: nothing changed"
    );
}

const VIEWER: &str = "selfhost-viewer";
const UPGRADER: &str = "selfhost-upgrader";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_status_without_listing_daemonsets() {
    refused_without(
        Cut::Rule("Role", VIEWER, 0),
        VIEWER,
        &["status"],
        &[
            "list on daemonsets.apps in namespace kube-system",
            "watch on daemonsets.apps in namespace kube-system",
        ],
        &["on pods", "on nodes"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_status_without_listing_pods() {
    refused_without(
        Cut::Rule("Role", VIEWER, 1),
        VIEWER,
        &["status"],
        &[
            "list on pods in namespace kube-system",
            "watch on pods in namespace kube-system",
        ],
        &["on daemonsets", "on nodes"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_status_without_listing_leases() {
    refused_without(
        Cut::Rule("Role", VIEWER, 2),
        VIEWER,
        &["status"],
        &["watch on leases.coordination.k8s.io in namespace kube-system"],
        &["on pods"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_status_without_listing_nodes() {
    refused_without(
        Cut::Rule("ClusterRole", VIEWER, 0),
        VIEWER,
        &["status"],
        &["list on nodes", "watch on nodes"],
        &["on pods"],
    )
    .await;
}

/// Removes the bootstrap bindings that let every user read health, version and discovery
/// (a cluster may have had them removed); then only deploy/rbac.yaml grants the paths.
async fn without_public_paths(sim: &SimCluster) {
    let bindings: Api<DynamicObject> = Api::all_with(
        sim.client(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
        )),
    );
    for name in ["system:public-info-viewer", "system:discovery"] {
        bindings
            .delete(name, &Default::default())
            .await
            .expect("remove a bootstrap binding");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_status_where_health_is_not_public_works_with_the_viewer_role() {
    let (sim, _dir, kubeconfig) = cluster_as(&manifest(), VIEWER).await;
    without_public_paths(&sim).await;
    let out = selfhost(&kubeconfig, &["status"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(FROM),
        "/version was read"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_status_where_health_is_not_public_without_the_path_rule() {
    let (sim, _dir, kubeconfig) = cluster_as(
        &cut(manifest(), Cut::Rule("ClusterRole", VIEWER, 1)),
        VIEWER,
    )
    .await;
    without_public_paths(&sim).await;
    let before = snapshot(&sim).await;
    let out = selfhost(&kubeconfig, &["status"]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(
            r#"forbidden: needs get on /readyz (denied to user "system:serviceaccount:kube-system:selfhost-viewer")"#
        ),
        "{err}"
    );
    assert!(err.contains("kubectl apply -f deploy/rbac.yaml"), "{err}");
    assert_eq!(snapshot(&sim).await, before, "nothing changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_where_reviews_are_not_open_to_all_the_viewer_role_may_still_ask() {
    let (sim, _dir, kubeconfig) = cluster_as(&manifest(), VIEWER).await;
    let bindings: Api<DynamicObject> = Api::all_with(
        sim.client(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
        )),
    );
    bindings
        .delete("system:basic-user", &Default::default())
        .await
        .expect("remove the bootstrap binding that lets everyone ask");
    let out = selfhost(&kubeconfig, &["status"]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("cannot check the permissions"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_plan_without_reading_the_kubeadm_config() {
    refused_without(
        Cut::Rule("Role", VIEWER, 3),
        VIEWER,
        &["plan", TO],
        &[r#"get on configmaps "kubeadm-config" in namespace kube-system"#],
        &["on daemonsets", "on pods"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_plan_with_a_config_file_does_not_need_the_kubeadm_config() {
    let (sim, _dir, kubeconfig) =
        cluster_as(&cut(manifest(), Cut::Rule("Role", VIEWER, 3)), VIEWER).await;
    let config = crate::fixture("kubeadm-v1beta4.yaml");
    let out = selfhost(&kubeconfig, &["plan", TO, "--config", &config]).await;
    assert_ne!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!stderr(&out).contains("forbidden"), "{}", stderr(&out));
    drop(sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_without_creating_daemonsets() {
    refused_without(
        Cut::Rule("Role", UPGRADER, 0),
        UPGRADER,
        &["apply", TO, "--yes"],
        &["forbidden: needs create on daemonsets.apps in namespace kube-system;"],
        &["update on", "on pods", "on leases"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_without_updating_the_real_daemonsets() {
    refused_without(
        Cut::Rule("Role", UPGRADER, 1),
        UPGRADER,
        &["apply", TO, "--yes"],
        &[
            r#"update on daemonsets.apps "self-hosted-kube-apiserver" in namespace kube-system"#,
            r#"update on daemonsets.apps "self-hosted-kube-controller-manager" in namespace kube-system"#,
            r#"update on daemonsets.apps "self-hosted-kube-scheduler" in namespace kube-system"#,
        ],
        &["create on", "on pods", "on leases"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_without_updating_one_named_daemonset() {
    refused_without(
        Cut::Name("Role", UPGRADER, 1, "self-hosted-kube-scheduler"),
        UPGRADER,
        &["apply", TO, "--yes"],
        &[r#"forbidden: needs update on daemonsets.apps "self-hosted-kube-scheduler" in namespace kube-system;"#],
        &["kube-apiserver\" in", "kube-controller-manager\" in"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_without_patching_and_deleting_backups() {
    refused_without(
        Cut::Rule("Role", UPGRADER, 2),
        UPGRADER,
        &["apply", TO, "--yes"],
        &[
            r#"patch on daemonsets.apps "temp-upgrade-self-hosted-kube-apiserver" in namespace kube-system"#,
            r#"delete on daemonsets.apps "temp-upgrade-self-hosted-kube-scheduler" in namespace kube-system"#,
        ],
        &["update on", "create on", "on pods"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_without_deleting_pods() {
    refused_without(
        Cut::Rule("Role", UPGRADER, 4),
        UPGRADER,
        &["apply", TO, "--yes"],
        &["forbidden: needs delete on pods in namespace kube-system;"],
        &["on daemonsets", "on leases"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_without_handing_over_leases() {
    refused_without(
        Cut::Rule("Role", UPGRADER, 5),
        UPGRADER,
        &["apply", TO, "--yes"],
        &[
            r#"delete on leases.coordination.k8s.io "kube-controller-manager" in namespace kube-system"#,
            r#"delete on leases.coordination.k8s.io "kube-scheduler" in namespace kube-system"#,
        ],
        &["on daemonsets", "on pods"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_with_prepull_works_with_exactly_the_upgrader_roles() {
    let (sim, _dir, kubeconfig) = cluster_as(&manifest(), UPGRADER).await;
    let out = selfhost(&kubeconfig, &["apply", TO, "--yes", "--prepull"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let images = images(&sim).await;
    assert_eq!(
        images.len(),
        3,
        "no prepull or backup DaemonSet left: {images:?}"
    );
    assert!(images.iter().all(|i| i.ends_with(":v1.34.0")), "{images:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_with_prepull_without_its_rule() {
    refused_without(
        Cut::Rule("Role", UPGRADER, 3),
        UPGRADER,
        &["apply", TO, "--yes", "--prepull"],
        &[
            r#"get on daemonsets.apps "upgrade-prepull-kube-apiserver" in namespace kube-system"#,
            r#"delete on daemonsets.apps "upgrade-prepull-kube-scheduler" in namespace kube-system"#,
        ],
        &["update on", "on pods", "on leases"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_plan_with_prepull_needs_the_upgrader_roles() {
    refused_without(
        Cut::Document("RoleBinding", UPGRADER),
        VIEWER,
        &["plan", TO, "--prepull"],
        &[
            "forbidden: needs create on daemonsets.apps in namespace kube-system",
            r#"delete on daemonsets.apps "upgrade-prepull-kube-apiserver" in namespace kube-system"#,
            "kube-system/selfhost-upgrader",
        ],
        &["update on", "on pods"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_without_the_upgrader_binding() {
    refused_without(
        Cut::Document("RoleBinding", UPGRADER),
        UPGRADER,
        &["apply", TO, "--yes"],
        &[
            "create on daemonsets.apps in namespace kube-system",
            "delete on pods in namespace kube-system",
        ],
        &["list on", "watch on"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_apply_without_the_viewer_binding() {
    refused_without(
        Cut::Document("RoleBinding", VIEWER),
        UPGRADER,
        &["apply", TO, "--yes"],
        &[
            "list on daemonsets.apps in namespace kube-system",
            r#"get on configmaps "kubeadm-config" in namespace kube-system"#,
        ],
        &["list on nodes", "create on"],
    )
    .await;
}

/// Where the up-front check cannot be made (reviews not allowed), a denied write is still
/// reported in the same words when it happens — after the 403 was tried twice more (a
/// starting apiserver denies before its authorization cache loads) — and the run stops
/// there, saying how to resume. This is what the up-front check exists to prevent: the
/// backup DaemonSet was already created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_without_the_up_front_check_a_denied_write_still_names_the_permission() {
    let docs = cut(
        cut(manifest(), Cut::Rule("ClusterRole", VIEWER, 2)),
        Cut::Rule("Role", UPGRADER, 1),
    );
    let (sim, _dir, kubeconfig) = cluster_as(&docs, UPGRADER).await;
    let bindings: Api<DynamicObject> = Api::all_with(
        sim.client(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
        )),
    );
    bindings
        .delete("system:basic-user", &Default::default())
        .await
        .expect("remove the bootstrap binding that lets everyone ask");
    let out = selfhost(&kubeconfig, &["apply", TO, "--yes"]).await;
    let err = stderr(&out);
    assert!(
        err.contains("cannot check the permissions up front"),
        "{err}"
    );
    assert!(
        err.contains(
            r#"update DaemonSet kube-system/self-hosted-kube-apiserver: forbidden: needs update on daemonsets.apps "self-hosted-kube-apiserver" in namespace kube-system (denied to user "system:serviceaccount:kube-system:selfhost-upgrader")"#
        ),
        "{err}"
    );
    assert!(err.contains("(after 3 attempts)"), "{err}");
    assert!(err.contains("kubectl apply -f deploy/rbac.yaml"), "{err}");
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains(&format!("selfhost apply {TO}")),
        "says how to resume: {err}"
    );
}
