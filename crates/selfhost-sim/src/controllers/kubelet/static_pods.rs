//! Static pods: pods a kubelet runs from manifest files in its manifests directory, whatever
//! the API says, and mirrors into the API as read-only "mirror pods" named `<pod>-<node>`.
//!
//! Reading the directory is the wiring's job; this module turns file contents into the pod the
//! kubelet runs (defaults, a uid that is the hash of file, node and content) and builds the
//! mirror pod (`kubernetes.io/config.mirror` = that hash, owned by the Node).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::stable_id::stable_hex;
use crate::controllers::objects;
use crate::controllers::taints;
use crate::names;

/// Annotation with the static pod's hash (also its uid on the node).
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// Annotation that marks a mirror pod, holding the static pod's hash.
pub const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Annotation naming where the kubelet got the pod (`file`).
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// Annotation with the time the kubelet first saw the manifest.
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";

/// A manifest the kubelet refuses (it logs and skips the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// Not YAML or JSON.
    #[error("{file}: could not read the manifest: {reason}")]
    Unreadable {
        /// The file.
        file: String,
        /// The parser's complaint.
        reason: String,
    },
    /// Valid YAML, but not a v1 Pod.
    #[error("{file}: expected apiVersion v1 and kind Pod, found {api_version:?} {kind:?}")]
    NotAPod {
        /// The file.
        file: String,
        /// Its apiVersion.
        api_version: String,
        /// Its kind.
        kind: String,
    },
    /// A Pod the apiserver would reject.
    #[error("{file}: invalid pod: {}", reasons.join("; "))]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong.
        reasons: Vec<String>,
    },
}

/// Parses and validates one manifest file's contents.
///
/// # Errors
/// Unreadable content, another kind than a v1 Pod, or a pod without a valid name or
/// containers.
pub fn parse_manifest(content: &[u8], file: &str) -> Result<Pod, ManifestError> {
    let unreadable = |reason: String| ManifestError::Unreadable {
        file: file.to_string(),
        reason,
    };
    let text = std::str::from_utf8(content).map_err(|e| unreadable(e.to_string()))?;
    let value: Value = serde_saphyr::from_str(text).map_err(|e| unreadable(e.to_string()))?;
    let field = |name: &str| {
        value
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version != "v1" || kind != "Pod" {
        return Err(ManifestError::NotAPod {
            file: file.to_string(),
            api_version,
            kind,
        });
    }
    let pod: Pod = serde_json::from_value(value).map_err(|e| unreadable(e.to_string()))?;
    let mut reasons = Vec::new();
    match pod.metadata.name.as_deref() {
        None | Some("") => reasons.push("metadata.name: Required value".to_string()),
        Some(name) => reasons.extend(
            names::dns1123_subdomain(name)
                .into_iter()
                .map(|e| format!("metadata.name: Invalid value: {name:?}: {e}")),
        ),
    }
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    if containers.is_empty() {
        reasons.push("spec.containers: Required value".to_string());
    }
    let mut seen = Vec::new();
    for (i, c) in containers.iter().enumerate() {
        reasons.extend(names::dns1123_label(&c.name).into_iter().map(|e| {
            format!(
                "spec.containers[{i}].name: Invalid value: {:?}: {e}",
                c.name
            )
        }));
        if seen.contains(&c.name) {
            reasons.push(format!(
                "spec.containers[{i}].name: Duplicate value: {:?}",
                c.name
            ));
        }
        seen.push(c.name.clone());
        if c.image.as_deref().is_none_or(str::is_empty) {
            reasons.push(format!("spec.containers[{i}].image: Required value"));
        }
    }
    if reasons.is_empty() {
        Ok(pod)
    } else {
        Err(ManifestError::Invalid {
            file: file.to_string(),
            reasons,
        })
    }
}

/// The pod the kubelet runs from a manifest: named `<name>-<node>`, in `default` unless the
/// manifest says otherwise, bound to the node, with the hash of file, node and content as uid
/// and `kubernetes.io/config.hash`, and tolerating every `NoExecute` taint so node problems
/// never evict it.
pub fn static_pod(manifest: &Pod, file: &str, node_name: &str, seen_at: Timestamp) -> Pod {
    let content = serde_json::to_string(manifest).unwrap_or_default();
    let hash = stable_hex(&format!("{content}host:{node_name}file:{file}"), 32);
    let mut pod = manifest.clone();
    let name = pod.metadata.name.clone().unwrap_or_default();
    pod.metadata.name = Some(format!("{name}-{}", node_name.to_lowercase()));
    if pod.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        pod.metadata.namespace = Some("default".into());
    }
    pod.metadata.uid = Some(hash.clone());
    let annotations = pod.metadata.annotations.get_or_insert_default();
    annotations.insert(CONFIG_HASH_ANNOTATION.into(), hash);
    annotations.insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
    annotations.insert(
        CONFIG_SEEN_ANNOTATION.into(),
        seen_at.strftime("%Y-%m-%dT%H:%M:%S%.fZ").to_string(),
    );
    let spec = pod.spec.get_or_insert_default();
    spec.node_name = Some(node_name.to_string());
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.termination_grace_period_seconds.get_or_insert(30);
    let tolerations = spec.tolerations.get_or_insert_default();
    let all_no_execute = k8s_openapi::api::core::v1::Toleration {
        operator: Some("Exists".into()),
        effect: Some(taints::effect::NO_EXECUTE.into()),
        ..Default::default()
    };
    taints::add_or_update_toleration(tolerations, all_no_execute);
    pod.status = None;
    pod
}

/// The static pod's hash.
pub fn config_hash(pod: &Pod) -> Option<&str> {
    objects::annotations(&pod.metadata)
        .get(CONFIG_HASH_ANNOTATION)
        .map(String::as_str)
}

/// Whether an API pod is a mirror pod.
pub fn is_mirror_pod(pod: &Pod) -> bool {
    objects::annotations(&pod.metadata).contains_key(CONFIG_MIRROR_ANNOTATION)
}

/// The hash a mirror pod mirrors.
pub fn mirror_hash(pod: &Pod) -> Option<&str> {
    objects::annotations(&pod.metadata)
        .get(CONFIG_MIRROR_ANNOTATION)
        .map(String::as_str)
}

/// The mirror pod to create in the API for a static pod on the node `node_name` (uid
/// `node_uid`): the same pod with `kubernetes.io/config.mirror`, owned by the Node, without a
/// uid (the apiserver assigns one) or status.
pub fn mirror_pod(static_pod: &Pod, node_name: &str, node_uid: &str) -> Pod {
    let mut mirror = static_pod.clone();
    let hash = config_hash(static_pod).unwrap_or_default().to_string();
    mirror
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(CONFIG_MIRROR_ANNOTATION.into(), hash);
    mirror.metadata = ObjectMeta {
        uid: None,
        resource_version: None,
        creation_timestamp: None,
        owner_references: Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: node_name.to_string(),
            uid: node_uid.to_string(),
            controller: Some(true),
            block_owner_deletion: None,
        }]),
        ..mirror.metadata
    };
    mirror.status = None;
    mirror
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::fixtures::t;

    const APISERVER: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
  labels: {component: kube-apiserver, tier: control-plane}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
  - name: kube-apiserver
    image: registry.k8s.io/kube-apiserver:v1.33.2
    command: [kube-apiserver, --advertise-address=10.0.0.11, --secure-port=6443]
"#;

    #[test]
    fn a_manifest_becomes_a_static_pod_bound_to_the_node() {
        let manifest = parse_manifest(
            APISERVER.as_bytes(),
            "/etc/kubernetes/manifests/kube-apiserver.yaml",
        )
        .unwrap();
        let pod = static_pod(
            &manifest,
            "/etc/kubernetes/manifests/kube-apiserver.yaml",
            "CP-1",
            t(0),
        );
        assert_eq!(pod.metadata.name.as_deref(), Some("kube-apiserver-cp-1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
        let hash = config_hash(&pod).unwrap().to_string();
        assert_eq!(hash.len(), 32);
        assert_eq!(pod.metadata.uid.as_deref(), Some(hash.as_str()));
        let annotations = pod.metadata.annotations.clone().unwrap();
        assert_eq!(annotations[CONFIG_SOURCE_ANNOTATION], "file");
        assert!(annotations[CONFIG_SEEN_ANNOTATION].starts_with("2023-11-14T22:13:20"));
        let spec = pod.spec.clone().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("CP-1"));
        assert!(
            spec.tolerations
                .unwrap()
                .iter()
                .any(|t| t.key.is_none() && t.effect.as_deref() == Some("NoExecute"))
        );
        // The hash follows content, file and node.
        let again = static_pod(
            &manifest,
            "/etc/kubernetes/manifests/kube-apiserver.yaml",
            "CP-1",
            t(9),
        );
        assert_eq!(config_hash(&again), Some(hash.as_str()));
        let moved = static_pod(
            &manifest,
            "/etc/kubernetes/manifests/other.yaml",
            "CP-1",
            t(0),
        );
        assert_ne!(config_hash(&moved), Some(hash.as_str()));
        let edited =
            parse_manifest(APISERVER.replace("v1.33.2", "v1.33.3").as_bytes(), "f").unwrap();
        assert_ne!(
            config_hash(&static_pod(
                &edited,
                "/etc/kubernetes/manifests/kube-apiserver.yaml",
                "CP-1",
                t(0)
            )),
            Some(hash.as_str())
        );
    }

    #[test]
    fn the_mirror_pod_names_its_static_pod_and_node() {
        let manifest = parse_manifest(APISERVER.as_bytes(), "f").unwrap();
        let pod = static_pod(&manifest, "f", "cp-1", t(0));
        let mirror = mirror_pod(&pod, "cp-1", "node-uid");
        assert!(is_mirror_pod(&mirror));
        assert_eq!(mirror_hash(&mirror), config_hash(&pod));
        assert_eq!(mirror.metadata.name.as_deref(), Some("kube-apiserver-cp-1"));
        assert!(mirror.metadata.uid.is_none());
        let owner = &mirror.metadata.owner_references.clone().unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller
            ),
            ("Node", "cp-1", "node-uid", Some(true))
        );
        assert!(!is_mirror_pod(&pod));
    }

    #[test]
    fn bad_manifests_are_refused_with_a_reason() {
        let cases: [(&str, &str); 5] = [
            ("a: [", "could not read"),
            (
                "apiVersion: apps/v1\nkind: Deployment\n",
                "expected apiVersion v1 and kind Pod",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: []}\n",
                "spec.containers: Required value",
            ),
            (
                "apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, image: b}]}\n",
                "metadata.name: Required value",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b}, {name: a}]}\n",
                "Duplicate value",
            ),
        ];
        for (content, expected) in cases {
            let error = parse_manifest(content.as_bytes(), "/m/x.yaml")
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{content:?}: {error}");
            assert!(error.starts_with("/m/x.yaml"), "{error}");
        }
    }
}
