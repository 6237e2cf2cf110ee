//! Field selectors: `fieldSelector=spec.nodeName=cp-1,status.phase!=Failed`.
//!
//! Each kind makes only some fields selectable (the apiserver's `...ToSelectableFields`);
//! any other field is refused with `field label not supported: <field>`. Cluster-scoped kinds
//! do not offer `metadata.namespace`, as in the apiserver.

use std::fmt;

use serde_json::Value;

use super::SelectorError;
use crate::resources::ResourceType;

/// One `field=value` or `field!=value` term.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldRequirement {
    field: String,
    value: String,
    /// `!=` rather than `=`/`==`.
    negated: bool,
}

/// A parsed and kind-checked field selector; the AND of its terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldRequirement {
    /// The selected field, e.g. `spec.nodeName`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The value compared against (unescaped).
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Whether the term is `!=`.
    pub fn is_negated(&self) -> bool {
        self.negated
    }
}

impl FieldSelector {
    /// Parses a field selector for objects of `rt`. The empty string selects everything.
    ///
    /// # Errors
    /// A term without operator, a bad escape, or a field `rt` does not make selectable.
    pub fn parse(input: &str, rt: &ResourceType) -> Result<Self, SelectorError> {
        let mut terms = split_terms(input);
        terms.sort();
        let mut requirements = Vec::new();
        for term in terms.iter().filter(|t| !t.is_empty()) {
            let Some((field, operator, raw_value)) = split_term(term) else {
                return Err(SelectorError::FieldSyntax {
                    selector: input.to_string(),
                    term: term.clone(),
                });
            };
            requirements.push(FieldRequirement {
                field: field.to_string(),
                value: unescape(raw_value)?,
                negated: operator == "!=",
            });
        }
        // As in the apiserver, the whole selector parses before fields are checked.
        let supported = selectable_fields(rt);
        if let Some(r) = requirements
            .iter()
            .find(|r| !supported.contains(&r.field.as_str()))
        {
            return Err(SelectorError::UnsupportedField(r.field.clone()));
        }
        Ok(FieldSelector { requirements })
    }

    /// The terms, in the order the apiserver sorts them.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Whether the selector selects every object.
    pub fn is_everything(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The value a `field=value` term requires, if there is one (lets the store narrow a
    /// list to a namespace or a name before matching).
    pub fn requires_exact(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && !r.negated)
            .map(|r| r.value.as_str())
    }

    /// Whether an object satisfies every term. A missing field has the value `""`.
    pub fn matches(&self, object: &Value) -> bool {
        self.requirements.iter().all(|r| {
            let actual = field_value(object, &r.field);
            (actual == r.value) != r.negated
        })
    }
}

/// Prints terms as the apiserver does (`=` for both `=` and `==`, values escaped).
impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let operator = if r.negated { "!=" } else { "=" };
            write!(f, "{}{operator}{}", r.field, escape(&r.value))?;
        }
        Ok(())
    }
}

/// The fields each kind lets clients select on, from the apiserver's registry strategies.
pub fn selectable_fields(rt: &ResourceType) -> Vec<&'static str> {
    let mut fields = vec!["metadata.name"];
    if rt.namespaced {
        fields.push("metadata.namespace");
    }
    let extra: &[&str] = match (rt.group, rt.plural) {
        ("", "pods") => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ("", "nodes") => &["spec.unschedulable"],
        ("", "namespaces") => &["status.phase"],
        ("", "secrets") => &["type"],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        _ => &[],
    };
    fields.extend_from_slice(extra);
    fields
}

/// The string value of a selectable field; absent fields are `""`, booleans `true`/`false`.
fn field_value(object: &Value, field: &str) -> String {
    let value = match field {
        // Events select `source` on the reporting component.
        "source" => &object["source"]["component"],
        _ => field.split('.').fold(object, |v, segment| &v[segment]),
    };
    match value {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        // `spec.unschedulable` and `spec.hostNetwork` read as false when unset.
        Value::Null if matches!(field, "spec.unschedulable" | "spec.hostNetwork") => {
            "false".to_string()
        }
        _ => String::new(),
    }
}

/// Splits on commas that are not escaped with a backslash.
fn split_terms(input: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for c in input.chars() {
        if escaped {
            current.push(c);
            escaped = false;
        } else if c == '\\' {
            current.push(c);
            escaped = true;
        } else if c == ',' {
            terms.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    terms.push(current);
    terms
}

/// The first operator in the term, scanning left to right (`!=` before `==` before `=`).
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for operator in ["!=", "==", "="] {
            if let Some(value) = rest.strip_prefix(operator) {
                return Some((&term[..i], operator, value));
            }
        }
    }
    None
}

fn unescape(raw: &str) -> Result<String, SelectorError> {
    if !raw.contains(['\\', '=', ',']) {
        return Ok(raw.to_string());
    }
    let mut out = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                other => {
                    let sequence = format!("\\{}", other.map(String::from).unwrap_or_default());
                    return Err(SelectorError::FieldValue(format!(
                        "invalid escape sequence: {sequence}"
                    )));
                }
            },
            ',' | '=' => {
                return Err(SelectorError::FieldValue(format!(
                    "unescaped character in value: {c}"
                )));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace(',', "\\,")
        .replace('=', "\\=")
}
