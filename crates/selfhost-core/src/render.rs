//! Rendering Kubernetes objects as users read and kubectl applies them.

use serde::Serialize;

/// An object that could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// YAML serialisation failed.
    #[error("cannot render YAML: {0}")]
    Yaml(String),
    /// JSON serialisation failed.
    #[error("cannot render JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// One object as a YAML document (without a leading `---`).
pub fn to_yaml<T: Serialize>(object: &T) -> Result<String, RenderError> {
    serde_saphyr::to_string(object).map_err(|e| RenderError::Yaml(e.to_string()))
}

/// Several objects as one multi-document YAML stream, each document introduced by `---`, as
/// `kubectl apply -f` reads it.
pub fn to_yaml_stream<T: Serialize>(objects: &[T]) -> Result<String, RenderError> {
    let mut out = String::new();
    for object in objects {
        out.push_str("---\n");
        let doc = to_yaml(object)?;
        out.push_str(&doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

/// Several objects as a `v1 List`, the form `kubectl get -o json` prints for many objects.
pub fn to_json_list<T: Serialize>(objects: &[T]) -> Result<serde_json::Value, RenderError> {
    let items = objects
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": items }))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn cm(name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            data: Some([("on".to_string(), "yes".to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn stream_round_trips_through_a_yaml_reader() {
        let text = to_yaml_stream(&[cm("a"), cm("b")]).expect("renders");
        assert_eq!(text.matches("---\n").count(), 2);
        assert!(text.contains("apiVersion: v1") && text.contains("kind: ConfigMap"));
        let back: Vec<ConfigMap> = serde_saphyr::from_multiple(&text).expect("parses");
        // YAML 1.1 booleans like `yes` must stay strings when read back.
        assert_eq!(back, vec![cm("a"), cm("b")]);
    }

    #[test]
    fn json_list_has_kind_list() {
        let list = to_json_list(&[cm("a")]).expect("renders");
        assert_eq!(list["kind"], "List");
        assert_eq!(list["items"][0]["metadata"]["name"], "a");
    }
}
