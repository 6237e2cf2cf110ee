//! The name and label syntax rules of the apiserver, with its exact messages.
//!
//! Each check returns the list of problems (empty when the value is valid), worded as
//! `k8s.io/apimachinery/pkg/util/validation` words them, because clients and users see those
//! sentences verbatim in 422 and 400 responses.

/// Longest DNS-1123 label (namespace names, label name parts).
pub const DNS1123_LABEL_MAX_LEN: usize = 63;
/// Longest DNS-1123 subdomain (most object names, label key prefixes).
pub const DNS1123_SUBDOMAIN_MAX_LEN: usize = 253;
/// Longest label value and label-key name part.
pub const LABEL_VALUE_MAX_LEN: usize = 63;

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// `must be no more than N characters`.
pub fn max_len_error(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// The apiserver's regex error sentence: the rule, examples, and the regex itself.
fn regex_error(rule: &str, regex: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}', ")).collect();
    format!(
        "{rule} (e.g. {}regex used for validation is '{regex}')",
        examples.join(" or ")
    )
}

fn dns1123_subdomain_fmt() -> String {
    format!("{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*")
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, without a regex engine.
fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns1123_label_syntax(s: &str) -> bool {
    let bytes = s.as_bytes();
    let lower_alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && bytes.iter().all(|b| lower_alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

/// Problems with `value` as a DNS-1123 label (namespace names).
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LEN {
        errs.push(max_len_error(DNS1123_LABEL_MAX_LEN));
    }
    if !is_dns1123_label_syntax(value) {
        errs.push(regex_error(
            DNS1123_LABEL_ERR,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// Problems with `value` as a DNS-1123 subdomain (most object names).
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LEN {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LEN));
    }
    if !value.split('.').all(is_dns1123_label_syntax) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            &dns1123_subdomain_fmt(),
            &["example.com"],
        ));
    }
    errs
}

/// Problems with `value` as a qualified name: a label or annotation key such as
/// `app.kubernetes.io/name` (optional DNS subdomain prefix, then a name part of at most 63).
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_VALUE_MAX_LEN {
        errs.push(format!("name part {}", max_len_error(LABEL_VALUE_MAX_LEN)));
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Problems with `value` as a label value (may be empty).
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LEN {
        errs.push(max_len_error(LABEL_VALUE_MAX_LEN));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            &format!("({QUALIFIED_NAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// Problems with `name` as an object name of a kind whose names are DNS subdomains. With
/// `prefix` (a `generateName`) a trailing `-` is allowed, as the apiserver masks it.
pub fn object_name_subdomain(name: &str, prefix: bool) -> Vec<String> {
    dns1123_subdomain(mask_trailing_dash(name, prefix))
}

/// Like [`object_name_subdomain`] for kinds whose names are DNS labels (namespaces).
pub fn object_name_label(name: &str, prefix: bool) -> Vec<String> {
    dns1123_label(mask_trailing_dash(name, prefix))
}

/// Like [`object_name_subdomain`] for RBAC kinds, whose names are any path segment
/// (`system:basic-user` is valid): not `.` or `..`, and no `/` or `%`.
pub fn object_name_path_segment(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"]
        .iter()
        .filter(|bad| name.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

fn mask_trailing_dash(name: &str, prefix: bool) -> &str {
    // A generateName like "kube-proxy-" is valid: the random suffix completes it.
    if prefix && name.len() > 1 {
        name.strip_suffix('-')
            .map_or(name, |s| if s.is_empty() { name } else { s })
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_follow_rfc_1123() {
        let cases: &[(&str, bool)] = &[
            ("kube-apiserver", true),
            ("self-hosted-kube-apiserver.v2", true),
            ("a", true),
            ("Kube", false),
            ("-lead", false),
            ("trail-", false),
            ("under_score", false),
            ("", false),
        ];
        for (name, ok) in cases {
            assert_eq!(dns1123_subdomain(name).is_empty(), *ok, "{name:?}");
        }
        assert_eq!(dns1123_subdomain(&"a".repeat(254))[0], max_len_error(253));
        assert!(dns1123_label("kube.system")[0].starts_with("a lowercase RFC 1123 label"));
        assert!(object_name_subdomain("kube-proxy-", true).is_empty());
        assert!(!object_name_subdomain("kube-proxy-", false).is_empty());
    }

    #[test]
    fn messages_are_the_apiservers() {
        assert_eq!(
            dns1123_subdomain("Foo")[0],
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert_eq!(
            label_value("a b")[0],
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
    }

    #[test]
    fn label_keys_are_qualified_names() {
        assert!(qualified_name("app.kubernetes.io/name").is_empty());
        assert!(qualified_name("k8s-app").is_empty());
        assert_eq!(qualified_name("/x"), vec!["prefix part must be non-empty"]);
        assert!(qualified_name("Example.com/x")[0].starts_with("prefix part a lowercase"));
        assert_eq!(qualified_name("").len(), 2, "empty and not matching");
        assert!(qualified_name("a/b/c")[0].starts_with("a qualified name must consist"));
        assert!(qualified_name(&"x".repeat(64))[0].contains("no more than 63"));
        assert!(label_value("").is_empty());
        assert!(label_value("v1.33.2").is_empty());
        assert!(!label_value("-x").is_empty());
    }
}
