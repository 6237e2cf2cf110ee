//! The API permissions each command needs, and a check that asks the API server about all
//! of them before anything is done (a `SelfSubjectAccessReview` each, the question
//! `kubectl auth can-i` asks).
//!
//! Without the check, a missing permission would surface mid-way: an upgrade that may
//! create its backup DaemonSet but not update the real one would stop with the cluster
//! half-changed, and a watch that may not list would retry until its timeout. With it, a
//! command that lacks a permission refuses before changing anything and names every
//! permission it lacks. `deploy/rbac.yaml` grants exactly these lists; the RBAC tests of
//! the CLI prove each entry is needed.

use futures::{StreamExt, stream};
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use kube::Api;
use kube::api::PostParams;
use selfhost_core::Component;
use selfhost_core::checkpoint::grant::{GRANT_NAME, LEASES_GROUP, RBAC_GROUP, READ_VERBS};
use selfhost_core::config::CONFIGMAP_NAME;
use selfhost_core::daemonset::{certificate_secrets, kubeconfig_secrets};

use crate::retry::{RetryPolicy, with_retries};

/// How many reviews are asked at once.
const REVIEWS_IN_FLIGHT: usize = 4;

pub use crate::permission::{Permission, RBAC_MANIFEST};

/// What every command that looks at the control plane needs: the watched caches (cluster_view.rs),
/// the node list (observer.rs) and the health and version probes (health.rs).
pub fn observe() -> Vec<Permission> {
    let mut needs = Vec::new();
    for verb in ["list", "watch"] {
        needs.push(Permission::in_kube_system(verb, "apps", "daemonsets"));
        needs.push(Permission::in_kube_system(verb, "", "pods"));
        needs.push(Permission::in_kube_system(
            verb,
            "coordination.k8s.io",
            "leases",
        ));
        needs.push(Permission::cluster(verb, "", "nodes"));
    }
    for path in ["/readyz", "/version"] {
        needs.push(Permission::path("get", path));
    }
    needs
}

/// What rendering the targets from the cluster's kubeadm configuration needs (target.rs);
/// not needed with `--config FILE`.
pub fn cluster_config() -> Vec<Permission> {
    vec![Permission::in_kube_system("get", "", "configmaps").named(CONFIGMAP_NAME)]
}

/// The writes of an upgrade (api_write.rs), each on the objects it touches.
pub fn upgrade() -> Vec<Permission> {
    let daemonset = |verb: &str| Permission::in_kube_system(verb, "apps", "daemonsets");
    let mut needs = vec![daemonset("create")];
    for component in Component::ALL {
        needs.push(daemonset("update").named(&component.daemonset_name()));
        needs.push(daemonset("patch").named(&component.backup_name()));
        needs.push(daemonset("delete").named(&component.backup_name()));
        if let Some(lease) = component.leader_lease_name() {
            needs.push(
                Permission::in_kube_system("delete", "coordination.k8s.io", "leases").named(lease),
            );
        }
    }
    needs.push(Permission::in_kube_system("delete", "", "pods"));
    needs
}

/// What `--prepull` needs besides the reads (prepull.rs): create the prepull DaemonSets
/// `upgrade-prepull-<component>`, read one back when its watch may have missed it, and
/// delete them.
pub fn prepull() -> Vec<Permission> {
    let daemonset = |verb: &str| Permission::in_kube_system(verb, "apps", "daemonsets");
    let mut needs = vec![daemonset("create")];
    for component in Component::ALL {
        needs.push(daemonset("get").named(&component.prepull_name()));
        needs.push(daemonset("delete").named(&component.prepull_name()));
    }
    needs
}

/// The writes of `selfhost convert` (convert/run.rs and the files beside it) and the reads it
/// makes besides [`observe`]. Both directions need the same DaemonSet and node writes: each
/// may have to undo the other's half (a failed hand-over to self-hosted deletes the DaemonSet
/// it created, a failed one to static labels the node again), and either may find an
/// un-gated DaemonSet to gate.
///
/// - `node`: the node converted, read first (an unknown name is bad input) and labelled.
/// - the leader Leases of the controller-manager and the scheduler, handed over from the
///   stopping pod to the new one as the upgrade hands them over.
/// - `certs_in_secrets` (to self-hosted): every Secret of kubeadm's certificates and
///   kubeconfigs is created, or read and replaced when it exists.
/// - `secrets_read` (to static): the Secrets the live DaemonSets mount, read to write the
///   files missing on the node.
pub fn convert(node: &str, certs_in_secrets: bool, secrets_read: &[String]) -> Vec<Permission> {
    let daemonset = |verb: &str| Permission::in_kube_system(verb, "apps", "daemonsets");
    let mut needs = vec![
        Permission::cluster("get", "", "nodes").named(node),
        Permission::cluster("patch", "", "nodes").named(node),
        daemonset("create"),
    ];
    for component in Component::ALL {
        let name = component.daemonset_name();
        needs.push(daemonset("update").named(&name));
        needs.push(daemonset("delete").named(&name));
        // Leadership is handed over from the static pod to the DaemonSet's as in an upgrade.
        if let Some(lease) = component.leader_lease_name() {
            needs.push(
                Permission::in_kube_system("delete", "coordination.k8s.io", "leases").named(lease),
            );
        }
    }
    let secret =
        |verb: &str, name: &str| Permission::in_kube_system(verb, "", "secrets").named(name);
    if certs_in_secrets {
        needs.push(Permission::in_kube_system("create", "", "secrets"));
        for table in certificate_secrets()
            .into_iter()
            .chain(kubeconfig_secrets())
        {
            needs.push(secret("get", &table.name));
            needs.push(secret("update", &table.name));
        }
    }
    for get in read_secrets(secrets_read) {
        if !needs.contains(&get) {
            needs.push(get);
        }
    }
    needs
}

/// What granting a node's checkpointer read access to the Leases of kube-system needs
/// (checkpoint/grant.rs), and taking it away again when the checkpointer this run wrote does
/// not run: the Role and RoleBinding `selfhost:checkpointer`, created, or read and replaced;
/// and what the Role grants, which Kubernetes lets only a holder grant (RBAC's escalation
/// check): get, list and watch on Leases in kube-system.
pub fn checkpointer_grant() -> Vec<Permission> {
    let mut needs = Vec::new();
    for resource in ["roles", "rolebindings"] {
        needs.push(Permission::in_kube_system("create", RBAC_GROUP, resource));
        for verb in ["get", "update", "delete"] {
            needs.push(Permission::in_kube_system(verb, RBAC_GROUP, resource).named(GRANT_NAME));
        }
    }
    for verb in READ_VERBS {
        needs.push(Permission::in_kube_system(verb, LEASES_GROUP, "leases"));
    }
    needs
}

/// What taking a node's access away needs when its checkpointer is removed: its subject read
/// and written back out of the RoleBinding, which goes with the Role once no subject is left.
pub fn checkpointer_revoke() -> Vec<Permission> {
    let rbac = |verb: &str, resource: &str| {
        Permission::in_kube_system(verb, RBAC_GROUP, resource).named(GRANT_NAME)
    };
    vec![
        rbac("get", "rolebindings"),
        rbac("update", "rolebindings"),
        rbac("delete", "rolebindings"),
        rbac("delete", "roles"),
    ]
}

/// What `selfhost checkpoint install` needs: the grant, and the list of kube-system pods by
/// which it waits for the checkpointer's mirror pod.
pub fn checkpoint_install() -> Vec<Permission> {
    let mut needs = checkpointer_grant();
    needs.push(Permission::in_kube_system("list", "", "pods"));
    needs
}

/// Installing the node's API front: reading the kube-apiserver DaemonSet, the node and the
/// control-plane nodes, the fronts' mirror pods, and marking the DaemonSet to listen behind
/// them once every node runs one.
pub fn front_install() -> Vec<Permission> {
    vec![
        Permission::in_kube_system("get", "apps", "daemonsets"),
        Permission::in_kube_system("patch", "apps", "daemonsets"),
        Permission::cluster("get", "", "nodes"),
        Permission::cluster("list", "", "nodes"),
        Permission::in_kube_system("list", "", "pods"),
    ]
}

/// Removing the node's API front: reading the kube-apiserver DaemonSet.
pub fn front_remove() -> Vec<Permission> {
    vec![Permission::in_kube_system("get", "apps", "daemonsets")]
}

/// `needs` with each of `more` that is not in it yet.
pub fn adding(mut needs: Vec<Permission>, more: Vec<Permission>) -> Vec<Permission> {
    for permission in more {
        if !needs.contains(&permission) {
            needs.push(permission);
        }
    }
    needs
}

/// Reading these Secrets in kube-system, each once.
pub fn read_secrets(names: &[String]) -> Vec<Permission> {
    let mut needs: Vec<Permission> = Vec::new();
    for name in names {
        let get = Permission::in_kube_system("get", "", "secrets").named(name);
        if !needs.contains(&get) {
            needs.push(get);
        }
    }
    needs
}

/// What the check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessCheck {
    /// Every permission is granted.
    Granted,
    /// These are not.
    Missing(Vec<Permission>),
    /// The server could not be asked (reviews are not allowed or not served); the commands
    /// go on and a missing permission shows when it is used.
    Unknown(String),
}

/// Asks the API server whether the credentials in use have every permission in `needs`.
pub async fn check(
    client: &kube::Client,
    needs: &[Permission],
    policy: &RetryPolicy,
) -> AccessCheck {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let asks = needs.iter().map(|permission| {
        let reviews = reviews.clone();
        async move {
            let review = permission.review();
            let what = format!("ask whether we may {permission}");
            let params = PostParams::default();
            let answer = with_retries(&what, policy, || reviews.create(&params, &review)).await;
            (permission, answer)
        }
    });
    // A few at a time: a burst of a connection per question would cost a busy apiserver
    // more than the round trips it saves.
    let answers: Vec<_> = stream::iter(asks)
        .buffered(REVIEWS_IN_FLIGHT)
        .collect()
        .await;
    let mut missing = Vec::new();
    for (permission, answer) in answers {
        match answer {
            Ok(review) if review.status.as_ref().is_some_and(|s| s.allowed) => {}
            Ok(_) => missing.push(permission.clone()),
            // Not allowed to ask, reviews not served, or the API failing: say why and let the
            // command find out by using its permissions.
            Err(e) => return AccessCheck::Unknown(e.to_string()),
        }
    }
    if missing.is_empty() {
        AccessCheck::Granted
    } else {
        AccessCheck::Missing(missing)
    }
}

/// Why a command refuses to start: the permissions it lacks, and how to grant them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "forbidden: needs {}; {command} refused before changing anything. Grant {}: kubectl apply \
     -f {RBAC_MANIFEST}, then run selfhost as the service account kube-system/{role} (or bind \
     your user to its roles)",
    missing.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
    if missing.len() == 1 { "it" } else { "them" }
)]
pub struct PermissionsMissing {
    /// The command, e.g. `selfhost apply`.
    pub command: String,
    /// The service account of `deploy/rbac.yaml` that has them: `selfhost-viewer` or
    /// `selfhost-upgrader` (see [`VIEWER`], [`UPGRADER`]).
    pub role: String,
    /// What is missing.
    pub missing: Vec<Permission>,
}

#[cfg(test)]
mod tests {
    use selfhost_core::component::NAMESPACE;

    use super::*;

    #[test]
    fn permissions_read_as_kubectl_auth_can_i_would_ask_them() {
        let rows = [
            (
                Permission::in_kube_system("update", "apps", "daemonsets").named("ds"),
                r#"update on daemonsets.apps "ds" in namespace kube-system"#,
            ),
            (Permission::cluster("list", "", "nodes"), "list on nodes"),
            (Permission::path("get", "/readyz"), "get on /readyz"),
            (
                Permission::in_kube_system("delete", "", "pods"),
                "delete on pods in namespace kube-system",
            ),
        ];
        for (permission, text) in rows {
            assert_eq!(permission.to_string(), text);
        }
    }

    #[test]
    fn reviews_ask_about_exactly_the_permission() {
        let review = Permission::in_kube_system("patch", "", "nodes/status")
            .named("n1")
            .review();
        let attrs = review
            .spec
            .resource_attributes
            .expect("resource attributes");
        assert_eq!(attrs.resource.as_deref(), Some("nodes"));
        assert_eq!(attrs.subresource.as_deref(), Some("status"));
        assert_eq!(attrs.name.as_deref(), Some("n1"));
        assert_eq!(attrs.group.as_deref(), Some(""));
        let path = Permission::path("get", "/version").review();
        assert!(path.spec.resource_attributes.is_none());
        assert_eq!(
            path.spec
                .non_resource_attributes
                .and_then(|a| a.path)
                .as_deref(),
            Some("/version")
        );
    }

    #[test]
    fn upgrades_write_only_the_objects_of_the_pivot() {
        let names: Vec<String> = upgrade().iter().map(ToString::to_string).collect();
        assert!(names.contains(
            &r#"update on daemonsets.apps "self-hosted-kube-apiserver" in namespace kube-system"#
                .to_string()
        ));
        assert!(names.contains(
            &r#"delete on leases.coordination.k8s.io "kube-scheduler" in namespace kube-system"#
                .to_string()
        ));
        assert!(
            upgrade()
                .iter()
                .all(|p| p.namespace.as_deref() == Some(NAMESPACE)),
            "no cluster-wide write"
        );
    }

    #[test]
    fn conversions_write_only_their_objects_and_secrets_only_when_asked() {
        let plain: Vec<String> = convert("cp-1", false, &[])
            .iter()
            .map(ToString::to_string)
            .collect();
        for needed in [
            r#"patch on nodes "cp-1""#,
            r#"get on nodes "cp-1""#,
            "create on daemonsets.apps in namespace kube-system",
            r#"delete on daemonsets.apps "self-hosted-kube-scheduler" in namespace kube-system"#,
        ] {
            assert!(plain.iter().any(|p| p == needed), "{needed} in {plain:?}");
        }
        assert!(plain.iter().all(|p| !p.contains("secrets")), "{plain:?}");
        let certs: Vec<String> = convert("cp-1", true, &[])
            .iter()
            .map(ToString::to_string)
            .collect();
        for needed in [
            "create on secrets in namespace kube-system",
            r#"update on secrets "apiserver-etcd-client" in namespace kube-system"#,
            r#"get on secrets "scheduler.conf" in namespace kube-system"#,
        ] {
            assert!(certs.iter().any(|p| p == needed), "{needed} in {certs:?}");
        }
        let back = convert("cp-1", false, &["ca".to_string(), "ca".to_string()]);
        let reads: Vec<_> = back.iter().filter(|p| p.resource == "secrets").collect();
        assert_eq!(
            reads.len(),
            1,
            "each Secret read is asked about once: {reads:?}"
        );
        assert_eq!(reads[0].verb, "get");
    }

    #[test]
    fn the_checkpointers_grant_writes_only_its_own_objects_and_holds_what_it_grants() {
        let grant: Vec<String> = checkpointer_grant()
            .iter()
            .map(ToString::to_string)
            .collect();
        for needed in [
            "create on roles.rbac.authorization.k8s.io in namespace kube-system",
            "create on rolebindings.rbac.authorization.k8s.io in namespace kube-system",
            r#"update on rolebindings.rbac.authorization.k8s.io "selfhost:checkpointer" in namespace kube-system"#,
            r#"delete on roles.rbac.authorization.k8s.io "selfhost:checkpointer" in namespace kube-system"#,
            "get on leases.coordination.k8s.io in namespace kube-system",
            "watch on leases.coordination.k8s.io in namespace kube-system",
        ] {
            assert!(grant.iter().any(|p| p == needed), "{needed} in {grant:?}");
        }
        assert!(
            checkpointer_grant()
                .iter()
                .filter(|p| p.resource == "leases")
                .all(|p| READ_VERBS.contains(&p.verb.as_str())),
            "the grant reads Leases and writes none: {grant:?}"
        );
        assert!(
            checkpointer_grant()
                .iter()
                .filter(|p| p.verb != "create" && p.resource != "leases")
                .all(|p| p.name.as_deref() == Some("selfhost:checkpointer")),
            "every other RBAC write is of the grant's objects: {grant:?}"
        );
        let revoke = checkpointer_revoke();
        assert!(
            revoke.iter().all(|p| checkpointer_grant().contains(p)),
            "a run that grants may take its grant back: {revoke:?}"
        );
        assert!(revoke.iter().all(|p| p.verb != "create"), "{revoke:?}");
        let install = checkpoint_install();
        assert!(install.contains(&Permission::in_kube_system("list", "", "pods")));
        let merged = adding(observe(), checkpointer_grant());
        let lists = merged
            .iter()
            .filter(|p| p.verb == "list" && p.resource == "leases")
            .count();
        assert_eq!(lists, 1, "each permission asked about once");
    }

    #[test]
    fn the_refusal_lists_every_missing_permission_and_the_fix() {
        let err = PermissionsMissing {
            command: "selfhost apply".into(),
            role: "selfhost-upgrader".into(),
            missing: vec![
                Permission::in_kube_system("create", "apps", "daemonsets"),
                Permission::cluster("watch", "", "nodes"),
            ],
        };
        assert_eq!(
            err.to_string(),
            "forbidden: needs create on daemonsets.apps in namespace kube-system, watch on nodes; \
             selfhost apply refused before changing anything. Grant them: kubectl apply -f \
             deploy/rbac.yaml, then run selfhost as the service account \
             kube-system/selfhost-upgrader (or bind your user to its roles)"
        );
    }
}
