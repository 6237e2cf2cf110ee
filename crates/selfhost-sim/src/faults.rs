//! Fault injection: what a flaky or restarting apiserver does to its clients, on demand.
//!
//! Rules match requests by method, path, verb and resource and answer them with an error
//! status (500/503/429, with `Retry-After`), added latency, or a connection reset. Watches
//! can be dropped or forced to start with 410 Expired, and the whole server can be "down for
//! D" (connections refused, then back on the same port).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use http::Method;
use tokio_util::sync::CancellationToken;

use crate::error::ApiError;
use crate::verb::Verb;

/// Which requests a fault applies to; every field set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestMatcher {
    method: Option<Method>,
    path: Option<String>,
    path_prefix: Option<String>,
    verb: Option<Verb>,
    resource: Option<String>,
    /// Requests with this `User-Agent` never match.
    spared_agent: Option<String>,
}

impl RequestMatcher {
    /// Every request.
    pub fn any() -> Self {
        Self::default()
    }

    /// Requests for exactly this path (without query), e.g.
    /// `/apis/apps/v1/namespaces/kube-system/daemonsets/kube-apiserver`.
    pub fn path(path: &str) -> Self {
        RequestMatcher {
            path: Some(path.to_string()),
            ..Self::default()
        }
    }

    /// Requests whose path starts with this prefix.
    pub fn path_prefix(prefix: &str) -> Self {
        RequestMatcher {
            path_prefix: Some(prefix.to_string()),
            ..Self::default()
        }
    }

    /// Requests for a resource (`daemonsets`, `pods/status`), in any namespace.
    pub fn resource(resource: &str) -> Self {
        RequestMatcher {
            resource: Some(resource.to_string()),
            ..Self::default()
        }
    }

    /// Narrows to one HTTP method.
    pub fn method(mut self, method: Method) -> Self {
        self.method = Some(method);
        self
    }

    /// Narrows to one API verb (`Verb::Watch`, `Verb::Patch`, ...).
    pub fn verb(mut self, verb: Verb) -> Self {
        self.verb = Some(verb);
        self
    }

    /// Leaves the requests of one client, by its `User-Agent`, alone: faults aimed at one
    /// client of the cluster are not consumed by another.
    pub fn sparing(mut self, user_agent: &str) -> Self {
        self.spared_agent = Some(user_agent.to_string());
        self
    }

    fn matches(&self, req: &RequestFacts<'_>) -> bool {
        self.method.as_ref().is_none_or(|m| m == req.method)
            && self.path.as_deref().is_none_or(|p| p == req.path)
            && self
                .path_prefix
                .as_deref()
                .is_none_or(|p| req.path.starts_with(p))
            && self.verb.is_none_or(|v| Some(v) == req.verb)
            && self
                .resource
                .as_deref()
                .is_none_or(|r| Some(r) == req.resource)
            && self
                .spared_agent
                .as_deref()
                .is_none_or(|a| a != req.user_agent)
    }
}

/// What an injected fault does to a matching request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer with this status (500 InternalError, 503 ServiceUnavailable, 429
    /// TooManyRequests, ...) and, for 429/503, a `Retry-After` of this many seconds.
    Status {
        /// HTTP status code.
        code: u16,
        /// `Retry-After` seconds.
        retry_after: Option<u64>,
    },
    /// Serve the request after this extra delay.
    Delay(Duration),
    /// Close the connection without answering.
    ResetConnection,
}

/// Identifies an injected fault, to remove it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FaultId(u64);

struct Rule {
    id: FaultId,
    matcher: RequestMatcher,
    action: FaultAction,
    remaining: Option<u32>,
}

/// Facts about a request that rules match on.
pub(crate) struct RequestFacts<'a> {
    pub(crate) method: &'a Method,
    pub(crate) path: &'a str,
    pub(crate) verb: Option<Verb>,
    pub(crate) resource: Option<&'a str>,
    /// Its `User-Agent` (empty when it sent none).
    pub(crate) user_agent: &'a str,
}

/// What the server does with a request, as decided by the faults.
#[derive(Debug, Default)]
pub(crate) struct Decision {
    pub(crate) delay: Duration,
    pub(crate) reset: bool,
    pub(crate) error: Option<ApiError>,
}

type DownHook = Arc<dyn Fn(Duration) + Send + Sync>;

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    next_id: u64,
    forced_expiries: u32,
    watch_drop: CancellationToken,
    down: Option<DownHook>,
}

/// The fault injector of one simulated apiserver (cheap to clone; all clones share rules).
#[derive(Clone, Default)]
pub struct Faults {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("rules", &self.lock().rules.len())
            .finish()
    }
}

fn status_error(code: u16, retry_after: Option<u64>) -> ApiError {
    match code {
        429 => ApiError::too_many_requests(retry_after.unwrap_or(1)),
        503 => ApiError::service_unavailable(retry_after),
        500 => ApiError::internal("injected fault"),
        other => ApiError {
            code: other,
            reason: "InternalError".into(),
            message: format!("injected fault ({other})"),
            details: None,
            retry_after,
        },
    }
}

impl Faults {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Injects a fault for matching requests, `times` times (`None`: until removed).
    pub fn inject(
        &self,
        matcher: RequestMatcher,
        action: FaultAction,
        times: Option<u32>,
    ) -> FaultId {
        let mut s = self.lock();
        s.next_id += 1;
        let id = FaultId(s.next_id);
        s.rules.push(Rule {
            id,
            matcher,
            action,
            remaining: times,
        });
        id
    }

    /// Answers the next request with `method` on `path` with `code` (429 and 503 carry
    /// `Retry-After: 1`).
    pub fn fail_next(&self, method: Method, path: &str, code: u16) -> FaultId {
        let retry_after = matches!(code, 429 | 503).then_some(1);
        self.inject(
            RequestMatcher::path(path).method(method),
            FaultAction::Status { code, retry_after },
            Some(1),
        )
    }

    /// Removes one fault.
    pub fn remove(&self, id: FaultId) {
        self.lock().rules.retain(|r| r.id != id);
    }

    /// Removes every fault and pending forced expiry.
    pub fn clear(&self) {
        let mut s = self.lock();
        s.rules.clear();
        s.forced_expiries = 0;
    }

    /// Cuts every watch stream open now (the connection is reset mid-stream).
    pub fn drop_watches(&self) {
        let mut s = self.lock();
        s.watch_drop.cancel();
        s.watch_drop = CancellationToken::new();
    }

    /// Makes the next `n` watch requests start with an ERROR event 410 Expired, so clients
    /// must relist.
    pub fn expire_next_watches(&self, n: u32) {
        self.lock().forced_expiries += n;
    }

    /// Takes the server down for `duration`: the listener closes, connections are cut and
    /// new ones refused; then it listens on the same port again.
    pub fn down_for(&self, duration: Duration) {
        let hook = self.lock().down.clone();
        if let Some(hook) = hook {
            hook(duration);
        }
    }

    pub(crate) fn set_down_hook(&self, hook: DownHook) {
        self.lock().down = Some(hook);
    }

    pub(crate) fn take_forced_expiry(&self) -> bool {
        let mut s = self.lock();
        if s.forced_expiries > 0 {
            s.forced_expiries -= 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn watch_drop_token(&self) -> CancellationToken {
        self.lock().watch_drop.clone()
    }

    /// Decides the fate of one request, consuming counted rules.
    pub(crate) fn decide(&self, req: &RequestFacts<'_>) -> Decision {
        let mut s = self.lock();
        let mut decision = Decision::default();
        for rule in s.rules.iter_mut() {
            if rule.remaining == Some(0) || !rule.matcher.matches(req) {
                continue;
            }
            let applies = match &rule.action {
                FaultAction::Delay(d) => {
                    decision.delay += *d;
                    true
                }
                FaultAction::Status { code, retry_after }
                    if decision.error.is_none() && !decision.reset =>
                {
                    decision.error = Some(status_error(*code, *retry_after));
                    true
                }
                FaultAction::ResetConnection if decision.error.is_none() && !decision.reset => {
                    decision.reset = true;
                    true
                }
                _ => false,
            };
            if applies && let Some(n) = rule.remaining.as_mut() {
                *n -= 1;
            }
        }
        s.rules.retain(|r| r.remaining != Some(0));
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(
        method: &'a Method,
        path: &'a str,
        verb: Verb,
        resource: &'a str,
    ) -> RequestFacts<'a> {
        RequestFacts {
            method,
            path,
            verb: Some(verb),
            resource: Some(resource),
            user_agent: "",
        }
    }

    #[test]
    fn a_spared_client_neither_meets_nor_consumes_a_fault() {
        let f = Faults::default();
        f.inject(
            RequestMatcher::resource("pods").sparing("node-agent"),
            FaultAction::Status {
                code: 500,
                retry_after: None,
            },
            Some(1),
        );
        let path = "/api/v1/namespaces/kube-system/pods";
        let agent = RequestFacts {
            user_agent: "node-agent",
            ..facts(&Method::GET, path, Verb::List, "pods")
        };
        assert!(f.decide(&agent).error.is_none());
        let tool = facts(&Method::GET, path, Verb::List, "pods");
        assert_eq!(f.decide(&tool).error.map(|e| e.code), Some(500));
        assert!(f.decide(&tool).error.is_none());
    }

    #[test]
    fn counted_faults_fire_that_many_times_on_matching_requests_only() {
        let f = Faults::default();
        let path = "/apis/apps/v1/namespaces/kube-system/daemonsets/d";
        f.fail_next(Method::PATCH, path, 503);
        let get = facts(&Method::GET, path, Verb::Get, "daemonsets");
        assert!(f.decide(&get).error.is_none());
        let patch = facts(&Method::PATCH, path, Verb::Patch, "daemonsets");
        let first = f.decide(&patch).error.unwrap();
        assert_eq!((first.code, first.retry_after), (503, Some(1)));
        assert!(f.decide(&patch).error.is_none());
    }

    #[test]
    fn delays_add_up_and_resets_win_over_later_statuses() {
        let f = Faults::default();
        f.inject(
            RequestMatcher::any(),
            FaultAction::Delay(Duration::from_millis(5)),
            None,
        );
        f.inject(
            RequestMatcher::resource("pods").verb(Verb::List),
            FaultAction::ResetConnection,
            Some(1),
        );
        f.inject(
            RequestMatcher::any(),
            FaultAction::Status {
                code: 500,
                retry_after: None,
            },
            None,
        );
        let list = facts(&Method::GET, "/api/v1/pods", Verb::List, "pods");
        let d = f.decide(&list);
        assert_eq!(d.delay, Duration::from_millis(5));
        assert!(d.reset && d.error.is_none());
        let d = f.decide(&list);
        assert_eq!(d.error.map(|e| e.code), Some(500));
    }

    #[test]
    fn forced_expiries_are_counted() {
        let f = Faults::default();
        f.expire_next_watches(2);
        assert!(f.take_forced_expiry());
        assert!(f.take_forced_expiry());
        assert!(!f.take_forced_expiry());
    }
}
