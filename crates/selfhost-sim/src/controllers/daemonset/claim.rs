//! Which pods and ControllerRevisions a DaemonSet owns, with upstream's `ControllerRefManager`
//! rules: keep what it controls and still selects, release what it controls but no longer
//! selects, adopt selected orphans, ignore what another controller owns.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::controllers::objects;
use crate::selector::LabelSelector;

/// What the DaemonSet does with one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Controlled by the DaemonSet and selected by it.
    Owned,
    /// An orphan the selector matches: the DaemonSet takes it (a patch adding its controller
    /// reference), and counts it from now on.
    Adopt,
    /// Controlled by the DaemonSet but no longer selected: the DaemonSet lets it go (a patch
    /// removing its reference).
    Release,
    /// Owned by someone else, or not selected, or not adoptable now.
    Ignore,
}

impl Claim {
    /// Whether the object counts as the DaemonSet's after the claim.
    pub fn is_claimed(self) -> bool {
        matches!(self, Claim::Owned | Claim::Adopt)
    }
}

/// Decides the claim of `object` by the controller `owner` with `selector`.
pub fn claim(owner: &ObjectMeta, selector: &LabelSelector, object: &ObjectMeta) -> Claim {
    let owner_uid = owner.uid.as_deref().unwrap_or_default();
    let selected = selector.matches(objects::labels(object));
    let owner_deleting = objects::is_terminating(owner);
    match objects::controller_of(object) {
        Some(reference) if reference.uid != owner_uid => Claim::Ignore,
        Some(_) if selected => Claim::Owned,
        // A controller being deleted does not release anything (the GC handles its dependents).
        Some(_) if owner_deleting => Claim::Ignore,
        Some(_) => Claim::Release,
        None if owner_deleting || !selected || objects::is_terminating(object) => Claim::Ignore,
        None if object.namespace != owner.namespace => Claim::Ignore,
        None => Claim::Adopt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::{map, t};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

    fn owner() -> ObjectMeta {
        ObjectMeta {
            name: Some("ds".into()),
            namespace: Some("kube-system".into()),
            uid: Some("ds-uid".into()),
            ..ObjectMeta::default()
        }
    }

    fn object(labels: &[(&str, &str)], controller: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some("p".into()),
            namespace: Some("kube-system".into()),
            labels: Some(map(labels)),
            owner_references: controller.map(|uid| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(true),
                    kind: "DaemonSet".into(),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn claims_follow_the_controller_ref_manager_rules() {
        let selector = LabelSelector::parse("app=x").unwrap();
        let deleting = |mut m: ObjectMeta| {
            m.deletion_timestamp = Some(Time(t(1)));
            m
        };
        let cases = [
            (
                "owned and selected",
                owner(),
                object(&[("app", "x")], Some("ds-uid")),
                Claim::Owned,
            ),
            (
                "owned, not selected",
                owner(),
                object(&[("app", "y")], Some("ds-uid")),
                Claim::Release,
            ),
            (
                "orphan selected",
                owner(),
                object(&[("app", "x")], None),
                Claim::Adopt,
            ),
            (
                "orphan not selected",
                owner(),
                object(&[("app", "y")], None),
                Claim::Ignore,
            ),
            (
                "someone else's",
                owner(),
                object(&[("app", "x")], Some("other")),
                Claim::Ignore,
            ),
            (
                "terminating orphan",
                owner(),
                deleting(object(&[("app", "x")], None)),
                Claim::Ignore,
            ),
            (
                "owner being deleted keeps but does not release",
                deleting(owner()),
                object(&[("app", "y")], Some("ds-uid")),
                Claim::Ignore,
            ),
            (
                "owner being deleted adopts nothing",
                deleting(owner()),
                object(&[("app", "x")], None),
                Claim::Ignore,
            ),
        ];
        for (name, owner, object, expected) in cases {
            assert_eq!(claim(&owner, &selector, &object), expected, "{name}");
        }
    }
}
