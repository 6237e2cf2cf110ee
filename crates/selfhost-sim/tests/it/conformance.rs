//! Conformance, part 1: the object lifecycle through kube-rs `Api` — CRUD for every served
//! kind, the metadata the server stamps, optimistic concurrency, the status subresource,
//! generation, dry run, and errors with the apiserver's reasons and wording.

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod, Secret, ServiceAccount};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::common::*;

/// Creates, reads, lists, replaces and deletes one object, checking what a client sees at
/// each step.
async fn round_trip<K>(api: Api<K>, obj: K, edit: impl Fn(&mut K))
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned,
    K::DynamicType: Default,
{
    let kind = K::kind(&K::DynamicType::default()).to_string();
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("create {kind}: {e}"));
    let name = created.name_any();
    let meta = created.meta();
    assert!(
        meta.uid.as_deref().is_some_and(|u| u.len() == 36),
        "{kind} uid"
    );
    assert!(
        meta.creation_timestamp.is_some(),
        "{kind} creationTimestamp"
    );
    let rv1: u64 = created.resource_version().unwrap().parse().unwrap();

    let got = api.get(&name).await.unwrap();
    assert_eq!(
        got.meta().uid,
        meta.uid,
        "{kind} get returns the created object"
    );
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert!(
        listed.items.iter().any(|o| o.name_any() == name),
        "{kind} is listed"
    );
    let list_rv: u64 = listed.metadata.resource_version.unwrap().parse().unwrap();
    assert!(
        list_rv >= rv1,
        "{kind}: a list is at least as new as what it contains"
    );

    let mut changed = got.clone();
    edit(&mut changed);
    let replaced = api
        .replace(&name, &PostParams::default(), &changed)
        .await
        .unwrap();
    let rv2: u64 = replaced.resource_version().unwrap().parse().unwrap();
    assert!(rv2 > rv1, "{kind}: every write moves the resourceVersion");
    assert_eq!(
        replaced.meta().uid,
        meta.uid,
        "{kind}: uid survives updates"
    );
    assert_eq!(replaced.meta().creation_timestamp, meta.creation_timestamp);

    api.delete(&name, &DeleteParams::default()).await.unwrap();
    eventually(&format!("{kind} {name} gone"), || async {
        is_gone(&api, &name).await.then_some(())
    })
    .await;
}

fn label<K: Resource>(obj: &mut K) {
    obj.labels_mut().insert("edited".into(), "yes".into());
}

#[tokio::test]
async fn every_served_kind_supports_the_object_lifecycle() {
    let sim = sim().await;
    let c = sim.client();
    let ns = "default";
    round_trip(
        Api::<Namespace>::all(c.clone()),
        object(json!({"metadata": {"name": "team-a"}})),
        label,
    )
    .await;
    round_trip(
        Api::<Node>::all(c.clone()),
        object(json!({"metadata": {"name": "node-1"}})),
        label,
    )
    .await;
    round_trip(
        Api::<Pod>::namespaced(c.clone(), ns),
        pod("p", json!({"app": "p"}), None),
        label,
    )
    .await;
    round_trip(
        Api::<ConfigMap>::namespaced(c.clone(), ns),
        configmap("cm", "v"),
        |cm| {
            cm.data
                .get_or_insert_default()
                .insert("key".into(), "v2".into());
        },
    )
    .await;
    round_trip(
        Api::<Secret>::namespaced(c.clone(), ns),
        object(json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}})),
        label,
    )
    .await;
    round_trip(
        Api::<Event>::namespaced(c.clone(), ns),
        object(json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Test"})),
        label,
    )
    .await;
    round_trip(
        Api::<ServiceAccount>::namespaced(c.clone(), ns),
        object(json!({"metadata": {"name": "sa"}})),
        label,
    )
    .await;
    round_trip(
        Api::<DaemonSet>::namespaced(c.clone(), ns),
        daemonset("ds", "img:1"),
        label,
    )
    .await;
    round_trip(
        Api::<ControllerRevision>::namespaced(c.clone(), ns),
        object(json!({"metadata": {"name": "ds-abc"}, "revision": 1, "data": {"spec": {}}})),
        label,
    )
    .await;
    round_trip(
        Api::<Lease>::namespaced(c.clone(), "kube-node-lease"),
        object(json!({"metadata": {"name": "node-1"}, "spec": {"holderIdentity": "node-1"}})),
        |l| l.spec.get_or_insert_default().lease_duration_seconds = Some(40),
    )
    .await;
}

#[tokio::test]
async fn a_cluster_starts_with_the_four_system_namespaces() {
    let sim = sim().await;
    let names: Vec<String> = Api::<Namespace>::all(sim.client())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
    let ns = Api::<Namespace>::all(sim.client())
        .get("kube-system")
        .await
        .unwrap();
    assert_eq!(ns.status.as_ref().unwrap().phase.as_deref(), Some("Active"));
    assert_eq!(ns.labels()["kubernetes.io/metadata.name"], "kube-system");
}

#[tokio::test]
async fn errors_carry_the_apiservers_reason_code_and_wording() {
    let sim = sim().await;
    let ds: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");

    let s = status(ds.get("nope").await);
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, r#"daemonsets.apps "nope" not found"#);
    let details = s.details.unwrap();
    assert_eq!(
        (
            details.name.as_str(),
            details.group.as_str(),
            details.kind.as_str()
        ),
        ("nope", "apps", "daemonsets")
    );

    let created = ds
        .create(&PostParams::default(), &daemonset("d", "img:1"))
        .await
        .unwrap();
    let s = status(
        ds.create(&PostParams::default(), &daemonset("d", "img:1"))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(s.message, r#"daemonsets.apps "d" already exists"#);

    let mut stale = created.clone();
    label(&mut stale);
    ds.replace("d", &PostParams::default(), &stale)
        .await
        .unwrap();
    let s = status(ds.replace("d", &PostParams::default(), &stale).await);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        r#"Operation cannot be fulfilled on daemonsets.apps "d": the object has been modified; please apply your changes to the latest version and try again"#
    );

    let missing_ns: Api<ConfigMap> = Api::namespaced(sim.client(), "nowhere");
    let s = status(
        missing_ns
            .create(&PostParams::default(), &configmap("c", "v"))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, r#"namespaces "nowhere" not found"#);

    let s = status(
        Api::<Pod>::namespaced(sim.client(), "default")
            .replace(
                "ghost",
                &PostParams::default(),
                &pod("ghost", json!({}), None),
            )
            .await,
    );
    assert_eq!(
        (s.code, s.reason.as_str()),
        (404, "NotFound"),
        "update does not create pods"
    );

    let mut renamed = ds.get("d").await.unwrap();
    renamed.metadata.name = Some("other".into());
    let s = status(ds.replace("d", &PostParams::default(), &renamed).await);
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
}

#[tokio::test]
async fn updates_without_a_resource_version_are_unconditional() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    cms.create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();
    cms.replace("c", &PostParams::default(), &configmap("c", "2"))
        .await
        .unwrap();
    let blind = configmap("c", "3");
    assert!(blind.metadata.resource_version.is_none());
    let out = cms
        .replace("c", &PostParams::default(), &blind)
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["key"], "3");
}

#[tokio::test]
async fn leases_are_created_by_an_update_but_daemonsets_are_not() {
    let sim = sim().await;
    let leases: Api<Lease> = Api::namespaced(sim.client(), "kube-system");
    let lease: Lease =
        object(json!({"metadata": {"name": "kube-scheduler"}, "spec": {"holderIdentity": "a"}}));
    let out = leases
        .replace("kube-scheduler", &PostParams::default(), &lease)
        .await
        .unwrap();
    assert_eq!(out.spec.unwrap().holder_identity.as_deref(), Some("a"));
    let ds: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    assert_eq!(
        status(
            ds.replace("x", &PostParams::default(), &daemonset("x", "i"))
                .await
        )
        .code,
        404
    );
}

#[tokio::test]
async fn generate_name_gives_each_object_a_fresh_suffix() {
    let sim = sim().await;
    let pods: Api<Pod> = Api::namespaced(sim.client(), "default");
    let mut template = pod("", json!({}), None);
    template.metadata.name = None;
    template.metadata.generate_name = Some("web-".into());
    let a = pods
        .create(&PostParams::default(), &template)
        .await
        .unwrap()
        .name_any();
    let b = pods
        .create(&PostParams::default(), &template)
        .await
        .unwrap()
        .name_any();
    assert_ne!(a, b);
    for n in [&a, &b] {
        assert!(n.starts_with("web-") && n.len() == 9, "{n}");
    }
    template.metadata.generate_name = None;
    let s = status(pods.create(&PostParams::default(), &template).await);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert!(
        s.message.contains("name or generateName is required"),
        "{}",
        s.message
    );
}

#[tokio::test]
async fn status_is_written_only_through_the_status_subresource() {
    let sim = sim().await;
    let ds: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let created = ds
        .create(&PostParams::default(), &daemonset("d", "img:1"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.status.as_ref().unwrap().desired_number_scheduled,
        0,
        "status starts empty"
    );

    // The main resource ignores status.
    let mut main = created.clone();
    main.status.as_mut().unwrap().number_ready = 5;
    let out = ds
        .replace("d", &PostParams::default(), &main)
        .await
        .unwrap();
    assert_eq!(out.status.as_ref().unwrap().number_ready, 0);
    assert_eq!(
        out.resource_version(),
        created.resource_version(),
        "an ignored change is no write"
    );

    // /status changes status only.
    let mut st = ds.get_status("d").await.unwrap();
    st.status.as_mut().unwrap().number_ready = 3;
    st.labels_mut().insert("sneaky".into(), "yes".into());
    let out = ds
        .replace_status("d", &PostParams::default(), &st)
        .await
        .unwrap();
    assert_eq!(out.status.as_ref().unwrap().number_ready, 3);
    assert!(!out.labels().contains_key("sneaky"));
    assert_eq!(
        out.metadata.generation,
        Some(1),
        "status writes never bump generation"
    );

    let patched = ds
        .patch_status(
            "d",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.status.unwrap().observed_generation, Some(1));
}

#[tokio::test]
async fn generation_moves_on_spec_changes_only() {
    let sim = sim().await;
    let ds: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    ds.create(&PostParams::default(), &daemonset("d", "img:1"))
        .await
        .unwrap();
    let cases = [
        (json!({"metadata": {"labels": {"a": "b"}}}), 1),
        (json!({"metadata": {"annotations": {"x": "y"}}}), 1),
        (
            json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "img:2"}]}}}}),
            2,
        ),
        (json!({"spec": {"minReadySeconds": 5}}), 3),
        (json!({"metadata": {"labels": {"a": "c"}}}), 3),
    ];
    for (patch, want) in cases {
        let out = ds
            .patch(
                "d",
                &PatchParams::default(),
                &Patch::Strategic(patch.clone()),
            )
            .await
            .unwrap();
        assert_eq!(out.metadata.generation, Some(want), "after {patch}");
    }
}

#[tokio::test]
async fn dry_run_answers_as_if_written_and_changes_nothing() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let out = cms.create(&dry, &configmap("c", "1")).await.unwrap();
    assert!(out.metadata.uid.is_some());
    assert!(is_gone(&cms, "c").await, "a dry-run create stores nothing");

    let real = cms
        .create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();
    let out = cms.replace("c", &dry, &configmap("c", "2")).await.unwrap();
    assert_eq!(out.data.unwrap()["key"], "2");
    let out = cms
        .patch(
            "c",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"data": {"key": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(out.data.unwrap()["key"], "3");
    cms.delete("c", &DeleteParams::default().dry_run())
        .await
        .unwrap();
    let now = cms.get("c").await.unwrap();
    assert_eq!(now.data.as_ref().unwrap()["key"], "1");
    assert_eq!(now.resource_version(), real.resource_version());
}

#[tokio::test]
async fn a_terminating_namespace_takes_its_content_and_refuses_new_content() {
    let sim = sim().await;
    let namespaces: Api<Namespace> = Api::all(sim.client());
    let s = status(
        namespaces
            .delete("kube-system", &DeleteParams::default())
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        s.message,
        r#"namespaces "kube-system" is forbidden: this namespace may not be deleted"#
    );

    namespaces
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "doomed"}})),
        )
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "doomed");
    cms.create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();
    // Keep the namespace terminating for a moment: a finalizer on its content.
    let mut held = configmap("held", "1");
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &held).await.unwrap();

    let pending = namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let ns = pending.left().expect("a namespace deletion is pending");
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    let s = status(
        cms.create(&PostParams::default(), &configmap("late", "1"))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
    assert!(
        s.message.contains("because it is being terminated"),
        "{}",
        s.message
    );

    eventually("the namespace content deleted", || async {
        is_gone(&cms, "c").await.then_some(())
    })
    .await;
    assert!(
        !is_gone(&namespaces, "doomed").await,
        "a finalizer on the content holds the namespace"
    );
    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the namespace gone", || async {
        is_gone(&namespaces, "doomed").await.then_some(())
    })
    .await;
}

#[tokio::test]
async fn finalizing_an_empty_terminating_namespace_removes_it() {
    let sim = sim().await;
    // Without the namespace cleanup running, only /finalize can let the namespace go.
    sim.garbage_collector().set_enabled(false);
    let namespaces: Api<Namespace> = Api::all(sim.client());
    namespaces
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "empty"}})),
        )
        .await
        .unwrap();
    let terminating = namespaces
        .delete("empty", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert_eq!(
        terminating.spec.as_ref().unwrap().finalizers.as_deref(),
        Some(&["kubernetes".to_string()][..])
    );
    let mut finalized = terminating.clone();
    finalized.spec.as_mut().unwrap().finalizers = Some(vec![]);
    namespaces
        .replace_subresource("finalize", "empty", &PostParams::default(), &finalized)
        .await
        .unwrap();
    assert!(is_gone(&namespaces, "empty").await);
}
