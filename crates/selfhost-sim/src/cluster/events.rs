//! Events the simulated components record (`kubectl describe` and `kubectl get events` show
//! them): core/v1 Events named `<object>.<hex time>`, as client-go's recorder names them.

use serde_json::json;

use super::api::ClusterApi;
use crate::resources;

/// The object an event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Involved {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// Who records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Source<'a> {
    /// `kubelet`, `daemonset-controller`, `default-scheduler`, …
    pub component: &'a str,
    /// The node, for a kubelet.
    pub host: Option<&'a str>,
}

/// Records one event; failures (the API is down) are dropped, as a real recorder drops what
/// it cannot send.
pub(crate) fn record(
    api: &ClusterApi,
    source: Source<'_>,
    involved: &Involved,
    warning: bool,
    reason: &str,
    message: &str,
) {
    if !api.is_up() {
        return;
    }
    let now = jiff::Timestamp::now();
    let stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let namespace = if involved.namespace.is_empty() {
        "default"
    } else {
        involved.namespace.as_str()
    };
    let mut source_json = json!({ "component": source.component });
    if let Some(host) = source.host {
        source_json["host"] = json!(host);
    }
    let nanos = now.as_nanosecond();
    for attempt in 0..4_i128 {
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": format!("{}.{:x}", involved.name, nanos + attempt),
                "namespace": namespace,
            },
            "involvedObject": {
                "apiVersion": involved.api_version,
                "kind": involved.kind,
                "namespace": involved.namespace,
                "name": involved.name,
                "uid": involved.uid,
            },
            "reason": reason,
            "message": message,
            "type": if warning { "Warning" } else { "Normal" },
            "source": source_json,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": source.component,
            "reportingInstance": source.host.unwrap_or(source.component),
        });
        match api.create(&resources::EVENTS, namespace, event, source.component) {
            Err(e) if e.is_conflict() => continue,
            Err(e) => {
                tracing::debug!(error = %e, reason, "event not recorded");
                return;
            }
            Ok(_) => return,
        }
    }
}
