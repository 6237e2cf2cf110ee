//! Least privilege: `status`, `plan` and a full `apply` work on a cluster that enforces RBAC
//! with exactly the roles of `deploy/rbac.yaml`, loaded over the API; with any one rule (or
//! one name of a rule) taken away, the command refuses before changing anything (exit 3,
//! DESIGN §2 "preflight refused"), naming the verb and resource it lacks and the fix.
//!
//! Why exit 3: the permissions are checked up front (SelfSubjectAccessReview), so a missing
//! one is found before any write, like a failed preflight check: nothing was changed and the
//! operator's fix is outside the cluster's state. Exit 1 would claim a failure that was
//! rolled back, and nothing was attempted.

mod certificates;
mod convert;
mod deprecated_apis;
mod fixture;

use fixture::*;

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
    remove_cluster_role_binding(&sim, "system:basic-user").await;
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
    remove_cluster_role_binding(&sim, "system:basic-user").await;
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

/// Where the up-front check cannot be made, a denied watch is named too: the first list
/// waits its time (the watches retry, as a starting apiserver may deny at first), then the
/// refusal says which permission the watch lacks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_without_the_up_front_check_a_denied_watch_still_names_the_permission() {
    let docs = cut(
        cut(manifest(), Cut::Rule("ClusterRole", VIEWER, 2)),
        Cut::Rule("Role", VIEWER, 1),
    );
    let (sim, _dir, kubeconfig) = cluster_as(&docs, VIEWER).await;
    remove_cluster_role_binding(&sim, "system:basic-user").await;
    let out = selfhost(&kubeconfig, &["status"]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains(
            r#"last error from the API: cannot list: forbidden: needs list on pods in namespace kube-system (denied to user "system:serviceaccount:kube-system:selfhost-viewer")"#
        ),
        "{err}"
    );
    assert!(err.contains("kubectl apply -f deploy/rbac.yaml"), "{err}");
}

/// `selfhost convert` both ways as the upgrader service account with exactly
/// deploy/rbac.yaml: the CONVERT rules are enough. (Not with --certs-in-secrets: the command
/// reads the host's /etc/kubernetes, which a test cannot provide; its Secret rules are read
/// from the code.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_convert_both_ways_works_with_exactly_the_upgrader_roles() {
    let sim = static_cluster().await;
    load(&sim, &manifest()).await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let kubeconfig = dir.path().join("kubeconfig");
    let yaml = sim
        .kubeconfig_for(selfhost_sim::auth::UserInfo::service_account(
            "kube-system",
            UPGRADER,
        ))
        .expect("kubeconfig");
    std::fs::write(&kubeconfig, yaml).expect("write kubeconfig");
    let manifests = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let manifests = manifests.to_str().expect("UTF-8 path");
    let convert = |direction: &'static str, extra: &'static [&'static str]| {
        let mut args = vec!["convert", direction, "--node", "cp-1", "--manifests-dir"];
        args.push(manifests);
        args.push("--yes");
        args.extend_from_slice(extra);
        args
    };
    let out = selfhost(
        &kubeconfig,
        &convert("to-self-hosted", &["--no-checkpointer"]),
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        images(&sim).await.len(),
        3,
        "the self-hosted DaemonSets exist"
    );
    let out = selfhost(&kubeconfig, &convert("to-static", &[])).await;
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(images(&sim).await.is_empty(), "the DaemonSets are gone");
}
