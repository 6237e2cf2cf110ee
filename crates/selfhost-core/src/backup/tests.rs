use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

use super::*;
use crate::daemonset::{DaemonSetOptions, build_daemonset};

fn live(component: Component) -> DaemonSet {
    let pod = crate::daemonset::tests::fixture(component);
    let mut ds = build_daemonset(component, &pod, &DaemonSetOptions::default()).expect("builds");
    // What the API server adds to a live object.
    ds.metadata.uid = Some("0b4c3b9e-1".into());
    ds.metadata.resource_version = Some("4711".into());
    ds.metadata.generation = Some(3);
    ds.metadata.creation_timestamp = Some(Time(Default::default()));
    ds.metadata.owner_references = Some(vec![OwnerReference::default()]);
    ds.metadata.annotations = Some(BTreeMap::from([
        (
            "deprecated.daemonset.template.generation".into(),
            "3".into(),
        ),
        (
            "kubectl.kubernetes.io/last-applied-configuration".into(),
            "{}".into(),
        ),
        ("team".into(), "platform".into()),
    ]));
    ds.status = Some(Default::default());
    ds
}

fn target() -> KubeVersion {
    KubeVersion::parse("v1.34.0").expect("version")
}

#[test]
fn backup_has_kubeadms_name_labels_and_selector() {
    for component in Component::ALL {
        let backup = derive_backup(&live(component), component, &target()).expect("backup");
        assert_eq!(backup.metadata.name, Some(component.backup_name()));
        assert_eq!(backup.metadata.namespace.as_deref(), Some("kube-system"));
        let want = backup_labels(component);
        assert_eq!(backup.metadata.labels.as_ref(), Some(&want));
        let spec = backup.spec.as_ref().expect("spec");
        assert_eq!(spec.selector.match_labels.as_ref(), Some(&want));
        assert_eq!(
            spec.template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.as_ref()),
            Some(&want)
        );
        assert!(is_backup_of(&backup, component));
        assert!(!is_backup_of(&live(component), component));
    }
}

#[test]
fn backup_drops_server_metadata_and_status_but_keeps_the_pod_spec() {
    let component = Component::ApiServer;
    let live = live(component);
    let backup = derive_backup(&live, component, &target()).expect("backup");
    let m = &backup.metadata;
    assert_eq!(
        (m.uid.as_ref(), m.resource_version.as_ref(), m.generation),
        (None, None, None)
    );
    assert!(m.creation_timestamp.is_none() && m.owner_references.is_none());
    assert!(backup.status.is_none());
    let annotations = m.annotations.as_ref().expect("annotations");
    assert_eq!(
        annotations.get("team").map(String::as_str),
        Some("platform")
    );
    assert!(!annotations.contains_key("deprecated.daemonset.template.generation"));
    assert!(!annotations.contains_key("kubectl.kubernetes.io/last-applied-configuration"));
    assert_eq!(
        annotations
            .get(TARGET_VERSION_ANNOTATION)
            .map(String::as_str),
        Some("v1.34.0")
    );
    let live_spec = live.spec.as_ref().expect("live spec");
    let backup_spec = backup.spec.as_ref().expect("backup spec");
    assert_eq!(live_spec.template.spec, backup_spec.template.spec);
    assert_eq!(live_spec.update_strategy, backup_spec.update_strategy);
}

#[test]
fn the_live_object_is_never_altered() {
    let component = Component::ControllerManager;
    let live = live(component);
    let before = live.clone();
    let _ = derive_backup(&live, component, &target()).expect("backup");
    assert_eq!(live, before);
}

#[test]
fn the_original_template_round_trips() {
    for component in Component::ALL {
        let live = live(component);
        let backup = derive_backup(&live, component, &target()).expect("backup");
        let record = read_backup(&backup, component).expect("record");
        assert_eq!(record.origin, BackupOrigin::Selfhost { target: target() });
        assert_eq!(
            Some(record.original_template),
            live.spec.map(|s| s.template)
        );
    }
}

#[test]
fn a_backup_of_a_backup_still_records_the_real_template() {
    // Re-deriving (for example on resume) must not nest annotations inside annotations.
    let component = Component::Scheduler;
    let first = derive_backup(&live(component), component, &target()).expect("first");
    let again = derive_backup(&first, component, &target()).expect("again");
    let notes = again.metadata.annotations.as_ref().expect("annotations");
    let template = &notes[ORIGINAL_TEMPLATE_ANNOTATION];
    assert!(!template.contains(ORIGINAL_TEMPLATE_ANNOTATION));
}

#[test]
fn a_kubeadm_backup_is_read_as_a_backup_of_its_own_template() {
    let component = Component::ApiServer;
    let live = live(component);
    let mut kubeadm = derive_backup(&live, component, &target()).expect("backup");
    kubeadm.metadata.annotations = None;
    let record = read_backup(&kubeadm, component).expect("record");
    assert_eq!(record.origin, BackupOrigin::Kubeadm);
    let labels = record
        .original_template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone());
    assert_eq!(labels, Some(self_hosted_labels(component)));
    assert_eq!(
        record.original_template.spec,
        live.spec.and_then(|s| s.template.spec)
    );
}

#[test]
fn damaged_annotations_are_reported_with_what_to_do() {
    let component = Component::ApiServer;
    let good = derive_backup(&live(component), component, &target()).expect("backup");
    let rows: &[(&str, Option<&str>, &str)] = &[
        (
            ORIGINAL_TEMPLATE_ANNOTATION,
            Some("{not json"),
            ORIGINAL_TEMPLATE_ANNOTATION,
        ),
        (
            TARGET_VERSION_ANNOTATION,
            Some("latest"),
            TARGET_VERSION_ANNOTATION,
        ),
        (TARGET_VERSION_ANNOTATION, None, TARGET_VERSION_ANNOTATION),
        (
            ORIGINAL_TEMPLATE_ANNOTATION,
            None,
            ORIGINAL_TEMPLATE_ANNOTATION,
        ),
    ];
    for (key, value, named) in rows {
        let mut backup = good.clone();
        let annotations = backup.metadata.annotations.as_mut().expect("annotations");
        match value {
            Some(v) => annotations.insert(key.to_string(), v.to_string()),
            None => annotations.remove(*key),
        };
        let err = read_backup(&backup, component).unwrap_err().to_string();
        assert!(err.contains(named), "{err}");
        assert!(
            err.contains("kubectl -n kube-system get ds temp-upgrade-self-hosted-kube-apiserver"),
            "{err}"
        );
    }
}

#[test]
fn a_daemonset_without_spec_cannot_be_backed_up() {
    let mut ds = live(Component::Scheduler);
    ds.spec = None;
    let err = derive_backup(&ds, Component::Scheduler, &target()).unwrap_err();
    assert!(
        err.to_string()
            .contains("self-hosted-kube-scheduler has no spec")
    );
}
