//! What the `removed-apis` preflight check reads: the kube-apiserver's count of deprecated
//! APIs its clients requested (`/metrics`), and the objects kept in each API version the
//! target stops serving that the cluster still serves.

use selfhost_core::preflight::{ApiUsage, ServedObjects};
use selfhost_core::removals::apis::{removed_between, requested_deprecated_apis};
use selfhost_core::version::MinorVersion;
use serde_json::Value;

use crate::api_call::describe;

/// Objects listed per resource: enough to say that some exist and roughly how many.
const LIST_LIMIT: usize = 500;

async fn get(client: &kube::Client, path: &str) -> Result<String, kube::Error> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    client.request_text(request).await
}

fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}

/// Reads what the `removed-apis` check needs for an upgrade from `current` to `target`.
/// Nothing here refuses on its own: a path the credentials may not read, or that fails, is
/// reported in [`ApiUsage`] for the check to word.
pub async fn read(client: &kube::Client, current: MinorVersion, target: MinorVersion) -> ApiUsage {
    let requested = get(client, "/metrics")
        .await
        .map(|text| requested_deprecated_apis(&text))
        .map_err(|e| format!("GET /metrics: {}", describe(&e)));
    let mut served = Vec::new();
    let mut unlisted = Vec::new();
    for api in removed_between(current, target) {
        let group_version = api.group_version();
        // The core group is served under /api, every other group under /apis.
        let base = if group_version.contains('/') {
            format!("/apis/{group_version}")
        } else {
            format!("/api/{group_version}")
        };
        let discovery = match get(client, &base).await {
            Ok(text) => serde_json::from_str::<Value>(&text).unwrap_or(Value::Null),
            Err(e) if is_not_found(&e) => continue,
            Err(e) => {
                unlisted.push(format!("GET {base}: {}", describe(&e)));
                continue;
            }
        };
        let listed_by_discovery = |resource: &str| {
            discovery["resources"]
                .as_array()
                .is_some_and(|all| all.iter().any(|r| r["name"] == resource))
        };
        for resource in api.resources.iter().filter(|r| listed_by_discovery(r)) {
            let path = format!("{base}/{resource}?limit={LIST_LIMIT}");
            let list = match get(client, &path).await {
                Ok(list) => list,
                Err(e) => {
                    unlisted.push(format!("{resource} in {group_version}: {}", describe(&e)));
                    continue;
                }
            };
            let list: Value = serde_json::from_str(&list).unwrap_or(Value::Null);
            let objects = list["items"].as_array().map_or(0, Vec::len);
            let more = list["metadata"]["continue"]
                .as_str()
                .is_some_and(|c| !c.is_empty());
            if objects > 0 {
                served.push(ServedObjects {
                    group_version: group_version.clone(),
                    resource: (*resource).to_string(),
                    objects,
                    more,
                    instead: api.instead.to_string(),
                });
            }
        }
    }
    ApiUsage {
        requested,
        served,
        unlisted,
    }
}
