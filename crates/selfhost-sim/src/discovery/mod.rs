//! Discovery documents, all derived from [`crate::resources::ALL`]:
//!
//! - legacy discovery: `/api` ([`api_versions`]), `/apis` ([`api_group_list`]),
//!   `/apis/<group>` ([`api_group`]), `/api/v1` and `/apis/<group>/<version>`
//!   ([`api_resource_list`]);
//! - aggregated discovery ([`aggregated_discovery`]), which kubectl ≥ 1.30 and client-go ask
//!   for with `Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`.
//!   Serve it with that same media type as `Content-Type` (and `Vary: Accept`); clients that
//!   get a plain JSON body back fall back to legacy discovery;
//! - a minimal OpenAPI ([`openapi`]) that is just enough for kubectl's writes.

mod openapi;

pub use openapi::{openapi_v2, openapi_v3_group, openapi_v3_root};

use serde_json::{Value, json};

use crate::resources::{ALL, ResourceType};

/// The media type of aggregated discovery responses.
pub const AGGREGATED_DISCOVERY_MEDIA_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Verbs of a served resource, in the apiserver's (alphabetical) order. Namespaces cannot be
/// deleted as a collection.
fn verbs(rt: &ResourceType) -> Vec<&'static str> {
    let mut verbs = vec![
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ];
    if rt.kind == "Namespace" {
        verbs.retain(|v| *v != "deletecollection");
    }
    verbs
}

const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// The `group/version` (or `v1` for the core group) of a served type.
fn group_version(rt: &ResourceType) -> String {
    rt.api_version()
}

/// The API groups other than core, in discovery order, with their versions.
fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut groups: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for rt in ALL.iter().filter(|rt| !rt.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == rt.group) {
            Some((_, versions)) if !versions.contains(&rt.version) => versions.push(rt.version),
            Some(_) => {}
            None => groups.push((rt.group, vec![rt.version])),
        }
    }
    groups
}

fn group_document(name: &str, versions: &[&str]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/api`: the core group's versions (`APIVersions`).
pub fn api_versions() -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [],
    })
}

/// `/apis`: every named group (`APIGroupList`).
pub fn api_group_list() -> Value {
    let groups: Vec<Value> = groups().iter().map(|(g, v)| group_document(g, v)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>` (`APIGroup`), if the group is served.
pub fn api_group(group: &str) -> Option<Value> {
    let (name, versions) = groups().into_iter().find(|(g, _)| *g == group)?;
    let mut document = group_document(name, &versions);
    document["kind"] = json!("APIGroup");
    document["apiVersion"] = json!("v1");
    Some(document)
}

/// `/api/v1` (group `""`) or `/apis/<group>/<version>` (`APIResourceList`), if served:
/// every resource with its verbs, short names and categories, and its `/status`
/// subresource where it has one.
pub fn api_resource_list(group: &str, version: &str) -> Option<Value> {
    let served: Vec<&ResourceType> = ALL
        .iter()
        .filter(|rt| rt.group == group && rt.version == version)
        .collect();
    let first = served.first()?;
    let mut resources = Vec::new();
    for rt in &served {
        let mut resource = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": verbs(rt),
        });
        if !rt.short_names.is_empty() {
            resource["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            resource["categories"] = json!(rt.categories);
        }
        resources.push(resource);
        if rt.has_status {
            resources.push(json!({
                "name": format!("{}/status", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": STATUS_VERBS,
            }));
        }
    }
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version(first),
        "resources": resources,
    }))
}

/// The aggregated discovery document (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`)
/// for `/api` (`core`) or `/apis`.
pub fn aggregated_discovery(core: bool) -> Value {
    let names: Vec<&str> = if core {
        vec![""]
    } else {
        groups().into_iter().map(|(g, _)| g).collect()
    };
    let items: Vec<Value> = names
        .into_iter()
        .map(|group| {
            let mut versions: Vec<&str> = Vec::new();
            for rt in ALL.iter().filter(|rt| rt.group == group) {
                if !versions.contains(&rt.version) {
                    versions.push(rt.version);
                }
            }
            let versions: Vec<Value> = versions
                .into_iter()
                .map(|version| {
                    let resources: Vec<Value> = ALL
                        .iter()
                        .filter(|rt| rt.group == group && rt.version == version)
                        .map(aggregated_resource)
                        .collect();
                    json!({"version": version, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let metadata = if group.is_empty() {
                json!({})
            } else {
                json!({"name": group})
            };
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

fn aggregated_resource(rt: &ResourceType) -> Value {
    let kind = json!({"group": rt.group, "version": rt.version, "kind": rt.kind});
    let mut resource = json!({
        "resource": rt.plural,
        "responseKind": kind,
        "scope": if rt.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": rt.singular,
        "verbs": verbs(rt),
    });
    if !rt.short_names.is_empty() {
        resource["shortNames"] = json!(rt.short_names);
    }
    if !rt.categories.is_empty() {
        resource["categories"] = json!(rt.categories);
    }
    if rt.has_status {
        resource["subresources"] = json!([{
            "subresource": "status",
            "responseKind": kind,
            "verbs": STATUS_VERBS,
        }]);
    }
    resource
}

#[cfg(test)]
mod tests;
