use serde_json::{Value, json};

use super::*;
use crate::resources::{
    CONFIGMAPS, CONTROLLERREVISIONS, DAEMONSETS, EVENTS, LEASES, NAMESPACES, NODES, PODS, SECRETS,
    SERVICEACCOUNTS,
};

/// 2025-06-20T12:34:56Z.
const NOW: i64 = 1_750_422_896;

fn header(table: &Value) -> Vec<String> {
    table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn row(rt: &ResourceType, item: Value) -> Vec<Value> {
    let table = to_table_at(rt, &[item], "42", "None", NOW);
    assert_eq!(
        table["rows"][0]["cells"].as_array().map(Vec::len),
        Some(header(&table).len()),
        "one cell per column"
    );
    table["rows"][0]["cells"].as_array().expect("cells").clone()
}

fn running_pod() -> Value {
    json!({
        "metadata": {"name": "kube-apiserver-cp-1", "namespace": "kube-system", "creationTimestamp": "2025-06-20T12:31:54Z"},
        "spec": {"nodeName": "cp-1", "containers": [{"name": "kube-apiserver"}, {"name": "sidecar"}]},
        "status": {
            "phase": "Running",
            "podIPs": [{"ip": "10.0.0.11"}],
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {"name": "kube-apiserver", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2025-06-20T12:29:56Z"}}},
                {"name": "sidecar", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]
        }
    })
}

#[test]
fn every_kind_has_the_real_printers_columns() {
    let cases: Vec<(ResourceType, Vec<&str>)> = vec![
        (
            PODS,
            vec![
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates",
            ],
        ),
        (
            DAEMONSETS,
            vec![
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age",
                "Containers",
                "Images",
                "Selector",
            ],
        ),
        (
            NODES,
            vec![
                "Name",
                "Status",
                "Roles",
                "Age",
                "Version",
                "Internal-IP",
                "External-IP",
                "OS-Image",
                "Kernel-Version",
                "Container-Runtime",
            ],
        ),
        (NAMESPACES, vec!["Name", "Status", "Age"]),
        (CONFIGMAPS, vec!["Name", "Data", "Age"]),
        (SECRETS, vec!["Name", "Type", "Data", "Age"]),
        (SERVICEACCOUNTS, vec!["Name", "Secrets", "Age"]),
        (LEASES, vec!["Name", "Holder", "Age"]),
        (
            CONTROLLERREVISIONS,
            vec!["Name", "Controller", "Revision", "Age"],
        ),
        (
            EVENTS,
            vec![
                "Last Seen",
                "Type",
                "Reason",
                "Object",
                "Subobject",
                "Source",
                "Message",
                "First Seen",
                "Count",
                "Name",
            ],
        ),
    ];
    for (rt, expected) in cases {
        let table = to_table_at(&rt, &[], "7", "Metadata", NOW);
        assert_eq!(header(&table), expected, "{}", rt.plural);
        assert_eq!(table["kind"], "Table");
        assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(table["metadata"]["resourceVersion"], "7");
    }
    let pods = to_table_at(&PODS, &[], "1", "None", NOW);
    let wide: Vec<bool> = pods["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .map(|c| c["priority"] == 1)
        .collect();
    assert_eq!(
        wide,
        [false, false, false, false, false, true, true, true, true]
    );
    assert_eq!(pods["columnDefinitions"][0]["format"], "name");
}

#[test]
fn pod_rows_aggregate_readiness_status_and_restarts() {
    assert_eq!(
        row(&PODS, running_pod()),
        [
            json!("kube-apiserver-cp-1"),
            json!("1/2"),
            json!("CrashLoopBackOff"),
            json!("3 (5m ago)"),
            json!("3m2s"),
            json!("10.0.0.11"),
            json!("cp-1"),
            json!("<none>"),
            json!("<none>"),
        ]
    );
    let mut pending = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}});
    assert_eq!(
        row(&PODS, pending.clone())[1..4],
        [json!("0/1"), json!("Pending"), json!("0")]
    );
    pending["metadata"]["deletionTimestamp"] = json!("2025-06-20T12:34:00Z");
    assert_eq!(row(&PODS, pending)[2], "Terminating");
    let init = json!({"metadata": {"name": "p"}, "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "c"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [{"name": "i", "state": {"running": {}}}]}});
    assert_eq!(row(&PODS, init)[2], "Init:0/1");
    let failed_init = json!({"metadata": {"name": "p"}, "spec": {"initContainers": [{"name": "i"}], "containers": [{"name": "c"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [{"name": "i", "state": {"terminated": {"exitCode": 2}}}]}});
    assert_eq!(row(&PODS, failed_init)[2], "Init:ExitCode:2");
}

#[test]
fn daemonset_rows_show_counts_selectors_and_images() {
    let ds = json!({
        "metadata": {"name": "self-hosted-kube-apiserver", "creationTimestamp": "2025-06-18T09:34:56Z"},
        "spec": {
            "selector": {"matchLabels": {"k8s-app": "self-hosted-kube-apiserver"}},
            "template": {"spec": {
                "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                "containers": [{"name": "kube-apiserver", "image": "registry.k8s.io/kube-apiserver:v1.33.2"}]
            }}
        },
        "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 1, "numberAvailable": 2}
    });
    assert_eq!(
        row(&DAEMONSETS, ds),
        [
            json!("self-hosted-kube-apiserver"),
            json!(3),
            json!(3),
            json!(2),
            json!(1),
            json!(2),
            json!("node-role.kubernetes.io/control-plane="),
            json!("2d3h"),
            json!("kube-apiserver"),
            json!("registry.k8s.io/kube-apiserver:v1.33.2"),
            json!("k8s-app=self-hosted-kube-apiserver"),
        ]
    );
}

#[test]
fn node_rows_show_readiness_roles_and_addresses() {
    let node = json!({
        "metadata": {"name": "cp-1", "creationTimestamp": "2025-06-20T08:34:56Z",
                     "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "master"}},
        "spec": {"unschedulable": true},
        "status": {
            "conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "nodeInfo": {"kubeletVersion": "v1.33.2", "osImage": "Simulated", "kernelVersion": "6.1", "containerRuntimeVersion": "sim://1"}
        }
    });
    assert_eq!(
        row(&NODES, node),
        [
            json!("cp-1"),
            json!("Ready,SchedulingDisabled"),
            json!("control-plane,master"),
            json!("4h"),
            json!("v1.33.2"),
            json!("10.0.0.1"),
            json!("<none>"),
            json!("Simulated"),
            json!("6.1"),
            json!("sim://1"),
        ]
    );
    assert_eq!(
        row(&NODES, json!({"metadata": {"name": "n"}}))[1..4],
        [json!("Unknown"), json!("<none>"), json!("<unknown>")]
    );
}

#[test]
fn small_kinds_print_their_one_or_two_facts() {
    let created = "2025-06-20T12:34:50Z";
    let cases: Vec<(ResourceType, Value, Vec<Value>)> = vec![
        (
            NAMESPACES,
            json!({"metadata": {"name": "kube-system", "creationTimestamp": created}, "status": {"phase": "Active"}}),
            vec![json!("kube-system"), json!("Active"), json!("6s")],
        ),
        (
            CONFIGMAPS,
            json!({"metadata": {"name": "kubeadm-config", "creationTimestamp": created}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}}),
            vec![json!("kubeadm-config"), json!(3), json!("6s")],
        ),
        (
            SECRETS,
            json!({"metadata": {"name": "s", "creationTimestamp": created}, "type": "Opaque", "data": {"a": "MQ=="}}),
            vec![json!("s"), json!("Opaque"), json!(1), json!("6s")],
        ),
        (
            SERVICEACCOUNTS,
            json!({"metadata": {"name": "default", "creationTimestamp": created}}),
            vec![json!("default"), json!(0), json!("6s")],
        ),
        (
            LEASES,
            json!({"metadata": {"name": "kube-scheduler", "creationTimestamp": created}, "spec": {"holderIdentity": "cp-1_abc"}}),
            vec![json!("kube-scheduler"), json!("cp-1_abc"), json!("6s")],
        ),
        (
            CONTROLLERREVISIONS,
            json!({"metadata": {"name": "ds-5d8f", "creationTimestamp": created, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}]}, "revision": 2}),
            vec![
                json!("ds-5d8f"),
                json!("daemonset.apps/ds"),
                json!(2),
                json!("6s"),
            ],
        ),
        (
            EVENTS,
            json!({"metadata": {"name": "p.1"}, "type": "Warning", "reason": "BackOff", "message": " Back-off restarting ",
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
            "source": {"component": "kubelet", "host": "cp-1"},
            "firstTimestamp": "2025-06-20T12:24:56Z", "lastTimestamp": "2025-06-20T12:34:46Z", "count": 4}),
            vec![
                json!("10s"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/p"),
                json!("spec.containers{c}"),
                json!("kubelet, cp-1"),
                json!("Back-off restarting"),
                json!("10m"),
                json!(4),
                json!("p.1"),
            ],
        ),
    ];
    for (rt, item, expected) in cases {
        assert_eq!(row(&rt, item), expected, "{}", rt.plural);
    }
}

#[test]
fn rows_carry_the_object_the_client_asked_for() {
    let pod = running_pod();
    let metadata = to_table_at(&PODS, std::slice::from_ref(&pod), "5", "Metadata", NOW);
    assert_eq!(
        metadata["rows"][0]["object"],
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": pod["metadata"]})
    );
    let object = to_table_at(&PODS, std::slice::from_ref(&pod), "5", "Object", NOW);
    assert_eq!(object["rows"][0]["object"]["kind"], "Pod");
    assert_eq!(object["rows"][0]["object"]["status"], pod["status"]);
    let none = to_table_at(&PODS, std::slice::from_ref(&pod), "5", "None", NOW);
    assert!(none["rows"][0].get("object").is_none());
}
