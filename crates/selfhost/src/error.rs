//! How API calls fail, classified by HTTP status code first.
//!
//! kube-rs's `Status::is_not_found()` and friends compare only the `reason` string, so a 404
//! whose body lacks `"reason":"NotFound"` would not count. The engine decides on the code, and
//! uses the reason only to tell a 409 AlreadyExists (a create raced) from a 409 Conflict (a
//! stale resourceVersion: re-read and try again).

use std::time::Duration;

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

/// The message a person should see for a kube-rs error: the server's own words for API
/// errors, the innermost cause for transport errors.
pub fn describe(err: &kube::Error) -> String {
    match err {
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

    #[test]
    fn the_message_is_the_servers() {
        let err = ApiCallError::new("get DaemonSet x", api(503, "ServiceUnavailable"), 4);
        assert_eq!(
            err.to_string(),
            "get DaemonSet x: m (503 ServiceUnavailable) (after 4 attempts)"
        );
    }
}
