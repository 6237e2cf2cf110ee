//! How API calls fail, classified by HTTP status code first.
//!
//! kube-rs's `Status::is_not_found()` and friends compare only the `reason` string, so a 404
//! whose body lacks `"reason":"NotFound"` would not count. The engine decides on the code, and
//! uses the reason only to tell a 409 AlreadyExists (a create raced) from a 409 Conflict (a
//! stale resourceVersion: re-read and try again).

use std::time::Duration;

use crate::permission::{Permission, RBAC_MANIFEST, UPGRADER};

/// What kind of failure an API call met, as far as the engine's decisions go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// 400.
    BadRequest,
    /// 401: the credentials were refused.
    Unauthorized,
    /// 403: the credentials lack a permission.
    Forbidden,
    /// 404.
    NotFound,
    /// 409 AlreadyExists: a create raced another.
    AlreadyExists,
    /// 409 Conflict: the object changed since it was read.
    Conflict,
    /// 410: a watch or list position is too old.
    Gone,
    /// 422: the object was refused by validation.
    Invalid,
    /// 429: the server asks us to slow down.
    TooManyRequests,
    /// 500 and other 5xx except 503/504.
    ServerError,
    /// 503/504: the server is (for now) not able to serve.
    Unavailable,
    /// No HTTP answer: connection refused or reset, TLS failure, DNS.
    Transport,
    /// No answer in time.
    Timeout,
    /// An answer that is not what the API promises (malformed JSON, wrong kind).
    Malformed,
    /// Anything else (a bug on our side, a request that could not be built).
    Other,
}

impl FailureKind {
    /// Classifies a kube-rs error.
    pub fn of(err: &kube::Error) -> FailureKind {
        match err {
            kube::Error::Api(status) => match status.code {
                400 => FailureKind::BadRequest,
                401 => FailureKind::Unauthorized,
                403 => FailureKind::Forbidden,
                404 => FailureKind::NotFound,
                409 if status.reason == "AlreadyExists" => FailureKind::AlreadyExists,
                409 => FailureKind::Conflict,
                410 => FailureKind::Gone,
                422 => FailureKind::Invalid,
                429 => FailureKind::TooManyRequests,
                503 | 504 => FailureKind::Unavailable,
                500..=599 => FailureKind::ServerError,
                _ => FailureKind::Other,
            },
            kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => {
                if too_large(err) {
                    // Asking again brings the same flood.
                    FailureKind::Malformed
                } else if err.to_string().contains("timed out")
                    || err.to_string().contains("Elapsed")
                {
                    FailureKind::Timeout
                } else {
                    FailureKind::Transport
                }
            }
            kube::Error::RustlsTls(_) | kube::Error::Auth(_) => FailureKind::Transport,
            kube::Error::SerdeError(_)
            | kube::Error::FromUtf8(_)
            | kube::Error::LinesCodecMaxLineLengthExceeded => FailureKind::Malformed,
            _ => FailureKind::Other,
        }
    }

    /// Whether trying the same call again may succeed. A 409 Conflict is not: the caller must
    /// re-read the object first.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            FailureKind::TooManyRequests
                | FailureKind::ServerError
                | FailureKind::Unavailable
                | FailureKind::Transport
                | FailureKind::Timeout
        )
    }
}

/// Whether the answer was cut off at [`crate::client::MAX_RESPONSE_BYTES`].
fn too_large(err: &kube::Error) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cause {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// The `Retry-After` the server asked for, if any.
pub fn retry_after(err: &kube::Error) -> Option<Duration> {
    match err {
        kube::Error::Api(status) => status
            .details
            .as_ref()
            .map(|d| d.retry_after_seconds)
            .filter(|s| *s > 0)
            .map(|s| Duration::from_secs(u64::from(s))),
        _ => None,
    }
}

/// The message a person should see for a kube-rs error: for a 403, the permission that is
/// missing and how to grant it; the server's own words for other API errors; the innermost
/// cause for transport errors.
pub fn describe(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if status.code == 403 => forbidden_message(status),
        kube::Error::Api(status) if !status.message.is_empty() => {
            format!("{} ({} {})", status.message, status.code, status.reason)
        }
        kube::Error::Api(status) => format!("HTTP {} {}", status.code, status.reason),
        other if too_large(other) => format!(
            "the answer was larger than {} MiB, far more than any request of selfhost needs",
            crate::client::MAX_RESPONSE_BYTES / (1024 * 1024)
        ),
        other => {
            let mut cause: &dyn std::error::Error = other;
            let mut text = other.to_string();
            while let Some(next) = cause.source() {
                text = next.to_string();
                cause = next;
            }
            text
        }
    }
}

/// The message for a watch that failed: the API error in [`describe`]'s words (so a 403 names
/// the missing permission), prefixed by what the watch was doing.
pub fn describe_watch(err: &kube::runtime::watcher::Error) -> String {
    use kube::runtime::watcher::Error as W;
    match err {
        W::InitialListFailed(e) => format!("cannot list: {}", describe(e)),
        W::WatchStartFailed(e) => format!("cannot watch: {}", describe(e)),
        W::WatchFailed(e) => format!("the watch failed: {}", describe(e)),
        W::WatchError(status) => format!(
            "the watch failed: {}",
            describe(&kube::Error::Api(status.clone()))
        ),
        other => other.to_string(),
    }
}

/// The permission a 403 says is missing, read from the apiserver's wording (`... User "u"
/// cannot update resource "daemonsets" in API group "apps" in the namespace "kube-system"`, or
/// `... cannot get path "/readyz"`) and the object name in its details; with the user denied.
pub fn denied_permission(status: &kube::core::Status) -> Option<(Permission, String)> {
    let message = status.message.as_str();
    let after_user = &message[message.find("User \"")? + "User \"".len()..];
    let (user, rest) = after_user.split_once("\" cannot ")?;
    let (verb, rest) = rest.split_once(' ')?;
    let quoted = |text: &str, prefix: &str| -> Option<(String, usize)> {
        let start = text.find(prefix)? + prefix.len();
        let len = text[start..].find('"')?;
        Some((text[start..start + len].to_string(), start + len + 1))
    };
    if rest.starts_with("path ") {
        let (path, _) = quoted(rest, "path \"")?;
        return Some((Permission::path(verb, &path), user.to_string()));
    }
    let (resource, end) = quoted(rest, "resource \"")?;
    let rest = &rest[end..];
    let (group, end) = quoted(rest, " in API group \"")?;
    let namespace = quoted(&rest[end..], " in the namespace \"").map(|(ns, _)| ns);
    let name = status
        .details
        .as_ref()
        .map(|d| d.name.clone())
        .filter(|n| !n.is_empty());
    let permission = Permission {
        verb: verb.to_string(),
        group,
        resource,
        namespace,
        name,
    };
    Some((permission, user.to_string()))
}

/// `forbidden: needs <verb> on <resource> [in namespace <ns>]` and how to grant it, for a 403.
fn forbidden_message(status: &kube::core::Status) -> String {
    let fix = format!(
        "grant it: kubectl apply -f {RBAC_MANIFEST}, then run selfhost as the service account \
         kube-system/{UPGRADER} (or bind your user to its roles)"
    );
    match denied_permission(status) {
        Some((permission, user)) => {
            format!("forbidden: needs {permission} (denied to user {user:?}); {fix}")
        }
        None if status.message.is_empty() => format!("forbidden (403 Forbidden); {fix}"),
        None => format!("forbidden: {} (403 Forbidden); {fix}", status.message),
    }
}

/// An API call that failed for good, after the retries it was allowed.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {message}{}", attempts_note(*.attempts))]
pub struct ApiCallError {
    /// What the call was for, e.g. `update DaemonSet kube-system/self-hosted-kube-apiserver`.
    pub what: String,
    /// How it failed the last time.
    pub kind: FailureKind,
    /// The last real error, in the server's words.
    pub message: String,
    /// How many times it was tried.
    pub attempts: u32,
    /// The last error itself.
    #[source]
    pub source: Option<kube::Error>,
}

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

impl ApiCallError {
    /// Wraps a single failure.
    pub fn new(what: impl Into<String>, err: kube::Error, attempts: u32) -> Self {
        ApiCallError {
            what: what.into(),
            kind: FailureKind::of(&err),
            message: describe(&err),
            attempts,
            source: Some(err),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            status: None,
            code,
            message: "m".into(),
            metadata: None,
            reason: reason.into(),
            details: None,
        }))
    }

    #[test]
    fn classification_goes_by_code_then_reason() {
        let rows = [
            (404, "", FailureKind::NotFound),
            (404, "NotFound", FailureKind::NotFound),
            (409, "AlreadyExists", FailureKind::AlreadyExists),
            (409, "Conflict", FailureKind::Conflict),
            (409, "", FailureKind::Conflict),
            (410, "Expired", FailureKind::Gone),
            (422, "Invalid", FailureKind::Invalid),
            (429, "TooManyRequests", FailureKind::TooManyRequests),
            (500, "InternalError", FailureKind::ServerError),
            (503, "ServiceUnavailable", FailureKind::Unavailable),
            (504, "Timeout", FailureKind::Unavailable),
            (403, "Forbidden", FailureKind::Forbidden),
        ];
        for (code, reason, want) in rows {
            assert_eq!(FailureKind::of(&api(code, reason)), want, "{code} {reason}");
        }
    }

    #[test]
    fn only_transient_failures_are_retried() {
        let retryable = [
            FailureKind::TooManyRequests,
            FailureKind::ServerError,
            FailureKind::Unavailable,
            FailureKind::Transport,
            FailureKind::Timeout,
        ];
        for kind in retryable {
            assert!(kind.is_retryable(), "{kind:?}");
        }
        for kind in [
            FailureKind::Conflict,
            FailureKind::NotFound,
            FailureKind::Invalid,
            FailureKind::Forbidden,
            FailureKind::Malformed,
        ] {
            assert!(!kind.is_retryable(), "{kind:?}");
        }
    }

    fn forbidden(message: &str, name: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            status: None,
            code: 403,
            message: message.into(),
            metadata: None,
            reason: "Forbidden".into(),
            details: Some(kube::core::response::StatusDetails {
                name: name.into(),
                group: String::new(),
                kind: String::new(),
                uid: String::new(),
                causes: Vec::new(),
                retry_after_seconds: 0,
            }),
        }))
    }

    #[test]
    fn a_denial_names_the_missing_permission_and_the_fix() {
        let user = "system:serviceaccount:kube-system:selfhost-viewer";
        let rows = [
            (
                format!(
                    r#"daemonsets.apps "self-hosted-kube-apiserver" is forbidden: User "{user}" cannot update resource "daemonsets" in API group "apps" in the namespace "kube-system""#
                ),
                "self-hosted-kube-apiserver",
                r#"forbidden: needs update on daemonsets.apps "self-hosted-kube-apiserver" in namespace kube-system"#,
            ),
            (
                format!(
                    r#"nodes is forbidden: User "{user}" cannot list resource "nodes" in API group "" at the cluster scope"#
                ),
                "",
                "forbidden: needs list on nodes (denied",
            ),
            (
                format!(
                    r#"pods is forbidden: User "{user}" cannot delete resource "pods" in API group "" in the namespace "kube-system""#
                ),
                "",
                "forbidden: needs delete on pods in namespace kube-system (denied",
            ),
            (
                format!(r#"forbidden: User "{user}" cannot get path "/readyz""#),
                "",
                "forbidden: needs get on /readyz (denied",
            ),
            (
                "the request is not allowed while the server starts".to_string(),
                "",
                "forbidden: the request is not allowed while the server starts (403 Forbidden); grant it",
            ),
        ];
        for (message, name, want) in rows {
            let text = describe(&forbidden(&message, name));
            assert!(text.starts_with(want), "{text}");
            assert!(text.contains("kubectl apply -f deploy/rbac.yaml"), "{text}");
        }
        let err = ApiCallError::new(
            "delete Pod kube-system/p",
            forbidden(
                &format!(
                    r#"pods "p" is forbidden: User "{user}" cannot delete resource "pods" in API group "" in the namespace "kube-system""#
                ),
                "p",
            ),
            3,
        );
        assert_eq!(err.kind, FailureKind::Forbidden);
        assert!(
            err.to_string().starts_with(&format!(
                r#"delete Pod kube-system/p: forbidden: needs delete on pods "p" in namespace kube-system (denied to user "{user}")"#
            )),
            "{err}"
        );
    }

    #[test]
    fn a_denied_watch_names_the_missing_permission() {
        use kube::runtime::watcher::Error as W;
        let denied = || {
            forbidden(
                r#"pods is forbidden: User "u" cannot list resource "pods" in API group "" in the namespace "kube-system""#,
                "",
            )
        };
        let text = describe_watch(&W::InitialListFailed(denied()));
        assert!(
            text.starts_with(
                r#"cannot list: forbidden: needs list on pods in namespace kube-system (denied to user "u"); grant it"#
            ),
            "{text}"
        );
        let kube::Error::Api(status) = denied() else {
            unreachable!("built as an API error")
        };
        assert!(describe_watch(&W::WatchError(status)).contains("needs list on pods"));
        assert!(describe_watch(&W::NoResourceVersion).contains("resourceVersion"));
    }

    #[test]
    fn the_message_is_the_servers() {
        let err = ApiCallError::new("get DaemonSet x", api(503, "ServiceUnavailable"), 4);
        assert_eq!(
            err.to_string(),
            "get DaemonSet x: m (503 ServiceUnavailable) (after 4 attempts)"
        );
    }
}
