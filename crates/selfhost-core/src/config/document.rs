//! Splitting a YAML stream into documents, telling their kinds apart, and turning parser
//! errors into [`ConfigError`]s that point into the whole text.
//!
//! Each document is parsed on its own (first for `apiVersion`/`kind` only, then strictly as
//! that kind), so an error in a KubeletConfiguration we skip can never block the
//! ClusterConfiguration we need, and each kind gets its own list of allowed fields.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_saphyr::{MessageFormatter, UserMessageFormatter};

use super::build;
use super::error::{ConfigError, Position};
use super::wire::{Draft, DraftInit, Locator};
use super::{ApiVersion, ClusterConfig, Notice, ParsedConfig, v1beta3, v1beta4};

const KUBEADM_GROUP: &str = "kubeadm.k8s.io";
const CLUSTER_CONFIGURATION: &str = "ClusterConfiguration";
const INIT_CONFIGURATION: &str = "InitConfiguration";

/// One document of a stream.
struct Document<'a> {
    /// 1-based index among the non-empty documents.
    index: usize,
    text: &'a str,
    locator: Locator,
}

/// A line that starts a new document (`---`, possibly followed by a comment or content).
fn is_document_start(line: &str) -> bool {
    let line = line.trim_end_matches(['\r', '\n']);
    line == "---" || line.starts_with("--- ") || line.starts_with("---\t")
}

/// Whether a line carries no content: blank, a comment, a directive or a marker.
fn is_blank(line: &str) -> bool {
    let line = line.trim();
    line.is_empty()
        || line.starts_with('#')
        || line.starts_with('%')
        || line == "..."
        || line == "---"
        || line.starts_with("--- #")
}

/// Splits `text` at document markers. Documents keep their own `---` line so the parser sees
/// them as they were written; documents with no content are dropped.
fn split(text: &str) -> Vec<Document<'_>> {
    let mut chunks: Vec<(usize, usize)> = vec![(0, 0)]; // (byte offset, lines before)
    let mut offset = 0;
    for (number, line) in text.split_inclusive('\n').enumerate() {
        if number > 0 && is_document_start(line) {
            chunks.push((offset, number));
        }
        offset += line.len();
    }
    let mut documents = Vec::new();
    for (i, &(start, lines_before)) in chunks.iter().enumerate() {
        let end = chunks.get(i + 1).map_or(text.len(), |&(next, _)| next);
        let chunk = &text[start..end];
        let Some(first) = chunk.lines().position(|l| !is_blank(l)) else {
            continue;
        };
        documents.push(Document {
            index: documents.len() + 1,
            text: chunk,
            locator: Locator {
                line_offset: lines_before,
                start: Position::new(lines_before + first + 1, 1),
            },
        });
    }
    documents
}

fn options() -> serde_saphyr::Options {
    // Strict booleans: `on`/`yes` stay text, as kubeadm's own YAML reader keeps them in
    // string maps such as extraArgs; a boolean field must say true or false.
    serde_saphyr::options! { strict_booleans: true, with_snippet: false }
}

/// Words for the Rust type names the parser reports.
fn describe(ty: &str) -> &str {
    match ty {
        "bool" => "true or false",
        t if t.starts_with('i') || t.starts_with('u') => "an integer",
        t if t.starts_with('f') => "a number",
        t => t,
    }
}

/// The key whose value holds the node at `line`/`column` (1-based, within the document),
/// found by indentation. Good enough to recognise the common mistakes of block-style files.
fn enclosing_key(text: &str, line: usize, column: usize) -> Option<&str> {
    let indent_of = |l: &str| l.len() - l.trim_start().len();
    text.lines()
        .take(line.saturating_sub(1))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .find(|l| indent_of(l) + 1 < column)
        .and_then(|l| {
            let entry = l.trim_start().trim_start_matches("- ");
            entry.split_once(':').map(|(key, _)| key.trim())
        })
}

/// The most common mistake when moving between API versions: the other version's shape of
/// `extraArgs`.
fn extra_args_hint(version: Option<ApiVersion>) -> Option<&'static str> {
    match version? {
        ApiVersion::V1Beta3 => Some(
            "in kubeadm.k8s.io/v1beta3 extraArgs is a map of `flag: value` lines (the list of name/value entries is v1beta4)",
        ),
        ApiVersion::V1Beta4 => Some(
            "in kubeadm.k8s.io/v1beta4 extraArgs is a list of `- name: flag` / `value: value` entries (the map is v1beta3)",
        ),
    }
}

fn map_error(
    err: &serde_saphyr::Error,
    doc: &Document<'_>,
    kind: &str,
    version: Option<ApiVersion>,
) -> ConfigError {
    use serde_saphyr::Error;
    let locator = &doc.locator;
    let at = err
        .location()
        .map_or(locator.start, |l| locator.position(l));
    match err {
        Error::Unexpected { expected, location } => {
            let local_line = at.line.saturating_sub(locator.line_offset);
            let hint = (location.line() > 0
                && enclosing_key(doc.text, local_line, at.column) == Some("extraArgs"))
            .then(|| extra_args_hint(version))
            .flatten();
            let wanted = match *expected {
                "mapping start" => "a mapping (`key: value` lines)",
                "sequence start" => "a list (`- item` lines)",
                "string scalar" => "a single value",
                other => other,
            };
            let message = match hint {
                Some(hint) => format!("expected {wanted}; {hint}"),
                None => format!("expected {wanted}"),
            };
            ConfigError::Syntax { at, message }
        }
        Error::SerdeUnknownField {
            field, expected, ..
        } => ConfigError::UnknownField {
            at,
            kind: kind.to_string(),
            field: field.to_string(),
            allowed: expected.iter().map(ToString::to_string).collect(),
        },
        Error::SerdeMissingField { field, .. } => ConfigError::MissingField {
            at,
            kind: kind.to_string(),
            field: (*field).to_string(),
        },
        Error::InvalidScalar { ty, .. } => ConfigError::Syntax {
            at,
            message: format!("expected {}", describe(ty)),
        },
        other => {
            let message = UserMessageFormatter.format_message(other);
            // The parser's text may quote input; keep it on one line.
            let message = message
                .chars()
                .map(|c| if c.is_control() { ' ' } else { c })
                .collect();
            ConfigError::Syntax { at, message }
        }
    }
}

fn parse<T: DeserializeOwned>(
    doc: &Document<'_>,
    kind: &str,
    version: Option<ApiVersion>,
) -> Result<T, ConfigError> {
    serde_saphyr::from_str_with_options(doc.text, options())
        .map_err(|e| map_error(&e, doc, kind, version))
}

/// Just enough of a document to know what it is.
#[derive(Deserialize)]
struct TypeMeta {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
}

/// What a document is, once its apiVersion and kind are known.
enum Classified {
    Cluster(ApiVersion),
    Init(ApiVersion),
    Ignored { api_version: String, kind: String },
}

fn classify(doc: &Document<'_>) -> Result<Classified, ConfigError> {
    let meta: TypeMeta = parse(doc, "the document", None)?;
    let at = doc.locator.start;
    let missing = |missing| ConfigError::MissingTypeMeta {
        at,
        document: doc.index,
        missing,
    };
    let api_version = meta.api_version.ok_or_else(|| missing("apiVersion"))?;
    let kind = meta.kind.ok_or_else(|| missing("kind"))?;
    let (group, _) = api_version.split_once('/').unwrap_or(("", &api_version));
    if group != KUBEADM_GROUP {
        return Ok(Classified::Ignored { api_version, kind });
    }
    let (version, ignorable): (ApiVersion, &[&'static str]) = match api_version.as_str() {
        "kubeadm.k8s.io/v1beta3" => (ApiVersion::V1Beta3, &["JoinConfiguration"]),
        "kubeadm.k8s.io/v1beta4" => (
            ApiVersion::V1Beta4,
            &[
                "JoinConfiguration",
                "ResetConfiguration",
                "UpgradeConfiguration",
            ],
        ),
        _ => {
            return Err(ConfigError::UnsupportedApiVersion {
                at,
                api_version,
                kind,
            });
        }
    };
    match kind.as_str() {
        CLUSTER_CONFIGURATION => Ok(Classified::Cluster(version)),
        INIT_CONFIGURATION => Ok(Classified::Init(version)),
        k if ignorable.contains(&k) => Ok(Classified::Ignored { api_version, kind }),
        _ => Err(ConfigError::UnknownKind {
            at,
            api_version,
            kind,
            accepted: [CLUSTER_CONFIGURATION, INIT_CONFIGURATION]
                .into_iter()
                .chain(ignorable.iter().copied())
                .collect(),
        }),
    }
}

fn cluster_draft(doc: &Document<'_>, version: ApiVersion) -> Result<Draft, ConfigError> {
    Ok(match version {
        ApiVersion::V1Beta3 => {
            parse::<v1beta3::ClusterConfiguration>(doc, CLUSTER_CONFIGURATION, Some(version))?
                .into_draft(&doc.locator)
        }
        ApiVersion::V1Beta4 => {
            parse::<v1beta4::ClusterConfiguration>(doc, CLUSTER_CONFIGURATION, Some(version))?
                .into_draft(&doc.locator)
        }
    })
}

fn init_draft(doc: &Document<'_>, version: ApiVersion) -> Result<DraftInit, ConfigError> {
    Ok(match version {
        ApiVersion::V1Beta3 => {
            parse::<v1beta3::InitConfiguration>(doc, INIT_CONFIGURATION, Some(version))?
                .into_draft(&doc.locator)
        }
        ApiVersion::V1Beta4 => {
            parse::<v1beta4::InitConfiguration>(doc, INIT_CONFIGURATION, Some(version))?
                .into_draft(&doc.locator)
        }
    })
}

fn finish(
    draft: Draft,
    init: Option<DraftInit>,
    mut notices: Vec<Notice>,
) -> Result<ParsedConfig, ConfigError> {
    let api_version = draft.api_version;
    let (config, more) = build::build(draft, init).map_err(ConfigError::Invalid)?;
    notices.extend(more);
    Ok(ParsedConfig {
        config,
        api_version,
        notices,
    })
}

/// Reads a configuration file: any number of documents, of which at most one
/// ClusterConfiguration and one InitConfiguration are used.
pub(super) fn parse_stream(text: &str) -> Result<ParsedConfig, ConfigError> {
    let mut cluster: Option<(Draft, Position)> = None;
    let mut init: Option<(DraftInit, Position)> = None;
    let mut notices = Vec::new();
    for doc in split(text) {
        let at = doc.locator.start;
        let duplicate = |kind: &str, first: Position| ConfigError::DuplicateDocument {
            at,
            kind: kind.to_string(),
            first_line: first.line,
        };
        match classify(&doc)? {
            Classified::Cluster(version) => {
                if let Some((_, first)) = &cluster {
                    return Err(duplicate(CLUSTER_CONFIGURATION, *first));
                }
                cluster = Some((cluster_draft(&doc, version)?, at));
            }
            Classified::Init(version) => {
                if let Some((_, first)) = &init {
                    return Err(duplicate(INIT_CONFIGURATION, *first));
                }
                init = Some((init_draft(&doc, version)?, at));
            }
            Classified::Ignored { api_version, kind } => {
                notices.push(Notice::IgnoredDocument {
                    document: doc.index,
                    line: at.line,
                    api_version,
                    kind,
                });
            }
        }
    }
    let draft = match (cluster, &init) {
        (Some((draft, cluster_at)), Some((init, init_at))) => {
            if draft.api_version != init.api_version {
                return Err(ConfigError::MixedApiVersions {
                    at: cluster_at.max(*init_at),
                    init_version: init.api_version.to_string(),
                    cluster_version: draft.api_version.to_string(),
                });
            }
            draft
        }
        (Some((draft, _)), None) => draft,
        // kubeadm defaults the whole ClusterConfiguration when a file has only an
        // InitConfiguration.
        (None, Some((init, _))) => Draft::empty(init.api_version),
        (None, None) => {
            let found = notices
                .iter()
                .filter_map(|notice| match notice {
                    Notice::IgnoredDocument {
                        line,
                        api_version,
                        kind,
                        ..
                    } => Some(format!("{kind} {api_version} at line {line}")),
                    Notice::FeatureGateNotRendered { .. } => None,
                })
                .collect();
            return Err(ConfigError::NoConfiguration { found });
        }
    };
    finish(draft, init.map(|(init, _)| init), notices)
}

/// Reads the `ClusterConfiguration` key of the kubeadm-config ConfigMap: one document of that
/// kind and nothing else.
pub(super) fn parse_configmap(text: &str) -> Result<ParsedConfig, ConfigError> {
    let docs = split(text);
    let [doc] = docs.as_slice() else {
        return Err(ConfigError::NotAClusterConfiguration {
            found: match docs.len() {
                0 => "no document".to_string(),
                n => format!("{n} documents"),
            },
        });
    };
    match classify(doc)? {
        Classified::Cluster(version) => finish(cluster_draft(doc, version)?, None, Vec::new()),
        Classified::Init(_) => Err(ConfigError::NotAClusterConfiguration {
            found: format!("kind {INIT_CONFIGURATION}"),
        }),
        Classified::Ignored { api_version, kind } => Err(ConfigError::NotAClusterConfiguration {
            found: format!("kind {kind} ({api_version})"),
        }),
    }
}

impl ClusterConfig {
    /// Lets tests and callers see how a text splits without exposing the splitter.
    #[cfg(test)]
    pub(super) fn document_starts(text: &str) -> Vec<usize> {
        split(text).iter().map(|d| d.locator.start.line).collect()
    }
}
