//! `--dry-run`: every API write the conversion would make is sent as a server-side dry run
//! (`dryRun=All`), the waits and file moves are described, and nothing changes — neither an
//! object's resourceVersion nor a file on the node.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use kube::Api;
use kube::api::ListParams;
use selfhost_sim::SimCluster;
use serde_json::Value;

use super::{convert, static_cluster};

/// What must not change: the resourceVersion of every DaemonSet, Secret and ConfigMap in
/// kube-system, every node's labels (a node's resourceVersion moves with the kubelet's
/// heartbeats), each kube-system pod's identity, and every file under the manifests
/// directory's parent, with its content.
pub(super) async fn everything(sim: &SimCluster, manifests: &Path) -> BTreeMap<String, String> {
    let client = sim.client();
    let lp = ListParams::default();
    let mut out = BTreeMap::new();
    macro_rules! versions {
        ($kind:ty, $prefix:literal) => {
            for object in Api::<$kind>::namespaced(client.clone(), "kube-system")
                .list(&lp)
                .await
                .expect("list")
                .items
            {
                let m = object.metadata;
                out.insert(
                    format!("{}/{}", $prefix, m.name.unwrap_or_default()),
                    format!("{:?}", m.resource_version),
                );
            }
        };
    }
    versions!(DaemonSet, "ds");
    versions!(Secret, "secret");
    versions!(ConfigMap, "configmap");
    for node in Api::<Node>::all(client.clone())
        .list(&lp)
        .await
        .expect("nodes")
        .items
    {
        let m = node.metadata;
        out.insert(
            format!("node/{}", m.name.unwrap_or_default()),
            format!("{:?}", m.labels),
        );
    }
    for pod in Api::<Pod>::namespaced(client, "kube-system")
        .list(&lp)
        .await
        .expect("pods")
        .items
    {
        let m = pod.metadata;
        out.insert(
            format!("pod/{}", m.name.unwrap_or_default()),
            format!("{:?} {:?}", m.uid, m.deletion_timestamp),
        );
    }
    let mut stack = vec![manifests.parent().expect("parent").to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let content = std::fs::read(&path).unwrap_or_default();
                out.insert(
                    format!("file/{}", path.display()),
                    String::from_utf8_lossy(&content).into_owned(),
                );
            }
        }
    }
    out
}

/// The action events of `step`, for every component.
fn actions<'a>(events: &'a [Value], step: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event"] == "action" && e["step"] == step)
        .collect()
}

fn assert_dry_run_result(events: &[Value]) {
    let last = events.last().cloned().unwrap_or_default();
    assert_eq!(last["event"], "result", "{last}");
    assert_eq!(last["outcome"], "done", "{last}");
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.contains("nothing was changed")),
        "{last}"
    );
    let finished: Vec<_> = events
        .iter()
        .filter(|e| e["event"] == "component-finished")
        .collect();
    assert_eq!(finished.len(), 3, "{finished:?}");
    assert!(
        finished.iter().all(|e| e["outcome"] == "dry-run"),
        "{finished:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_runs_both_ways_send_every_write_as_a_dry_run_and_change_nothing() {
    let sim = static_cluster(true).await;
    let manifests = sim.manifests_dir("cp-1").expect("dir").to_path_buf();

    // To self-hosted, from kubeadm's static pods.
    let before = everything(&sim, &manifests).await;
    let (events, code) = convert(&sim, "to-self-hosted", &["--dry-run"], None).await;
    assert_eq!(code, Some(0), "{events:#?}");
    assert_dry_run_result(&events);
    for step in ["create-daemonset", "label-node", "move-manifest-aside"] {
        let made = actions(&events, step);
        assert_eq!(made.len(), 3, "{step} for each component: {events:#?}");
        assert!(made.iter().all(|e| e["dry_run"] == true), "{made:?}");
    }
    for created in actions(&events, "create-daemonset") {
        assert!(
            created["detail"].as_str().is_some_and(
                |d| d.starts_with("accepted by the API server's dry run: created DaemonSet")
            ),
            "{created}"
        );
    }
    for moved in actions(&events, "move-manifest-aside") {
        assert!(
            moved["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("would move ") && d.contains("not moved")),
            "{moved}"
        );
    }
    assert!(
        events.iter().filter(|e| e["event"] == "waiting").count() >= 6,
        "the waits are described: {events:#?}"
    );
    assert_eq!(
        everything(&sim, &manifests).await,
        before,
        "the dry run to self-hosted changed nothing"
    );

    // Converted for real, then the reverse as a dry run.
    let (events, code) = convert(&sim, "to-self-hosted", &["--yes"], None).await;
    assert_eq!(code, Some(0), "{:?}", events.last());
    let before = everything(&sim, &manifests).await;
    let (events, code) = convert(&sim, "to-static", &["--dry-run"], None).await;
    assert_eq!(code, Some(0), "{events:#?}");
    assert_dry_run_result(&events);
    let plan = events
        .iter()
        .find(|e| e["event"] == "plan")
        .map(|e| e["plan"].clone())
        .unwrap_or_default();
    for component in plan["components"].as_array().into_iter().flatten() {
        assert_eq!(
            component["config_disagreements"],
            serde_json::json!([]),
            "the DaemonSets made from kubeadm's manifests still agree with kubeadm's \
             configuration (selfhost's own flags aside): {component}"
        );
    }
    for step in ["write-manifest", "unlabel-node", "delete-daemonset"] {
        let made = actions(&events, step);
        assert_eq!(made.len(), 3, "{step} for each component: {events:#?}");
        assert!(made.iter().all(|e| e["dry_run"] == true), "{made:?}");
    }
    for written in actions(&events, "write-manifest") {
        assert!(
            written["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("would write (dry run: not written)")),
            "{written}"
        );
    }
    assert_eq!(
        everything(&sim, &manifests).await,
        before,
        "the dry run to static changed nothing"
    );
}

/// Without `-o json`, the dry run's progress on stderr says what each step would do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_text_of_a_dry_run_says_what_would_happen() {
    let sim = static_cluster(true).await;
    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let out = crate::selfhost()
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["convert", "to-self-hosted", "--node", "cp-1", "--dry-run"])
        .arg("--manifests-dir")
        .arg(&dir)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    for expected in [
        "kube-apiserver:   accepted by the API server's dry run: created DaemonSet kube-system/self-hosted-kube-apiserver",
        "kube-apiserver:   would wait for ",
        "(dry run)",
        "kube-scheduler:   would move ",
        "nothing was changed",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in {stderr}");
    }
}
