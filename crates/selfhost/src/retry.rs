//! Bounded retries of single API calls, with backoff, `Retry-After`, a per-attempt timeout and
//! an overall deadline. When it gives up it reports the last real error — never kubeadm's
//! "timed out waiting for the condition" after 42 minutes of silence.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::api_call::{ApiCallError, FailureKind, retry_after};

/// How many times a 403 is tried again (see [`with_retries`]).
const FORBIDDEN_RETRIES: u32 = 2;

/// How hard to try one API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Delay before the second attempt; doubles after each failure.
    pub first_delay: Duration,
    /// Longest delay between attempts (also caps a server's `Retry-After`).
    pub max_delay: Duration,
    /// Most attempts in all.
    pub max_attempts: u32,
    /// Longest any one attempt may take.
    pub attempt_timeout: Duration,
    /// Longest all attempts together may take.
    pub deadline: Duration,
}

impl Default for RetryPolicy {
    /// Enough to ride out an apiserver hand-over (a few seconds of refused connections) and
    /// a crash-restart, but short enough that a broken cluster is reported within a minute.
    fn default() -> Self {
        RetryPolicy {
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(3),
            max_attempts: 12,
            attempt_timeout: Duration::from_secs(20),
            deadline: Duration::from_secs(60),
        }
    }
}

/// Runs `op` until it succeeds, fails with an error that retrying cannot fix, or the policy's
/// attempts or deadline run out. `what` names the call in the error.
pub async fn with_retries<T, F, Fut>(
    what: &str,
    policy: &RetryPolicy,
    mut op: F,
) -> Result<T, ApiCallError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let started = Instant::now();
    let mut delay = policy.first_delay;
    let mut attempts = 0;
    let mut forbidden = 0;
    loop {
        attempts += 1;
        let failure = match tokio::time::timeout(policy.attempt_timeout, op()).await {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(err)) => {
                let kind = FailureKind::of(&err);
                let wait = retry_after(&err).unwrap_or(delay).min(policy.max_delay);
                // A kube-apiserver that has just started can answer 403 before its
                // authorization cache is loaded; behind a load balancer the next attempt
                // may reach it or another one. A real denial stays a denial: two more
                // tries, then its own message.
                let early_denial = kind == FailureKind::Forbidden && forbidden < FORBIDDEN_RETRIES;
                if early_denial {
                    forbidden += 1;
                }
                (
                    ApiCallError::new(what, err, attempts),
                    kind.is_retryable() || early_denial,
                    wait,
                )
            }
            Err(_) => (
                ApiCallError {
                    what: what.to_string(),
                    kind: FailureKind::Timeout,
                    message: format!("no answer within {:?}", policy.attempt_timeout),
                    attempts,
                    source: None,
                },
                true,
                delay,
            ),
        };
        let (error, retryable, wait) = failure;
        let out_of_time = started.elapsed() + wait >= policy.deadline;
        if !retryable || attempts >= policy.max_attempts || out_of_time {
            return Err(error);
        }
        tracing::debug!(what, attempt = attempts, error = %error.message, ?wait, "retrying");
        tokio::time::sleep(wait).await;
        delay = (delay * 2).min(policy.max_delay);
    }
}
