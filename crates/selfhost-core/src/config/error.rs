//! Errors of reading a kubeadm configuration, each pointing at the place in the file.

use std::fmt;

/// A place in the configuration text: 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct Position {
    /// 1-based line in the whole (multi-document) text.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
}

impl Position {
    /// A position from its line and column.
    pub fn new(line: usize, column: usize) -> Self {
        Position { line, column }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// One semantic problem in an otherwise well-formed configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// Where the offending value is, when the parser could tell.
    pub at: Option<Position>,
    /// The field's path in kubeadm's words, e.g. `networking.serviceSubnet`.
    pub field: String,
    /// What is wrong and what would be right.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(at) = self.at {
            write!(f, "{at}: ")?;
        }
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// The API versions of kubeadm's configuration that selfhost reads.
pub const ACCEPTED_API_VERSIONS: [&str; 2] = ["kubeadm.k8s.io/v1beta3", "kubeadm.k8s.io/v1beta4"];

/// Why a kubeadm configuration could not be read.
///
/// Every variant that comes from the text carries the [`Position`] of the offending node, so a
/// user can go straight to it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The text is not well-formed YAML, or a value has the wrong type.
    #[error("{at}: {message}")]
    Syntax {
        /// Where the parser stopped.
        at: Position,
        /// What it expected or found.
        message: String,
    },

    /// A field that the document's kind does not have (often a typo or a field of another
    /// API version).
    #[error("{at}: unknown field `{field}` (in {kind}); allowed at this place: {}", .allowed.join(", "))]
    UnknownField {
        /// Where the field is.
        at: Position,
        /// The kind of the document it appeared in, e.g. `ClusterConfiguration`.
        kind: String,
        /// The field as written.
        field: String,
        /// Every field accepted at that place.
        allowed: Vec<String>,
    },

    /// A required field is absent.
    #[error("{at}: missing field `{field}` in {kind}")]
    MissingField {
        /// Where the object that lacks it starts.
        at: Position,
        /// The kind of the document.
        kind: String,
        /// The required field.
        field: String,
    },

    /// A document has no `apiVersion` or no `kind`.
    #[error(
        "{at}: document {document} has no `{missing}`; every kubeadm document starts with `apiVersion: kubeadm.k8s.io/v1beta4` (or v1beta3) and a `kind`"
    )]
    MissingTypeMeta {
        /// Where the document starts.
        at: Position,
        /// 1-based index of the document in the stream.
        document: usize,
        /// `apiVersion` or `kind`.
        missing: &'static str,
    },

    /// A kubeadm document in an API version selfhost does not read.
    #[error(
        "{at}: {kind} has apiVersion {api_version}, which selfhost does not read; accepted: {}. Convert older files with `kubeadm config migrate`",
        ACCEPTED_API_VERSIONS.join(", ")
    )]
    UnsupportedApiVersion {
        /// Where the document starts.
        at: Position,
        /// The apiVersion as written.
        api_version: String,
        /// The document's kind.
        kind: String,
    },

    /// A kind that kubeadm's API group does not have in that version.
    #[error("{at}: unknown kind {kind} in {api_version}; accepted kinds: {}", .accepted.join(", "))]
    UnknownKind {
        /// Where the document starts.
        at: Position,
        /// The apiVersion as written.
        api_version: String,
        /// The kind as written.
        kind: String,
        /// The kinds that version has.
        accepted: Vec<&'static str>,
    },

    /// The same kind appears twice in one file.
    #[error("{at}: a second {kind} document; the first one starts at line {first_line}. Keep one")]
    DuplicateDocument {
        /// Where the second document starts.
        at: Position,
        /// The repeated kind.
        kind: String,
        /// Where the first one starts.
        first_line: usize,
    },

    /// InitConfiguration and ClusterConfiguration use different API versions.
    #[error(
        "{at}: InitConfiguration is {init_version} but ClusterConfiguration is {cluster_version}; use one API version for both (`kubeadm config migrate` converts)"
    )]
    MixedApiVersions {
        /// Where the later of the two documents starts.
        at: Position,
        /// The InitConfiguration's apiVersion.
        init_version: String,
        /// The ClusterConfiguration's apiVersion.
        cluster_version: String,
    },

    /// The text holds no ClusterConfiguration or InitConfiguration at all.
    #[error(
        "no ClusterConfiguration or InitConfiguration document found{}; expected a document with `apiVersion: kubeadm.k8s.io/v1beta4` (or v1beta3) and `kind: ClusterConfiguration`",
        if .found.is_empty() { String::new() } else { format!(" (found only: {})", .found.join(", ")) }
    )]
    NoConfiguration {
        /// The documents of other kinds that were seen, e.g. `Pod v1 at line 1`.
        found: Vec<String>,
    },

    /// The `ClusterConfiguration` key of the `kubeadm-config` ConfigMap holds something else.
    #[error(
        "the kubeadm-config ConfigMap's ClusterConfiguration holds {found}; expected exactly one ClusterConfiguration document"
    )]
    NotAClusterConfiguration {
        /// What was found instead, e.g. `2 documents` or `kind InitConfiguration`.
        found: String,
    },

    /// The configuration is well-formed but has values kubeadm (or Kubernetes) would refuse.
    #[error("invalid configuration:\n{}", .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Invalid(Vec<Problem>),
}

impl ConfigError {
    /// Where in the text the error is, if it is tied to one place.
    pub fn position(&self) -> Option<Position> {
        match self {
            ConfigError::Syntax { at, .. }
            | ConfigError::UnknownField { at, .. }
            | ConfigError::MissingField { at, .. }
            | ConfigError::MissingTypeMeta { at, .. }
            | ConfigError::UnsupportedApiVersion { at, .. }
            | ConfigError::UnknownKind { at, .. }
            | ConfigError::DuplicateDocument { at, .. }
            | ConfigError::MixedApiVersions { at, .. } => Some(*at),
            ConfigError::Invalid(problems) => problems.iter().find_map(|p| p.at),
            ConfigError::NoConfiguration { .. } | ConfigError::NotAClusterConfiguration { .. } => {
                None
            }
        }
    }
}
