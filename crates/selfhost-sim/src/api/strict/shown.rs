//! The value a rejected patch quotes, as the apiserver prints it: the patched object as
//! JSON (JSON and merge patches) or the patch as Go prints a `map[string]interface{}`
//! (strategic merge patches). Secret values are never shown.

use std::borrow::Cow;

use serde_json::Value;

use crate::resources::ResourceType;

/// Replaces the values of a Secret's `data` and `stringData` (any other kind is shown as
/// is): error messages are logged and printed, Secret contents must not be.
fn redacted<'a>(rt: &ResourceType, value: &'a Value) -> Cow<'a, Value> {
    if (rt.group, rt.kind) != ("", "Secret") {
        return Cow::Borrowed(value);
    }
    let mut copy = value.clone();
    for field in ["data", "stringData"] {
        if let Some(map) = copy.get_mut(field).and_then(Value::as_object_mut) {
            map.values_mut()
                .for_each(|v| *v = Value::String("<redacted>".into()));
        }
    }
    Cow::Owned(copy)
}

/// A patched object as the JSON the apiserver quotes.
pub(crate) fn patched_object(rt: &ResourceType, obj: &Value) -> String {
    redacted(rt, obj).to_string()
}

/// A strategic merge patch as Go's `%+v` prints the decoded map: `map[spec:map[bogus:1]]`.
pub(crate) fn strategic_patch(rt: &ResourceType, patch: &Value) -> String {
    let mut out = String::new();
    go_value(&redacted(rt, patch), &mut out);
    out
}

fn go_value(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("<nil>"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => out.push_str(s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                go_value(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Go prints map keys sorted, as serde_json's map iterates them.
            out.push_str("map[");
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(key);
                out.push(':');
                go_value(item, out);
            }
            out.push(']');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{DAEMONSETS, SECRETS};
    use serde_json::json;

    #[test]
    fn strategic_patches_print_as_go_maps() {
        let patch = json!({"spec": {"bogus": 1, "template": {"spec": {"containers": [
            {"name": "c", "image": "i:2", "args": null, "ok": true}]}}}});
        assert_eq!(
            strategic_patch(&DAEMONSETS, &patch),
            "map[spec:map[bogus:1 template:map[spec:map[containers:[map[args:<nil> image:i:2 name:c ok:true]]]]]]"
        );
    }

    #[test]
    fn secret_values_are_never_shown() {
        let secret = json!({"metadata": {"name": "s"}, "data": {"password": "aHVudGVyMg=="},
                            "stringData": {"token": "plain"}, "bogus": 1});
        let shown = patched_object(&SECRETS, &secret);
        assert!(
            !shown.contains("aHVudGVyMg==") && !shown.contains("plain"),
            "{shown}"
        );
        assert!(shown.contains("\"password\":\"<redacted>\""), "{shown}");
        let shown = strategic_patch(&SECRETS, &secret);
        assert!(
            !shown.contains("aHVudGVyMg==") && !shown.contains("plain"),
            "{shown}"
        );
        assert!(shown.contains("bogus:1"), "{shown}");
    }
}
