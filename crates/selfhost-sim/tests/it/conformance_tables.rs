//! Conformance, part 8: Tables (`as=Table`, what `kubectl get` asks for) page like lists:
//! every page but the last carries `continue` and `remainingItemCount`, and following the
//! tokens yields every row once.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::Value;

use crate::common::*;

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";

async fn table_page(client: &kube::Client, query: &str) -> Value {
    let request = http::Request::get(format!("/api/v1/namespaces/default/configmaps?{query}"))
        .header(http::header::ACCEPT, TABLE)
        .body(Vec::new())
        .unwrap();
    client.request(request).await.expect("a Table page")
}

#[tokio::test]
async fn paged_tables_carry_continue_and_remaining_item_count() {
    let sim = sim().await;
    let client = sim.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for name in ["a", "b", "c", "d", "e"] {
        cms.create(&PostParams::default(), &configmap(name, "1"))
            .await
            .unwrap();
    }
    let mut names = Vec::new();
    let mut remaining = Vec::new();
    let mut query = "limit=2".to_string();
    loop {
        let page = table_page(&client, &query).await;
        assert_eq!(page["kind"], "Table");
        names.extend(
            page["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["cells"][0].as_str().unwrap().to_string()),
        );
        let metadata = &page["metadata"];
        assert!(metadata["resourceVersion"].is_string());
        remaining.push(metadata["remainingItemCount"].as_u64());
        match metadata["continue"].as_str() {
            Some(token) => query = format!("limit=2&continue={token}"),
            None => break,
        }
    }
    assert_eq!(names, ["a", "b", "c", "d", "e"]);
    assert_eq!(remaining, [Some(3), Some(1), None]);

    let unpaged = table_page(&client, "").await;
    assert_eq!(unpaged["rows"].as_array().unwrap().len(), 5);
    assert!(unpaged["metadata"].get("continue").is_none());
    assert!(unpaged["metadata"].get("remainingItemCount").is_none());
}
