//! Server-side field validation (`fieldValidation=Strict|Warn|Ignore`): fields an object's
//! kind does not have, and fields a body repeats, are rejected (Strict), reported in
//! `Warning` headers (Warn, the default when the parameter is absent) or passed over
//! (Ignore). Whatever the directive, unknown fields are dropped before storage, as decoding
//! into the typed object drops them in the apiserver.
//!
//! Wording and order follow the apiserver: create and update answer 400 `DaemonSet in
//! version "v1" cannot be handled as a DaemonSet: strict decoding error: unknown field
//! "spec.bogus"` with problems in body order; patches answer 422 Invalid on the field
//! `patch`, listing the patch's repeated fields first, then the patched object's unknown
//! fields.

pub(crate) mod scan;
pub(crate) mod shown;
pub(crate) mod typed;

use serde_json::Value;

use super::query::Query;
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::store::{DataStep, check_type_meta, display_data_path, meta};
use scan::{Scanned, render};

/// What to do about unknown and repeated fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in `Warning` headers.
    Warn,
    /// Reject the request.
    Strict,
}

impl FieldValidation {
    /// The `fieldValidation` parameter; absent or empty means Warn, as in the apiserver.
    /// `options_kind` names the options for the error (`CreateOptions`, `UpdateOptions`,
    /// `PatchOptions`).
    ///
    /// # Errors
    /// 422 Invalid for any other value, worded as the apiserver's options validation.
    pub(crate) fn from_query(query: &Query, options_kind: &str) -> Result<Self, ApiError> {
        match query.get("fieldValidation").unwrap_or("") {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Strict" => Ok(FieldValidation::Strict),
            "Ignore" => Ok(FieldValidation::Ignore),
            other => Err(ApiError::invalid_options(
                options_kind,
                "fieldValidation",
                "FieldValueNotSupported",
                &format!(
                    "Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
                ),
            )),
        }
    }
}

/// How problems of a patched object are ordered (they follow the patch's own).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchedOrder {
    /// A walk with keys sorted (JSON and merge patches: the apiserver re-reads the patched
    /// object from JSON it wrote with sorted keys).
    Walk,
    /// Sorted as text (strategic merge patches: the unstructured converter sorts them).
    Text,
}

/// Checks a decoded create or update body: strips `null`s, drops unknown fields, and
/// answers by the directive. `scanned` carries body order and repeated fields (JSON bodies);
/// without it (YAML) unknown fields are reported sorted, as the apiserver does for YAML.
///
/// # Errors
/// 400 BadRequest for a value of the wrong type, and (Strict) for any unknown or repeated
/// field.
pub(crate) fn check_body(
    rt: &ResourceType,
    obj: &mut Value,
    scanned: Option<&Scanned>,
    directive: FieldValidation,
) -> Result<Vec<String>, ApiError> {
    let cannot_handle = |why: &str| {
        ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {why}",
            kind = rt.kind,
            version = rt.version
        ))
    };
    check_type_meta(rt, obj)?;
    typed::strip_nulls(obj);
    let unknown = typed::unknown_fields(rt, obj).map_err(|e| cannot_handle(&e.to_string()))?;
    for path in &unknown {
        typed::remove(obj, path);
    }
    let unknown: Vec<String> = unknown.iter().map(|p| render(p)).collect();
    let problems = match scanned {
        Some(scanned) => {
            let mut positioned: Vec<(usize, String)> = unknown
                .iter()
                .map(|p| (scanned.position(p), format!("unknown field {p:?}")))
                .collect();
            // A field both unknown and repeated is reported once, as unknown; so is anything
            // inside an unknown field.
            positioned.extend(
                scanned
                    .duplicates
                    .iter()
                    .filter(|(_, d)| !unknown.iter().any(|u| within(d, u)))
                    .map(|(at, d)| (*at, format!("duplicate field {d:?}"))),
            );
            positioned.sort_by_key(|(at, _)| *at);
            positioned.into_iter().map(|(_, p)| p).collect()
        }
        None => {
            let mut sorted = unknown;
            sorted.sort();
            sorted
                .iter()
                .map(|p| format!("unknown field {p:?}"))
                .collect()
        }
    };
    verdict(directive, problems, |problems| {
        cannot_handle(&strict_decoding_error(problems))
    })
}

/// Checks an object a JSON, merge or strategic merge patch produced, after the patch's own
/// problems (`patch_problems`, already worded). `shown` renders the value the 422 quotes.
///
/// # Errors
/// 422 Invalid on `patch` for a value of the wrong type, and (Strict) for any problem.
pub(crate) fn check_patched(
    rt: &ResourceType,
    obj: &mut Value,
    patch_problems: &[String],
    order: PatchedOrder,
    directive: FieldValidation,
    shown: impl Fn(&Value) -> String,
) -> Result<Vec<String>, ApiError> {
    check_type_meta(rt, obj)?;
    typed::strip_nulls(obj);
    let unknown = match typed::unknown_fields(rt, obj) {
        Ok(u) => u,
        Err(e) => return Err(ApiError::invalid_patch(&shown(obj), &e.to_string())),
    };
    let mut rendered: Vec<String> = unknown.iter().map(|p| render(p)).collect();
    if order == PatchedOrder::Text {
        rendered.sort();
    }
    let mut problems = patch_problems.to_vec();
    problems.extend(rendered.iter().map(|p| format!("unknown field {p:?}")));
    let shown_value = if directive == FieldValidation::Strict && !problems.is_empty() {
        shown(obj)
    } else {
        String::new()
    };
    for path in &unknown {
        typed::remove(obj, path);
    }
    verdict(directive, problems, |problems| {
        ApiError::invalid_patch(&shown_value, &strict_decoding_error(problems))
    })
}

/// Checks a server-side apply configuration against its kind: there an unknown field is an
/// error whatever `fieldValidation` says, reported as structured-merge-diff reports it (a
/// 500 without a reason): `failed to create typed patch object (kube-system/x; apps/v1,
/// Kind=DaemonSet): .spec.bogus: field not declared in schema`. Items of keyed lists are
/// named by their key, as there.
///
/// # Errors
/// That 500 for unknown fields or values of the wrong type; the store's 400 for a
/// configuration of another kind.
pub(crate) fn check_applied(rt: &ResourceType, applied: &Value) -> Result<(), ApiError> {
    let mut probe = applied.clone();
    check_type_meta(rt, &mut probe)?;
    typed::strip_nulls(&mut probe);
    let object = format!(
        "{}/{}; {}/{}, Kind={}",
        meta::namespace(applied),
        meta::name(applied),
        rt.group,
        rt.version,
        rt.kind
    );
    let object = object.strip_prefix('/').unwrap_or(&object);
    let failed = |why: &str| {
        ApiError::unknown(format!(
            "failed to create typed patch object ({object}): {why}"
        ))
    };
    let unknown = typed::unknown_fields(rt, &probe).map_err(|e| failed(&e.to_string()))?;
    let errors: Vec<String> = unknown
        .iter()
        .map(|path| {
            let steps: Vec<DataStep<'_>> = path
                .iter()
                .map(|segment| match segment {
                    scan::Segment::Key(k) => DataStep::Field(k),
                    scan::Segment::Index(i) => DataStep::Index(*i),
                })
                .collect();
            format!(
                "{}: field not declared in schema",
                display_data_path(&probe, &steps)
            )
        })
        .collect();
    match errors.as_slice() {
        [] => Ok(()),
        [one] => Err(failed(one)),
        many => Err(failed(&format!("errors:\n  {}", many.join("\n  ")))),
    }
}

/// The patch's own problems: repeated fields, in body order.
pub(crate) fn repeated_fields(scanned: &Scanned) -> Vec<String> {
    scanned
        .duplicates
        .iter()
        .map(|(_, d)| format!("duplicate field {d:?}"))
        .collect()
}

/// The problems of a JSON patch's operations themselves: members other than `op`, `path`,
/// `from` and `value`, and repeated members, in body order.
pub(crate) fn json_patch_problems(scanned: &Scanned) -> Vec<String> {
    let mut positioned: Vec<(usize, String)> = Vec::new();
    if let Some(ops) = scanned.value.as_array() {
        for (i, op) in ops.iter().enumerate() {
            let Some(members) = op.as_object() else {
                continue;
            };
            for key in members.keys() {
                if !matches!(key.as_str(), "op" | "path" | "from" | "value") {
                    let path = format!("[{i}].{key}");
                    positioned.push((
                        scanned.position(&path),
                        format!("json patch unknown field {path:?}"),
                    ));
                }
            }
        }
    }
    positioned.extend(
        scanned
            .duplicates
            .iter()
            .map(|(at, d)| (*at, format!("json patch duplicate field {d:?}"))),
    );
    positioned.sort_by_key(|(at, _)| *at);
    positioned.into_iter().map(|(_, p)| p).collect()
}

fn within(path: &str, ancestor: &str) -> bool {
    path == ancestor
        || path
            .strip_prefix(ancestor)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

fn strict_decoding_error(problems: &[String]) -> String {
    format!("strict decoding error: {}", problems.join(", "))
}

fn verdict(
    directive: FieldValidation,
    problems: Vec<String>,
    reject: impl FnOnce(&[String]) -> ApiError,
) -> Result<Vec<String>, ApiError> {
    match directive {
        _ if problems.is_empty() => Ok(Vec::new()),
        FieldValidation::Strict => Err(reject(&problems)),
        FieldValidation::Warn => Ok(problems),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests;
