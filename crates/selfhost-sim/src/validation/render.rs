//! Bad values printed as the apiserver prints them in field errors (Go's `%q`, `%v` and
//! `%#v`), so that messages read like a real cluster's.

use serde_json::Value;

/// A scalar as `field.Error` prints it: strings quoted, numbers and booleans bare; anything
/// else as compact JSON.
pub(super) fn go_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}

/// A `map[string]string` as `%#v`: `map[string]string{"a":"b", "c":"d"}`.
pub(super) fn go_string_map(value: &Value) -> String {
    match value.as_object() {
        None => "map[string]string(nil)".to_string(),
        Some(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default()))
                .collect();
            format!("map[string]string{{{}}}", pairs.join(", "))
        }
    }
}

fn go_string_slice(value: &Value) -> String {
    match value.as_array() {
        None => "[]string(nil)".to_string(),
        Some(items) => {
            let items: Vec<String> = items
                .iter()
                .map(|v| format!("{:?}", v.as_str().unwrap_or_default()))
                .collect();
            format!("[]string{{{}}}", items.join(", "))
        }
    }
}

/// A `*metav1.LabelSelector` as the apiserver prints it in "field is immutable" and
/// "empty selector" errors.
pub(super) fn go_label_selector(value: &Value) -> String {
    if value.is_null() {
        return "null".to_string();
    }
    let expressions = match value["matchExpressions"].as_array() {
        None => "[]v1.LabelSelectorRequirement(nil)".to_string(),
        Some(items) => {
            let items: Vec<String> = items
                .iter()
                .map(|e| {
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:{}}}",
                        e["key"].as_str().unwrap_or_default(),
                        e["operator"].as_str().unwrap_or_default(),
                        go_string_slice(&e["values"])
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
    };
    format!(
        "v1.LabelSelector{{MatchLabels:{}, MatchExpressions:{expressions}}}",
        go_string_map(&value["matchLabels"])
    )
}

/// An `intstr.IntOrString` as its `String()`: `1` or `25%`.
pub(super) fn int_or_string(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => "0".to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_print_like_go() {
        assert_eq!(go_value(&json!("x")), "\"x\"");
        assert_eq!(go_value(&json!(-1)), "-1");
        assert_eq!(
            go_string_map(&json!({"b": "2", "a": "1"})),
            r#"map[string]string{"a":"1", "b":"2"}"#
        );
        assert_eq!(go_string_map(&json!(null)), "map[string]string(nil)");
        assert_eq!(
            go_label_selector(&json!({"matchLabels": {"app": "rng"}})),
            r#"v1.LabelSelector{MatchLabels:map[string]string{"app":"rng"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"#
        );
        assert_eq!(
            go_label_selector(
                &json!({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]})
            ),
            r#"v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"a", Operator:"In", Values:[]string{"x"}}}}"#
        );
        assert_eq!(int_or_string(&json!("25%")), "25%");
        assert_eq!(int_or_string(&json!(1)), "1");
    }
}
