//! Requirements of a label selector: one condition on one label, validated as
//! `labels.NewRequirement` validates it and matched against a label set.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::names;

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
