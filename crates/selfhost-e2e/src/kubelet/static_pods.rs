//! Static pods: pods the kubelet runs from manifest files whatever the API says, mirrored into
//! the API as read-only "mirror pods" named `<pod>-<node>`.
//!
//! The pod's uid is the hash of node, file and content (the kubelet hashes the decoded pod, so
//! reformatting a file changes nothing); it is also `kubernetes.io/config.hash`, and the mirror
//! pod carries it as `kubernetes.io/config.mirror`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

// The kubelet's annotations and manifest errors are the simulator's: one definition of what
// a real kubelet writes.
pub use selfhost_sim::controllers::kubelet::{
    CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION, CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION, ManifestError,
};
pub(crate) use selfhost_sim::controllers::kubelet::{is_mirror_pod, mirror_hash};

/// Whether a file name is one the kubelet reads as a manifest (hidden files are skipped).
pub(crate) fn is_manifest_name(name: &str) -> bool {
    !name.starts_with('.')
        && [".yaml", ".yml", ".json"]
            .iter()
            .any(|ext| name.ends_with(ext))
}

/// Parses and checks one manifest file's contents.
pub(crate) fn parse_manifest(content: &[u8], file: &str) -> Result<Pod, ManifestError> {
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
    if pod.metadata.name.as_deref().is_none_or(str::is_empty) {
        reasons.push("metadata.name: Required value".to_string());
    }
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    if containers.is_empty() {
        reasons.push("spec.containers: Required value".to_string());
    }
    let init = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_deref())
        .unwrap_or_default();
    let mut seen = Vec::new();
    for (i, c) in init.iter().chain(containers).enumerate() {
        if c.name.is_empty() {
            reasons.push(format!("containers[{i}].name: Required value"));
        }
        if seen.contains(&&c.name) {
            reasons.push(format!(
                "containers[{i}].name: Duplicate value: {:?}",
                c.name
            ));
        }
        seen.push(&c.name);
        if c.image.as_deref().is_none_or(str::is_empty) {
            reasons.push(format!("containers[{i}].image: Required value"));
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

/// A stable 128-bit FNV-1a hash in hex: the same input gives the same uid on every run and
/// every build.
pub(crate) fn stable_hex(input: &[u8]) -> String {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    let hash = input
        .iter()
        .fold(OFFSET, |h, b| (h ^ u128::from(*b)).wrapping_mul(PRIME));
    format!("{hash:032x}")
}

/// The hash of a manifest on a node: node, file and decoded content.
pub(crate) fn config_hash(manifest: &Pod, file: &str, node_name: &str) -> String {
    let content = serde_json::to_string(manifest).unwrap_or_default();
    stable_hex(format!("host:{node_name}\nfile:{file}\n{content}").as_bytes())
}

/// The pod the kubelet runs from a manifest: named `<name>-<node>`, in `default` unless the
/// manifest says otherwise, bound to the node, with the hash as uid and
/// `kubernetes.io/config.hash`, tolerating every `NoExecute` taint so that node problems never
/// evict it.
pub(crate) fn static_pod(manifest: &Pod, file: &str, node_name: &str, seen_at: Timestamp) -> Pod {
    let hash = config_hash(manifest, file, node_name);
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
        seen_at.strftime("%Y-%m-%dT%H:%M:%S%.9fZ").to_string(),
    );
    let spec = pod.spec.get_or_insert_default();
    spec.node_name = Some(node_name.to_string());
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    let tolerations = spec.tolerations.get_or_insert_default();
    let all_no_execute = Toleration {
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        ..Toleration::default()
    };
    if !tolerations.contains(&all_no_execute) {
        tolerations.push(all_no_execute);
    }
    pod.status = None;
    pod
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The mirror pod to create for a static pod on the node `node_name` (uid `node_uid`): the
/// same pod with `kubernetes.io/config.mirror`, owned by the Node, without uid or status.
pub(crate) fn mirror_pod(static_pod: &Pod, node_name: &str, node_uid: &str) -> Pod {
    let hash = annotation(static_pod, CONFIG_HASH_ANNOTATION)
        .unwrap_or_default()
        .to_string();
    let mut annotations: BTreeMap<String, String> =
        static_pod.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(CONFIG_MIRROR_ANNOTATION.into(), hash);
    Pod {
        metadata: ObjectMeta {
            name: static_pod.metadata.name.clone(),
            namespace: static_pod.metadata.namespace.clone(),
            labels: static_pod.metadata.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node_name.to_string(),
                uid: node_uid.to_string(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        spec: static_pod.spec.clone(),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::clock::t;

    const APISERVER: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
  labels: {component: kube-apiserver, tier: control-plane}
spec:
  hostNetwork: true
  containers:
  - name: kube-apiserver
    image: k8s.gcr.io/kube-apiserver:v1.20.2
    command: [kube-apiserver, --advertise-address=127.0.1.1, --secure-port=6443]
"#;

    const FILE: &str = "/m/kube-apiserver.yaml";

    #[test]
    fn a_manifest_becomes_a_static_pod_bound_to_the_node() {
        let manifest = parse_manifest(APISERVER.as_bytes(), FILE).unwrap();
        let pod = static_pod(&manifest, FILE, "N1", t(0));
        assert_eq!(pod.metadata.name.as_deref(), Some("kube-apiserver-n1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("kube-system"));
        let hash = config_hash(&manifest, FILE, "N1");
        assert_eq!(hash.len(), 32);
        assert_eq!(pod.metadata.uid.as_deref(), Some(hash.as_str()));
        let annotations = pod.metadata.annotations.clone().unwrap();
        assert_eq!(annotations[CONFIG_HASH_ANNOTATION], hash);
        assert_eq!(annotations[CONFIG_SOURCE_ANNOTATION], "file");
        assert_eq!(
            annotations[CONFIG_SEEN_ANNOTATION],
            "2023-11-14T22:13:20.000000000Z"
        );
        let spec = pod.spec.clone().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("N1"));
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert!(spec.tolerations.unwrap().iter().any(|t| t.key.is_none()
            && t.operator.as_deref() == Some("Exists")
            && t.effect.as_deref() == Some("NoExecute")));
    }

    #[test]
    fn the_hash_follows_node_file_and_content_but_not_formatting() {
        let hash = |text: &str, file: &str, node: &str| {
            config_hash(&parse_manifest(text.as_bytes(), file).unwrap(), file, node)
        };
        let base = hash(APISERVER, FILE, "n1");
        let reformatted = APISERVER.replace(
            "{component: kube-apiserver, tier: control-plane}",
            "\n    component: kube-apiserver\n    tier: control-plane",
        );
        let cases = [
            (hash(&reformatted, FILE, "n1"), true),
            (hash(APISERVER, FILE, "n1"), true),
            (hash(APISERVER, FILE, "n2"), false),
            (hash(APISERVER, "/m/other.yaml", "n1"), false),
            (
                hash(&APISERVER.replace("v1.20.2", "v1.20.3"), FILE, "n1"),
                false,
            ),
        ];
        for (i, (other, same)) in cases.into_iter().enumerate() {
            assert_eq!(other == base, same, "case {i}");
        }
        assert_eq!(stable_hex(b""), "6c62272e07bb014262b821756295c58d");
    }

    #[test]
    fn the_mirror_pod_names_its_static_pod_and_node() {
        let manifest = parse_manifest(APISERVER.as_bytes(), FILE).unwrap();
        let pod = static_pod(&manifest, FILE, "n1", t(0));
        let mirror = mirror_pod(&pod, "n1", "node-uid");
        assert!(is_mirror_pod(&mirror));
        assert!(!is_mirror_pod(&pod));
        assert_eq!(mirror_hash(&mirror), pod.metadata.uid.as_deref());
        assert_eq!(mirror.metadata.name.as_deref(), Some("kube-apiserver-n1"));
        assert!(mirror.metadata.uid.is_none());
        let owner = &mirror.metadata.owner_references.clone().unwrap()[0];
        assert_eq!(
            (
                owner.api_version.as_str(),
                owner.kind.as_str(),
                owner.name.as_str(),
                owner.uid.as_str(),
                owner.controller
            ),
            ("v1", "Node", "n1", "node-uid", Some(true))
        );
        assert_eq!(mirror.spec, pod.spec);
    }

    #[test]
    fn bad_manifests_are_refused_with_a_reason() {
        let cases = [
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
                "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b}, {name: a, image: b}]}\n",
                "Duplicate value",
            ),
            (
                "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a}]}\n",
                "image: Required value",
            ),
        ];
        for (content, expected) in cases {
            let error = parse_manifest(content.as_bytes(), "/m/x.yaml")
                .unwrap_err()
                .to_string();
            assert!(error.contains(expected), "{content:?}: {error}");
            assert!(error.starts_with("/m/x.yaml"), "{error}");
        }
        let names = [
            ("a.yaml", true),
            ("a.yml", true),
            ("a.json", true),
            (".a.yaml", false),
            ("a.yaml.swp", false),
            ("a", false),
        ];
        for (name, expected) in names {
            assert_eq!(is_manifest_name(name), expected, "{name}");
        }
    }
}
