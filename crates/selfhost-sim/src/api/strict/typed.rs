//! Which fields of an object its kind does not have, found by decoding the object into the
//! kind's typed struct (k8s-openapi, which skips unknown keys as Go's lenient decoder does)
//! and encoding it back: a field that does not come back is one the kind does not know.
//!
//! Exact once `null`s are gone (callers strip them first, as Go decodes `null` as the zero
//! value): every present known field decodes to something that is encoded again, maps keep
//! every key and lists keep their length and order, so paths line up.

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Node, Pod, Secret, ServiceAccount};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::scan::Segment;
use crate::resources::ResourceType;

/// Why an object could not be decoded as its kind (a value of the wrong type).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct TypeError(String);

/// The paths of the fields of `obj` its kind does not have, in document order of a
/// key-sorted walk; empty for kinds without a typed struct.
///
/// # Errors
/// [`TypeError`] when a known field holds a value of the wrong type.
pub(crate) fn unknown_fields(
    rt: &ResourceType,
    obj: &Value,
) -> Result<Vec<Vec<Segment>>, TypeError> {
    let typed = match (rt.group, rt.kind) {
        ("", "Namespace") => round_trip::<Namespace>(obj),
        ("", "Node") => round_trip::<Node>(obj),
        ("", "Pod") => round_trip::<Pod>(obj),
        ("", "ConfigMap") => round_trip::<ConfigMap>(obj),
        ("", "Secret") => round_trip::<Secret>(obj),
        ("", "Event") => round_trip::<Event>(obj),
        ("", "ServiceAccount") => round_trip::<ServiceAccount>(obj),
        ("apps", "DaemonSet") => round_trip::<DaemonSet>(obj),
        ("apps", "ControllerRevision") => round_trip::<ControllerRevision>(obj),
        ("coordination.k8s.io", "Lease") => round_trip::<Lease>(obj),
        _ => return Ok(Vec::new()),
    }?;
    let mut path = Vec::new();
    let mut unknown = Vec::new();
    missing(obj, &typed, &mut path, &mut unknown);
    Ok(unknown)
}

fn round_trip<T: DeserializeOwned + Serialize>(obj: &Value) -> Result<Value, TypeError> {
    let typed = T::deserialize(obj).map_err(|e| TypeError(e.to_string()))?;
    serde_json::to_value(typed).map_err(|e| TypeError(e.to_string()))
}

/// Collects the paths present in `sent` but absent from `kept`.
fn missing(sent: &Value, kept: &Value, path: &mut Vec<Segment>, out: &mut Vec<Vec<Segment>>) {
    match (sent, kept) {
        (Value::Object(sent), Value::Object(kept)) => {
            for (key, value) in sent {
                path.push(Segment::Key(key.clone()));
                match kept.get(key) {
                    Some(k) => missing(value, k, path, out),
                    None => out.push(path.clone()),
                }
                path.pop();
            }
        }
        (Value::Array(sent), Value::Array(kept)) => {
            for (i, (s, k)) in sent.iter().zip(kept).enumerate() {
                path.push(Segment::Index(i));
                missing(s, k, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Removes `null` members of objects everywhere in `value` (Go decodes them as zero
/// values, so they never reach storage).
pub(crate) fn strip_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Removes the field at `path` (a path [`unknown_fields`] returned).
pub(crate) fn remove(value: &mut Value, path: &[Segment]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = value;
    for segment in parents {
        let next = match segment {
            Segment::Key(k) => node.get_mut(k.as_str()),
            Segment::Index(i) => node.get_mut(*i),
        };
        match next {
            Some(n) => node = n,
            None => return,
        }
    }
    if let (Segment::Key(k), Some(map)) = (last, node.as_object_mut()) {
        map.remove(k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::strict::scan::render;
    use crate::resources::{CONFIGMAPS, CONTROLLERREVISIONS, DAEMONSETS, PODS, SECRETS};
    use serde_json::json;

    fn unknown(rt: &ResourceType, obj: Value) -> Vec<String> {
        unknown_fields(rt, &obj)
            .expect("decodes")
            .iter()
            .map(|p| render(p))
            .collect()
    }

    #[test]
    fn fields_the_kind_lacks_are_found_at_any_depth() {
        let ds = json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "x", "labels": {"any.key/at-all": "v"}, "unknownMeta": 1},
            "spec": {
                "bogus": true,
                "selector": {"matchLabels": {"a": "b"}},
                "template": {"spec": {"containers": [
                    {"name": "c", "image": "i", "ports": [{"containerPort": 1, "hostPrt": 2}]},
                    {"name": "d", "imagePullPolicyx": "Always"}
                ]}}
            }
        });
        assert_eq!(
            unknown(&DAEMONSETS, ds),
            [
                "metadata.unknownMeta",
                "spec.bogus",
                "spec.template.spec.containers[0].ports[0].hostPrt",
                "spec.template.spec.containers[1].imagePullPolicyx",
            ]
        );
    }

    #[test]
    fn free_form_values_and_maps_have_no_unknown_fields() {
        let revision = json!({"metadata": {"name": "r"}, "revision": 1,
                              "data": {"spec": {"anything": {"goes": [1, {"here": true}]}}}});
        assert!(unknown(&CONTROLLERREVISIONS, revision).is_empty());
        let cm = json!({"metadata": {"name": "c", "managedFields": [{"manager": "m",
                        "fieldsV1": {"f:data": {"f:x": {}}}}]},
                        "data": {"x": "1", "y.z": ""}, "binaryData": {"b": "AAE="}});
        assert!(unknown(&CONFIGMAPS, cm).is_empty());
        let secret = json!({"metadata": {"name": "s"}, "type": "Opaque",
                            "data": {"k": "dmFsdWU="}, "stringData": {"p": "plain"}});
        assert!(unknown(&SECRETS, secret).is_empty());
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
                         "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
                         "livenessProbe": {"httpGet": {"port": "http", "path": "/"}}}]}});
        assert!(unknown(&PODS, pod).is_empty());
    }

    #[test]
    fn values_of_the_wrong_type_are_type_errors() {
        let ds = json!({"metadata": {"name": "x"}, "spec": {"revisionHistoryLimit": "ten"}});
        let err = unknown_fields(&DAEMONSETS, &ds).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }

    #[test]
    fn nulls_are_stripped_and_unknown_fields_removed() {
        let mut obj = json!({"metadata": {"name": "p", "labels": null},
                             "spec": {"containers": [{"name": "c", "bogus": null, "x": 1}]}});
        strip_nulls(&mut obj);
        assert_eq!(obj["metadata"], json!({"name": "p"}));
        for path in unknown_fields(&PODS, &obj).unwrap() {
            remove(&mut obj, &path);
        }
        assert_eq!(obj["spec"]["containers"][0], json!({"name": "c"}));
    }
}
