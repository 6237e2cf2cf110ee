//! Request counters of the simulated apiserver, for tests that bound how many API calls an
//! operation makes, and for telling one client's requests from another's by user agent.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Requests served, counted by verb and resource.
///
/// Resource requests count under their API verb (`get`, `list`, `watch`, `create`,
/// `update`, `patch`, `delete`, `deletecollection`) and resource (`daemonsets`,
/// `pods/status`); other paths count under the lower-case HTTP method and the path
/// (`get` `/readyz`).
///
/// Requests are also counted by the client's `User-Agent` header (the empty string when it
/// sent none), so that a demo can tell its prober's requests from the tool's.
#[derive(Clone, Default)]
pub struct Metrics {
    counts: Arc<Mutex<Counts>>,
}

#[derive(Default)]
struct Counts {
    by_request: BTreeMap<(String, String), u64>,
    by_agent: BTreeMap<String, u64>,
    by_agent_request: BTreeMap<(String, String, String), u64>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("total", &self.total())
            .finish()
    }
}

impl Metrics {
    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn record(&self, verb: &str, resource: &str, user_agent: &str) {
        let mut counts = self.lock();
        *counts
            .by_request
            .entry((verb.to_string(), resource.to_string()))
            .or_default() += 1;
        *counts.by_agent.entry(user_agent.to_string()).or_default() += 1;
        *counts
            .by_agent_request
            .entry((
                user_agent.to_string(),
                verb.to_string(),
                resource.to_string(),
            ))
            .or_default() += 1;
    }

    /// Requests sent with this `User-Agent` (`""`: requests without one).
    pub fn requests_from(&self, user_agent: &str) -> u64 {
        self.lock().by_agent.get(user_agent).copied().unwrap_or(0)
    }

    /// Requests with this verb on this resource so far.
    pub fn requests(&self, verb: &str, resource: &str) -> u64 {
        self.lock()
            .by_request
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Requests on this resource, any verb.
    pub fn requests_for(&self, resource: &str) -> u64 {
        self.lock()
            .by_request
            .iter()
            .filter(|((_, r), _)| r == resource)
            .map(|(_, n)| n)
            .sum()
    }

    /// Every counter: `(verb, resource) → count`.
    pub fn snapshot(&self) -> BTreeMap<(String, String), u64> {
        self.lock().by_request.clone()
    }

    /// Every counter of the requests not sent with this `User-Agent`: `(verb, resource) →
    /// count`.
    pub fn snapshot_sparing(&self, user_agent: &str) -> BTreeMap<(String, String), u64> {
        let mut out = BTreeMap::new();
        for ((agent, verb, resource), n) in &self.lock().by_agent_request {
            if agent != user_agent {
                *out.entry((verb.clone(), resource.clone())).or_default() += n;
            }
        }
        out
    }

    /// All requests counted.
    pub fn total(&self) -> u64 {
        self.lock().by_request.values().sum()
    }

    /// Sets every counter back to zero.
    pub fn reset(&self) {
        *self.lock() = Counts::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_verb_and_resource() {
        let m = Metrics::default();
        m.record("get", "pods", "kubectl/v1.33.1");
        m.record("get", "pods", "");
        m.record("patch", "daemonsets", "kubectl/v1.33.1");
        assert_eq!(m.requests("get", "pods"), 2);
        assert_eq!(m.requests_from("kubectl/v1.33.1"), 2);
        assert_eq!(m.requests_from(""), 1);
        assert_eq!(m.requests_from("other"), 0);
        assert_eq!(m.requests("list", "pods"), 0);
        assert_eq!(m.requests_for("daemonsets"), 1);
        assert_eq!(m.total(), 3);
        assert_eq!(
            m.snapshot_sparing("kubectl/v1.33.1"),
            BTreeMap::from([(("get".to_string(), "pods".to_string()), 1)])
        );
        m.reset();
        assert_eq!(m.total(), 0);
        assert_eq!(m.requests_from(""), 0);
    }
}
