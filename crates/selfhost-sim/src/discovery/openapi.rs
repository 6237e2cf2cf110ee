//! A minimal OpenAPI: just enough for kubectl 1.32's writes, none of the schemas.
//!
//! What kubectl does with OpenAPI, and what this gives it:
//! - `apply`/`create`/`replace` validate with `--validate=strict` by default. kubectl first
//!   asks OpenAPI v3 whether the group-version's PATCH operation for the kind accepts the
//!   `fieldValidation` query parameter; if it does, it leaves validation to the server and
//!   sends `fieldValidation=Strict`. Each group-version document therefore lists, per kind, a
//!   PATCH operation tagged with `x-kubernetes-group-version-kind` and that parameter.
//!   (Without it kubectl would download the v2 schema and fail: "failed to download
//!   openapi".)
//! - client-side `apply` computes its strategic merge patch from the OpenAPI v3 schema when
//!   the PATCH operation's request body lists the strategic-merge media type, else from v2,
//!   else from its compiled-in types. The operations here have no request body and v2 is
//!   not served, so kubectl uses its compiled-in types, which are exact for every kind we
//!   serve.
//! - `kubectl explain` needs the schemas and is not supported.

use serde_json::{Map, Value, json};

use crate::resources::{ALL, ResourceType};

/// `/openapi/v2`: not served (404), so that kubectl falls back to its compiled-in types.
pub fn openapi_v2() -> Option<Value> {
    None
}

/// The path of a group-version's document under `/openapi/v3/`: `api/v1`, `apis/apps/v1`.
fn group_version_path(rt: &ResourceType) -> String {
    rt.url_prefix().trim_start_matches('/').to_string()
}

fn group_version_paths() -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for rt in ALL {
        let path = group_version_path(rt);
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
}

/// `/openapi/v3`: the served group-versions, each with the URL (and content hash) of its
/// document.
pub fn openapi_v3_root() -> Value {
    let mut paths = Map::new();
    for path in group_version_paths() {
        let document = openapi_v3_group(&path).unwrap_or_default();
        let hash = fnv1a(document.to_string().as_bytes());
        paths.insert(
            path.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{path}?hash={hash:016X}")}),
        );
    }
    json!({ "paths": paths })
}

/// `/openapi/v3/<path>` for `path` such as `apis/apps/v1` (a leading `/` and a `?hash=`
/// query are ignored), if that group-version is served.
pub fn openapi_v3_group(path: &str) -> Option<Value> {
    let path = path.split('?').next().unwrap_or_default().trim_matches('/');
    let kinds: Vec<&ResourceType> = ALL
        .iter()
        .filter(|rt| group_version_path(rt) == path)
        .collect();
    if kinds.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    for rt in kinds {
        let item = if rt.namespaced {
            format!(
                "{}/namespaces/{{namespace}}/{}/{{name}}",
                rt.url_prefix(),
                rt.plural
            )
        } else {
            format!("{}/{}/{{name}}", rt.url_prefix(), rt.plural)
        };
        paths.insert(item.clone(), json!({"patch": patch_operation(rt, "")}));
        if rt.has_status {
            paths.insert(
                format!("{item}/status"),
                json!({"patch": patch_operation(rt, "Status")}),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "unversioned"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

fn patch_operation(rt: &ResourceType, subresource: &str) -> Value {
    // operationId as the apiserver spells it: patchAppsV1NamespacedDaemonSetStatus.
    let group = capitalize(rt.group.split('.').next().unwrap_or_default());
    let version = capitalize(rt.version);
    let scope = if rt.namespaced { "Namespaced" } else { "" };
    let group = if group.is_empty() {
        "Core".to_string()
    } else {
        group
    };
    let query = |name: &str, kind: &str| json!({"name": name, "in": "query", "schema": {"type": kind, "uniqueItems": true}});
    json!({
        "operationId": format!("patch{group}{version}{scope}{}{subresource}", rt.kind),
        "parameters": [
            query("dryRun", "string"),
            query("fieldManager", "string"),
            query("fieldValidation", "string"),
            query("force", "boolean"),
        ],
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
    })
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// FNV-1a, 64 bits: a stable content hash for the root's URLs (clients cache by it).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
