//! Conformance, part 2: lists and watches — paging, selectors, resourceVersion semantics,
//! bookmarks, 410 Expired, and no lost or duplicated events between a list and the watch that
//! follows it, as kube-runtime's `watcher`, `reflector` and `await_condition` rely on.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};
use proptest::prelude::*;
use selfhost_sim::SimServerOptions;
use selfhost_sim::store::StoreOptions;
use serde_json::json;

use crate::common::*;

fn rv<K: kube::Resource>(obj: &K) -> u64 {
    obj.meta()
        .resource_version
        .as_deref()
        .unwrap()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn paging_returns_every_object_once_from_one_consistent_snapshot() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    for i in 0..25 {
        cms.create(
            &PostParams::default(),
            &configmap(&format!("cm-{i:02}"), "v"),
        )
        .await
        .unwrap();
    }
    let first = cms.list(&ListParams::default().limit(10)).await.unwrap();
    assert_eq!(first.items.len(), 10);
    assert_eq!(first.metadata.remaining_item_count, Some(15));
    let snapshot_rv = first.metadata.resource_version.clone().unwrap();

    // Changes after the first page are not seen by the later pages.
    cms.delete("cm-20", &Default::default()).await.unwrap();
    cms.create(&PostParams::default(), &configmap("cm-99", "v"))
        .await
        .unwrap();
    cms.patch(
        "cm-15",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"key": "new"}})),
    )
    .await
    .unwrap();

    let mut names: Vec<String> = first.items.iter().map(|c| c.name_any()).collect();
    let mut token = first.metadata.continue_;
    while let Some(t) = token {
        let page = cms
            .list(&ListParams::default().limit(10).continue_token(&t))
            .await
            .unwrap();
        assert_eq!(page.metadata.resource_version.as_ref(), Some(&snapshot_rv));
        for c in &page.items {
            if c.name_any() == "cm-15" {
                assert_eq!(
                    c.data.as_ref().unwrap()["key"],
                    "v",
                    "the snapshot's version"
                );
            }
        }
        names.extend(page.items.iter().map(|c| c.name_any()));
        token = page.metadata.continue_;
    }
    let expected: Vec<String> = (0..25).map(|i| format!("cm-{i:02}")).collect();
    assert_eq!(names, expected);
}

#[tokio::test]
async fn continue_tokens_and_watches_older_than_the_history_expire_with_410() {
    let sim = sim_with(SimServerOptions {
        store: StoreOptions { history_limit: 10 },
        ..SimServerOptions::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    for i in 0..4 {
        cms.create(&PostParams::default(), &configmap(&format!("c{i}"), "v"))
            .await
            .unwrap();
    }
    let page = cms.list(&ListParams::default().limit(2)).await.unwrap();
    let token = page.metadata.continue_.clone().unwrap();
    let old_rv = page.metadata.resource_version.clone().unwrap();
    for i in 0..20 {
        cms.patch(
            "c0",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"key": i.to_string()}})),
        )
        .await
        .unwrap();
    }
    let s = status(
        cms.list(&ListParams::default().limit(2).continue_token(&token))
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert!(
        s.message
            .starts_with("The provided continue parameter is too old"),
        "{}",
        s.message
    );

    let mut stream = cms
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match within("the 410 event", stream.try_next()).await.unwrap() {
        Some(WatchEvent::Error(e)) => {
            assert_eq!((e.code, e.reason.as_str()), (410, "Expired"));
            assert!(
                e.message.starts_with("too old resource version"),
                "{}",
                e.message
            );
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_a_list_sees_every_later_change_exactly_once() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let writer = {
        let cms = cms.clone();
        tokio::spawn(async move {
            for i in 0..60 {
                let name = format!("w{}", i % 6);
                if cms.get_opt(&name).await.unwrap().is_some() && i % 3 == 0 {
                    cms.delete(&name, &Default::default()).await.unwrap();
                } else if cms.get_opt(&name).await.unwrap().is_some() {
                    cms.patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"data": {"key": i.to_string()}})),
                    )
                    .await
                    .unwrap();
                } else {
                    cms.create(&PostParams::default(), &configmap(&name, &i.to_string()))
                        .await
                        .unwrap();
                }
            }
        })
    };
    // List in the middle of the writes, then replay the watch from the list's version.
    tokio::task::yield_now().await;
    let list = cms.list(&ListParams::default()).await.unwrap();
    let mut state: BTreeMap<String, (u64, String)> = list
        .items
        .iter()
        .map(|c| {
            (
                c.name_any(),
                (rv(c), c.data.as_ref().unwrap()["key"].clone()),
            )
        })
        .collect();
    let mut last = list
        .metadata
        .resource_version
        .unwrap()
        .parse::<u64>()
        .unwrap();
    writer.await.unwrap();
    let end = cms.list(&ListParams::default()).await.unwrap();
    let end_rv: u64 = end
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();

    let mut stream = cms
        .watch(&WatchParams::default(), &last.to_string())
        .await
        .unwrap()
        .boxed();
    while last < end_rv {
        let event = within("the next watch event", stream.try_next())
            .await
            .unwrap()
            .unwrap();
        let (obj, deleted) = match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => (o, false),
            WatchEvent::Deleted(o) => (o, true),
            other => panic!("unexpected {other:?}"),
        };
        let r = rv(&obj);
        assert_eq!(
            r,
            last + 1,
            "events arrive in order, none missing or repeated"
        );
        last = r;
        if deleted {
            assert!(
                state.remove(&obj.name_any()).is_some(),
                "deleted something listed"
            );
        } else {
            state.insert(obj.name_any(), (r, obj.data.unwrap()["key"].clone()));
        }
    }
    let replayed: BTreeMap<String, String> = state.into_iter().map(|(k, (_, v))| (k, v)).collect();
    let truth: BTreeMap<String, String> = end
        .items
        .iter()
        .map(|c| (c.name_any(), c.data.as_ref().unwrap()["key"].clone()))
        .collect();
    assert_eq!(replayed, truth, "list + watch replays to the final state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflector_converges_on_the_store_under_concurrent_writes() {
    let sim = sim().await;
    let pods: Api<Pod> = Api::namespaced(sim.client(), "default");
    let (reader, writer) = reflector::store::<Pod>();
    let stream = watcher(pods.clone(), watcher::Config::default().labels("tier=web"))
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    let task = tokio::spawn(stream.for_each(|_| async {}));
    for i in 0..20 {
        let tier = if i % 2 == 0 { "web" } else { "db" };
        pods.create(
            &PostParams::default(),
            &pod(&format!("p{i}"), json!({"tier": tier}), None),
        )
        .await
        .unwrap();
    }
    // Relabel one pod out of the selection and one into it, and delete one.
    pods.patch(
        "p0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "db"}}})),
    )
    .await
    .unwrap();
    pods.patch(
        "p1",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"tier": "web"}}})),
    )
    .await
    .unwrap();
    pods.delete("p2", &Default::default()).await.unwrap();
    within("the reflector is ready", reader.wait_until_ready())
        .await
        .unwrap();
    let want: Vec<String> = {
        let mut w: Vec<String> = pods
            .list(&ListParams::default().labels("tier=web"))
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| p.name_any())
            .collect();
        w.sort();
        w
    };
    assert!(want.contains(&"p1".to_string()) && !want.contains(&"p0".to_string()));
    eventually("the reflector to match the server", || async {
        let mut got: Vec<String> = reader.state().iter().map(|p| p.name_any()).collect();
        got.sort();
        (got == want).then_some(())
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn await_condition_sees_a_status_change() {
    let sim = sim().await;
    let pods: Api<Pod> = Api::namespaced(sim.client(), "default");
    pods.create(&PostParams::default(), &pod("p", json!({}), None))
        .await
        .unwrap();
    let waiter = tokio::spawn(await_condition(
        pods.clone(),
        "p",
        conditions::is_pod_running(),
    ));
    pods.patch_status(
        "p",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    let pod = within("the pod running", waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Running"));
}

#[tokio::test]
async fn watches_start_with_the_current_state_for_version_zero_and_send_bookmarks() {
    let sim = sim_with(SimServerOptions {
        api: selfhost_sim::ApiConfig {
            bookmark_interval: Duration::from_millis(50),
            ..Default::default()
        },
        ..SimServerOptions::default()
    })
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    cms.create(&PostParams::default(), &configmap("a", "1"))
        .await
        .unwrap();
    let mut stream = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    match within("the initial event", stream.try_next())
        .await
        .unwrap()
    {
        Some(WatchEvent::Added(c)) => assert_eq!(c.name_any(), "a"),
        other => panic!("expected ADDED a, got {other:?}"),
    }
    let current = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    match within("a bookmark", stream.try_next()).await.unwrap() {
        Some(WatchEvent::Bookmark(b)) => assert_eq!(b.metadata.resource_version, current),
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn watches_end_after_their_timeout() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let stream = cms
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap();
    let events: Vec<_> = within("the watch to end", stream.collect::<Vec<_>>()).await;
    assert!(events.is_empty(), "{events:?}");
}

#[tokio::test]
async fn field_selected_watches_see_objects_enter_and_leave_their_selection() {
    let sim = sim().await;
    let pods: Api<Pod> = Api::namespaced(sim.client(), "default");
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut on_n1 = pods
        .watch(&WatchParams::default().fields("spec.nodeName=n1"), &rv)
        .await
        .unwrap()
        .boxed();
    pods.create(
        &PostParams::default(),
        &pod("elsewhere", json!({}), Some("n2")),
    )
    .await
    .unwrap();
    pods.create(&PostParams::default(), &pod("here", json!({}), Some("n1")))
        .await
        .unwrap();
    match within("ADDED here", on_n1.try_next()).await.unwrap() {
        Some(WatchEvent::Added(p)) => assert_eq!(p.name_any(), "here"),
        other => panic!("{other:?}"),
    }
    pods.patch_status(
        "here",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running"}})),
    )
    .await
    .unwrap();
    match within("MODIFIED here", on_n1.try_next()).await.unwrap() {
        Some(WatchEvent::Modified(p)) => {
            assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_streaming_list_watcher_gets_the_initial_state_then_changes() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    cms.create(&PostParams::default(), &configmap("a", "1"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store::<ConfigMap>();
    let task = tokio::spawn(
        watcher(cms.clone(), watcher::Config::default().streaming_lists())
            .default_backoff()
            .reflect(writer)
            .applied_objects()
            .for_each(|_| async {}),
    );
    within("the streaming list", reader.wait_until_ready())
        .await
        .unwrap();
    assert_eq!(reader.state().len(), 1);
    assert_eq!(
        sim.metrics().requests("list", "configmaps"),
        0,
        "no list request at all"
    );
    cms.create(&PostParams::default(), &configmap("b", "1"))
        .await
        .unwrap();
    eventually("the second object", || async {
        (reader.state().len() == 2).then_some(())
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn table_watches_send_one_row_per_event_and_the_columns_once() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    for name in ["a", "b"] {
        cms.create(&PostParams::default(), &configmap(name, "1"))
            .await
            .unwrap();
    }
    let req = http::Request::get(
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0&timeoutSeconds=1",
    )
    .header(
        "accept",
        "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    )
    .body(Vec::new())
    .unwrap();
    let text = within("the table watch", sim.client().request_text(req))
        .await
        .unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "{text}");
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["type"], "ADDED");
        assert_eq!(e["object"]["kind"], "Table");
        assert_eq!(e["object"]["rows"].as_array().map(Vec::len), Some(1));
        assert_eq!(
            e["object"].get("columnDefinitions").is_some(),
            i == 0,
            "columns only first"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// A label-selected list returns exactly the objects the selector matches, whatever the
    /// labels and the selector.
    #[test]
    fn label_selected_lists_return_exactly_the_matching_objects(
        labels in proptest::collection::vec(proptest::option::of(prop_oneof!["a", "b", "c"]), 1..8),
        selector in prop_oneof![
            Just("tier=a".to_string()), Just("tier!=a".to_string()), Just("tier in (a,b)".to_string()),
            Just("tier notin (b)".to_string()), Just("tier".to_string()), Just("!tier".to_string()),
            Just("tier==c,tier".to_string()),
        ],
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let sim = sim().await;
            let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
            let mut expected = Vec::new();
            for (i, tier) in labels.iter().enumerate() {
                let mut cm = configmap(&format!("c{i}"), "v");
                if let Some(t) = tier {
                    cm.labels_mut().insert("tier".into(), t.clone());
                }
                cms.create(&PostParams::default(), &cm).await.unwrap();
                let set: std::collections::BTreeMap<String, String> = cm.labels().clone();
                if matches_by_hand(&selector, &set) {
                    expected.push(format!("c{i}"));
                }
            }
            let got: Vec<String> = cms
                .list(&ListParams::default().labels(&selector))
                .await
                .unwrap()
                .items
                .iter()
                .map(|c| c.name_any())
                .collect();
            assert_eq!(got, expected, "selector {selector}");
        });
    }
}

/// The selector semantics, written out for the few forms the property uses.
fn matches_by_hand(selector: &str, labels: &BTreeMap<String, String>) -> bool {
    let tier = labels.get("tier").map(String::as_str);
    match selector {
        "tier=a" => tier == Some("a"),
        "tier!=a" => tier != Some("a"),
        "tier in (a,b)" => matches!(tier, Some("a" | "b")),
        "tier notin (b)" => tier != Some("b"),
        "tier" => tier.is_some(),
        "!tier" => tier.is_none(),
        "tier==c,tier" => tier == Some("c"),
        other => panic!("no hand-written meaning for {other}"),
    }
}
