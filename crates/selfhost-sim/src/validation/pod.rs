//! Pod spec rules (for Pods and pod templates) and the Pod update rule.

use std::collections::BTreeSet;

use serde_json::Value;

use super::FieldErrors;
use super::render::go_value;
use crate::names;

const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const HOST_PATH_TYPES: &[&str] = &[
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
];

/// The fields a Pod update may change, as the apiserver lists them in its refusal.
const UPDATABLE: &str = "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

fn items(value: &Value) -> &[Value] {
    value.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// `ValidatePodSpec` for a Pod's spec at `path`.
pub(super) fn validate_pod_spec(spec: &Value, path: &str, errs: &mut FieldErrors) {
    validate_pod_spec_of(spec, path, true, errs);
}

/// As [`validate_pod_spec`] for a pod template (`spec.template.spec`).
pub(super) fn validate_template_spec(spec: &Value, path: &str, errs: &mut FieldErrors) {
    validate_pod_spec_of(spec, path, false, errs);
}

fn validate_pod_spec_of(spec: &Value, path: &str, is_pod: bool, errs: &mut FieldErrors) {
    let volumes = validate_volumes(items(&spec["volumes"]), &format!("{path}.volumes"), errs);
    let containers = items(&spec["containers"]);
    if containers.is_empty() {
        errs.required(&format!("{path}.containers"), "");
    }
    let mut container_names = BTreeSet::new();
    for list in ["initContainers", "containers"] {
        for (i, container) in items(&spec[list]).iter().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            validate_container(container, &at, &volumes, &mut container_names, errs);
        }
    }
    if spec["hostNetwork"].as_bool() == Some(true) {
        for list in ["initContainers", "containers"] {
            for (i, container) in items(&spec[list]).iter().enumerate() {
                for (j, port) in items(&container["ports"]).iter().enumerate() {
                    let host = port["hostPort"].as_i64().unwrap_or(0);
                    let container_port = port["containerPort"].as_i64().unwrap_or(0);
                    // Templates may leave hostPort 0: it is defaulted when the Pod is created.
                    if (is_pod || host != 0) && host != container_port {
                        errs.invalid(
                            &format!("{path}.{list}[{i}].ports[{j}].hostPort"),
                            host.to_string(),
                            "must match `containerPort` when `hostNetwork` is true",
                        );
                    }
                }
            }
        }
    }
    for (field, supported) in [
        ("restartPolicy", RESTART_POLICIES),
        ("dnsPolicy", DNS_POLICIES),
    ] {
        match spec[field].as_str() {
            None => {}
            Some("") => errs.required(&format!("{path}.{field}"), ""),
            Some(value) if !supported.contains(&value) => {
                errs.not_supported(&format!("{path}.{field}"), format!("{value:?}"), supported)
            }
            Some(_) => {}
        }
    }
    if let Some(deadline) = spec["activeDeadlineSeconds"].as_i64()
        && !(1..=i64::from(i32::MAX)).contains(&deadline)
    {
        errs.invalid(
            &format!("{path}.activeDeadlineSeconds"),
            deadline.to_string(),
            "must be between 1 and 2147483647, inclusive",
        );
    }
    super::meta::validate_labels(&spec["nodeSelector"], &format!("{path}.nodeSelector"), errs);
}

/// Volume names and sources; returns the declared names.
fn validate_volumes(volumes: &[Value], path: &str, errs: &mut FieldErrors) -> BTreeSet<String> {
    let mut declared = BTreeSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let name = text(&volume["name"]);
        let at = format!("{path}[{i}]");
        if name.is_empty() {
            errs.required(&format!("{at}.name"), "");
        } else {
            for msg in names::dns1123_label(name) {
                errs.invalid(&format!("{at}.name"), format!("{name:?}"), &msg);
            }
            if !declared.insert(name.to_string()) {
                errs.duplicate(&format!("{at}.name"), format!("{name:?}"));
            }
        }
        if let Some(host_path) = volume["hostPath"].as_object() {
            if text(&host_path["path"]).is_empty() {
                errs.required(&format!("{at}.hostPath.path"), "");
            }
            if let Some(kind) = host_path.get("type").and_then(Value::as_str)
                && !HOST_PATH_TYPES.contains(&kind)
            {
                errs.not_supported(
                    &format!("{at}.hostPath.type"),
                    format!("{kind:?}"),
                    HOST_PATH_TYPES,
                );
            }
        }
    }
    declared
}

fn validate_container(
    container: &Value,
    at: &str,
    volumes: &BTreeSet<String>,
    seen: &mut BTreeSet<String>,
    errs: &mut FieldErrors,
) {
    let name = text(&container["name"]);
    if name.is_empty() {
        errs.required(&format!("{at}.name"), "");
    } else {
        for msg in names::dns1123_label(name) {
            errs.invalid(&format!("{at}.name"), format!("{name:?}"), &msg);
        }
        if !seen.insert(name.to_string()) {
            errs.duplicate(&format!("{at}.name"), format!("{name:?}"));
        }
    }
    let image = text(&container["image"]);
    if image.is_empty() {
        errs.required(&format!("{at}.image"), "");
    } else if image.trim() != image {
        errs.invalid(
            &format!("{at}.image"),
            format!("{image:?}"),
            "must not have leading or trailing whitespace",
        );
    }
    for (j, port) in items(&container["ports"]).iter().enumerate() {
        let port_at = format!("{at}.ports[{j}]");
        let in_range = |n: i64| (1..=65535).contains(&n);
        let container_port = port["containerPort"].as_i64().unwrap_or(0);
        if !in_range(container_port) {
            errs.invalid(
                &format!("{port_at}.containerPort"),
                container_port.to_string(),
                "must be between 1 and 65535, inclusive",
            );
        }
        let host_port = port["hostPort"].as_i64().unwrap_or(0);
        if host_port != 0 && !in_range(host_port) {
            errs.invalid(
                &format!("{port_at}.hostPort"),
                host_port.to_string(),
                "must be between 1 and 65535, inclusive",
            );
        }
        match port["protocol"].as_str() {
            Some(p) if !PROTOCOLS.contains(&p) => {
                errs.not_supported(&format!("{port_at}.protocol"), format!("{p:?}"), PROTOCOLS)
            }
            _ => {}
        }
    }
    for (j, mount) in items(&container["volumeMounts"]).iter().enumerate() {
        let mount_at = format!("{at}.volumeMounts[{j}]");
        let volume = text(&mount["name"]);
        if volume.is_empty() {
            errs.required(&format!("{mount_at}.name"), "");
        } else if !volumes.contains(volume) {
            errs.not_found(&format!("{mount_at}.name"), format!("{volume:?}"));
        }
        if text(&mount["mountPath"]).is_empty() {
            errs.required(&format!("{mount_at}.mountPath"), "");
        }
    }
}

/// `ValidatePodUpdate`'s spec rule: after setting every updatable field of the new spec back
/// to the old one, the specs must be equal.
pub(super) fn validate_pod_update(old: &Value, new: &Value, errs: &mut FieldErrors) {
    for list in ["containers", "initContainers"] {
        if items(&old[list]).len() != items(&new[list]).len() {
            errs.forbidden(
                &format!("spec.{list}"),
                "pod updates may not add or remove containers",
            );
            return;
        }
    }
    let mut munged = new.clone();
    for list in ["containers", "initContainers"] {
        if let Some(containers) = munged.get_mut(list).and_then(Value::as_array_mut) {
            for (i, container) in containers.iter_mut().enumerate() {
                set_like(container, &old[list][i], "image");
            }
        }
    }

    match (
        old["activeDeadlineSeconds"].as_i64(),
        new["activeDeadlineSeconds"].as_i64(),
    ) {
        (Some(_), None) => errs.invalid(
            "spec.activeDeadlineSeconds",
            "null".into(),
            "must not update from a positive integer to nil value",
        ),
        (Some(before), Some(after)) if after > before => errs.invalid(
            "spec.activeDeadlineSeconds",
            after.to_string(),
            "must be less than or equal to previous value",
        ),
        _ => {}
    }
    set_like(&mut munged, old, "activeDeadlineSeconds");

    let old_tolerations = items(&old["tolerations"]);
    if old_tolerations
        .iter()
        .any(|t| !items(&new["tolerations"]).contains(t))
    {
        errs.forbidden(
            "spec.tolerations",
            "existing toleration can not be modified except its tolerationSeconds",
        );
    }
    set_like(&mut munged, old, "tolerations");

    let grace_was_negative = old["terminationGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g < 0);
    if grace_was_negative && new["terminationGracePeriodSeconds"].as_i64() == Some(1) {
        set_like(&mut munged, old, "terminationGracePeriodSeconds");
    }

    if munged != *old {
        let diff = describe_difference(old, &munged, "spec");
        errs.forbidden(
            "spec",
            &format!("pod updates may not change fields other than {UPDATABLE}\n{diff}"),
        );
    }
}

/// Makes `field` of `target` what it is in `source` (present or absent).
fn set_like(target: &mut Value, source: &Value, field: &str) {
    if let Some(map) = target.as_object_mut() {
        match source.get(field) {
            Some(value) => {
                map.insert(field.to_string(), value.clone());
            }
            None => {
                map.remove(field);
            }
        }
    }
}

/// A short `-`/`+` listing of the first differing fields, standing in for the Go diff the
/// apiserver appends.
fn describe_difference(old: &Value, new: &Value, path: &str) -> String {
    let mut lines = Vec::new();
    collect_differences(old, new, path, &mut lines);
    lines.join("\n")
}

fn collect_differences(old: &Value, new: &Value, path: &str, lines: &mut Vec<String>) {
    if old == new || lines.len() >= 20 {
        return;
    }
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let (x, y) = (
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                );
                collect_differences(x, y, &format!("{path}.{key}"), lines);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                collect_differences(x, y, &format!("{path}[{i}]"), lines);
            }
        }
        _ => {
            lines.push(format!("- {path}: {}", go_value(old)));
            lines.push(format!("+ {path}: {}", go_value(new)));
        }
    }
}
