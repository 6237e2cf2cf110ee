//! Server-side printing: the `meta.k8s.io/v1` Table that `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`, with the columns and cells the
//! real apiserver's printers produce for each kind. The apiserver always prints the wide
//! form; kubectl hides columns with a priority above 0 unless `-o wide`.

mod rows;
pub mod time;

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// One column: name, cell type (`string`, `integer`, `date`), format, and priority.
struct Column {
    name: &'static str,
    kind: &'static str,
    priority: u8,
    description: &'static str,
}

const fn column(
    name: &'static str,
    kind: &'static str,
    priority: u8,
    description: &'static str,
) -> Column {
    Column {
        name,
        kind,
        priority,
        description,
    }
}

const NAME: Column = column(
    "Name",
    "string",
    0,
    "Name of the object, unique within its namespace.",
);
const AGE: Column = column("Age", "string", 0, "Time since the object was created.");

fn columns(rt: &ResourceType) -> Vec<Column> {
    match (rt.group, rt.kind) {
        ("", "Pod") => vec![
            NAME,
            column(
                "Ready",
                "string",
                0,
                "Ready containers out of all containers.",
            ),
            column(
                "Status",
                "string",
                0,
                "The aggregate status of the pod's containers.",
            ),
            column(
                "Restarts",
                "string",
                0,
                "Container restarts, and how long ago the last one was.",
            ),
            AGE,
            column("IP", "string", 1, "The pod's IP address."),
            column("Node", "string", 1, "The node the pod is bound to."),
            column(
                "Nominated Node",
                "string",
                1,
                "The node the scheduler nominated for preemption.",
            ),
            column(
                "Readiness Gates",
                "string",
                1,
                "Readiness gates that are true out of all.",
            ),
        ],
        ("apps", "DaemonSet") => vec![
            NAME,
            column(
                "Desired",
                "integer",
                0,
                "Nodes that should run the daemon pod.",
            ),
            column(
                "Current",
                "integer",
                0,
                "Nodes that run at least one daemon pod.",
            ),
            column("Ready", "integer", 0, "Nodes whose daemon pod is ready."),
            column(
                "Up-to-date",
                "integer",
                0,
                "Nodes that run the current template.",
            ),
            column(
                "Available",
                "integer",
                0,
                "Nodes whose daemon pod has been available long enough.",
            ),
            column(
                "Node Selector",
                "string",
                0,
                "Labels a node must have to run the daemon pod.",
            ),
            AGE,
            column(
                "Containers",
                "string",
                1,
                "Names of the template's containers.",
            ),
            column(
                "Images",
                "string",
                1,
                "Images of the template's containers.",
            ),
            column(
                "Selector",
                "string",
                1,
                "The label selector of the daemon pods.",
            ),
        ],
        ("", "Node") => vec![
            NAME,
            column(
                "Status",
                "string",
                0,
                "Readiness and schedulability of the node.",
            ),
            column(
                "Roles",
                "string",
                0,
                "Roles from the node-role.kubernetes.io labels.",
            ),
            AGE,
            column("Version", "string", 0, "Kubelet version."),
            column("Internal-IP", "string", 1, "The node's internal address."),
            column("External-IP", "string", 1, "The node's external address."),
            column("OS-Image", "string", 1, "Operating system image."),
            column("Kernel-Version", "string", 1, "Kernel version."),
            column(
                "Container-Runtime",
                "string",
                1,
                "Container runtime and version.",
            ),
        ],
        ("", "Namespace") => vec![
            NAME,
            column("Status", "string", 0, "The namespace's phase."),
            AGE,
        ],
        ("", "ConfigMap") => vec![NAME, column("Data", "integer", 0, "Number of keys."), AGE],
        ("", "Secret") => vec![
            NAME,
            column("Type", "string", 0, "The secret's type."),
            column("Data", "integer", 0, "Number of keys."),
            AGE,
        ],
        ("", "ServiceAccount") => vec![
            NAME,
            column("Secrets", "integer", 0, "Number of secrets."),
            AGE,
        ],
        ("", "Event") => vec![
            column(
                "Last Seen",
                "string",
                0,
                "Time since the event was last seen.",
            ),
            column("Type", "string", 0, "Normal or Warning."),
            column("Reason", "string", 0, "Short machine-readable reason."),
            column("Object", "string", 0, "The object the event is about."),
            column(
                "Subobject",
                "string",
                1,
                "The part of the object the event is about.",
            ),
            column(
                "Source",
                "string",
                1,
                "The component that reported the event.",
            ),
            column("Message", "string", 0, "Human-readable description."),
            column(
                "First Seen",
                "string",
                1,
                "Time since the event was first seen.",
            ),
            column("Count", "string", 1, "How often the event occurred."),
            column("Name", "string", 1, "Name of the event object."),
        ],
        ("coordination.k8s.io", "Lease") => vec![
            NAME,
            column("Holder", "string", 0, "Identity of the holder."),
            AGE,
        ],
        ("apps", "ControllerRevision") => vec![
            NAME,
            column(
                "Controller",
                "string",
                0,
                "The object that owns the revision.",
            ),
            column("Revision", "integer", 0, "Revision number."),
            AGE,
        ],
        _ => vec![NAME, AGE],
    }
}

/// Builds the Table for `items` of type `rt`, aged against the current time.
///
/// `include_object` is the `includeObject` query parameter: `None` (no object per row),
/// `Object` (the whole object) or, by default, `Metadata` (a `PartialObjectMetadata`).
pub fn to_table(
    rt: &ResourceType,
    items: &[Value],
    list_resource_version: &str,
    include_object: &str,
) -> Value {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    to_table_at(rt, items, list_resource_version, include_object, now)
}

/// [`to_table`] with the current time given as Unix seconds (ages are relative to it).
pub fn to_table_at(
    rt: &ResourceType,
    items: &[Value],
    list_resource_version: &str,
    include_object: &str,
    now: i64,
) -> Value {
    let column_definitions: Vec<Value> = columns(rt)
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.kind,
                "format": if c.name == "Name" { "name" } else { "" },
                "description": c.description,
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|item| {
            let mut row = json!({ "cells": rows::cells(rt, item, now) });
            match include_object {
                "None" => {}
                "Object" => {
                    let mut object = item.clone();
                    if let Some(map) = object.as_object_mut() {
                        map.insert("apiVersion".into(), json!(rt.api_version()));
                        map.insert("kind".into(), json!(rt.kind));
                    }
                    row["object"] = object;
                }
                _ => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": item["metadata"],
                    });
                }
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": { "resourceVersion": list_resource_version },
        "columnDefinitions": column_definitions,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests;
