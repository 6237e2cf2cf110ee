//! Non-resource endpoints: `/version` and the health checks `/healthz`, `/livez`, `/readyz`
//! with their `?verbose` listing, `?exclude=` and per-check paths.

use std::collections::BTreeSet;
use std::sync::RwLock;

use axum::response::Response;
use serde_json::json;

use super::query::Query;
use super::respond;

/// Checks every health endpoint lists (the apiserver's own names).
const LIVEZ_CHECKS: &[&str] = &[
    "ping",
    "log",
    "etcd",
    "poststarthook/start-apiserver-admission-initializer",
    "poststarthook/generic-apiserver-start-informers",
    "poststarthook/priority-and-fairness-config-consumer",
    "poststarthook/storage-object-count-tracker-hook",
    "poststarthook/start-system-namespaces-controller",
    "poststarthook/bootstrap-controller",
    "poststarthook/start-kube-aggregator-informers",
    "poststarthook/apiservice-registration-controller",
    "poststarthook/apiservice-discovery-controller",
    "autoregister-completion",
];

/// Extra checks only readiness has.
const READYZ_ONLY: &[&str] = &["etcd-readiness", "informer-sync", "shutdown"];

/// The version and health state a caller controls (the simulated control plane decides
/// them; for now tests set them directly).
#[derive(Debug)]
pub(crate) struct Control {
    git_version: RwLock<String>,
    failing: RwLock<BTreeSet<String>>,
}

impl Control {
    pub(crate) fn new(git_version: &str) -> Self {
        Control {
            git_version: RwLock::new(git_version.to_string()),
            failing: RwLock::new(BTreeSet::new()),
        }
    }

    pub(crate) fn set_version(&self, git_version: &str) {
        *self.git_version.write().unwrap_or_else(|e| e.into_inner()) = git_version.to_string();
    }

    pub(crate) fn git_version(&self) -> String {
        self.git_version
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn set_check_failing(&self, check: &str, failing: bool) {
        let mut f = self.failing.write().unwrap_or_else(|e| e.into_inner());
        if failing {
            f.insert(check.to_string());
        } else {
            f.remove(check);
        }
    }

    fn is_failing(&self, check: &str) -> bool {
        self.failing
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .contains(check)
    }
}

/// The `/version` document.
pub(crate) fn version(control: &Control) -> Response {
    let git_version = control.git_version();
    let mut parts = git_version.trim_start_matches('v').split('.');
    let major = parts.next().unwrap_or("").to_string();
    let minor = parts.next().unwrap_or("").to_string();
    respond::json(
        200,
        &json!({
            "major": major,
            "minor": minor,
            "gitVersion": git_version,
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2025-01-01T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
    )
}

/// Which health endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probe {
    Healthz,
    Livez,
    Readyz,
}

impl Probe {
    fn name(self) -> &'static str {
        match self {
            Probe::Healthz => "healthz",
            Probe::Livez => "livez",
            Probe::Readyz => "readyz",
        }
    }

    fn checks(self) -> Vec<&'static str> {
        let mut checks = LIVEZ_CHECKS.to_vec();
        if self == Probe::Readyz {
            checks.extend(READYZ_ONLY);
        }
        checks
    }
}

/// A health endpoint, or one of its checks (`/readyz/etcd`).
pub(crate) fn health(
    control: &Control,
    probe: Probe,
    check: Option<&str>,
    query: &Query,
) -> Response {
    if let Some(check) = check {
        if !probe.checks().contains(&check) {
            return respond::text(404, "404 page not found\n".into());
        }
        return if control.is_failing(check) {
            respond::text(
                500,
                format!("internal server error: {check} check failed\n"),
            )
        } else {
            respond::text(200, "ok".into())
        };
    }
    let excluded: Vec<&str> = query
        .get("exclude")
        .map(|e| e.split(',').collect())
        .unwrap_or_default();
    let mut lines = String::new();
    let mut failed = false;
    for c in probe.checks().into_iter().filter(|c| !excluded.contains(c)) {
        if control.is_failing(c) {
            failed = true;
            lines.push_str(&format!("[-]{c} failed: reason withheld\n"));
        } else {
            lines.push_str(&format!("[+]{c} ok\n"));
        }
    }
    for e in excluded.iter().filter(|e| !e.is_empty()) {
        lines.push_str(&format!("[+]{e} excluded: ok\n"));
    }
    let name = probe.name();
    if failed {
        return respond::text(500, format!("{lines}{name} check failed\n"));
    }
    if query.get("verbose").is_some() {
        return respond::text(200, format!("{lines}{name} check passed\n"));
    }
    respond::text(200, "ok".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn body(r: Response) -> (u16, String) {
        let code = r.status().as_u16();
        let bytes = r.into_body().collect().await.unwrap().to_bytes();
        (code, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn readyz_lists_checks_when_verbose_and_fails_with_500() {
        let c = Control::new("v1.33.2");
        let (code, text) = body(health(&c, Probe::Readyz, None, &Query::parse(""))).await;
        assert_eq!((code, text.as_str()), (200, "ok"));
        let (code, text) = body(health(&c, Probe::Readyz, None, &Query::parse("verbose"))).await;
        assert_eq!(code, 200);
        assert!(text.starts_with("[+]ping ok\n"), "{text}");
        assert!(text.contains("[+]shutdown ok\n"));
        assert!(text.ends_with("readyz check passed\n"));
        c.set_check_failing("etcd", true);
        let (code, text) = body(health(&c, Probe::Livez, None, &Query::parse(""))).await;
        assert_eq!(code, 500);
        assert!(text.contains("[-]etcd failed: reason withheld\n"));
        assert!(text.ends_with("livez check failed\n"));
        let (code, _) = body(health(
            &c,
            Probe::Readyz,
            None,
            &Query::parse("exclude=etcd"),
        ))
        .await;
        assert_eq!(code, 200);
        let (code, _) = body(health(&c, Probe::Readyz, Some("etcd"), &Query::parse(""))).await;
        assert_eq!(code, 500);
    }

    #[tokio::test]
    async fn version_splits_major_and_minor() {
        let c = Control::new("v1.33.2");
        c.set_version("v1.34.0");
        let (_, text) = body(version(&c)).await;
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            (v["major"].as_str(), v["minor"].as_str()),
            (Some("1"), Some("34"))
        );
        assert_eq!(v["gitVersion"], "v1.34.0");
    }
}
