//! Object metadata rules shared by every kind, and the key rules of ConfigMaps and Secrets.

use serde_json::Value;

use super::FieldErrors;
use super::render::go_value;
use crate::names;
use crate::resources::ResourceType;

/// Largest total size of all annotations (keys and values), in bytes.
const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The name rule of a kind: namespaces are DNS labels, everything else we serve is a DNS
/// subdomain.
fn name_problems(rt: &ResourceType, name: &str, prefix: bool) -> Vec<String> {
    if rt.kind == "Namespace" {
        names::object_name_label(name, prefix)
    } else if rt.group == crate::resources::RBAC_GROUP {
        names::object_name_path_segment(name)
    } else {
        names::object_name_subdomain(name, prefix)
    }
}

/// `ValidateObjectMeta` for a new object.
pub(super) fn validate_object_meta(rt: &ResourceType, obj: &Value, errs: &mut FieldErrors) {
    let meta = &obj["metadata"];
    let name = meta["name"].as_str().unwrap_or_default();
    let generate_name = meta["generateName"].as_str().unwrap_or_default();
    if !generate_name.is_empty() {
        for msg in name_problems(rt, generate_name, true) {
            errs.invalid("metadata.generateName", format!("{generate_name:?}"), &msg);
        }
    }
    // With a generateName the store names the object before it is stored.
    if name.is_empty() && generate_name.is_empty() {
        errs.required("metadata.name", "name or generateName is required");
    }
    if !name.is_empty() {
        for msg in name_problems(rt, name, false) {
            errs.invalid("metadata.name", format!("{name:?}"), &msg);
        }
    }
    validate_meta_contents(meta, errs);
}

/// `ValidateObjectMetaUpdate`: identity is immutable; labels and the rest stay valid.
pub(super) fn validate_object_meta_update(
    _rt: &ResourceType,
    old: &Value,
    new: &Value,
    errs: &mut FieldErrors,
) {
    for field in ["name", "namespace", "uid", "creationTimestamp"] {
        let (before, after) = (&old["metadata"][field], &new["metadata"][field]);
        if before != after {
            errs.invalid(
                &format!("metadata.{field}"),
                go_value(after),
                "field is immutable",
            );
        }
    }
    validate_meta_contents(&new["metadata"], errs);
}

fn validate_meta_contents(meta: &Value, errs: &mut FieldErrors) {
    validate_labels(&meta["labels"], "metadata.labels", errs);
    validate_annotations(&meta["annotations"], "metadata.annotations", errs);
    validate_owner_references(&meta["ownerReferences"], errs);
    for finalizer in meta["finalizers"].as_array().into_iter().flatten() {
        let finalizer = finalizer.as_str().unwrap_or_default();
        for msg in names::qualified_name(finalizer) {
            errs.invalid("metadata.finalizers", format!("{finalizer:?}"), &msg);
        }
    }
}

/// `ValidateLabels`: keys are qualified names, values label values.
pub(super) fn validate_labels(labels: &Value, field: &str, errs: &mut FieldErrors) {
    for (key, value) in labels.as_object().into_iter().flatten() {
        for msg in names::qualified_name(key) {
            errs.invalid(field, format!("{key:?}"), &msg);
        }
        let value = value.as_str().unwrap_or_default();
        for msg in names::label_value(value) {
            errs.invalid(field, format!("{value:?}"), &msg);
        }
    }
}

/// `ValidateAnnotations`: keys are qualified names (case-insensitively); 256 KiB in total.
pub(super) fn validate_annotations(annotations: &Value, field: &str, errs: &mut FieldErrors) {
    let mut total = 0;
    for (key, value) in annotations.as_object().into_iter().flatten() {
        for msg in names::qualified_name(&key.to_lowercase()) {
            errs.invalid(field, format!("{key:?}"), &msg);
        }
        total += key.len() + value.as_str().map_or(0, str::len);
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        errs.too_long(
            field,
            &format!("must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        );
    }
}

fn validate_owner_references(references: &Value, errs: &mut FieldErrors) {
    let references = references.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut controllers = Vec::new();
    for reference in references {
        for (field, what) in [
            ("apiVersion", "version"),
            ("kind", "kind"),
            ("name", "name"),
            ("uid", "uid"),
        ] {
            if reference[field].as_str().unwrap_or_default().is_empty() {
                errs.invalid(
                    &format!("metadata.ownerReferences.{field}"),
                    "\"\"".into(),
                    &format!("{what} must not be empty"),
                );
            }
        }
        if reference["controller"].as_bool() == Some(true) {
            controllers.push(format!(
                "{}/{}",
                reference["kind"].as_str().unwrap_or_default(),
                reference["name"].as_str().unwrap_or_default()
            ));
        }
    }
    if controllers.len() > 1 {
        errs.invalid(
            "metadata.ownerReferences",
            Value::Array(references.to_vec()).to_string(),
            &format!(
                "Only one reference can have Controller set to true. Found \"true\" in references for {}",
                controllers.join(" and ")
            ),
        );
    }
}

/// Problems with a ConfigMap or Secret key (`IsConfigMapKey`).
fn config_key_problems(key: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if key.len() > names::DNS1123_SUBDOMAIN_MAX_LEN {
        problems.push(names::max_len_error(names::DNS1123_SUBDOMAIN_MAX_LEN));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
    if key.is_empty() || !key.chars().all(allowed) {
        problems.push(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
                .to_string(),
        );
    }
    if key == "." || key == ".." {
        problems.push(format!("must not be '{key}'"));
    } else if key.starts_with("..") {
        problems.push("must not start with '..'".to_string());
    }
    problems
}

/// Keys of `data`-like maps of ConfigMaps and Secrets.
pub(super) fn validate_config_keys(obj: &Value, fields: &[&str], errs: &mut FieldErrors) {
    for field in fields {
        for key in obj[*field]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            for msg in config_key_problems(key) {
                errs.invalid(&format!("{field}[{key}]"), format!("{key:?}"), &msg);
            }
        }
    }
}

/// An `immutable: true` ConfigMap or Secret keeps its data and its immutability.
pub(super) fn validate_immutable_data(
    old: &Value,
    new: &Value,
    fields: &[&str],
    errs: &mut FieldErrors,
) {
    if old["immutable"].as_bool() != Some(true) {
        return;
    }
    if new["immutable"].as_bool() != Some(true) {
        errs.forbidden("immutable", "field is immutable when `immutable` is set");
    }
    for field in fields {
        if old[*field] != new[*field] {
            errs.forbidden(field, "field is immutable when `immutable` is set");
        }
    }
}
