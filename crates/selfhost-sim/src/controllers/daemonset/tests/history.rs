//! ControllerRevisions: one per template, numbered, cleaned up, collision-safe.

use super::*;
use crate::controllers::daemonset::history as revision_history;
use crate::controllers::fixtures::node;
use k8s_openapi::api::apps::v1::ControllerRevision;

fn revisions(h: &Harness) -> Vec<(String, i64)> {
    let mut r: Vec<(String, i64)> = h
        .revisions
        .iter()
        .map(|r| (r.metadata.name.clone().unwrap(), r.revision))
        .collect();
    r.sort_by_key(|(_, n)| *n);
    r
}

#[test]
fn each_template_gets_a_numbered_revision_named_after_its_hash() {
    let mut h = Harness::new(daemon_set("ds"), vec![node("a").build()]);
    h.sync();
    let first = h.last.hash.clone();
    assert_eq!(revisions(&h), [(format!("ds-{first}"), 1)]);
    let revision = &h.revisions[0];
    assert_eq!(
        revision.metadata.labels.as_ref().unwrap()["controller-revision-hash"],
        first
    );
    assert_eq!(revision.metadata.labels.as_ref().unwrap()["k8s-app"], "ds");
    assert_eq!(owner_refs_of(revision)[0].uid, "uid-ds-ds");
    let data = &revision.data.as_ref().unwrap().0;
    assert_eq!(data["spec"]["template"]["$patch"], "replace");
    assert_eq!(
        data["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.k8s.io/kube-apiserver:v1.32.0"
    );
    assert!(
        first
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c))
    );

    h.sync();
    assert_eq!(
        revisions(&h).len(),
        1,
        "no new revision for the same template"
    );

    h.set_image("registry.k8s.io/kube-apiserver:v1.33.0");
    h.sync();
    let second = h.last.hash.clone();
    assert_ne!(first, second);
    assert_eq!(
        revisions(&h),
        [(format!("ds-{first}"), 1), (format!("ds-{second}"), 2)]
    );

    // Rolling back to the first template reuses its revision with a new number.
    h.set_image("registry.k8s.io/kube-apiserver:v1.32.0");
    h.sync();
    assert_eq!(h.last.hash, first);
    assert_eq!(
        revisions(&h),
        [(format!("ds-{second}"), 2), (format!("ds-{first}"), 3)]
    );
}

#[test]
fn history_is_trimmed_to_the_limit_but_live_revisions_stay() {
    let mut ds = daemon_set("ds");
    ds.spec.as_mut().unwrap().revision_history_limit = Some(1);
    ds.spec.as_mut().unwrap().update_strategy = Some(DaemonSetUpdateStrategy {
        type_: Some("OnDelete".into()),
        rolling_update: None,
    });
    let mut h = Harness::new(ds, vec![node("a").build()]);
    h.sync();
    for version in ["v1.33.0", "v1.33.1", "v1.33.2"] {
        h.set_image(&format!("registry.k8s.io/kube-apiserver:{version}"));
        h.sync();
    }
    // One old revision is kept: the first, because its pod still runs (OnDelete); the
    // intermediate ones were deleted oldest first as each new one appeared.
    let names: Vec<i64> = revisions(&h).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, [1, 4]);
    // Once no pod runs the first template, the next change drops it like any other.
    h.pods.clear();
    h.set_image("registry.k8s.io/kube-apiserver:v1.33.3");
    h.sync();
    let names: Vec<i64> = revisions(&h).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, [4, 5]);
}

#[test]
fn a_name_collision_bumps_the_collision_count_and_changes_the_hash() {
    let ds = daemon_set("ds");
    let mut h = Harness::new(ds.clone(), vec![node("a").build()]);
    let hash = revision_history::template_hash(&ds.spec.as_ref().unwrap().template, None);
    // Someone else's revision already has the name with different data.
    h.revisions.push(ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!("ds-{hash}")),
            namespace: Some("kube-system".into()),
            ..ObjectMeta::default()
        },
        data: None,
        revision: 1,
    });
    h.sync();
    assert_eq!(h.ds.status.as_ref().unwrap().collision_count, Some(1));
    assert!(h.last.pods_to_create().next().is_none());
    h.sync();
    assert_ne!(h.last.hash, hash);
    assert_eq!(h.last.pods_to_create().count(), 1);
}

#[test]
fn orphan_revisions_are_adopted_and_unlabelled_ones_labelled() {
    let ds = daemon_set("ds");
    let mut h = Harness::new(ds.clone(), vec![]);
    let mut orphan = revision_history::snapshot(&ds, "abc", 1);
    orphan.metadata.owner_references = None;
    orphan
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove("controller-revision-hash");
    h.revisions.push(orphan);
    h.sync();
    let name = "ds-abc".to_string();
    assert!(
        h.last
            .actions
            .contains(&Action::AdoptRevision { name: name.clone() })
    );
    assert!(h.last.actions.contains(&Action::LabelRevision {
        name: name.clone(),
        hash: name.clone()
    }));
    assert_eq!(
        h.last.hash, name,
        "the matching revision is current; its hash label is its name"
    );
    assert!(
        !h.last
            .actions
            .iter()
            .any(|a| matches!(a, Action::CreateRevision(_)))
    );
}

#[test]
fn duplicate_current_revisions_are_merged_into_the_newest() {
    let ds = daemon_set("ds");
    let mut h = Harness::new(ds.clone(), vec![node("a").build()]);
    h.revisions = vec![
        revision_history::snapshot(&ds, "old1", 1),
        revision_history::snapshot(&ds, "new2", 2),
    ];
    h.settle();
    let names: Vec<String> = h
        .revisions
        .iter()
        .map(|r| r.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["ds-new2"]);
    assert_eq!(h.last.hash, "new2");
}

#[test]
fn the_hash_depends_on_the_template_and_the_collision_count_only() {
    let ds = daemon_set("ds");
    let template = &ds.spec.as_ref().unwrap().template;
    let a = revision_history::template_hash(template, None);
    assert_eq!(
        a,
        revision_history::template_hash(&template.clone(), None),
        "stable"
    );
    assert_ne!(a, revision_history::template_hash(template, Some(1)));
    let mut other = template.clone();
    other.spec.as_mut().unwrap().containers[0].image = Some("x".into());
    assert_ne!(a, revision_history::template_hash(&other, None));
}

fn owner_refs_of(r: &ControllerRevision) -> &[OwnerReference] {
    r.metadata.owner_references.as_deref().unwrap_or_default()
}
