//! Per-type rules the real registry applies before a write ("strategies"): what a create may
//! set, the status subresource rule, and when `metadata.generation` moves.

use serde_json::{Map, Value, json};

use super::meta;
use crate::resources::{self, ResourceType};

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Subresource {
    /// The object itself: `status` is ignored for types with a status subresource.
    #[default]
    Main,
    /// `/status`: only `status` changes.
    Status,
    /// `/finalize` of a namespace: only `spec.finalizers` changes.
    Finalize,
}

impl Subresource {
    /// The subresource name in URLs and `managedFields`, if any.
    pub fn name(self) -> Option<&'static str> {
        match self {
            Subresource::Main => None,
            Subresource::Status => Some("status"),
            Subresource::Finalize => Some("finalize"),
        }
    }
}

/// Metadata fields only the server sets; a client's values are dropped on create and
/// replaced by the stored ones on update.
const SYSTEM_FIELDS: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
];

/// Prepares a new object: drops what clients may not set, resets status where the real
/// registry does, and starts `generation` at 1.
pub(crate) fn prepare_for_create(rt: &ResourceType, obj: &mut Value) {
    let name = meta::name(obj).to_string();
    let meta = meta::metadata_mut(obj);
    for field in SYSTEM_FIELDS {
        meta.remove(*field);
    }
    if rt.has_generation {
        meta.insert("generation".into(), json!(1));
    }
    if *rt == resources::NAMESPACES {
        meta::metadata_mut(obj)
            .entry("labels")
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .map(|l| l.insert("kubernetes.io/metadata.name".into(), json!(name)));
        obj["spec"] = json!({ "finalizers": ["kubernetes"] });
        obj["status"] = json!({ "phase": "Active" });
    } else if *rt == resources::PODS {
        let qos = qos_class(obj);
        obj["status"] = json!({ "phase": "Pending", "qosClass": qos });
    } else if *rt == resources::DAEMONSETS {
        set_template_generation(obj, 1);
        obj["status"] = json!({
            "currentNumberScheduled": 0,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 0,
            "numberReady": 0,
        });
    }
}

/// Applies the status subresource rule and the generation rule to an update.
///
/// `new` already carries the stored identity (uid, creationTimestamp, deletion fields).
pub(crate) fn prepare_for_update(
    rt: &ResourceType,
    old: &Value,
    new: &mut Value,
    sub: Subresource,
) {
    match sub {
        Subresource::Finalize => {
            let finalizers = new
                .get("spec")
                .and_then(|s| s.get("finalizers"))
                .cloned()
                .unwrap_or_else(|| json!([]));
            let rv = meta::resource_version(new).map(str::to_string);
            let mut merged = old.clone();
            merged["spec"]["finalizers"] = finalizers;
            let meta = meta::metadata_mut(&mut merged);
            match rv {
                Some(rv) => meta.insert("resourceVersion".into(), json!(rv)),
                None => meta.remove("resourceVersion"),
            };
            *new = merged;
        }
        Subresource::Status => {
            // Only status changes: everything else is the stored object's.
            let status = new.get("status").cloned();
            let mut merged = old.clone();
            match status {
                Some(s) => merged["status"] = s,
                None => {
                    if let Some(m) = merged.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            // The precondition and the ownership records travel with the write.
            let carried: Vec<(&str, Option<Value>)> = ["resourceVersion", "managedFields"]
                .into_iter()
                .map(|f| (f, meta::metadata(new).and_then(|m| m.get(f)).cloned()))
                .collect();
            let meta = meta::metadata_mut(&mut merged);
            for (field, value) in carried {
                match value {
                    Some(v) => meta.insert(field.to_string(), v),
                    None => meta.remove(field),
                };
            }
            *new = merged;
        }
        Subresource::Main => {
            if rt.has_status {
                match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            if *rt == resources::NAMESPACES {
                // spec.finalizers only change through /finalize.
                if let Some(f) = old.get("spec").and_then(|s| s.get("finalizers")) {
                    new["spec"]["finalizers"] = f.clone();
                }
            }
            if *rt == resources::DAEMONSETS {
                let template = |o: &Value| o.get("spec").and_then(|s| s.get("template")).cloned();
                let before = template_generation(old);
                let bump = u64::from(template(old) != template(new));
                set_template_generation(new, before + bump);
            }
            if rt.has_generation && old.get("spec") != new.get("spec") {
                let next = meta::generation(old) + 1;
                meta::metadata_mut(new).insert("generation".into(), json!(next));
            }
        }
    }
}

/// The annotation in which apps/v1 carries a DaemonSet's `spec.templateGeneration`.
const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// A DaemonSet's template generation (0 when the annotation is missing or garbled).
fn template_generation(ds: &Value) -> u64 {
    meta::annotations(ds)
        .get(TEMPLATE_GENERATION)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The registry owns the template generation: 1 on create, +1 on every template change, kept
/// otherwise (whatever the client sent), so the DaemonSet controller can label its pods.
fn set_template_generation(ds: &mut Value, generation: u64) {
    let meta = meta::metadata_mut(ds);
    let annotations = meta
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    if let Some(a) = annotations.as_object_mut() {
        a.insert(TEMPLATE_GENERATION.into(), json!(generation.to_string()));
    }
}

/// Copies the server-owned metadata of the stored object onto an incoming update.
pub(crate) fn keep_system_fields(old: &Value, new: &mut Value) {
    let stored = meta::metadata(old).cloned().unwrap_or_default();
    let meta = meta::metadata_mut(new);
    for field in SYSTEM_FIELDS {
        match stored.get(*field) {
            Some(v) => meta.insert((*field).to_string(), v.clone()),
            None => meta.remove(*field),
        };
    }
}

/// The pod QoS class, as the apiserver computes it at create: Guaranteed when every
/// container has equal cpu and memory requests and limits, BestEffort when none has any,
/// Burstable otherwise.
fn qos_class(pod: &Value) -> &'static str {
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|k| pod.get("spec")?.get(*k)?.as_array())
        .flatten();
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let res = c.get("resources");
        let requests = res
            .and_then(|r| r.get("requests"))
            .and_then(Value::as_object);
        let limits = res.and_then(|r| r.get("limits")).and_then(Value::as_object);
        if requests.is_some_and(|r| !r.is_empty()) || limits.is_some_and(|l| !l.is_empty()) {
            any = true;
        }
        for kind in ["cpu", "memory"] {
            let limit = limits.and_then(|l| l.get(kind));
            // A missing request defaults to the limit.
            let request = requests.and_then(|r| r.get(kind)).or(limit);
            if limit.is_none() || request != limit {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{DAEMONSETS, PODS};

    #[test]
    fn status_writes_change_only_status() {
        let old = json!({"metadata": {"name": "d", "labels": {"a": "1"}, "resourceVersion": "5"}, "spec": {"x": 1}, "status": {"n": 1}});
        let mut new = json!({"metadata": {"name": "d", "labels": {"a": "2"}, "resourceVersion": "5"}, "spec": {"x": 2}, "status": {"n": 2}});
        prepare_for_update(&DAEMONSETS, &old, &mut new, Subresource::Status);
        assert_eq!(new["spec"]["x"], 1);
        assert_eq!(new["metadata"]["labels"]["a"], "1");
        assert_eq!(new["status"]["n"], 2);
    }

    #[test]
    fn main_writes_ignore_status_and_bump_generation_on_spec_change_only() {
        let old = json!({"metadata": {"generation": 3}, "spec": {"x": 1}, "status": {"n": 1}});
        let mut same_spec = json!({"metadata": {"generation": 3, "labels": {"b": "c"}}, "spec": {"x": 1}, "status": {"n": 9}});
        prepare_for_update(&DAEMONSETS, &old, &mut same_spec, Subresource::Main);
        assert_eq!(same_spec["metadata"]["generation"], 3);
        assert_eq!(same_spec["status"]["n"], 1);
        let mut new_spec = json!({"metadata": {"generation": 3}, "spec": {"x": 2}});
        prepare_for_update(&DAEMONSETS, &old, &mut new_spec, Subresource::Main);
        assert_eq!(new_spec["metadata"]["generation"], 4);
    }

    #[test]
    fn daemonset_template_generation_moves_with_the_template_only() {
        let tg = |o: &Value| o["metadata"]["annotations"][TEMPLATE_GENERATION].clone();
        let mut ds = json!({"metadata": {"name": "d"}, "spec": {"template": {"x": 1}, "minReadySeconds": 0}});
        prepare_for_create(&DAEMONSETS, &mut ds);
        assert_eq!(tg(&ds), "1");
        let mut other_spec = ds.clone();
        other_spec["spec"]["minReadySeconds"] = json!(5);
        other_spec["metadata"]["annotations"][TEMPLATE_GENERATION] = json!("7");
        prepare_for_update(&DAEMONSETS, &ds, &mut other_spec, Subresource::Main);
        assert_eq!(tg(&other_spec), "1", "the client cannot move it");
        let mut new_template = other_spec.clone();
        new_template["spec"]["template"]["x"] = json!(2);
        prepare_for_update(
            &DAEMONSETS,
            &other_spec,
            &mut new_template,
            Subresource::Main,
        );
        assert_eq!(tg(&new_template), "2");
    }

    #[test]
    fn pod_qos_classes() {
        let cases = [
            (
                json!({"spec": {"containers": [{"name": "a"}]}}),
                "BestEffort",
            ),
            (
                json!({"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}),
                "Guaranteed",
            ),
            (
                json!({"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}}}]}}),
                "Burstable",
            ),
        ];
        for (mut pod, want) in cases {
            prepare_for_create(&PODS, &mut pod);
            assert_eq!(pod["status"]["qosClass"], want, "{pod}");
            assert_eq!(pod["status"]["phase"], "Pending");
        }
    }
}
