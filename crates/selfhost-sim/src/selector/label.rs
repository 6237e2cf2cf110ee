//! Label selectors: the string grammar of the `labelSelector` query parameter and the
//! `metav1.LabelSelector` object, with the apiserver's parsing, validation and matching.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use super::SelectorError;
use super::requirement::{Operator, Requirement};

/// A parsed label selector.
///
/// `matches_nothing` is only set for an absent (`null`) `metav1.LabelSelector`, which selects
/// no object, whereas an empty one (`{}`) and the empty string select every object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    matches_nothing: bool,
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
        requirements.sort_by(|a, b| a.key().cmp(b.key()));
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
