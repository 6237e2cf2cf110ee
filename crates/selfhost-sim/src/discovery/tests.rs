use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResourceList, APIVersions,
};
use kube::core::discovery::v2::APIGroupDiscoveryList;
use serde_json::json;

use super::*;

#[test]
fn legacy_documents_deserialize_into_the_client_types() {
    let versions: APIVersions = serde_json::from_value(api_versions()).expect("APIVersions");
    assert_eq!(versions.versions, ["v1"]);

    let list: APIGroupList = serde_json::from_value(api_group_list()).expect("APIGroupList");
    let names: Vec<&str> = list.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(
        names,
        ["apps", "coordination.k8s.io", "rbac.authorization.k8s.io"]
    );
    assert_eq!(
        list.groups[0]
            .preferred_version
            .as_ref()
            .map(|v| v.group_version.as_str()),
        Some("apps/v1")
    );

    let apps: APIGroup =
        serde_json::from_value(api_group("apps").expect("apps is served")).expect("APIGroup");
    assert_eq!(apps.versions[0].group_version, "apps/v1");
    assert!(api_group("batch").is_none());
    assert!(
        api_group("").is_none(),
        "the core group has no /apis document"
    );
}

#[test]
fn every_served_resource_is_listed_with_its_verbs_and_subresources() {
    for rt in ALL {
        let list: APIResourceList = serde_json::from_value(
            api_resource_list(rt.group, rt.version).expect("served group-version"),
        )
        .expect("APIResourceList");
        assert_eq!(list.group_version, rt.api_version());
        let resource = list
            .resources
            .iter()
            .find(|r| r.name == rt.plural)
            .unwrap_or_else(|| panic!("{} listed", rt.plural));
        assert_eq!(
            (resource.kind.as_str(), resource.namespaced),
            (rt.kind, rt.namespaced)
        );
        assert_eq!(resource.singular_name, rt.singular);
        assert_eq!(
            resource.short_names.as_deref().unwrap_or_default(),
            rt.short_names
        );
        for verb in [
            "create", "delete", "get", "list", "patch", "update", "watch",
        ] {
            assert!(
                resource.verbs.iter().any(|v| v == verb),
                "{} {verb}",
                rt.plural
            );
        }
        let status = list
            .resources
            .iter()
            .find(|r| r.name == format!("{}/status", rt.plural));
        assert_eq!(status.is_some(), rt.has_status, "{}/status", rt.plural);
        if let Some(status) = status {
            assert_eq!(status.verbs, ["get", "patch", "update"]);
        }
    }
    let core = api_resource_list("", "v1").expect("core");
    let namespaces = core["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["name"] == "namespaces")
        .expect("namespaces listed");
    assert!(
        !namespaces["verbs"]
            .as_array()
            .expect("verbs")
            .contains(&json!("deletecollection"))
    );
    assert!(api_resource_list("apps", "v2").is_none());
    assert!(api_resource_list("batch", "v1").is_none());
}

#[test]
fn aggregated_discovery_covers_the_same_resources() {
    let core: APIGroupDiscoveryList =
        serde_json::from_value(aggregated_discovery(true)).expect("core list");
    assert_eq!(core.items.len(), 1);
    let core_resources: Vec<String> = core.items[0].versions[0]
        .resources
        .iter()
        .filter_map(|r| r.resource.clone())
        .collect();
    assert_eq!(
        core_resources,
        [
            "namespaces",
            "nodes",
            "pods",
            "configmaps",
            "secrets",
            "events",
            "serviceaccounts"
        ]
    );

    let groups: APIGroupDiscoveryList =
        serde_json::from_value(aggregated_discovery(false)).expect("group list");
    let names: Vec<String> = groups
        .items
        .iter()
        .filter_map(|g| g.metadata.as_ref().and_then(|m| m.name.clone()))
        .collect();
    assert_eq!(
        names,
        ["apps", "coordination.k8s.io", "rbac.authorization.k8s.io"]
    );
    let daemonsets = groups.items[0].versions[0]
        .resources
        .iter()
        .find(|r| r.resource.as_deref() == Some("daemonsets"))
        .expect("daemonsets");
    assert_eq!(daemonsets.scope.as_deref(), Some("Namespaced"));
    assert_eq!(daemonsets.short_names, ["ds"]);
    assert_eq!(daemonsets.categories, ["all"]);
    assert_eq!(
        daemonsets.subresources[0].subresource.as_deref(),
        Some("status")
    );
    assert_eq!(
        daemonsets
            .response_kind
            .as_ref()
            .and_then(|k| k.kind.as_deref()),
        Some("DaemonSet")
    );
    assert_eq!(
        groups.items[0].versions[0].freshness.as_deref(),
        Some("Current")
    );
}

#[test]
fn openapi_v3_advertises_server_side_field_validation_for_every_kind() {
    let root = openapi_v3_root();
    let paths: Vec<&String> = root["paths"].as_object().expect("paths").keys().collect();
    assert_eq!(
        paths,
        [
            "api/v1",
            "apis/apps/v1",
            "apis/coordination.k8s.io/v1",
            "apis/rbac.authorization.k8s.io/v1"
        ]
    );
    let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .expect("url");
    assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
    assert_eq!(openapi_v3_root(), root, "hashes are stable");

    for rt in ALL {
        let document = openapi_v3_group(&group_version_path_of(rt)).expect("served");
        let operation = document["paths"]
            .as_object()
            .expect("paths")
            .values()
            .map(|p| &p["patch"])
            .find(|op| {
                op["x-kubernetes-group-version-kind"]
                    == json!({"group": rt.group, "version": rt.version, "kind": rt.kind})
            })
            .unwrap_or_else(|| panic!("a PATCH operation for {}", rt.kind));
        assert!(
            operation["parameters"]
                .as_array()
                .expect("parameters")
                .iter()
                .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"),
            "{}",
            rt.kind
        );
        assert!(
            operation.get("requestBody").is_none(),
            "kubectl must use its compiled-in patch metadata"
        );
    }
    let apps = openapi_v3_group("/apis/apps/v1?hash=ABC").expect("query and slash ignored");
    assert_eq!(
        apps["paths"]["/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}"]["patch"]["operationId"],
        "patchAppsV1NamespacedDaemonSet"
    );
    assert_eq!(
        openapi_v3_group("api/v1").expect("core")["paths"]["/api/v1/nodes/{name}/status"]["patch"]
            ["operationId"],
        "patchCoreV1NodeStatus"
    );
    assert!(openapi_v3_group("apis/batch/v1").is_none());
    assert!(openapi_v2().is_none());
}

fn group_version_path_of(rt: &ResourceType) -> String {
    rt.url_prefix().trim_start_matches('/').to_string()
}
