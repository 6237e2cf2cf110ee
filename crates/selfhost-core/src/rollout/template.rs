//! Deciding whether two pod templates are the same *to Kubernetes*.
//!
//! The template the engine renders spells out only what it means; the one read back from the
//! API server also carries every default the server filled in (`imagePullPolicy`,
//! `terminationMessagePath`, probe timings, `schedulerName`, `securityContext: {}`...).
//! Comparing the two naively would make every run look like a change, and a change that can
//! never be observed as applied would loop for ever.
//!
//! The choice: **apply the API server's defaults to both sides, then compare everything.**
//! Comparing only the fields we set was the alternative, but it cannot see a field the new
//! template *drops* (a probe, a volume), so a real change could go unnoticed. Normalising keeps
//! the comparison exact for every field a control-plane pod uses. Should a server add a
//! default this module does not know, the pivot still terminates: it also trusts its own
//! record of having applied a template (see `crate::pivot`), so an unknown default costs at
//! most one redundant update, never a loop.
//!
//! Normalisation: the defaults of `SetDefaults_PodSpec`, `_Container`, `_Probe`,
//! `_HTTPGetAction`, `_ContainerPort`, `_ObjectFieldSelector`, `_Volume` and the volume
//! sources, as applied to pod templates (pod-only defaults such as `enableServiceLinks` and
//! host ports of host-network pods are not applied to templates by the server either); the
//! deprecated `serviceAccount` alias folded into `serviceAccountName`; template metadata
//! reduced to labels and annotations; and empty values (`null`, `""`, `{}`, `[]`) removed,
//! since the API server omits them and they mean the same as absence for every field here.
//! Lists keep their order: the order of flags, env vars and volumes is part of the template
//! hash the DaemonSet controller computes, so a reordering *is* a rollout.

use k8s_openapi::api::core::v1::PodTemplateSpec;
use serde::Serialize;
use serde_json::{Value, json};

/// The template with the API server's defaults applied and empty values removed, as JSON.
pub fn normalize(template: &PodTemplateSpec) -> Value {
    // Serialising a PodTemplateSpec cannot fail: it holds only strings, numbers, booleans,
    // maps with string keys and lists.
    let mut value = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|key, _| key == "labels" || key == "annotations");
    }
    if let Some(spec) = value.get_mut("spec").filter(|s| s.is_object()) {
        default_pod_spec(spec);
    }
    prune(&mut value);
    value
}

/// Whether two templates are the same once defaults are applied to both.
pub fn templates_equal(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    normalize(a) == normalize(b)
}

/// A stable hash of the normalised template (FNV-1a, 64 bits, hex): the same on every
/// platform and Rust version, so it can be stored in an annotation and compared later.
pub fn template_hash(template: &PodTemplateSpec) -> String {
    let text = normalize(template).to_string();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Where two templates first differ, once normalised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateDifference {
    /// JSON path of the first difference, e.g. `spec.containers[0].image`.
    pub path: String,
    /// The value on the left (`None` when absent), as compact JSON.
    pub left: Option<String>,
    /// The value on the right (`None` when absent), as compact JSON.
    pub right: Option<String>,
}

/// The first difference between two templates after normalisation, or `None` when equal.
pub fn first_difference(a: &PodTemplateSpec, b: &PodTemplateSpec) -> Option<TemplateDifference> {
    diff(&normalize(a), &normalize(b), String::new())
}

fn diff(a: &Value, b: &Value, path: String) -> Option<TemplateDifference> {
    let show = |v: &Value| Some(v.to_string());
    match (a, b) {
        (Value::Object(left), Value::Object(right)) => {
            let mut keys: Vec<&String> = left.keys().chain(right.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| {
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match (left.get(key), right.get(key)) {
                    (Some(l), Some(r)) => diff(l, r, here),
                    (l, r) => Some(TemplateDifference {
                        path: here,
                        left: l.and_then(show),
                        right: r.and_then(show),
                    }),
                }
            })
        }
        (Value::Array(left), Value::Array(right)) => {
            let common = left.len().min(right.len());
            (0..common)
                .find_map(|i| diff(&left[i], &right[i], format!("{path}[{i}]")))
                .or_else(|| {
                    (left.len() != right.len()).then(|| TemplateDifference {
                        path: format!("{path}[{common}]"),
                        left: left.get(common).and_then(show),
                        right: right.get(common).and_then(show),
                    })
                })
        }
        _ if a == b => None,
        _ => Some(TemplateDifference {
            path,
            left: show(a),
            right: show(b),
        }),
    }
}

/// Sets `obj[key]` when it is absent or null.
fn or_insert(obj: &mut Value, key: &str, value: Value) {
    if let Some(map) = obj.as_object_mut() {
        let slot = map.entry(key).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value;
        }
    }
}

/// Sets `obj[key]` when it is absent, null, `""` or `0`: Go defaulting cannot tell a zero
/// value of a non-pointer field from an unset one.
fn or_insert_unless_set(obj: &mut Value, key: &str, value: Value) {
    if let Some(map) = obj.as_object_mut() {
        let unset = match map.get(key) {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s.is_empty(),
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(_) => false,
        };
        if unset {
            map.insert(key.to_string(), value);
        }
    }
}

fn each_item(obj: &mut Value, key: &str, mut f: impl FnMut(&mut Value)) {
    if let Some(items) = obj.get_mut(key).and_then(Value::as_array_mut) {
        items.iter_mut().for_each(&mut f);
    }
}

fn child<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    obj.get_mut(key).filter(|v| v.is_object())
}

fn default_pod_spec(spec: &mut Value) {
    or_insert_unless_set(spec, "dnsPolicy", json!("ClusterFirst"));
    or_insert_unless_set(spec, "restartPolicy", json!("Always"));
    or_insert_unless_set(spec, "schedulerName", json!("default-scheduler"));
    or_insert(spec, "terminationGracePeriodSeconds", json!(30));
    fold_service_account(spec);
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        each_item(spec, list, default_container);
    }
    each_item(spec, "volumes", default_volume);
}

/// `serviceAccount` is the deprecated alias of `serviceAccountName`; the server keeps both in
/// step, so only the name carries meaning.
fn fold_service_account(spec: &mut Value) {
    let Some(map) = spec.as_object_mut() else {
        return;
    };
    if let Some(alias) = map.remove("serviceAccount")
        && map.get("serviceAccountName").is_none_or(Value::is_null)
    {
        map.insert("serviceAccountName".to_string(), alias);
    }
}

fn default_container(container: &mut Value) {
    let image = container
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let policy = if pulls_latest(image) {
        "Always"
    } else {
        "IfNotPresent"
    };
    or_insert_unless_set(container, "imagePullPolicy", json!(policy));
    or_insert_unless_set(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    or_insert_unless_set(container, "terminationMessagePolicy", json!("File"));
    each_item(container, "ports", |port| {
        or_insert_unless_set(port, "protocol", json!("TCP"));
    });
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = child(container, probe) {
            or_insert_unless_set(probe, "timeoutSeconds", json!(1));
            or_insert_unless_set(probe, "periodSeconds", json!(10));
            or_insert_unless_set(probe, "successThreshold", json!(1));
            or_insert_unless_set(probe, "failureThreshold", json!(3));
            default_http_get(probe);
        }
    }
    if let Some(lifecycle) = child(container, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(hook) = child(lifecycle, hook) {
                default_http_get(hook);
            }
        }
    }
    each_item(container, "env", |env| {
        if let Some(field_ref) = child(env, "valueFrom").and_then(|v| child(v, "fieldRef")) {
            or_insert_unless_set(field_ref, "apiVersion", json!("v1"));
        }
    });
}

/// Whether the kubelet would pull the image every time: tagged `latest` or not tagged at all
/// (and not pinned by digest).
fn pulls_latest(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    // A tag follows the last `:` after the last `/` (a `:` before it is a registry port).
    let last_part = image.rsplit('/').next().unwrap_or(image);
    match last_part.rsplit_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

fn default_http_get(handler: &mut Value) {
    if let Some(http_get) = child(handler, "httpGet") {
        or_insert_unless_set(http_get, "path", json!("/"));
        or_insert_unless_set(http_get, "scheme", json!("HTTP"));
    }
}

/// Volume sources a volume may name; a volume naming none is an `emptyDir`.
const VOLUME_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "gitRepo",
    "glusterfs",
    "hostPath",
    "image",
    "iscsi",
    "nfs",
    "persistentVolumeClaim",
    "photonPersistentDisk",
    "portworxVolume",
    "projected",
    "quobyte",
    "rbd",
    "scaleIO",
    "secret",
    "storageos",
    "vsphereVolume",
];

fn default_volume(volume: &mut Value) {
    let has_source = VOLUME_SOURCES
        .iter()
        .any(|source| volume.get(*source).is_some_and(|v| !v.is_null()));
    if !has_source {
        or_insert(volume, "emptyDir", json!({}));
    }
    for source in ["secret", "configMap", "projected", "downwardAPI"] {
        if let Some(source) = child(volume, source) {
            or_insert(source, "defaultMode", json!(420));
        }
    }
    if let Some(projected) = child(volume, "projected") {
        each_item(projected, "sources", |source| {
            if let Some(token) = child(source, "serviceAccountToken") {
                or_insert(token, "expirationSeconds", json!(3600));
            }
        });
    }
}

/// Removes `null`, `""`, `{}` and `[]` everywhere, innermost first, so that an object left
/// empty by the removal goes too.
fn prune(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.values_mut().for_each(prune);
            map.retain(|_, v| !is_empty(v));
        }
        Value::Array(items) => items.iter_mut().for_each(prune),
        _ => {}
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}
