//! Request counters of the simulated apiserver, for tests that bound how many API calls an
//! operation makes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

/// Requests served, counted by verb and resource.
///
/// Resource requests count under their API verb (`get`, `list`, `watch`, `create`,
/// `update`, `patch`, `delete`, `deletecollection`) and resource (`daemonsets`,
/// `pods/status`); other paths count under the lower-case HTTP method and the path
/// (`get` `/readyz`).
#[derive(Clone, Default)]
pub struct Metrics {
    counts: Arc<Mutex<BTreeMap<(String, String), u64>>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("total", &self.total())
            .finish()
    }
}

impl Metrics {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<(String, String), u64>> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn record(&self, verb: &str, resource: &str) {
        *self
            .lock()
            .entry((verb.to_string(), resource.to_string()))
            .or_default() += 1;
    }

    /// Requests with this verb on this resource so far.
    pub fn requests(&self, verb: &str, resource: &str) -> u64 {
        self.lock()
            .get(&(verb.to_string(), resource.to_string()))
            .copied()
            .unwrap_or(0)
    }

    /// Requests on this resource, any verb.
    pub fn requests_for(&self, resource: &str) -> u64 {
        self.lock()
            .iter()
            .filter(|((_, r), _)| r == resource)
            .map(|(_, n)| n)
            .sum()
    }

    /// Every counter: `(verb, resource) → count`.
    pub fn snapshot(&self) -> BTreeMap<(String, String), u64> {
        self.lock().clone()
    }

    /// All requests counted.
    pub fn total(&self) -> u64 {
        self.lock().values().sum()
    }

    /// Sets every counter back to zero.
    pub fn reset(&self) {
        self.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_verb_and_resource() {
        let m = Metrics::default();
        m.record("get", "pods");
        m.record("get", "pods");
        m.record("patch", "daemonsets");
        assert_eq!(m.requests("get", "pods"), 2);
        assert_eq!(m.requests("list", "pods"), 0);
        assert_eq!(m.requests_for("daemonsets"), 1);
        assert_eq!(m.total(), 3);
        m.reset();
        assert_eq!(m.total(), 0);
    }
}
