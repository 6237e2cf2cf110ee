//! The defaulting a real apiserver applies to objects it stores, as far as clients can see it
//! (from `pkg/apis/core/v1/defaults.go` and `pkg/apis/apps/v1/defaults.go`), plus the empty
//! structs and zero counters Go serialisation always prints (`resources: {}`, a new
//! DaemonSet's `numberReady: 0`), so that `kubectl get -o yaml` and template comparisons see
//! what they would see on a real cluster.
//!
//! Not done here, because the apiserver does not do it by defaulting: admission plugins
//! (`DefaultTolerationSeconds` adds the `not-ready`/`unreachable` tolerations to Pods, the
//! ServiceAccount plugin sets `serviceAccountName` and the token volume), the registry's
//! status reset on create (a new Pod's `status.phase: Pending`), and a Namespace's
//! `spec.finalizers: [kubernetes]`, which the simulated namespace lifecycle does not model.
//!
//! Defaulting is idempotent: applying it to a defaulted object changes nothing.

use serde_json::{Map, Value, json};

use crate::resources::ResourceType;

/// Fills in the defaults the apiserver would for an object of `rt` (on create and update).
pub fn apply_defaults(rt: &ResourceType, obj: &mut Value) {
    match (rt.group, rt.kind) {
        ("", "Pod") => default_pod(obj),
        ("apps", "DaemonSet") => default_daemonset(obj),
        ("", "Namespace") => default_namespace(obj),
        ("", "Secret") => default_secret(obj),
        ("", "Node") => default_node(obj),
        _ => {}
    }
}

/// Sets `obj[key]` to `value` when it is absent or null.
fn or_insert(obj: &mut Value, key: &str, value: Value) {
    if let Some(map) = obj.as_object_mut() {
        let slot = map.entry(key).or_insert(Value::Null);
        if slot.is_null() {
            *slot = value;
        }
    }
}

/// Like [`or_insert`], also replacing an empty string or a zero (Go's zero values).
fn or_insert_nonzero(obj: &mut Value, key: &str, value: Value) {
    let zero = match obj.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_i64() == Some(0),
        Some(_) => false,
    };
    if zero && let Some(map) = obj.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

/// Items of the list at `obj[key]`, if it is one.
fn items_mut<'a>(obj: &'a mut Value, key: &str) -> impl Iterator<Item = &'a mut Value> {
    obj.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
}

/// `obj[key]` if it is an object.
fn object_mut<'a>(obj: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    obj.get_mut(key).filter(|v| v.is_object())
}

fn default_pod(pod: &mut Value) {
    let Some(spec) = object_mut(pod, "spec") else {
        return;
    };
    default_pod_spec(spec);
    // Pod-only defaults (SetDefaults_Pod), which pod templates do not get.
    or_insert(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        for container in items_mut(spec, list) {
            requests_from_limits(container);
        }
    }
    if spec["hostNetwork"].as_bool() == Some(true) {
        for list in ["containers", "initContainers"] {
            for container in items_mut(spec, list) {
                for port in items_mut(container, "ports") {
                    let container_port = port["containerPort"].clone();
                    or_insert_nonzero(port, "hostPort", container_port);
                }
            }
        }
    }
}

/// Limits without requests make equal requests (Pods only).
fn requests_from_limits(container: &mut Value) {
    let Some(limits) = container["resources"]["limits"].as_object().cloned() else {
        return;
    };
    let Some(resources) = object_mut(container, "resources") else {
        return;
    };
    or_insert(resources, "requests", Value::Object(Map::new()));
    if let Some(requests) = resources["requests"].as_object_mut() {
        for (name, quantity) in limits {
            requests.entry(name).or_insert(quantity);
        }
    }
}

/// SetDefaults_PodSpec and the defaults of everything inside a pod spec.
fn default_pod_spec(spec: &mut Value) {
    or_insert_nonzero(spec, "dnsPolicy", json!("ClusterFirst"));
    or_insert_nonzero(spec, "restartPolicy", json!("Always"));
    or_insert(spec, "securityContext", json!({}));
    or_insert(spec, "terminationGracePeriodSeconds", json!(30));
    or_insert_nonzero(spec, "schedulerName", json!("default-scheduler"));
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for container in items_mut(spec, list) {
            default_container(container);
        }
    }
    for volume in items_mut(spec, "volumes") {
        default_volume(volume);
    }
}

fn default_container(container: &mut Value) {
    let image = container["image"].as_str().unwrap_or_default();
    let policy = if image_tag(image).as_deref() == Some("latest") {
        "Always"
    } else {
        "IfNotPresent"
    };
    or_insert_nonzero(container, "imagePullPolicy", json!(policy));
    or_insert_nonzero(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    or_insert_nonzero(container, "terminationMessagePolicy", json!("File"));
    // ResourceRequirements is a struct, not a pointer: it always serialises.
    or_insert(container, "resources", json!({}));
    for port in items_mut(container, "ports") {
        or_insert_nonzero(port, "protocol", json!("TCP"));
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = object_mut(container, probe) {
            or_insert_nonzero(probe, "timeoutSeconds", json!(1));
            or_insert_nonzero(probe, "periodSeconds", json!(10));
            or_insert_nonzero(probe, "successThreshold", json!(1));
            or_insert_nonzero(probe, "failureThreshold", json!(3));
            default_http_get(probe);
        }
    }
    if let Some(lifecycle) = object_mut(container, "lifecycle") {
        for hook in ["postStart", "preStop"] {
            if let Some(hook) = object_mut(lifecycle, hook) {
                default_http_get(hook);
            }
        }
    }
    for env in items_mut(container, "env") {
        if let Some(field_ref) = env
            .get_mut("valueFrom")
            .and_then(|v| object_mut(v, "fieldRef"))
        {
            or_insert_nonzero(field_ref, "apiVersion", json!("v1"));
        }
    }
}

fn default_http_get(handler: &mut Value) {
    if let Some(http_get) = object_mut(handler, "httpGet") {
        or_insert_nonzero(http_get, "path", json!("/"));
        or_insert_nonzero(http_get, "scheme", json!("HTTP"));
    }
}

const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

fn default_volume(volume: &mut Value) {
    let has_source = VOLUME_SOURCES
        .iter()
        .any(|s| volume.get(*s).is_some_and(|v| !v.is_null()));
    if !has_source {
        or_insert(volume, "emptyDir", json!({}));
    }
    if let Some(host_path) = object_mut(volume, "hostPath") {
        or_insert(host_path, "type", json!(""));
    }
    for source in ["secret", "configMap", "projected", "downwardAPI"] {
        if let Some(source) = object_mut(volume, source) {
            or_insert(source, "defaultMode", json!(420));
        }
    }
    if let Some(projected) = object_mut(volume, "projected") {
        for source in items_mut(projected, "sources") {
            if let Some(token) = object_mut(source, "serviceAccountToken") {
                or_insert(token, "expirationSeconds", json!(3600));
            }
        }
    }
}

/// The tag the kubelet will pull: `latest` when the reference names neither tag nor digest,
/// none when it names only a digest.
fn image_tag(image: &str) -> Option<String> {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last_segment = name.rsplit('/').next().unwrap_or(name);
    match last_segment.split_once(':') {
        Some((_, tag)) => Some(tag.to_string()),
        None if digest.is_some() => None,
        None => Some("latest".to_string()),
    }
}

fn default_daemonset(ds: &mut Value) {
    let Some(spec) = object_mut(ds, "spec") else {
        return;
    };
    or_insert(spec, "updateStrategy", json!({}));
    if let Some(strategy) = object_mut(spec, "updateStrategy") {
        or_insert_nonzero(strategy, "type", json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate" {
            or_insert(strategy, "rollingUpdate", json!({}));
            if let Some(rolling) = object_mut(strategy, "rollingUpdate") {
                or_insert(rolling, "maxUnavailable", json!(1));
                or_insert(rolling, "maxSurge", json!(0));
            }
        }
    }
    or_insert(spec, "revisionHistoryLimit", json!(10));
    if let Some(pod_spec) = spec.get_mut("template").and_then(|t| object_mut(t, "spec")) {
        default_pod_spec(pod_spec);
    }
    // These status counters have no `omitempty`: a new DaemonSet shows them as 0.
    or_insert(ds, "status", json!({}));
    if let Some(status) = object_mut(ds, "status") {
        for counter in [
            "currentNumberScheduled",
            "desiredNumberScheduled",
            "numberMisscheduled",
            "numberReady",
        ] {
            or_insert(status, counter, json!(0));
        }
    }
}

fn default_namespace(ns: &mut Value) {
    if let Some(name) = ns["metadata"]["name"].as_str().map(str::to_string)
        && !name.is_empty()
        && let Some(meta) = object_mut(ns, "metadata")
    {
        or_insert(meta, "labels", json!({}));
        if let Some(labels) = meta["labels"].as_object_mut() {
            labels.insert("kubernetes.io/metadata.name".into(), json!(name));
        }
    }
    or_insert(ns, "status", json!({}));
    if let Some(status) = object_mut(ns, "status") {
        or_insert_nonzero(status, "phase", json!("Active"));
    }
}

/// `type: Opaque`, and `stringData` folded into `data` (the Secret registry does this on
/// every write; clients never read `stringData` back).
fn default_secret(secret: &mut Value) {
    or_insert_nonzero(secret, "type", json!("Opaque"));
    let Some(Value::Object(string_data)) =
        secret.as_object_mut().and_then(|m| m.remove("stringData"))
    else {
        return;
    };
    or_insert(secret, "data", json!({}));
    if let Some(data) = secret["data"].as_object_mut() {
        for (key, value) in string_data {
            let plain = value.as_str().unwrap_or_default();
            data.insert(key, json!(base64(plain.as_bytes())));
        }
    }
}

fn default_node(node: &mut Value) {
    let capacity = node["status"]["capacity"].clone();
    if capacity.is_object()
        && let Some(status) = object_mut(node, "status")
    {
        or_insert(status, "allocatable", capacity);
    }
}

/// Standard base64 with padding, as Secret `data` is encoded.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{CONFIGMAPS, DAEMONSETS, NAMESPACES, NODES, PODS, SECRETS};

    fn defaulted(rt: &ResourceType, mut obj: Value) -> Value {
        apply_defaults(rt, &mut obj);
        let mut again = obj.clone();
        apply_defaults(rt, &mut again);
        assert_eq!(again, obj, "defaulting is idempotent");
        obj
    }

    #[test]
    fn a_daemonset_gets_its_strategy_history_and_pod_template_defaults() {
        let ds = defaulted(
            &DAEMONSETS,
            json!({"metadata": {"name": "d"}, "spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "registry.k8s.io/kube-apiserver:v1.33.2",
                                "ports": [{"containerPort": 6443}]}]
            }}}}),
        );
        assert_eq!(
            ds["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
        );
        assert_eq!(ds["spec"]["revisionHistoryLimit"], 10);
        let spec = &ds["spec"]["template"]["spec"];
        assert_eq!(
            (
                &spec["restartPolicy"],
                &spec["dnsPolicy"],
                &spec["schedulerName"]
            ),
            (
                &json!("Always"),
                &json!("ClusterFirst"),
                &json!("default-scheduler")
            )
        );
        assert_eq!(
            (
                &spec["terminationGracePeriodSeconds"],
                &spec["securityContext"]
            ),
            (&json!(30), &json!({}))
        );
        assert!(
            spec.get("enableServiceLinks").is_none(),
            "templates do not get Pod-only defaults"
        );
        assert_eq!(
            spec["containers"][0],
            json!({"name": "c", "image": "registry.k8s.io/kube-apiserver:v1.33.2",
                   "ports": [{"containerPort": 6443, "protocol": "TCP"}],
                   "imagePullPolicy": "IfNotPresent", "resources": {},
                   "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
        );
        assert_eq!(
            ds["status"],
            json!({"currentNumberScheduled": 0, "desiredNumberScheduled": 0, "numberMisscheduled": 0, "numberReady": 0})
        );
        let on_delete = defaulted(
            &DAEMONSETS,
            json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}),
        );
        assert_eq!(
            on_delete["spec"]["updateStrategy"],
            json!({"type": "OnDelete"})
        );
        let surge = defaulted(
            &DAEMONSETS,
            json!({"spec": {"updateStrategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}}}),
        );
        assert_eq!(
            surge["spec"]["updateStrategy"]["rollingUpdate"],
            json!({"maxUnavailable": 0, "maxSurge": 1})
        );
    }

    #[test]
    fn a_pod_gets_pod_only_defaults_probes_and_volumes() {
        let pod = defaulted(
            &PODS,
            json!({"spec": {"hostNetwork": true, "containers": [{
                "name": "c", "image": "busybox",
                "ports": [{"containerPort": 10259}],
                "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Mi"}},
                "livenessProbe": {"httpGet": {"port": 10259}, "failureThreshold": 8},
                "env": [{"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
            }], "volumes": [{"name": "a"}, {"name": "b", "hostPath": {"path": "/x"}}, {"name": "c", "configMap": {"name": "m"}}]}}),
        );
        let spec = &pod["spec"];
        assert_eq!(spec["enableServiceLinks"], true);
        let c = &spec["containers"][0];
        assert_eq!(c["imagePullPolicy"], "Always", "untagged means :latest");
        assert_eq!(
            c["ports"][0],
            json!({"containerPort": 10259, "hostPort": 10259, "protocol": "TCP"})
        );
        assert_eq!(
            c["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Mi"})
        );
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 10259, "path": "/", "scheme": "HTTP"}, "failureThreshold": 8,
                   "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(
            spec["volumes"],
            json!([{"name": "a", "emptyDir": {}}, {"name": "b", "hostPath": {"path": "/x", "type": ""}},
                   {"name": "c", "configMap": {"name": "m", "defaultMode": 420}}])
        );
        assert!(
            spec.get("tolerations").is_none(),
            "admission, not defaulting, adds tolerations"
        );
    }

    #[test]
    fn image_pull_policy_follows_the_tag() {
        let cases = [
            ("nginx", "Always"),
            ("nginx:latest", "Always"),
            ("nginx:1.27", "IfNotPresent"),
            ("registry:5000/nginx", "Always"),
            ("registry:5000/nginx:1.27", "IfNotPresent"),
            ("nginx@sha256:0123", "IfNotPresent"),
        ];
        for (image, policy) in cases {
            let pod = defaulted(
                &PODS,
                json!({"spec": {"containers": [{"name": "c", "image": image}]}}),
            );
            assert_eq!(
                pod["spec"]["containers"][0]["imagePullPolicy"], policy,
                "{image}"
            );
        }
        let kept = defaulted(
            &PODS,
            json!({"spec": {"containers": [{"name": "c", "image": "nginx", "imagePullPolicy": "Never"}]}}),
        );
        assert_eq!(kept["spec"]["containers"][0]["imagePullPolicy"], "Never");
    }

    #[test]
    fn other_kinds_get_their_visible_defaults() {
        let ns = defaulted(&NAMESPACES, json!({"metadata": {"name": "kube-system"}}));
        assert_eq!(
            ns["metadata"]["labels"],
            json!({"kubernetes.io/metadata.name": "kube-system"})
        );
        assert_eq!(ns["status"], json!({"phase": "Active"}));
        let secret = defaulted(
            &SECRETS,
            json!({"metadata": {"name": "s"}, "stringData": {"token": "abcd", "x": ""}}),
        );
        assert_eq!(
            secret,
            json!({"metadata": {"name": "s"}, "type": "Opaque", "data": {"token": "YWJjZA==", "x": ""}})
        );
        let node = defaulted(&NODES, json!({"status": {"capacity": {"cpu": "2"}}}));
        assert_eq!(node["status"]["allocatable"], json!({"cpu": "2"}));
        let cm = json!({"metadata": {"name": "c"}});
        assert_eq!(defaulted(&CONFIGMAPS, cm.clone()), cm);
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }
}
