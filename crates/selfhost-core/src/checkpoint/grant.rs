//! What the checkpointer may do beyond what its node's credentials already allow: read the
//! Leases of kube-system.
//!
//! The checkpointer reaches the API with the kubelet's credentials (user `system:node:<node>`,
//! group `system:nodes`). The Node authorizer has no opinion on Leases outside
//! `kube-node-lease`, so RBAC decides, and by default a node may not read the kube-apiserver
//! identity Leases nor the leader Leases of kube-system. One Role, [`GRANT_NAME`] in
//! kube-system, holds exactly that, and one RoleBinding of the same name binds it to the user
//! of every node that runs the checkpointer: installing the checkpointer adds its node's
//! subject, removing it takes that subject away again.
//!
//! Reads only: the NodeRestriction admission plugin (kubeadm enables it) refuses any write of a
//! node to a Lease outside `kube-node-lease`, whatever RBAC allows. A leader Lease is released
//! with the credentials of the component that holds it instead (`leader_release.rs`), which
//! Kubernetes' own roles let update its Lease.
//!
//! Everything here is pure: the objects as rendered, and the subjects after adding or removing
//! a node, whatever other subjects an operator bound meanwhile.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::component::{MANAGED_BY, MANAGED_BY_LABEL, NAMESPACE};

/// The name of the Role and of the RoleBinding, both in kube-system.
pub const GRANT_NAME: &str = "selfhost:checkpointer";
/// The API group of Roles, RoleBindings and of `User` subjects.
pub const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
/// The API group of Leases.
pub const LEASES_GROUP: &str = "coordination.k8s.io";
/// The verbs of the read rule: the checkpointer lists and watches the Leases, and reads one.
pub const READ_VERBS: [&str; 3] = ["get", "list", "watch"];

/// The user a node's kubelet credentials authenticate as.
pub fn node_user(node: &str) -> String {
    format!("system:node:{node}")
}

/// The Role's one rule: read every Lease of kube-system (the identity Leases are named after a
/// hash of each apiserver's host, so no names can be given).
pub fn grant_rules() -> Vec<PolicyRule> {
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
    vec![PolicyRule {
        api_groups: Some(strings(&[LEASES_GROUP])),
        resources: Some(strings(&["leases"])),
        verbs: strings(&READ_VERBS),
        ..PolicyRule::default()
    }]
}

/// Metadata of both objects: their name in kube-system, labelled as everything selfhost
/// creates.
fn metadata() -> ObjectMeta {
    ObjectMeta {
        name: Some(GRANT_NAME.to_string()),
        namespace: Some(NAMESPACE.to_string()),
        labels: Some(BTreeMap::from([(
            MANAGED_BY_LABEL.to_string(),
            MANAGED_BY.to_string(),
        )])),
        ..ObjectMeta::default()
    }
}

/// The Role as rendered.
pub fn grant_role() -> Role {
    Role {
        metadata: metadata(),
        rules: Some(grant_rules()),
    }
}

/// The live Role with the rendered rules and label, to be written back with its own
/// resourceVersion; `None` when it has them already. Labels an operator added are kept.
pub fn role_as_rendered(live: &Role) -> Option<Role> {
    let labelled = live
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY);
    if labelled && live.rules.as_ref() == Some(&grant_rules()) {
        return None;
    }
    let mut role = live.clone();
    role.metadata.managed_fields = None;
    role.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY.to_string());
    role.rules = Some(grant_rules());
    Some(role)
}

/// The reference every binding of the grant has to the Role.
pub fn grant_role_ref() -> RoleRef {
    RoleRef {
        api_group: RBAC_GROUP.to_string(),
        kind: "Role".to_string(),
        name: GRANT_NAME.to_string(),
    }
}

/// The RoleBinding as rendered, binding the Role to `subjects`.
pub fn grant_binding(subjects: Vec<Subject>) -> RoleBinding {
    RoleBinding {
        metadata: metadata(),
        role_ref: grant_role_ref(),
        subjects: Some(subjects),
    }
}

/// Whether a live RoleBinding of the grant's name binds the grant's Role. A binding's
/// `roleRef` cannot be changed, so one that refers to anything else is not selfhost's to
/// write.
pub fn binds_the_grant(binding: &RoleBinding) -> bool {
    binding.role_ref == grant_role_ref()
}

/// The subject of one node's kubelet credentials.
pub fn node_subject(node: &str) -> Subject {
    Subject {
        api_group: Some(RBAC_GROUP.to_string()),
        kind: "User".to_string(),
        name: node_user(node),
        namespace: None,
    }
}

/// What identifies a subject: the API server defaults the group of `User` and `Group`
/// subjects, so one written without it is the same subject.
fn key(subject: &Subject) -> (String, String, String, String) {
    let group = match (subject.api_group.as_deref(), subject.kind.as_str()) {
        (None | Some(""), "User" | "Group") => RBAC_GROUP,
        (group, _) => group.unwrap_or_default(),
    };
    (
        subject.kind.clone(),
        group.to_string(),
        subject.namespace.clone().unwrap_or_default(),
        subject.name.clone(),
    )
}

/// Sorted by kind, group, namespace and name, each subject once.
fn normalised(mut subjects: Vec<Subject>) -> Vec<Subject> {
    subjects.sort_by_key(key);
    subjects.dedup_by(|a, b| key(a) == key(b));
    subjects
}

/// Whether `subjects` bind `node`'s kubelet credentials.
pub fn has_node(subjects: &[Subject], node: &str) -> bool {
    let wanted = key(&node_subject(node));
    subjects.iter().any(|s| key(s) == wanted)
}

/// The subjects with `node` added: sorted, each once, every other subject kept. Adding a
/// node that is there already gives the same subjects, normalised.
pub fn with_node(subjects: &[Subject], node: &str) -> Vec<Subject> {
    let mut all = subjects.to_vec();
    all.push(node_subject(node));
    normalised(all)
}

/// The subjects with `node` taken away: sorted, each once, every other subject kept.
pub fn without_node(subjects: &[Subject], node: &str) -> Vec<Subject> {
    let gone = key(&node_subject(node));
    normalised(
        subjects
            .iter()
            .filter(|s| key(s) != gone)
            .cloned()
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn user(name: &str) -> Subject {
        Subject {
            api_group: Some(RBAC_GROUP.into()),
            kind: "User".into(),
            name: name.into(),
            namespace: None,
        }
    }

    fn group(name: &str) -> Subject {
        Subject {
            kind: "Group".into(),
            ..user(name)
        }
    }

    fn service_account(namespace: &str, name: &str) -> Subject {
        Subject {
            api_group: None,
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(namespace.into()),
        }
    }

    fn names(subjects: &[Subject]) -> Vec<String> {
        subjects
            .iter()
            .map(|s| format!("{}/{}", s.kind, s.name))
            .collect()
    }

    #[test]
    fn the_role_reads_every_lease_and_writes_none() {
        let role = grant_role();
        assert_eq!(role.metadata.name.as_deref(), Some(GRANT_NAME));
        assert_eq!(role.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(
            role.metadata.labels.unwrap().get(MANAGED_BY_LABEL),
            Some(&"selfhost".to_string())
        );
        let rules = role.rules.unwrap();
        assert_eq!(
            rules.len(),
            1,
            "NodeRestriction refuses a node's Lease writes anyway"
        );
        let read = &rules[0];
        assert_eq!(read.verbs, ["get", "list", "watch"]);
        assert_eq!(read.api_groups.as_deref(), Some(&[LEASES_GROUP.into()][..]));
        assert_eq!(read.resources.as_deref(), Some(&["leases".into()][..]));
        assert_eq!(
            read.resource_names, None,
            "identity Leases have no fixed names"
        );
    }

    #[test]
    fn the_binding_binds_the_role_to_node_users() {
        let binding = grant_binding(vec![node_subject("cp-1")]);
        assert_eq!(binding.metadata.name.as_deref(), Some(GRANT_NAME));
        assert_eq!(binding.role_ref.kind, "Role");
        assert_eq!(binding.role_ref.name, GRANT_NAME);
        assert_eq!(binding.role_ref.api_group, RBAC_GROUP);
        assert!(binds_the_grant(&binding));
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(subject.kind, "User");
        assert_eq!(subject.name, "system:node:cp-1");
        assert_eq!(subject.api_group.as_deref(), Some(RBAC_GROUP));
        let mut foreign = grant_binding(vec![]);
        foreign.role_ref.kind = "ClusterRole".into();
        assert!(!binds_the_grant(&foreign));
    }

    #[test]
    fn adding_a_node_is_idempotent_sorted_and_keeps_other_subjects() {
        let operator = group("ops");
        let rows: Vec<(&str, Vec<Subject>, &str, Vec<&str>)> = vec![
            ("none yet", vec![], "cp-1", vec!["User/system:node:cp-1"]),
            (
                "already there",
                vec![node_subject("cp-1")],
                "cp-1",
                vec!["User/system:node:cp-1"],
            ),
            (
                "there without its defaulted group",
                vec![Subject {
                    api_group: None,
                    ..node_subject("cp-1")
                }],
                "cp-1",
                vec!["User/system:node:cp-1"],
            ),
            (
                "a second node, sorted",
                vec![node_subject("cp-2")],
                "cp-1",
                vec!["User/system:node:cp-1", "User/system:node:cp-2"],
            ),
            (
                "duplicates an operator wrote, once each",
                vec![node_subject("cp-2"), node_subject("cp-2")],
                "cp-3",
                vec!["User/system:node:cp-2", "User/system:node:cp-3"],
            ),
            (
                "an operator's subjects kept",
                vec![
                    user("alice"),
                    operator.clone(),
                    service_account("monitoring", "agent"),
                ],
                "cp-1",
                vec![
                    "Group/ops",
                    "ServiceAccount/agent",
                    "User/alice",
                    "User/system:node:cp-1",
                ],
            ),
        ];
        for (what, subjects, node, want) in rows {
            let added = with_node(&subjects, node);
            assert_eq!(names(&added), want, "{what}");
            assert!(has_node(&added, node), "{what}");
            assert_eq!(with_node(&added, node), added, "{what}: idempotent");
        }
    }

    #[test]
    fn removing_a_node_takes_only_its_subject() {
        let rows: Vec<(&str, Vec<Subject>, &str, Vec<&str>)> = vec![
            ("the last one", vec![node_subject("cp-1")], "cp-1", vec![]),
            (
                "not there",
                vec![node_subject("cp-2")],
                "cp-1",
                vec!["User/system:node:cp-2"],
            ),
            ("none at all", vec![], "cp-1", vec![]),
            (
                "one of two",
                vec![node_subject("cp-2"), node_subject("cp-1")],
                "cp-1",
                vec!["User/system:node:cp-2"],
            ),
            (
                "written twice, without its defaulted group",
                vec![
                    node_subject("cp-1"),
                    Subject {
                        api_group: Some(String::new()),
                        ..node_subject("cp-1")
                    },
                ],
                "cp-1",
                vec![],
            ),
            (
                "a group or service account of the same name is another subject",
                vec![
                    group("system:node:cp-1"),
                    service_account("kube-system", "system:node:cp-1"),
                    node_subject("cp-1"),
                ],
                "cp-1",
                vec!["Group/system:node:cp-1", "ServiceAccount/system:node:cp-1"],
            ),
        ];
        for (what, subjects, node, want) in rows {
            let left = without_node(&subjects, node);
            assert_eq!(names(&left), want, "{what}");
            assert!(!has_node(&left, node), "{what}");
        }
    }

    #[test]
    fn a_live_role_is_written_back_only_when_it_differs() {
        assert_eq!(role_as_rendered(&grant_role()), None, "as rendered");
        let mut narrowed = grant_role();
        narrowed.metadata.resource_version = Some("7".into());
        narrowed.metadata.labels = Some(BTreeMap::from([("team".into(), "ops".into())]));
        narrowed.rules = Some(grant_rules()[..1].to_vec());
        let fixed = role_as_rendered(&narrowed).expect("rules and label put back");
        assert_eq!(fixed.rules, Some(grant_rules()));
        assert_eq!(
            fixed.metadata.resource_version.as_deref(),
            Some("7"),
            "written with the resourceVersion read"
        );
        let labels = fixed.metadata.labels.unwrap();
        assert_eq!(labels.get("team").map(String::as_str), Some("ops"));
        assert_eq!(
            labels.get(MANAGED_BY_LABEL).map(String::as_str),
            Some(MANAGED_BY)
        );
    }
}
