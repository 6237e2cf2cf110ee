//! Reading a static pod manifest as the kubelet reads it.

/// Why a static pod manifest cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// Not YAML (or JSON).
    #[error("not YAML: {0}")]
    NotYaml(String),
    /// Another kind of object.
    #[error(
        "expected apiVersion v1 and kind Pod, found apiVersion {api_version:?} and kind {kind:?}"
    )]
    NotAPod {
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
    },
    /// A Pod whose fields do not have the types a Pod's have.
    #[error("not a valid Pod: {0}")]
    Invalid(String),
}

/// Parses a static pod manifest as the kubelet reads it: YAML (or JSON), apiVersion v1, kind
/// Pod.
pub fn parse_manifest(text: &str) -> Result<k8s_openapi::api::core::v1::Pod, ManifestError> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|e| ManifestError::NotYaml(e.to_string()))?;
    let field = |name: &str| {
        value
            .get(name)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version != "v1" || kind != "Pod" {
        return Err(ManifestError::NotAPod { api_version, kind });
    }
    serde_json::from_value(value).map_err(|e| ManifestError::Invalid(e.to_string()))
}
