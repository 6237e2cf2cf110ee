//! Label selectors: the string grammar of the `labelSelector` query parameter and the
//! `metav1.LabelSelector` object, with the apiserver's parsing, validation and matching.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use super::SelectorError;
use crate::validation::names;

/// How a requirement relates a label to its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `key=value`.
    Equals,
    /// `key==value` (same meaning as `=`, kept apart so that printing round-trips).
    DoubleEquals,
    /// `key!=value`: the label is absent or has another value.
    NotEquals,
    /// `key in (a,b)`.
    In,
    /// `key notin (a,b)`: the label is absent or has none of the values.
    NotIn,
    /// `key`: the label is present.
    Exists,
    /// `!key`: the label is absent.
    DoesNotExist,
    /// `key>N`: the label is an integer greater than N.
    GreaterThan,
    /// `key<N`: the label is an integer less than N.
    LessThan,
}

/// One condition of a selector; a selector is the AND of its requirements.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and without duplicates: the apiserver treats values as a set.
    values: Vec<String>,
}

/// A parsed label selector.
///
/// `matches_nothing` is only set for an absent (`null`) `metav1.LabelSelector`, which selects
/// no object, whereas an empty one (`{}`) and the empty string select every object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    matches_nothing: bool,
}

impl Requirement {
    /// Builds a validated requirement, as `labels.NewRequirement` does. Errors carry the
    /// apiserver's field paths (`key`, `values[0][app]`).
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, String> {
        let mut errs = Vec::new();
        let key_problems = names::qualified_name(key);
        if !key_problems.is_empty() {
            errs.push(format!(
                "key: Invalid value: {key:?}: {}",
                key_problems.join("; ")
            ));
        }
        let shown = || format!("[]string{{{}}}", quoted_list(&values));
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => errs.push(format!(
                "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
                shown()
            )),
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                errs.push(format!(
                    "values: Invalid value: {}: exact-match compatibility requires one single value",
                    shown()
                ))
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => errs.push(format!(
                "values: Invalid value: {}: values set must be empty for exists and does not exist",
                shown()
            )),
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(format!(
                        "values: Invalid value: {}: for 'Gt', 'Lt' operators, exactly one value is required",
                        shown()
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(format!(
                            "values[{i}]: Invalid value: {v:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            let value_problems = names::label_value(v);
            if !value_problems.is_empty() {
                errs.push(format!(
                    "values[{i}][{key}]: Invalid value: {v:?}: {}",
                    value_problems.join("; ")
                ));
            }
        }
        if !errs.is_empty() {
            return Err(aggregate(errs));
        }
        let values: BTreeSet<String> = values.into_iter().collect();
        Ok(Requirement {
            key: key.to_string(),
            operator,
            values: values.into_iter().collect(),
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a label set satisfies this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let has = |v: &String| self.values.binary_search(v).is_ok();
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => value.is_some_and(has),
            Operator::NotIn | Operator::NotEquals => !value.is_some_and(has),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(actual), [bound]) = (value, self.values.as_slice()) else {
                    return false;
                };
                match (actual.parse::<i64>(), bound.parse::<i64>()) {
                    (Ok(a), Ok(b)) if self.operator == Operator::GreaterThan => a > b,
                    (Ok(a), Ok(b)) => a < b,
                    _ => false,
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = self.values.join(",");
        match self.operator {
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::Equals => write!(f, "{}={values}", self.key),
            Operator::DoubleEquals => write!(f, "{}=={values}", self.key),
            Operator::NotEquals => write!(f, "{}!={values}", self.key),
            Operator::GreaterThan => write!(f, "{}>{values}", self.key),
            Operator::LessThan => write!(f, "{}<{values}", self.key),
            Operator::In => write!(f, "{} in ({values})", self.key),
            Operator::NotIn => write!(f, "{} notin ({values})", self.key),
        }
    }
}

impl LabelSelector {
    /// The selector that matches every object.
    pub fn everything() -> Self {
        Self::default()
    }

    /// The selector that matches no object (an absent `metav1.LabelSelector`).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            matches_nothing: true,
        }
    }

    /// Builds a selector from requirements (ANDed), ordered by key as the apiserver orders them.
    pub fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            matches_nothing: false,
        }
    }

    /// Parses the `labelSelector` query grammar. The empty string selects everything.
    ///
    /// # Errors
    /// A [`SelectorError`] worded as the apiserver words it.
    pub fn parse(input: &str) -> Result<Self, SelectorError> {
        super::parse::parse(input).map(Self::from_requirements)
    }

    /// Converts a `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`).
    ///
    /// `null` gives [`LabelSelector::nothing`] (a missing selector selects no object, as for a
    /// DaemonSet); `{}` gives [`LabelSelector::everything`].
    ///
    /// # Errors
    /// A malformed object, an unknown operator (`"Foo" is not a valid label selector
    /// operator`) or an invalid requirement.
    pub fn from_label_selector_json(selector: &Value) -> Result<Self, SelectorError> {
        let object = match selector {
            Value::Null => return Ok(Self::nothing()),
            Value::Object(object) => object,
            other => {
                return Err(SelectorError::LabelSelectorObject(format!(
                    "a label selector must be an object, not {other}"
                )));
            }
        };
        let bad = |what: &str| SelectorError::LabelSelectorObject(what.to_string());
        let mut requirements = Vec::new();
        match object.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (key, value) in labels {
                    let value = value
                        .as_str()
                        .ok_or_else(|| bad("matchLabels values must be strings"))?;
                    requirements.push(
                        Requirement::new(key, Operator::Equals, vec![value.to_string()])
                            .map_err(SelectorError::LabelSelectorObject)?,
                    );
                }
            }
            Some(_) => return Err(bad("matchLabels must be an object")),
        }
        let expressions = match object.get("matchExpressions") {
            None | Some(Value::Null) => &Vec::new(),
            Some(Value::Array(expressions)) => expressions,
            Some(_) => return Err(bad("matchExpressions must be a list")),
        };
        for expression in expressions {
            let key = expression["key"].as_str().unwrap_or_default();
            let operator = expression["operator"].as_str().unwrap_or_default();
            let operator = match operator {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError::LabelSelectorObject(format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            };
            let values = match &expression["values"] {
                Value::Null => Vec::new(),
                Value::Array(values) => values
                    .iter()
                    .map(|v| v.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| bad("matchExpressions values must be strings"))?,
                _ => return Err(bad("matchExpressions values must be a list")),
            };
            requirements.push(
                Requirement::new(key, operator, values)
                    .map_err(SelectorError::LabelSelectorObject)?,
            );
        }
        Ok(Self::from_requirements(requirements))
    }

    /// The requirements, ordered by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether this selector selects every object.
    pub fn is_everything(&self) -> bool {
        !self.matches_nothing && self.requirements.is_empty()
    }

    /// Whether this selector selects no object at all (an absent object selector).
    pub fn is_nothing(&self) -> bool {
        self.matches_nothing
    }

    /// Whether a label set satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.matches_nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether an object's `metadata.labels` satisfy the selector (no labels = empty set).
    pub fn matches_object(&self, object: &Value) -> bool {
        self.matches(&labels_of(object))
    }
}

/// Prints the query-string form; parsing it again gives an equal selector. (The nothing
/// selector prints as the empty string, as in the apiserver, and so does not round-trip.)
impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

/// The `metadata.labels` of an object as a map; non-string values are ignored.
pub(crate) fn labels_of(object: &Value) -> BTreeMap<String, String> {
    object["metadata"]["labels"]
        .as_object()
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn quoted_list(values: &[String]) -> String {
    values
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Joins field errors as `utilerrors.NewAggregate` prints them.
fn aggregate(errs: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for e in errs {
        if !unique.contains(&e) {
            unique.push(e);
        }
    }
    if unique.len() == 1 {
        unique.remove(0)
    } else {
        format!("[{}]", unique.join(", "))
    }
}
