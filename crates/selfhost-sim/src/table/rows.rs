//! The cells of one row per kind, computed as the apiserver's printers compute them.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::time::{age, parse_rfc3339};
use crate::resources::ResourceType;
use crate::selector::LabelSelector;

const NONE: &str = "<none>";

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn items(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        NONE.to_string()
    } else {
        s.to_string()
    }
}

fn count(value: &Value) -> i64 {
    value.as_i64().unwrap_or(0)
}

/// `labels.FormatLabels`: `a=b,c=d`, or `<none>`.
fn format_labels(labels: &Value) -> String {
    let pairs: Vec<String> = labels
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", text(v)))
        .collect();
    or_none(&pairs.join(","))
}

/// The cells of `item`'s row, one per column of its kind.
pub(super) fn cells(rt: &ResourceType, item: &Value, now: i64) -> Vec<Value> {
    let name = json!(text(&item["metadata"]["name"]));
    let created = age(item["metadata"]["creationTimestamp"].as_str(), now);
    match (rt.group, rt.kind) {
        ("", "Pod") => pod_cells(item, name, created, now),
        ("apps", "DaemonSet") => {
            let status = &item["status"];
            let pod_spec = &item["spec"]["template"]["spec"];
            let containers = items(&pod_spec["containers"]);
            let joined = |field: &str| {
                containers
                    .iter()
                    .map(|c| text(&c[field]))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let selector = LabelSelector::from_label_selector_json(&item["spec"]["selector"])
                .map_or_else(|_| "<error>".to_string(), |s| or_none(&s.to_string()));
            vec![
                name,
                json!(count(&status["desiredNumberScheduled"])),
                json!(count(&status["currentNumberScheduled"])),
                json!(count(&status["numberReady"])),
                json!(count(&status["updatedNumberScheduled"])),
                json!(count(&status["numberAvailable"])),
                json!(format_labels(&pod_spec["nodeSelector"])),
                json!(created),
                json!(joined("name")),
                json!(joined("image")),
                json!(selector),
            ]
        }
        ("", "Node") => node_cells(item, name, created),
        ("", "Namespace") => vec![name, json!(text(&item["status"]["phase"])), json!(created)],
        ("", "ConfigMap") => {
            let keys = map_len(&item["data"]) + map_len(&item["binaryData"]);
            vec![name, json!(keys), json!(created)]
        }
        ("", "Secret") => vec![
            name,
            json!(text(&item["type"])),
            json!(map_len(&item["data"])),
            json!(created),
        ],
        ("", "ServiceAccount") => vec![name, json!(items(&item["secrets"]).len()), json!(created)],
        ("", "Event") => event_cells(item, name, now),
        ("coordination.k8s.io", "Lease") => {
            vec![
                name,
                json!(text(&item["spec"]["holderIdentity"])),
                json!(created),
            ]
        }
        ("apps", "ControllerRevision") => {
            let controller = items(&item["metadata"]["ownerReferences"])
                .iter()
                .find(|r| r["controller"].as_bool() == Some(true))
                .map_or_else(
                    || NONE.to_string(),
                    |r| {
                        let group = text(&r["apiVersion"])
                            .rsplit_once('/')
                            .map_or("", |(g, _)| g);
                        let kind = text(&r["kind"]).to_lowercase();
                        let kind = if group.is_empty() {
                            kind
                        } else {
                            format!("{kind}.{group}")
                        };
                        format!("{kind}/{}", text(&r["name"]))
                    },
                );
            vec![
                name,
                json!(controller),
                json!(count(&item["revision"])),
                json!(created),
            ]
        }
        _ => vec![name, json!(created)],
    }
}

fn map_len(value: &Value) -> usize {
    value.as_object().map_or(0, |m| m.len())
}

/// `printPod`: readiness, the aggregate status reason, restarts and placement.
fn pod_cells(pod: &Value, name: Value, created: String, now: i64) -> Vec<Value> {
    let spec = &pod["spec"];
    let status = &pod["status"];
    let mut reason = text(&status["phase"]).to_string();
    if !text(&status["reason"]).is_empty() {
        reason = text(&status["reason"]).to_string();
    }
    let mut restarts = 0;
    let mut last_restart: Option<i64> = None;
    let mut note_restart = |container: &Value, restarts: &mut i64| {
        *restarts += count(&container["restartCount"]);
        if let Some(finished) = container["lastState"]["terminated"]["finishedAt"]
            .as_str()
            .and_then(parse_rfc3339)
        {
            last_restart = Some(last_restart.map_or(finished, |l| l.max(finished)));
        }
    };

    let init_statuses = items(&status["initContainerStatuses"]);
    let init_total = items(&spec["initContainers"]).len();
    let mut initializing = false;
    for (i, container) in init_statuses.iter().enumerate() {
        note_restart(container, &mut restarts);
        let state = &container["state"];
        let terminated = &state["terminated"];
        let waiting_reason = text(&state["waiting"]["reason"]);
        if terminated.is_object() && count(&terminated["exitCode"]) == 0 {
            continue;
        }
        reason = if terminated.is_object() {
            match text(&terminated["reason"]) {
                "" if count(&terminated["signal"]) != 0 => {
                    format!("Init:Signal:{}", count(&terminated["signal"]))
                }
                "" => format!("Init:ExitCode:{}", count(&terminated["exitCode"])),
                r => format!("Init:{r}"),
            }
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            format!("Init:{waiting_reason}")
        } else {
            format!("Init:{i}/{init_total}")
        };
        initializing = true;
        break;
    }

    let containers = items(&status["containerStatuses"]);
    let total = items(&spec["containers"]).len();
    let mut ready = 0;
    let initialized = items(&status["conditions"])
        .iter()
        .any(|c| c["type"] == "Initialized" && c["status"] == "True");
    if !initializing || initialized {
        restarts = 0;
        let mut has_running = false;
        for container in containers.iter().rev() {
            note_restart(container, &mut restarts);
            let state = &container["state"];
            let terminated = &state["terminated"];
            if !text(&state["waiting"]["reason"]).is_empty() {
                reason = text(&state["waiting"]["reason"]).to_string();
            } else if !text(&terminated["reason"]).is_empty() {
                reason = text(&terminated["reason"]).to_string();
            } else if terminated.is_object() {
                reason = match count(&terminated["signal"]) {
                    0 => format!("ExitCode:{}", count(&terminated["exitCode"])),
                    signal => format!("Signal:{signal}"),
                };
            } else if container["ready"].as_bool() == Some(true) && state["running"].is_object() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            let pod_ready = items(&status["conditions"])
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.to_string();
        }
    }
    let terminal = matches!(text(&status["phase"]), "Succeeded" | "Failed");
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        if text(&status["reason"]) == "NodeLost" {
            reason = "Unknown".to_string();
        } else if !terminal {
            reason = "Terminating".to_string();
        }
    }

    let restarts_text = match last_restart {
        Some(when) if restarts != 0 => format!(
            "{restarts} ({} ago)",
            super::time::human_duration(now - when)
        ),
        _ => restarts.to_string(),
    };
    let ip = items(&status["podIPs"])
        .first()
        .map_or_else(|| text(&status["podIP"]), |p| text(&p["ip"]));
    let gates = items(&spec["readinessGates"]);
    let gates_text = if gates.is_empty() {
        NONE.to_string()
    } else {
        let satisfied = gates
            .iter()
            .filter(|g| {
                items(&status["conditions"])
                    .iter()
                    .any(|c| c["type"] == g["conditionType"] && c["status"] == "True")
            })
            .count();
        format!("{satisfied}/{}", gates.len())
    };
    vec![
        name,
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_text),
        json!(created),
        json!(or_none(ip)),
        json!(or_none(text(&spec["nodeName"]))),
        json!(or_none(text(&status["nominatedNodeName"]))),
        json!(gates_text),
    ]
}

/// `printNode`: Ready/NotReady/Unknown plus SchedulingDisabled, and roles from labels.
fn node_cells(node: &Value, name: Value, created: String) -> Vec<Value> {
    let conditions = items(&node["status"]["conditions"]);
    let mut status: Vec<&str> = match conditions.iter().rev().find(|c| c["type"] == "Ready") {
        Some(c) if c["status"] == "True" => vec!["Ready"],
        Some(_) => vec!["NotReady"],
        None => vec!["Unknown"],
    };
    if node["spec"]["unschedulable"].as_bool() == Some(true) {
        status.push("SchedulingDisabled");
    }
    let mut roles = BTreeSet::new();
    for (key, value) in node["metadata"]["labels"].as_object().into_iter().flatten() {
        if let Some(role) = key.strip_prefix("node-role.kubernetes.io/")
            && !role.is_empty()
        {
            roles.insert(role.to_string());
        } else if key == "kubernetes.io/role" && !text(value).is_empty() {
            roles.insert(text(value).to_string());
        }
    }
    let roles = roles.into_iter().collect::<Vec<_>>().join(",");
    let address = |kind: &str| {
        items(&node["status"]["addresses"])
            .iter()
            .find(|a| a["type"] == kind)
            .map_or_else(|| NONE.to_string(), |a| text(&a["address"]).to_string())
    };
    let info = &node["status"]["nodeInfo"];
    let unknown = |field: &str| match text(&info[field]) {
        "" => "<unknown>".to_string(),
        value => value.to_string(),
    };
    vec![
        name,
        json!(status.join(",")),
        json!(or_none(&roles)),
        json!(created),
        json!(text(&info["kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(unknown("osImage")),
        json!(unknown("kernelVersion")),
        json!(unknown("containerRuntimeVersion")),
    ]
}

/// `printEvent`: last/first seen (falling back to eventTime and series), the object as
/// `kind/name`, and the source.
fn event_cells(event: &Value, name: Value, now: i64) -> Vec<Value> {
    let seen = |field: &str| event[field].as_str().filter(|s| !s.is_empty());
    let first = age(seen("firstTimestamp").or_else(|| seen("eventTime")), now);
    let mut last = match seen("lastTimestamp") {
        Some(ts) => age(Some(ts), now),
        None => first.clone(),
    };
    let mut occurrences = count(&event["count"]);
    if event["series"].is_object() {
        last = age(event["series"]["lastObservedTime"].as_str(), now);
        occurrences = count(&event["series"]["count"]);
    } else if occurrences == 0 {
        occurrences = 1;
    }
    let involved = &event["involvedObject"];
    let kind = text(&involved["kind"]).to_lowercase();
    let target = match text(&involved["name"]) {
        "" => kind,
        object => format!("{kind}/{object}"),
    };
    let component = text(&event["source"]["component"]);
    let component = if component.is_empty() {
        text(&event["reportingComponent"])
    } else {
        component
    };
    let host = text(&event["source"]["host"]);
    let host = if host.is_empty() {
        text(&event["reportingInstance"])
    } else {
        host
    };
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    vec![
        json!(last),
        json!(text(&event["type"])),
        json!(text(&event["reason"])),
        json!(target),
        json!(text(&involved["fieldPath"])),
        json!(source),
        json!(text(&event["message"]).trim()),
        json!(first),
        json!(occurrences),
        name,
    ]
}
