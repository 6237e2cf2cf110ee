//! Label and field selectors, as the apiserver parses, validates and matches them.
//!
//! - [`LabelSelector`]: the `labelSelector` query grammar (`a=b`, `a==b`, `a!=b`,
//!   `a in (x,y)`, `a notin (x)`, `a`, `!a`, `a>1`, `a<1`, comma = AND) and the
//!   `metav1.LabelSelector` object form used by DaemonSets.
//! - [`FieldSelector`]: the `fieldSelector` query grammar (`f=v`, `f==v`, `f!=v`) over the
//!   fields each kind makes selectable.

mod field;
mod label;
mod parse;
mod requirement;

pub use field::{FieldRequirement, FieldSelector, selectable_fields};
pub use label::LabelSelector;
pub use requirement::{Operator, Requirement};

use crate::error::ApiError;

/// Why a selector was refused. The `Display` text is the apiserver's own sentence, which
/// clients show to users.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The label selector string does not follow the grammar, e.g.
    /// `found ')', expected: !, identifier, or 'end of string'`.
    #[error("{0}")]
    LabelSyntax(String),
    /// A requirement is well-formed but invalid (bad key or value, wrong value count), e.g.
    /// `unable to parse requirement: <nil>: Invalid value: "a@b": name part must consist ...`.
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// A `metav1.LabelSelector` object is invalid, e.g. `"Foo" is not a valid label selector
    /// operator`, or one of its requirements is.
    #[error("{0}")]
    LabelSelectorObject(String),
    /// A field selector term has no operator: `invalid selector: 'a'; can't understand 'a'`.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldSyntax {
        /// The whole selector as sent.
        selector: String,
        /// The term that could not be understood.
        term: String,
    },
    /// A field selector value has a bad escape or an unescaped `,`/`=`.
    #[error("invalid field selector: {0}")]
    FieldValue(String),
    /// The kind does not make this field selectable.
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

impl SelectorError {
    /// The 400 BadRequest the apiserver answers a list or watch with a bad selector.
    pub fn to_api_error(&self) -> ApiError {
        ApiError::bad_request(self.to_string())
    }
}

#[cfg(test)]
mod tests;
