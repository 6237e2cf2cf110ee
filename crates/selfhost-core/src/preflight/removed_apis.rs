//! The `removed-apis` check: which API versions the target stops serving are still in use.
//!
//! Two sources, both from the cluster before the first change. What clients still request:
//! the kube-apiserver's `apiserver_requested_deprecated_apis` gauge on `/metrics` (1 for
//! every deprecated version requested since that apiserver started, with the release that
//! removes it). What objects exist in them: each version of [`removed_between`] the cluster
//! still serves, listed. A client that requests a version the target removes breaks when the
//! upgrade finishes, so that fails; objects stored through one stay readable through its
//! replacement, so they warn, naming the manifests to rewrite.

use serde::Serialize;

use super::{CheckId, ClusterObservation, PreflightTarget, Report, Verdict};
use crate::removals::apis::{REMOVED_APIS, RequestedApi, removed_between};

/// What the engine read of the cluster's use of API versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApiUsage {
    /// The deprecated APIs clients requested, or why `/metrics` could not be read.
    pub requested: Result<Vec<RequestedApi>, String>,
    /// Objects in versions the target removes that the cluster still serves.
    pub served: Vec<ServedObjects>,
    /// Resources in such versions that could not be listed, each with why.
    pub unlisted: Vec<String>,
}

/// The objects of one resource in one API version that the target no longer serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServedObjects {
    /// `group/version`.
    pub group_version: String,
    /// The resource.
    pub resource: String,
    /// How many objects were listed (at most one page).
    pub objects: usize,
    /// Whether the list had more pages than were read.
    pub more: bool,
    /// The version to use instead.
    pub instead: String,
}

/// The replacement of `group/version` in the tables, in words.
fn instead(group_version: &str) -> String {
    REMOVED_APIS
        .iter()
        .find(|api| api.group_version() == group_version)
        .map_or_else(
            || {
                "the version that replaces it (kubernetes.io's deprecated API migration guide)"
                    .to_string()
            },
            |api| api.instead.to_string(),
        )
}

/// Adds the check's findings, or its one pass.
pub(super) fn check(report: &mut Report, cluster: &ClusterObservation, target: &PreflightTarget) {
    let Some(usage) = &cluster.api_usage else {
        return;
    };
    let target_minor = target.version.minor_version();
    let current = cluster.oldest_apiserver_minor(target_minor);
    let force = target.flags.force;
    // Each finding: its verdict, what was found, and the fix.
    let mut findings: Vec<(Verdict, String, String)> = Vec::new();
    match &usage.requested {
        Ok(requested) => {
            for api in requested
                .iter()
                .filter(|api| api.removed_in.is_some_and(|r| r <= target_minor))
            {
                let removed = api.removed_in.map_or_else(String::new, |r| r.to_string());
                findings.push((
                    if force { Verdict::Warn } else { Verdict::Fail },
                    format!(
                        "clients still request {}, which {removed} no longer serves \
                         (apiserver_requested_deprecated_apis, as the kube-apiserver that \
                         answered counted since it started){}",
                        api.qualified(),
                        if force {
                            "; --force upgrades anyway"
                        } else {
                            ""
                        }
                    ),
                    format!(
                        "move the clients and manifests that use {} to {}: `kubectl get --raw \
                         /metrics | grep apiserver_requested_deprecated_apis` lists what is \
                         requested, the audit log names who; or pass --force",
                        api.group_version(),
                        instead(&api.group_version())
                    ),
                ));
            }
        }
        Err(why) => findings.push((
            Verdict::Warn,
            format!("which deprecated APIs clients request is unknown: {why}"),
            "grant `get` on the non-resource URL /metrics to the user selfhost runs as, or \
             check `apiserver_requested_deprecated_apis` by hand"
                .to_string(),
        )),
    }
    findings.extend(usage.served.iter().map(|served| {
        (
            Verdict::Warn,
            format!(
                "{}{} {} in {}, which {target_minor} no longer serves; they stay readable as {}",
                served.objects,
                if served.more { " or more" } else { "" },
                served.resource,
                served.group_version,
                served.instead
            ),
            format!(
                "rewrite the manifests that create {} in {} for {}",
                served.resource, served.group_version, served.instead
            ),
        )
    }));
    findings.extend(usage.unlisted.iter().map(|why| {
        (
            Verdict::Warn,
            format!(
                "whether objects are kept in a version {target_minor} removes is unknown: {why}"
            ),
            "grant `list` on the resource to the user selfhost runs as, or list it by hand"
                .to_string(),
        )
    }));
    let found = !findings.is_empty();
    for (verdict, message, fix) in findings {
        report.add(CheckId::RemovedApis, None, verdict, message, Some(fix));
    }
    if !found {
        let stored = match removed_between(current, target_minor).count() {
            0 => format!("it removes none since {current}"),
            1 => format!("the one version it removes since {current} holds no objects"),
            n => format!("none of the {n} versions it removes since {current} holds objects"),
        };
        report.add(
            CheckId::RemovedApis,
            None,
            Verdict::Pass,
            format!(
                "no client requests an API version that {target_minor} no longer serves, and \
                 {stored}"
            ),
            None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::builder::version;
    use crate::skew::{ApiServerVersion, SUPPORTED_VERSIONS, SkewFlags};
    use crate::version::MinorVersion;

    fn flowschemas(removed: Option<&str>) -> RequestedApi {
        RequestedApi {
            group: "flowcontrol.apiserver.k8s.io".into(),
            version: "v1beta3".into(),
            resource: "flowschemas".into(),
            subresource: None,
            removed_in: removed.map(|r| {
                let (major, minor) = r.split_once('.').expect("major.minor");
                MinorVersion::new(major.parse().expect("major"), minor.parse().expect("minor"))
            }),
        }
    }

    fn run(usage: ApiUsage, from: &str, to: &str, force: bool) -> Vec<(Verdict, String)> {
        let cluster = ClusterObservation {
            components: Vec::new(),
            apiserver_versions: vec![ApiServerVersion {
                name: "cp-1".into(),
                version: version(from),
            }],
            kubelets: Vec::new(),
            api_usage: Some(usage),
            certificates: None,
            etcd: None,
        };
        let target = PreflightTarget {
            version: version(to),
            templates: Default::default(),
            templates_edited_in: None,
            flags: SkewFlags {
                force,
                ..SkewFlags::default()
            },
            accept_downtime: false,
            supported: SUPPORTED_VERSIONS,
            certificate_warning: crate::preflight::DEFAULT_CERTIFICATE_WARNING,
        };
        let mut report = Report(Vec::new());
        check(&mut report, &cluster, &target);
        report
            .0
            .into_iter()
            .map(|c| {
                assert_eq!(c.id, CheckId::RemovedApis);
                (
                    c.verdict,
                    format!("{} | {}", c.message, c.fix.unwrap_or_default()),
                )
            })
            .collect()
    }

    /// A case: its name, the usage read, the target, `--force`, and each finding expected
    /// (verdict and words).
    type Row = (
        &'static str,
        ApiUsage,
        &'static str,
        bool,
        Vec<(Verdict, &'static str)>,
    );

    #[test]
    fn what_clients_request_and_what_is_kept_in_removed_versions_is_named_with_its_replacement() {
        let served = |objects, more| ServedObjects {
            group_version: "flowcontrol.apiserver.k8s.io/v1beta3".into(),
            resource: "flowschemas".into(),
            objects,
            more,
            instead: "flowcontrol.apiserver.k8s.io/v1".into(),
        };
        let usage =
            |requested: Result<Vec<RequestedApi>, String>, served: Vec<ServedObjects>| ApiUsage {
                requested,
                served,
                unlisted: Vec::new(),
            };
        let rows: Vec<Row> = vec![
            (
                "a patch release removes nothing",
                usage(Ok(vec![]), vec![]),
                "v1.31.9",
                false,
                vec![(Verdict::Pass, "and it removes none since v1.31")],
            ),
            (
                "nothing in use",
                usage(Ok(vec![]), vec![]),
                "v1.32.0",
                false,
                vec![(
                    Verdict::Pass,
                    "the one version it removes since v1.31 holds no objects",
                )],
            ),
            (
                "a client requests what the target removes",
                usage(Ok(vec![flowschemas(Some("1.32"))]), vec![]),
                "v1.32.0",
                false,
                vec![(
                    Verdict::Fail,
                    "clients still request flowschemas.v1beta3.flowcontrol.apiserver.k8s.io, \
                     which v1.32 no longer serves",
                )],
            ),
            (
                "with --force it warns",
                usage(Ok(vec![flowschemas(Some("1.32"))]), vec![]),
                "v1.32.0",
                true,
                vec![(Verdict::Warn, "--force upgrades anyway")],
            ),
            (
                "removed only by a later release",
                usage(Ok(vec![flowschemas(Some("1.34"))]), vec![]),
                "v1.32.0",
                false,
                vec![(Verdict::Pass, "no client requests")],
            ),
            (
                "deprecated with no removal planned",
                usage(Ok(vec![flowschemas(None)]), vec![]),
                "v1.32.0",
                false,
                vec![(Verdict::Pass, "no client requests")],
            ),
            (
                "the metrics cannot be read",
                usage(Err("GET /metrics: 403 Forbidden".into()), vec![]),
                "v1.32.0",
                false,
                vec![(Verdict::Warn, "unknown: GET /metrics: 403 Forbidden")],
            ),
            (
                "a removed version that cannot be listed",
                ApiUsage {
                    requested: Ok(vec![]),
                    served: vec![],
                    unlisted: vec![
                        "flowschemas in flowcontrol.apiserver.k8s.io/v1beta3: forbidden".into(),
                    ],
                },
                "v1.32.0",
                false,
                vec![(
                    Verdict::Warn,
                    "is unknown: flowschemas in flowcontrol.apiserver.k8s.io/v1beta3: forbidden",
                )],
            ),
            (
                "objects kept in a removed version",
                usage(Ok(vec![]), vec![served(2, false), served(500, true)]),
                "v1.32.0",
                false,
                vec![
                    (
                        Verdict::Warn,
                        "2 flowschemas in flowcontrol.apiserver.k8s.io/v1beta3, which v1.32 no \
                         longer serves; they stay readable as flowcontrol.apiserver.k8s.io/v1",
                    ),
                    (Verdict::Warn, "500 or more flowschemas"),
                ],
            ),
        ];
        for (name, usage, to, force, expected) in rows {
            let found = run(usage, "v1.31.2", to, force);
            assert_eq!(found.len(), expected.len(), "{name}: {found:?}");
            for ((verdict, text), (want, words)) in found.iter().zip(&expected) {
                assert_eq!(verdict, want, "{name}: {text}");
                assert!(text.contains(words), "{name}: {text}");
            }
        }
    }

    #[test]
    fn the_fix_names_the_replacement_from_the_tables() {
        let found = run(
            ApiUsage {
                requested: Ok(vec![flowschemas(Some("1.32"))]),
                served: vec![],
                unlisted: vec![],
            },
            "v1.31.0",
            "v1.32.0",
            false,
        );
        assert!(
            found[0].1.contains("to flowcontrol.apiserver.k8s.io/v1:"),
            "{}",
            found[0].1
        );
    }
}
