//! Granting a node's checkpointer read access to the Leases of kube-system, and taking it away
//! again: the Role and RoleBinding of [`selfhost_core::checkpoint::grant`], written with the
//! tool's own credentials wherever the checkpointer is installed or removed.
//!
//! Every write is a read, a change and a write back with the resourceVersion read, so that a
//! subject another node's run added meanwhile is never lost: a 409 Conflict reads again, a 409
//! AlreadyExists on a create reads what the other run created.

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams, Preconditions};
use selfhost_core::checkpoint::grant::{
    GRANT_NAME, binds_the_grant, grant_binding, grant_role, has_node, node_subject,
    role_as_rendered, with_node, without_node,
};
use selfhost_core::component::NAMESPACE;
use serde::Serialize;

use crate::api_call::{ApiCallError, FailureKind};
use crate::api_write::FIELD_MANAGER;
use crate::permission::{RBAC_MANIFEST, UPGRADER};
use crate::retry::{RetryPolicy, with_retries};

/// How many times a write that met another writer (a 409) reads the object again and tries
/// once more: a few nodes installing at once, not a writer that never stops.
const CONFLICT_REREADS: usize = 5;

/// What became of one node's access to the Leases of kube-system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum LeaseAccess {
    /// The node's subject is in the RoleBinding.
    Granted {
        /// The node.
        node: String,
        /// Whether this run added it (not there before).
        added: bool,
    },
    /// A dry run: the node's subject would be added.
    WouldGrant {
        /// The node.
        node: String,
    },
    /// The node's subject is not in the RoleBinding (the RoleBinding and the Role are gone
    /// once no subject is left).
    Revoked {
        /// The node.
        node: String,
        /// Whether this run removed it (there before).
        removed: bool,
    },
    /// A dry run: the node's subject would be removed.
    WouldRevoke {
        /// The node.
        node: String,
    },
}

impl std::fmt::Display for LeaseAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = "read access to kube-system Leases and delete of the leader Leases";
        let objects = format!("Role and RoleBinding {NAMESPACE}/{GRANT_NAME}");
        match self {
            LeaseAccess::Granted { node, added: true } => {
                write!(f, "granted node {node} {what} ({objects})")
            }
            LeaseAccess::Granted { node, added: false } => {
                write!(f, "node {node} already had {what} ({objects})")
            }
            LeaseAccess::WouldGrant { node } => {
                write!(f, "would grant node {node} {what} ({objects})")
            }
            LeaseAccess::Revoked {
                node,
                removed: true,
            } => {
                write!(f, "revoked node {node}'s {what} ({objects})")
            }
            LeaseAccess::Revoked {
                node,
                removed: false,
            } => write!(f, "node {node} had no {what} to revoke"),
            LeaseAccess::WouldRevoke { node } => {
                write!(f, "would revoke node {node}'s {what} ({objects})")
            }
        }
    }
}

/// Why a node's access could not be granted or revoked.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// An API call failed for good.
    #[error(
        "{} ({NAMESPACE}/{GRANT_NAME}) failed: {source}; {}",
        doing(node, *revoking),
        fix(source)
    )]
    Api {
        /// The node.
        node: String,
        /// Whether it was revoking rather than granting.
        revoking: bool,
        /// The call that failed.
        source: ApiCallError,
    },
    /// A RoleBinding of the grant's name binds something else: not selfhost's to write.
    #[error(
        "RoleBinding {NAMESPACE}/{GRANT_NAME} binds {kind} {name}, not Role {GRANT_NAME}: it is \
         not selfhost's, and a binding's role cannot be changed; delete it (kubectl -n \
         {NAMESPACE} delete rolebinding {GRANT_NAME}) and run again"
    )]
    ForeignBinding {
        /// The kind it refers to.
        kind: String,
        /// The name it refers to.
        name: String,
    },
}

/// What failed, in the user's terms.
fn doing(node: &str, revoking: bool) -> String {
    if revoking {
        format!("revoking node {node}'s access to kube-system Leases")
    } else {
        format!("granting node {node} read access to kube-system Leases")
    }
}

/// What to do about a failed call, in the user's terms.
fn fix(error: &ApiCallError) -> String {
    match error.kind {
        FailureKind::Forbidden => format!(
            "the credentials selfhost runs with need create, get, update and delete on Roles \
             and RoleBindings in {NAMESPACE} ({RBAC_MANIFEST}, service account {UPGRADER}, or \
             the cluster's admin.conf), and Kubernetes lets them grant only what they hold \
             themselves: get, list and watch on Leases in {NAMESPACE} and delete on the \
             leader Leases"
        ),
        FailureKind::Conflict | FailureKind::AlreadyExists => {
            "other writers kept changing it meanwhile; run the command again".to_string()
        }
        _ => "run the command again once the API server answers".to_string(),
    }
}

/// Adds `node`'s kubelet credentials to the grant: creates or updates the Role to the rendered
/// rules, then adds the node's subject to the RoleBinding (created when absent). With
/// `dry_run`, reads and writes nothing and says what it would do.
///
/// # Errors
/// A call fails for good (a 403 names the permission and how to grant it), or a RoleBinding
/// of the grant's name binds another role.
pub async fn grant(
    api: &kube::Client,
    node: &str,
    dry_run: bool,
) -> Result<LeaseAccess, GrantError> {
    if dry_run {
        return Ok(LeaseAccess::WouldGrant {
            node: node.to_string(),
        });
    }
    let failed = |source| GrantError::Api {
        node: node.to_string(),
        revoking: false,
        source,
    };
    ensure_role(api).await.map_err(failed)?;
    let added = add_subject(api, node).await?;
    Ok(LeaseAccess::Granted {
        node: node.to_string(),
        added,
    })
}

/// Takes `node`'s kubelet credentials out of the grant, leaving every other subject; once no
/// subject is left, deletes the RoleBinding and the Role. With `dry_run`, reads and writes
/// nothing and says what it would do.
///
/// # Errors
/// A call fails for good, or a RoleBinding of the grant's name binds another role.
pub async fn revoke(
    api: &kube::Client,
    node: &str,
    dry_run: bool,
) -> Result<LeaseAccess, GrantError> {
    if dry_run {
        return Ok(LeaseAccess::WouldRevoke {
            node: node.to_string(),
        });
    }
    let removed = remove_subject(api, node).await?;
    Ok(LeaseAccess::Revoked {
        node: node.to_string(),
        removed,
    })
}

fn post() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    }
}

/// Whether a failed write met another writer, and the object is to be read again.
fn raced(result: &Result<impl Sized, ApiCallError>) -> bool {
    result.as_ref().is_err_and(|e| {
        matches!(
            e.kind,
            FailureKind::Conflict | FailureKind::AlreadyExists | FailureKind::NotFound
        )
    })
}

/// Creates the Role, or writes the rendered rules back into the live one.
async fn ensure_role(api: &kube::Client) -> Result<(), ApiCallError> {
    let roles: Api<Role> = Api::namespaced(api.clone(), NAMESPACE);
    let (policy, post, rendered) = (RetryPolicy::default(), post(), grant_role());
    let mut result = Ok(());
    for _ in 0..=CONFLICT_REREADS {
        let live = with_retries(
            &format!("get Role {NAMESPACE}/{GRANT_NAME}"),
            &policy,
            || roles.get_opt(GRANT_NAME),
        )
        .await?;
        result = match live {
            None => with_retries(
                &format!("create Role {NAMESPACE}/{GRANT_NAME}"),
                &policy,
                || roles.create(&post, &rendered),
            )
            .await
            .map(drop),
            Some(live) => match role_as_rendered(&live) {
                None => return Ok(()),
                Some(role) => with_retries(
                    &format!("update Role {NAMESPACE}/{GRANT_NAME}"),
                    &policy,
                    || roles.replace(GRANT_NAME, &post, &role),
                )
                .await
                .map(drop),
            },
        };
        if !raced(&result) {
            break;
        }
    }
    result
}

/// Adds the node's subject to the RoleBinding, creating it when absent; whether it was not
/// there before.
async fn add_subject(api: &kube::Client, node: &str) -> Result<bool, GrantError> {
    let bindings: Api<RoleBinding> = Api::namespaced(api.clone(), NAMESPACE);
    let (policy, post) = (RetryPolicy::default(), post());
    let rendered = grant_binding(vec![node_subject(node)]);
    let failed = |source| GrantError::Api {
        node: node.to_string(),
        revoking: false,
        source,
    };
    let mut result = Ok(false);
    for _ in 0..=CONFLICT_REREADS {
        let live = read_binding(&bindings, &policy).await.map_err(failed)?;
        if let Some(foreign) = live.as_ref().filter(|b| !binds_the_grant(b)) {
            return Err(GrantError::ForeignBinding {
                kind: foreign.role_ref.kind.clone(),
                name: foreign.role_ref.name.clone(),
            });
        }
        result = match live {
            None => with_retries(
                &format!("create RoleBinding {NAMESPACE}/{GRANT_NAME}"),
                &policy,
                || bindings.create(&post, &rendered),
            )
            .await
            .map(|_| true),
            Some(mut live) => {
                let subjects = live.subjects.take().unwrap_or_default();
                if has_node(&subjects, node) {
                    return Ok(false);
                }
                live.subjects = Some(with_node(&subjects, node));
                live.metadata.managed_fields = None;
                with_retries(
                    &format!("update RoleBinding {NAMESPACE}/{GRANT_NAME}"),
                    &policy,
                    || bindings.replace(GRANT_NAME, &post, &live),
                )
                .await
                .map(|_| true)
            }
        };
        if !raced(&result) {
            break;
        }
    }
    result.map_err(failed)
}

/// Takes the node's subject out of the RoleBinding; deletes it and the Role once no subject
/// is left. Whether the subject was there.
async fn remove_subject(api: &kube::Client, node: &str) -> Result<bool, GrantError> {
    let bindings: Api<RoleBinding> = Api::namespaced(api.clone(), NAMESPACE);
    let (policy, post) = (RetryPolicy::default(), post());
    let failed = |source| GrantError::Api {
        node: node.to_string(),
        revoking: true,
        source,
    };
    let mut result: Result<(), ApiCallError> = Ok(());
    for _ in 0..=CONFLICT_REREADS {
        let live = read_binding(&bindings, &policy).await.map_err(failed)?;
        let Some(mut live) = live else {
            // No binding grants nothing; a Role left by a revoke stopped between its two
            // deletes goes with it.
            delete_role(api, &policy).await.map_err(failed)?;
            return Ok(false);
        };
        if !binds_the_grant(&live) {
            // Not selfhost's: nothing of it was granted by an install, and it is left alone.
            tracing::warn!(
                role = %live.role_ref.name,
                "RoleBinding {NAMESPACE}/{GRANT_NAME} binds another role; left as it is"
            );
            return Ok(false);
        }
        let subjects = live.subjects.take().unwrap_or_default();
        if !has_node(&subjects, node) {
            return Ok(false);
        }
        let left = without_node(&subjects, node);
        result = if left.is_empty() {
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: live.metadata.uid.clone(),
                    resource_version: live.metadata.resource_version.clone(),
                }),
                ..DeleteParams::default()
            };
            with_retries(
                &format!("delete RoleBinding {NAMESPACE}/{GRANT_NAME}"),
                &policy,
                || bindings.delete(GRANT_NAME, &params),
            )
            .await
            .map(drop)
        } else {
            live.subjects = Some(left.clone());
            live.metadata.managed_fields = None;
            with_retries(
                &format!("update RoleBinding {NAMESPACE}/{GRANT_NAME}"),
                &policy,
                || bindings.replace(GRANT_NAME, &post, &live),
            )
            .await
            .map(drop)
        };
        if raced(&result) {
            continue;
        }
        result.map_err(failed)?;
        if left.is_empty() {
            delete_role(api, &policy).await.map_err(failed)?;
        }
        return Ok(true);
    }
    result.map(|()| true).map_err(failed)
}

/// The RoleBinding of the grant's name, if there is one.
async fn read_binding(
    bindings: &Api<RoleBinding>,
    policy: &RetryPolicy,
) -> Result<Option<RoleBinding>, ApiCallError> {
    with_retries(
        &format!("get RoleBinding {NAMESPACE}/{GRANT_NAME}"),
        policy,
        || bindings.get_opt(GRANT_NAME),
    )
    .await
}

/// Deletes the Role; gone already is as good.
async fn delete_role(api: &kube::Client, policy: &RetryPolicy) -> Result<(), ApiCallError> {
    let roles: Api<Role> = Api::namespaced(api.clone(), NAMESPACE);
    let params = DeleteParams::default();
    match with_retries(
        &format!("delete Role {NAMESPACE}/{GRANT_NAME}"),
        policy,
        || roles.delete(GRANT_NAME, &params),
    )
    .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind == FailureKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(kind: FailureKind, message: &str) -> ApiCallError {
        ApiCallError {
            what: format!("create Role {NAMESPACE}/{GRANT_NAME}"),
            kind,
            message: message.into(),
            attempts: 1,
            source: None,
        }
    }

    #[test]
    fn outcomes_say_which_node_gets_or_loses_what() {
        let node = || "cp-1".to_string();
        let rows = [
            (
                LeaseAccess::WouldGrant { node: node() },
                "would grant node cp-1 read access to kube-system Leases and delete of the \
                 leader Leases (Role and RoleBinding kube-system/selfhost:checkpointer)",
            ),
            (
                LeaseAccess::Granted {
                    node: node(),
                    added: true,
                },
                "granted node cp-1 read access to kube-system Leases",
            ),
            (
                LeaseAccess::Granted {
                    node: node(),
                    added: false,
                },
                "node cp-1 already had read access to kube-system Leases",
            ),
            (
                LeaseAccess::WouldRevoke { node: node() },
                "would revoke node cp-1's read access to kube-system Leases",
            ),
            (
                LeaseAccess::Revoked {
                    node: node(),
                    removed: true,
                },
                "revoked node cp-1's read access to kube-system Leases",
            ),
            (
                LeaseAccess::Revoked {
                    node: node(),
                    removed: false,
                },
                "node cp-1 had no read access to kube-system Leases",
            ),
        ];
        for (access, text) in rows {
            assert!(access.to_string().starts_with(text), "{access}");
        }
    }

    #[test]
    fn a_failure_says_what_failed_and_how_to_fix_it() {
        let denied = GrantError::Api {
            node: "cp-1".into(),
            revoking: false,
            source: failure(
                FailureKind::Forbidden,
                "forbidden: needs create on roles.rbac.authorization.k8s.io in namespace \
                 kube-system",
            ),
        }
        .to_string();
        for said in [
            "granting node cp-1 read access to kube-system Leases \
             (kube-system/selfhost:checkpointer) failed: create Role",
            "needs create on roles.rbac.authorization.k8s.io",
            "need create, get, update and delete on Roles and RoleBindings in kube-system",
            "deploy/rbac.yaml",
            "grant only what they hold",
        ] {
            assert!(denied.contains(said), "{said:?} in {denied}");
        }
        let raced = GrantError::Api {
            node: "cp-2".into(),
            revoking: true,
            source: failure(FailureKind::Conflict, "the object has been modified"),
        }
        .to_string();
        assert!(raced.starts_with("revoking node cp-2's access"), "{raced}");
        assert!(raced.ends_with("run the command again"), "{raced}");
        let foreign = GrantError::ForeignBinding {
            kind: "ClusterRole".into(),
            name: "view".into(),
        }
        .to_string();
        assert!(
            foreign.contains("binds ClusterRole view")
                && foreign.contains("kubectl -n kube-system delete rolebinding"),
            "{foreign}"
        );
    }
}
