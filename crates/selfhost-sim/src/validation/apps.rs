//! DaemonSet, ControllerRevision and Lease rules.

use serde_json::Value;

use super::FieldErrors;
use super::meta::{validate_annotations, validate_labels};
use super::pod::validate_template_spec;
use super::render::{go_label_selector, go_string_map, go_value, int_or_string};
use crate::names;
use crate::selector::LabelSelector;

const PERCENT_ERROR: &str = "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')";

/// `ValidateDaemonSet` (metadata is checked by the caller).
pub(super) fn validate_daemonset(obj: &Value, errs: &mut FieldErrors) {
    let spec = &obj["spec"];
    let selector = &spec["selector"];
    validate_selector_object(selector, "spec.selector", errs);

    let template_labels = &spec["template"]["metadata"]["labels"];
    // A missing selector selects nothing, so it never matches the template's labels.
    if let Ok(parsed) = LabelSelector::from_label_selector_json(selector)
        && !parsed.matches_object(&spec["template"])
    {
        errs.invalid(
            "spec.template.metadata.labels",
            go_string_map(template_labels),
            "`selector` does not match template `labels`",
        );
    }
    let requirement_count = selector["matchLabels"].as_object().map_or(0, |m| m.len())
        + selector["matchExpressions"].as_array().map_or(0, Vec::len);
    if selector.is_object() && requirement_count == 0 {
        errs.invalid(
            "spec.selector",
            go_label_selector(selector),
            "empty selector is invalid for daemonset",
        );
    }

    validate_labels(template_labels, "spec.template.metadata.labels", errs);
    validate_annotations(
        &spec["template"]["metadata"]["annotations"],
        "spec.template.metadata.annotations",
        errs,
    );
    let pod_spec = &spec["template"]["spec"];
    validate_template_spec(pod_spec, "spec.template.spec", errs);
    if let Some(policy) = pod_spec["restartPolicy"].as_str()
        && policy != "Always"
    {
        errs.not_supported(
            "spec.template.spec.restartPolicy",
            format!("{policy:?}"),
            &["Always"],
        );
    }
    if let Some(deadline) = pod_spec
        .get("activeDeadlineSeconds")
        .filter(|v| !v.is_null())
    {
        errs.invalid(
            "spec.template.spec.activeDeadlineSeconds",
            go_value(deadline),
            "must not be specified",
        );
    }
    errs.non_negative("spec.minReadySeconds", &spec["minReadySeconds"]);
    validate_update_strategy(&spec["updateStrategy"], errs);
    errs.non_negative("spec.revisionHistoryLimit", &spec["revisionHistoryLimit"]);
}

/// `ValidateDaemonSetUpdate` plus the strategy's selector immutability.
pub(super) fn validate_daemonset_update(old: &Value, new: &Value, errs: &mut FieldErrors) {
    validate_daemonset(new, errs);
    let (before, after) = (&old["spec"]["selector"], &new["spec"]["selector"]);
    if !semantically_equal(before, after) {
        errs.invalid(
            "spec.selector",
            go_label_selector(after),
            "field is immutable",
        );
    }
}

/// `ValidateDaemonSetStatusUpdate`: counters are non-negative; collisionCount only grows.
pub(super) fn validate_daemonset_status(old: &Value, new: &Value, errs: &mut FieldErrors) {
    let status = &new["status"];
    for field in [
        "currentNumberScheduled",
        "numberMisscheduled",
        "desiredNumberScheduled",
        "numberReady",
        "observedGeneration",
        "updatedNumberScheduled",
        "numberAvailable",
        "numberUnavailable",
        "collisionCount",
    ] {
        errs.non_negative(&format!("status.{field}"), &status[field]);
    }
    let before = old["status"]["collisionCount"].as_i64();
    let after = status["collisionCount"].as_i64();
    if before.is_some_and(|b| after.is_none_or(|a| a < b)) {
        errs.invalid(
            "status.collisionCount",
            after.unwrap_or(0).to_string(),
            "cannot be decremented",
        );
    }
}

/// `ValidateLabelSelector` on the object form.
fn validate_selector_object(selector: &Value, path: &str, errs: &mut FieldErrors) {
    validate_labels(
        &selector["matchLabels"],
        &format!("{path}.matchLabels"),
        errs,
    );
    let expressions = selector["matchExpressions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (i, expression) in expressions.iter().enumerate() {
        let at = format!("{path}.matchExpressions[{i}]");
        let values = expression["values"].as_array().map_or(0, Vec::len);
        match expression["operator"].as_str().unwrap_or_default() {
            "In" | "NotIn" if values == 0 => errs.required(
                &format!("{at}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            ),
            "Exists" | "DoesNotExist" if values > 0 => errs.forbidden(
                &format!("{at}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.invalid(
                &format!("{at}.operator"),
                format!("{other:?}"),
                "not a valid selector operator",
            ),
        }
        let key = expression["key"].as_str().unwrap_or_default();
        for msg in names::qualified_name(key) {
            errs.invalid(&format!("{at}.key"), format!("{key:?}"), &msg);
        }
    }
}

fn validate_update_strategy(strategy: &Value, errs: &mut FieldErrors) {
    match strategy["type"].as_str().unwrap_or_default() {
        "OnDelete" => {}
        "RollingUpdate" => {
            let rolling = &strategy["rollingUpdate"];
            if rolling.is_null() {
                errs.required("spec.updateStrategy.rollingUpdate", "");
                return;
            }
            validate_rolling_update(rolling, errs);
        }
        other => errs.not_supported(
            "spec.updateStrategy",
            format!("apps.DaemonSetUpdateStrategy{{Type:{other:?}}}"),
            &["RollingUpdate", "OnDelete"],
        ),
    }
}

/// `ValidateRollingUpdateDaemonSet`: exactly one of maxUnavailable and maxSurge is non-zero.
fn validate_rolling_update(rolling: &Value, errs: &mut FieldErrors) {
    let path = "spec.updateStrategy.rollingUpdate";
    let (unavailable, surge) = (&rolling["maxUnavailable"], &rolling["maxSurge"]);
    for (field, value) in [("maxUnavailable", unavailable), ("maxSurge", surge)] {
        let at = format!("{path}.{field}");
        match value {
            Value::String(s) if !is_percent(s) => errs.invalid(&at, s.clone(), PERCENT_ERROR),
            Value::Number(_) => errs.non_negative(&at, value),
            _ => {}
        }
    }
    for (field, value) in [("maxUnavailable", unavailable), ("maxSurge", surge)] {
        if let Value::String(s) = value
            && is_percent(s)
            && percent(s) > 100
        {
            errs.invalid(
                &format!("{path}.{field}"),
                s.clone(),
                "must not be greater than 100%",
            );
        }
    }
    match (int_or_percent(unavailable) != 0, int_or_percent(surge) != 0) {
        (true, true) => errs.invalid(
            &format!("{path}.maxSurge"),
            int_or_string(surge),
            "may not be set when maxUnavailable is non-zero",
        ),
        (false, false) => errs.required(
            &format!("{path}.maxUnavailable"),
            "cannot be 0 when maxSurge is 0",
        ),
        _ => {}
    }
}

fn is_percent(s: &str) -> bool {
    s.strip_suffix('%')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn percent(s: &str) -> i64 {
    s.trim_end_matches('%').parse().unwrap_or(i64::MAX)
}

/// The number an `IntOrString` stands for when checking zero-ness (bad strings count as 0).
fn int_or_percent(value: &Value) -> i64 {
    match value {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) if is_percent(s) => percent(s),
        Value::String(s) => s.parse().unwrap_or(0),
        _ => 0,
    }
}

/// Equality that, like the apiserver's semantic equality, does not tell absent, null and
/// empty lists or maps apart.
fn semantically_equal(a: &Value, b: &Value) -> bool {
    fn normalize(v: &Value) -> Value {
        match v {
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), normalize(v)))
                    .filter(|(_, v)| !is_empty(v))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(normalize).collect()),
            other => other.clone(),
        }
    }
    fn is_empty(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Object(m) => m.is_empty(),
            Value::Array(a) => a.is_empty(),
            _ => false,
        }
    }
    normalize(a) == normalize(b)
}

/// `ValidateControllerRevision` (metadata is checked by the caller).
pub(super) fn validate_controller_revision(obj: &Value, errs: &mut FieldErrors) {
    if obj["data"].is_null() {
        errs.required("data", "data is mandatory");
    }
    errs.non_negative("revision", &obj["revision"]);
}

/// `ValidateLeaseSpec`.
pub(super) fn validate_lease(obj: &Value, errs: &mut FieldErrors) {
    let spec = &obj["spec"];
    if let Some(duration) = spec["leaseDurationSeconds"].as_i64()
        && duration <= 0
    {
        errs.invalid(
            "spec.leaseDurationSeconds",
            duration.to_string(),
            "must be greater than 0",
        );
    }
    errs.non_negative("spec.leaseTransitions", &spec["leaseTransitions"]);
}
