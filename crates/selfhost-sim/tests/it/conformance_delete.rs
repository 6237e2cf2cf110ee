//! Conformance, part 4: deletion — the response bodies, propagation policies with the garbage
//! collector, finalizers, graceful pod deletion, preconditions and deletecollection.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, ResourceExt};
use selfhost_sim::SimServer;
use serde_json::json;

use crate::common::*;

/// A DaemonSet `d` in kube-system owning pods `d-0`, `d-1` (blocking owner deletion).
async fn owner_with_pods(sim: &SimServer) -> (Api<DaemonSet>, Api<Pod>, DaemonSet) {
    let ds: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let owner = ds
        .create(&PostParams::default(), &daemonset("d", "img:1"))
        .await
        .unwrap();
    for i in 0..2 {
        let mut p = pod(&format!("d-{i}"), json!({"app": "d"}), None);
        p.metadata.owner_references = Some(vec![object(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d",
            "uid": owner.uid().unwrap(), "controller": true, "blockOwnerDeletion": true,
        }))]);
        pods.create(&PostParams::default(), &p).await.unwrap();
    }
    (ds, pods, owner)
}

async fn pod_names(pods: &Api<Pod>) -> Vec<String> {
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect()
}

#[tokio::test]
async fn background_deletion_removes_the_owner_at_once_and_its_dependents_after() {
    let sim = sim().await;
    let (ds, pods, owner) = owner_with_pods(&sim).await;
    let answer = ds.delete("d", &DeleteParams::background()).await.unwrap();
    let status = answer
        .right()
        .expect("an immediate deletion answers with a Status");
    assert!(status.is_success());
    let details = status.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("d", "daemonsets")
    );
    assert_eq!(Some(details.uid), owner.uid());
    assert!(is_gone(&ds, "d").await);
    eventually("the dependents collected", || async {
        pod_names(&pods).await.is_empty().then_some(())
    })
    .await;
}

#[tokio::test]
async fn foreground_deletion_keeps_the_owner_readable_until_blocking_dependents_are_gone() {
    let sim = sim().await;
    let (ds, pods, _) = owner_with_pods(&sim).await;
    // A finalizer on one dependent holds the whole chain.
    pods.patch(
        "d-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
    )
    .await
    .unwrap();
    let pending = ds
        .delete("d", &DeleteParams::foreground())
        .await
        .unwrap()
        .left()
        .expect("pending");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.finalizers(), ["foregroundDeletion"]);
    eventually("the free dependent deleted", || async {
        is_gone(&pods, "d-1").await.then_some(())
    })
    .await;
    let held = pods.get("d-0").await.unwrap();
    assert!(
        held.metadata.deletion_timestamp.is_some(),
        "the held dependent is being deleted"
    );
    assert!(
        ds.get("d").await.is_ok(),
        "the owner waits for its blocking dependent"
    );

    pods.patch(
        "d-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the owner deleted", || async {
        is_gone(&ds, "d").await.then_some(())
    })
    .await;
}

#[tokio::test]
async fn orphan_deletion_leaves_dependents_without_the_owner_reference() {
    let sim = sim().await;
    let (ds, pods, _) = owner_with_pods(&sim).await;
    let pending = ds.delete("d", &DeleteParams::orphan()).await.unwrap();
    let obj = pending.left().expect("the owner waits for the orphaning");
    assert_eq!(obj.finalizers(), ["orphan"]);
    eventually("the owner deleted", || async {
        is_gone(&ds, "d").await.then_some(())
    })
    .await;
    let left = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(left.items.len(), 2, "orphans stay");
    assert!(left.items.iter().all(|p| p.owner_references().is_empty()));
}

#[tokio::test]
async fn the_garbage_collector_only_acts_while_enabled() {
    let sim = sim().await;
    sim.garbage_collector().set_enabled(false);
    let (ds, pods, _) = owner_with_pods(&sim).await;
    ds.delete("d", &DeleteParams::foreground()).await.unwrap();
    // Give a (wrongly) running collector every chance to act: write and read back.
    pods.patch(
        "d-0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
    )
    .await
    .unwrap();
    assert_eq!(pod_names(&pods).await.len(), 2);
    assert!(ds.get("d").await.is_ok());
    sim.garbage_collector().set_enabled(true);
    eventually("the owner deleted", || async {
        is_gone(&ds, "d").await.then_some(())
    })
    .await;
    assert!(pod_names(&pods).await.is_empty());
}

#[tokio::test]
async fn pods_on_a_node_wait_for_their_kubelet_but_unbound_pods_go_at_once() {
    let sim = sim().await;
    let pods: Api<Pod> = Api::namespaced(sim.client(), "default");
    pods.create(&PostParams::default(), &pod("unbound", json!({}), None))
        .await
        .unwrap();
    let answer = pods
        .delete("unbound", &DeleteParams::default())
        .await
        .unwrap();
    let gone = answer.left().expect("pods answer with the deleted object");
    assert_eq!(gone.name_any(), "unbound");
    assert!(is_gone(&pods, "unbound").await);

    let mut bound = pod("bound", json!({}), Some("node-1"));
    bound
        .spec
        .as_mut()
        .unwrap()
        .termination_grace_period_seconds = Some(10);
    pods.create(&PostParams::default(), &bound).await.unwrap();
    let pending = pods
        .delete("bound", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .unwrap();
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(10));
    assert!(
        pods.get("bound").await.is_ok(),
        "still there while its kubelet stops it"
    );
    // What the kubelet does once the containers stopped.
    pods.delete("bound", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    assert!(is_gone(&pods, "bound").await);
}

#[tokio::test]
async fn finalizers_hold_an_object_and_no_new_ones_can_be_added_while_deleting() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let mut cm = configmap("c", "1");
    cm.metadata.finalizers = Some(vec!["example.com/a".into()]);
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let pending = cms
        .delete("c", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("200 with the object");
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(0));
    let s = status(
        cms.patch(
            "c",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/a", "example.com/b"]}})),
        )
        .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    cms.patch(
        "c",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": []}})),
    )
    .await
    .unwrap();
    assert!(
        is_gone(&cms, "c").await,
        "the last finalizer's removal completes the deletion"
    );
}

#[tokio::test]
async fn delete_preconditions_conflict_when_they_do_not_hold() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let created = cms
        .create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();
    let cases = [
        Preconditions {
            uid: Some("someone-else".into()),
            resource_version: None,
        },
        Preconditions {
            uid: None,
            resource_version: Some("1".into()),
        },
    ];
    for pre in cases {
        let s = status(
            cms.delete("c", &DeleteParams::default().preconditions(pre.clone()))
                .await,
        );
        assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"), "{pre:?}");
        assert!(s.message.contains("Precondition failed"), "{}", s.message);
    }
    let right = Preconditions {
        uid: created.uid(),
        resource_version: created.resource_version(),
    };
    cms.delete("c", &DeleteParams::default().preconditions(right))
        .await
        .unwrap();
    assert!(is_gone(&cms, "c").await);
}

#[tokio::test]
async fn delete_collection_deletes_what_the_selector_selects() {
    let sim = sim().await;
    let pods: Api<Pod> = Api::namespaced(sim.client(), "default");
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        pods.create(
            &PostParams::default(),
            &pod(name, json!({"tier": tier}), None),
        )
        .await
        .unwrap();
    }
    let out = pods
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("tier=web"),
        )
        .await
        .unwrap();
    let deleted: Vec<String> = out
        .left()
        .unwrap()
        .items
        .iter()
        .map(|p| p.name_any())
        .collect();
    assert_eq!(deleted, ["a", "b"]);
    assert_eq!(pod_names(&pods).await, ["c"]);
}
