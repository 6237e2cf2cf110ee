//! What a user inspects during a rollout: `kubectl rollout status` and `rollout history` of
//! a DaemonSet, `kubectl get events`, and `kubectl describe` of a DaemonSet and a pod (which
//! find their events with `involvedObject.*` field selectors).
//!
//! The DaemonSet status and ControllerRevisions are written through kube-rs here, as the
//! DaemonSet controller would write them, so that only the server's part is under test.

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use selfhost_sim::SimServer;
use serde_json::{Value, json};

use super::{Kubectl, cluster};
use crate::common::{eventually, object};

const NS: &str = "kube-system";
const DS: &str = "self-hosted-kube-apiserver";

async fn daemonset(sim: &SimServer) -> DaemonSet {
    Api::<DaemonSet>::namespaced(sim.client(), NS)
        .get(DS)
        .await
        .expect("the seeded DaemonSet")
}

/// Reports the DaemonSet as the controller does when `updated` of `nodes` nodes run the
/// current template (available and ready).
async fn report_rollout(sim: &SimServer, updated: i32, nodes: i32) {
    let generation = daemonset(sim)
        .await
        .metadata
        .generation
        .expect("a generation");
    let status = json!({"status": {
        "observedGeneration": generation,
        "desiredNumberScheduled": nodes,
        "currentNumberScheduled": nodes,
        "updatedNumberScheduled": updated,
        "numberReady": updated,
        "numberAvailable": updated,
        "numberUnavailable": nodes - updated,
        "numberMisscheduled": 0,
    }});
    Api::<DaemonSet>::namespaced(sim.client(), NS)
        .patch_status(DS, &PatchParams::default(), &Patch::Merge(status))
        .await
        .expect("write the DaemonSet status");
}

/// An event about `kind/name`, as a controller or kubelet records it.
async fn record_event(sim: &SimServer, name: &str, involved: Value, reason: &str, message: &str) {
    let event: Event = object(json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": NS},
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": "Normal",
        "source": {"component": "daemonset-controller"},
        "count": 1,
        "firstTimestamp": "2025-01-01T00:00:00Z",
        "lastTimestamp": "2025-01-01T00:00:00Z",
    }));
    Api::<Event>::namespaced(sim.client(), NS)
        .create(&PostParams::default(), &event)
        .await
        .expect("record an event");
}

/// kubectl's output with every run of blanks shrunk to one space (describe aligns columns by
/// the longest label, which the test need not know).
fn squeezed(out: &str) -> String {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn rollout_status_reports_a_complete_daemonset() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "rollout status ds") else {
        return;
    };
    report_rollout(&sim, 1, 1).await;
    let out = kubectl
        .ok(&[
            "rollout",
            "status",
            &format!("ds/{DS}"),
            "-n",
            NS,
            "--timeout=30s",
        ])
        .await;
    assert_eq!(
        out.trim(),
        format!("daemon set \"{DS}\" successfully rolled out")
    );
}

#[tokio::test]
async fn rollout_status_waits_on_a_watch_until_the_rollout_completes() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "rollout status ds (waiting)") else {
        return;
    };
    report_rollout(&sim, 0, 1).await;
    let watches_before = sim.metrics().requests("watch", "daemonsets");
    let target = format!("ds/{DS}");
    let args = ["rollout", "status", &target, "-n", NS, "--timeout=60s"];
    let status = kubectl.run(&args);
    let finish = async {
        // Complete the rollout only once kubectl watches, so that the watch must deliver it.
        eventually("kubectl to watch the DaemonSet", || async {
            (sim.metrics().requests("watch", "daemonsets") > watches_before).then_some(())
        })
        .await;
        report_rollout(&sim, 1, 1).await;
    };
    let (out, ()) = tokio::join!(status, finish);
    assert!(out.success, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "Waiting for daemon set \"{DS}\" rollout to finish: 0 out of 1 new pods have been updated..."
            ),
            format!("daemon set \"{DS}\" successfully rolled out"),
        ],
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn rollout_history_lists_the_daemonsets_revisions() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "rollout history ds") else {
        return;
    };
    let ds = daemonset(&sim).await;
    let owner = json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": DS,
                        "uid": ds.uid().expect("a uid"), "controller": true,
                        "blockOwnerDeletion": true}]);
    let labels = ds
        .spec
        .as_ref()
        .expect("a spec")
        .selector
        .match_labels
        .clone();
    let revisions: Api<ControllerRevision> = Api::namespaced(sim.client(), NS);
    for (revision, cause) in [(1, None), (2, Some("kubectl set image"))] {
        let mut annotations = json!({});
        if let Some(cause) = cause {
            annotations["kubernetes.io/change-cause"] = json!(cause);
        }
        let cr: ControllerRevision = object(json!({
            "apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": format!("{DS}-{revision}"), "labels": labels,
                         "annotations": annotations, "ownerReferences": owner},
            "revision": revision,
            "data": {"spec": {"template": {"$patch": "replace"}}},
        }));
        revisions
            .create(&PostParams::default(), &cr)
            .await
            .expect("a revision");
    }
    let out = kubectl
        .ok(&["rollout", "history", &format!("ds/{DS}"), "-n", NS])
        .await;
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .filter(|w: &Vec<&str>| !w.is_empty())
        .collect();
    assert_eq!(lines[0], [format!("daemonset.apps/{DS}").as_str()], "{out}");
    assert_eq!(lines[1], ["REVISION", "CHANGE-CAUSE"], "{out}");
    assert_eq!(lines[2], ["1", "<none>"], "{out}");
    assert_eq!(lines[3], ["2", "kubectl", "set", "image"], "{out}");
}

#[tokio::test]
async fn get_events_prints_a_row_per_event() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "get events") else {
        return;
    };
    let involved = json!({"kind": "DaemonSet", "namespace": NS, "name": DS,
                          "apiVersion": "apps/v1"});
    record_event(&sim, "e1", involved, "SuccessfulCreate", "Created pod: x").await;
    let out = kubectl.ok(&["get", "events", "-n", NS]).await;
    let header = out.lines().next().unwrap_or_default();
    for column in ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"] {
        assert!(header.contains(column), "{out}");
    }
    let row = out.lines().nth(1).unwrap_or_default();
    for cell in [
        "Normal",
        "SuccessfulCreate",
        &format!("daemonset/{DS}"),
        "Created pod: x",
    ] {
        assert!(row.contains(cell), "{cell} in {out}");
    }
}

#[tokio::test]
async fn describe_shows_a_daemonsets_status_and_only_its_events() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "describe ds") else {
        return;
    };
    report_rollout(&sim, 1, 1).await;
    let uid = daemonset(&sim).await.uid().expect("a uid");
    let involved = json!({"kind": "DaemonSet", "namespace": NS, "name": DS,
                          "apiVersion": "apps/v1", "uid": uid});
    record_event(
        &sim,
        "ds-event",
        involved,
        "SuccessfulCreate",
        "Created pod: ds-pod",
    )
    .await;
    let other = json!({"kind": "Pod", "namespace": NS, "name": "kube-apiserver-cp-1"});
    record_event(&sim, "pod-event", other, "Pulled", "Image pulled").await;

    let out = kubectl
        .ok(&["describe", &format!("ds/{DS}"), "-n", NS])
        .await;
    let described = squeezed(&out);
    for expected in [
        format!("Name: {DS}"),
        "Selector: k8s-app=self-hosted-kube-apiserver".to_string(),
        "Desired Number of Nodes Scheduled: 1".to_string(),
        "Number of Nodes Scheduled with Up-to-date Pods: 1".to_string(),
        "Normal SuccessfulCreate".to_string(),
    ] {
        assert!(described.contains(&expected), "{expected:?} in {out}");
    }
    assert!(out.contains("Created pod: ds-pod"), "its event: {out}");
    assert!(!out.contains("Image pulled"), "not the pod's event: {out}");
}

#[tokio::test]
async fn describe_shows_a_pods_containers_and_events() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "describe pod") else {
        return;
    };
    let pod = "kube-apiserver-cp-1";
    let uid = Api::<Pod>::namespaced(sim.client(), NS)
        .get(pod)
        .await
        .expect("the seeded pod")
        .uid()
        .expect("a uid");
    let involved = json!({"kind": "Pod", "namespace": NS, "name": pod, "uid": uid,
                          "apiVersion": "v1", "fieldPath": "spec.containers{kube-apiserver}"});
    record_event(
        &sim,
        "pulled",
        involved,
        "Pulled",
        "Container image already present",
    )
    .await;

    let out = kubectl
        .ok(&["describe", &format!("pod/{pod}"), "-n", NS])
        .await;
    let described = squeezed(&out);
    for expected in [
        format!("Name: {pod}"),
        "Node: cp-1".to_string(),
        "Status: Running".to_string(),
        "Image: registry.k8s.io/kube-apiserver:v1.32.4".to_string(),
        "Normal Pulled".to_string(),
        "Container image already present".to_string(),
    ] {
        assert!(described.contains(&expected), "{expected:?} in {out}");
    }
}
