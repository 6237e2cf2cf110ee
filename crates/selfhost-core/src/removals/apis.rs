//! API versions a release stops serving, and what the kube-apiserver says its clients still
//! request: after the upgrade, a client that requests a version no longer served gets 404,
//! and a manifest written in it no longer applies. Objects stored through an old version stay
//! readable through its replacement, so they need new manifests, not a migration of data.

use serde::Serialize;

use super::m;
use crate::version::MinorVersion;

/// An API version a release no longer serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemovedApi {
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The version, e.g. `v1beta3`.
    pub version: &'static str,
    /// The resources it served.
    pub resources: &'static [&'static str],
    /// The first release that no longer serves it.
    pub removed_in: MinorVersion,
    /// The version to use instead, `group/version`.
    pub instead: &'static str,
    /// Where the fact comes from.
    pub source: &'static str,
}

impl RemovedApi {
    /// `group/version`, or `version` for the core group.
    pub fn group_version(&self) -> String {
        group_version(self.group, self.version)
    }
}

fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

const GUIDE: &str = "kubernetes/website: docs/reference/using-api/deprecation-guide.md";

/// The API versions each release stopped serving, from 1.25 (the oldest a supported upgrade
/// starts from is later, but a cluster upgraded through them may still hold clients of them).
pub const REMOVED_APIS: &[RemovedApi] = &[
    RemovedApi {
        group: "batch",
        version: "v1beta1",
        resources: &["cronjobs"],
        removed_in: m(25),
        instead: "batch/v1",
        source: GUIDE,
    },
    RemovedApi {
        group: "discovery.k8s.io",
        version: "v1beta1",
        resources: &["endpointslices"],
        removed_in: m(25),
        instead: "discovery.k8s.io/v1",
        source: GUIDE,
    },
    RemovedApi {
        group: "events.k8s.io",
        version: "v1beta1",
        resources: &["events"],
        removed_in: m(25),
        instead: "events.k8s.io/v1",
        source: GUIDE,
    },
    RemovedApi {
        group: "autoscaling",
        version: "v2beta1",
        resources: &["horizontalpodautoscalers"],
        removed_in: m(25),
        instead: "autoscaling/v2",
        source: GUIDE,
    },
    RemovedApi {
        group: "policy",
        version: "v1beta1",
        resources: &["poddisruptionbudgets", "podsecuritypolicies"],
        removed_in: m(25),
        instead: "policy/v1 (PodSecurityPolicy has no successor: Pod Security Admission)",
        source: GUIDE,
    },
    RemovedApi {
        group: "node.k8s.io",
        version: "v1beta1",
        resources: &["runtimeclasses"],
        removed_in: m(25),
        instead: "node.k8s.io/v1",
        source: GUIDE,
    },
    RemovedApi {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1beta1",
        resources: &["flowschemas", "prioritylevelconfigurations"],
        removed_in: m(26),
        instead: "flowcontrol.apiserver.k8s.io/v1",
        source: GUIDE,
    },
    RemovedApi {
        group: "autoscaling",
        version: "v2beta2",
        resources: &["horizontalpodautoscalers"],
        removed_in: m(26),
        instead: "autoscaling/v2",
        source: GUIDE,
    },
    RemovedApi {
        group: "storage.k8s.io",
        version: "v1beta1",
        resources: &["csistoragecapacities"],
        removed_in: m(27),
        instead: "storage.k8s.io/v1",
        source: GUIDE,
    },
    RemovedApi {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1beta2",
        resources: &["flowschemas", "prioritylevelconfigurations"],
        removed_in: m(29),
        instead: "flowcontrol.apiserver.k8s.io/v1",
        source: GUIDE,
    },
    RemovedApi {
        group: "flowcontrol.apiserver.k8s.io",
        version: "v1beta3",
        resources: &["flowschemas", "prioritylevelconfigurations"],
        removed_in: m(32),
        instead: "flowcontrol.apiserver.k8s.io/v1",
        source: GUIDE,
    },
];

/// The API versions that releases after `current` up to `target` stop serving: what an
/// upgrade from `current` to `target` removes.
pub fn removed_between(
    current: MinorVersion,
    target: MinorVersion,
) -> impl Iterator<Item = &'static RemovedApi> {
    REMOVED_APIS
        .iter()
        .filter(move |api| api.removed_in > current && api.removed_in <= target)
}

/// One series of the kube-apiserver's `apiserver_requested_deprecated_apis` gauge: a
/// deprecated API some client requested since that apiserver started.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RequestedApi {
    /// The API group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The resource.
    pub resource: String,
    /// The subresource, if one.
    pub subresource: Option<String>,
    /// The release that removes it, when the apiserver knows (`removed_release`).
    pub removed_in: Option<MinorVersion>,
}

impl RequestedApi {
    /// `resource.version.group`, as `kubectl get` spells a resource in one version.
    pub fn qualified(&self) -> String {
        let mut name = self.resource.clone();
        if let Some(sub) = &self.subresource {
            name.push('/');
            name.push_str(sub);
        }
        if self.group.is_empty() {
            format!("{name} ({})", self.version)
        } else {
            format!("{name}.{}.{}", self.version, self.group)
        }
    }

    /// `group/version`.
    pub fn group_version(&self) -> String {
        group_version(&self.group, &self.version)
    }
}

/// The series of `apiserver_requested_deprecated_apis` with value 1 in a Prometheus text
/// exposition (what `/metrics` answers), sorted and without repeats. Lines that are not
/// well-formed series of it are skipped.
pub fn requested_deprecated_apis(metrics: &str) -> Vec<RequestedApi> {
    let mut requested: Vec<RequestedApi> = metrics
        .lines()
        .filter_map(|line| line.strip_prefix("apiserver_requested_deprecated_apis{"))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once('}')?;
            let value: f64 = value.split_whitespace().next()?.parse().ok()?;
            (value >= 1.0).then(|| series(labels)).flatten()
        })
        .collect();
    requested.sort();
    requested.dedup();
    requested
}

fn series(labels: &str) -> Option<RequestedApi> {
    let labels = parse_labels(labels)?;
    let get = |name: &str| {
        labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let non_empty = |name: &str| get(name).filter(|v| !v.is_empty());
    Some(RequestedApi {
        group: get("group").unwrap_or_default(),
        version: non_empty("version")?,
        resource: non_empty("resource")?,
        subresource: non_empty("subresource"),
        removed_in: non_empty("removed_release").and_then(|r| release(&r)),
    })
}

/// `1.32` or `v1.32` as a release line.
fn release(text: &str) -> Option<MinorVersion> {
    let text = text.trim().trim_start_matches('v');
    let (major, minor) = text.split_once('.')?;
    Some(MinorVersion::new(major.parse().ok()?, minor.parse().ok()?))
}

/// `a="x",b="y"` as pairs, with the exposition format's escapes (`\\`, `\"`, `\n`) undone.
fn parse_labels(text: &str) -> Option<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (name, after) = rest.split_once('=')?;
        let mut chars = after.strip_prefix('"')?.char_indices();
        let mut value = String::new();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        };
        pairs.push((name.trim().to_string(), value));
        rest = after[end + 2..].trim_start_matches(',').trim();
    }
    Some(pairs)
}
