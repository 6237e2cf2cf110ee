//! `etcd`: the etcd the kube-apiserver uses is healthy, and its version suits the target.
//! The kube-apiserver's own `/readyz/etcd` says whether it reaches etcd; with etcd's client
//! certificate each member is asked directly (`/health`, `/version`), since one unhealthy
//! member of three leaves the apiserver ready while an upgrade restarts every apiserver
//! against it. Versions come from the members, else from etcd's static pods' images.

use serde::Serialize;

use super::{CheckId, ClusterObservation, PreflightTarget, Report, Verdict};
use crate::etcd_versions::{EtcdFit, EtcdVersion, NEWEST_KNOWN, fit, kubeadm_etcd};

/// What the kube-apiserver's `/readyz/etcd` said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum ApiserverEtcd {
    /// ok.
    Ready,
    /// Not ok: what it said.
    NotReady {
        /// Its answer.
        said: String,
    },
    /// Not asked successfully (forbidden, no answer): why.
    Unknown {
        /// Why.
        why: String,
    },
}

/// What was seen of etcd.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EtcdObservation {
    /// The kube-apiserver's `/readyz/etcd`.
    pub apiserver: ApiserverEtcd,
    /// The endpoints the kube-apiserver template names (`--etcd-servers`).
    pub servers: Vec<String>,
    /// Each member asked directly; `None` when no etcd credentials were given.
    pub members: Option<Vec<EtcdMember>>,
    /// etcd's static pods, as the API shows them (kubeadm's stacked etcd).
    pub pods: Vec<EtcdPod>,
}

/// One etcd endpoint asked directly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EtcdMember {
    /// Its client URL.
    pub endpoint: String,
    /// `/health`: `Ok`, or why not.
    pub health: Result<(), String>,
    /// `/version`'s `etcdserver`, when it answered.
    pub version: Option<String>,
}

/// One etcd static pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EtcdPod {
    /// Its node.
    pub node: String,
    /// Its image.
    pub image: String,
}

pub(super) fn check(report: &mut Report, cluster: &ClusterObservation, target: &PreflightTarget) {
    let Some(etcd) = &cluster.etcd else {
        return;
    };
    health(report, etcd, target);
    version(report, etcd, target);
}

fn health(report: &mut Report, etcd: &EtcdObservation, target: &PreflightTarget) {
    let servers = if etcd.servers.is_empty() {
        "its etcd".to_string()
    } else {
        etcd.servers.join(",")
    };
    match &etcd.apiserver {
        ApiserverEtcd::Ready => {}
        ApiserverEtcd::NotReady { said } => {
            report.add(
                CheckId::Etcd,
                None,
                Verdict::Fail,
                format!("the kube-apiserver does not reach {servers}: /readyz/etcd {said}"),
                Some(
                    "repair etcd first: `kubectl get --raw /readyz/etcd`, and on a control-plane \
                     node `etcdctl endpoint health --cluster`"
                        .into(),
                ),
            );
            return;
        }
        ApiserverEtcd::Unknown { why } => {
            if etcd.members.is_none() {
                report.add(
                    CheckId::Etcd,
                    None,
                    Verdict::Warn,
                    format!("cannot ask the kube-apiserver whether it reaches {servers}: {why}"),
                    Some(
                        "let this account get /readyz/etcd (deploy/rbac.yaml's viewer role), or \
                         pass --etcd-endpoints with etcd's client certificate"
                            .into(),
                    ),
                );
                return;
            }
        }
    }
    let Some(members) = &etcd.members else {
        report.add(
            CheckId::Etcd,
            None,
            Verdict::Pass,
            format!(
                "the kube-apiserver reaches {servers} (/readyz/etcd ok); the members are not \
                 asked one by one (pass --etcd-endpoints with etcd's client certificate)"
            ),
            None,
        );
        return;
    };
    let sick: Vec<String> = members
        .iter()
        .filter_map(|m| {
            m.health
                .as_ref()
                .err()
                .map(|e| format!("{}: {e}", m.endpoint))
        })
        .collect();
    if sick.is_empty() {
        report.add(
            CheckId::Etcd,
            None,
            Verdict::Pass,
            format!(
                "{} etcd member(s) healthy ({}){}",
                members.len(),
                members
                    .iter()
                    .map(|m| m.endpoint.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                if etcd.apiserver == ApiserverEtcd::Ready {
                    ", and the kube-apiserver reaches them"
                } else {
                    ""
                }
            ),
            None,
        );
        return;
    }
    let force = target.flags.force;
    report.add(
        CheckId::Etcd,
        None,
        if force { Verdict::Warn } else { Verdict::Fail },
        format!(
            "{} of {} etcd member(s) unhealthy: {}{}",
            sick.len(),
            members.len(),
            sick.join("; "),
            if force {
                "; --force goes on: every kube-apiserver restarts against the members left"
            } else {
                ""
            }
        ),
        Some(
            "repair or remove the member first (`etcdctl endpoint health --cluster`, `etcdctl \
             member list`), or pass --force"
                .into(),
        ),
    );
}

fn version(report: &mut Report, etcd: &EtcdObservation, target: &PreflightTarget) {
    // (where, version) of every etcd whose version is known: the members, else the pods.
    let mut known: Vec<(String, String)> = etcd
        .members
        .iter()
        .flatten()
        .filter_map(|m| m.version.clone().map(|v| (m.endpoint.clone(), v)))
        .collect();
    if known.is_empty() {
        known = etcd
            .pods
            .iter()
            .filter_map(|p| {
                let tag = p.image.rsplit_once(':').map(|(_, tag)| tag)?;
                Some((format!("{}'s etcd pod", p.node), tag.to_string()))
            })
            .collect();
    }
    if known.is_empty() {
        report.add(
            CheckId::Etcd,
            None,
            Verdict::NotRun,
            "etcd's version is unknown: no etcd static pod (external etcd?) and no member asked; \
             pass --etcd-endpoints with etcd's client certificate to check it"
                .into(),
            None,
        );
        return;
    }
    let minor = target.version.minor_version();
    let pairing = kubeadm_etcd(minor).map(|row| {
        format!(
            "kubeadm pairs {minor} with etcd {}.{}{}",
            row.line.0,
            row.line.1,
            row.image.map(|i| format!(" ({i})")).unwrap_or_default()
        )
    });
    let mut worst: Option<(Verdict, String, Option<String>)> = None;
    let mut distinct: Vec<String> = Vec::new();
    for (place, text) in &known {
        if !distinct.contains(text) {
            distinct.push(text.clone());
        }
        let Some(running) = EtcdVersion::parse(text) else {
            consider(
                &mut worst,
                Verdict::Warn,
                format!("{place} runs etcd {text}, not a version selfhost can read"),
                None,
            );
            continue;
        };
        let pairing = pairing.clone().unwrap_or_default();
        match fit(running, minor) {
            EtcdFit::Fits => {}
            EtcdFit::Unsupported => consider(
                &mut worst,
                if target.flags.force {
                    Verdict::Warn
                } else {
                    Verdict::Fail
                },
                format!(
                    "{place} runs etcd {running}, a line the etcd project no longer supports; \
                     {pairing}"
                ),
                Some(
                    "upgrade etcd one minor at a time to a supported line first (etcd's \
                     upgrade guides), or pass --force"
                        .into(),
                ),
            ),
            EtcdFit::BelowMinimum(minimum) => consider(
                &mut worst,
                Verdict::Warn,
                format!(
                    "{place} runs etcd {running}, older than {minimum}, the oldest patch the \
                     Kubernetes documentation recommends for production"
                ),
                Some(format!("upgrade etcd to {minimum} or newer of its line")),
            ),
            EtcdFit::OlderLine(line) => consider(
                &mut worst,
                Verdict::Warn,
                format!("{place} runs etcd {running}; {pairing}: selfhost leaves etcd as it is"),
                Some(format!(
                    "upgrade etcd to {}.{} on its own (its upgrade guide lists the 3.5 patch \
                     to reach first), before or after this upgrade",
                    line.0, line.1
                )),
            ),
            EtcdFit::NewerLine(_) => consider(
                &mut worst,
                Verdict::Warn,
                format!("{place} runs etcd {running}, newer than tested: {pairing}"),
                None,
            ),
            EtcdFit::Before => consider(
                &mut worst,
                Verdict::Pass,
                format!(
                    "{place} runs etcd {running}; the etcd table starts at v1.{}, so it is not \
                     checked against {minor}",
                    crate::etcd_versions::KUBEADM_ETCD
                        .first()
                        .map_or(0, |row| row.from)
                ),
                None,
            ),
            EtcdFit::Beyond => consider(
                &mut worst,
                Verdict::Warn,
                format!(
                    "{place} runs etcd {running}; the etcd table reaches {NEWEST_KNOWN} only, \
                     so it is not checked against {minor}"
                ),
                None,
            ),
        }
    }
    match worst {
        Some((verdict, message, fix)) => report.add(CheckId::Etcd, None, verdict, message, fix),
        None => report.add(
            CheckId::Etcd,
            None,
            Verdict::Pass,
            format!(
                "etcd {} ({}); {}",
                distinct.join(", "),
                known
                    .iter()
                    .map(|(place, _)| place.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                pairing.unwrap_or_default()
            ),
            None,
        ),
    }
}

/// Keeps the more severe finding (a failure over a warning; the first of equals).
fn consider(
    worst: &mut Option<(Verdict, String, Option<String>)>,
    verdict: Verdict,
    message: String,
    fix: Option<String>,
) {
    let rank = |v: Verdict| match v {
        Verdict::Fail => 2,
        Verdict::Warn => 1,
        _ => 0,
    };
    if worst
        .as_ref()
        .is_none_or(|(w, _, _)| rank(verdict) > rank(*w))
    {
        *worst = Some((verdict, message, fix));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preflight::{Check, preflight};

    fn observation(
        apiserver: ApiserverEtcd,
        members: Option<Vec<EtcdMember>>,
        pods: &[&str],
    ) -> EtcdObservation {
        EtcdObservation {
            apiserver,
            servers: vec!["https://127.0.0.1:2379".into()],
            members,
            pods: pods
                .iter()
                .enumerate()
                .map(|(i, image)| EtcdPod {
                    node: format!("cp-{}", i + 1),
                    image: (*image).into(),
                })
                .collect(),
        }
    }

    fn member(endpoint: &str, healthy: bool, version: &str) -> EtcdMember {
        EtcdMember {
            endpoint: endpoint.into(),
            health: if healthy {
                Ok(())
            } else {
                Err("/health says it is not healthy: RAFT NO LEADER".into())
            },
            version: Some(version.into()),
        }
    }

    /// The `etcd` checks for `etcd` and a target of `to`.
    fn etcd_checks(etcd: EtcdObservation, to: &str, force: bool) -> Vec<Check> {
        let mut cluster = crate::preflight::tests::cluster(1, |_, w| w);
        cluster.etcd = Some(etcd);
        let mut target = crate::preflight::tests::target_to(to);
        target.flags.force = force;
        preflight(&cluster, &target)
            .checks
            .into_iter()
            .filter(|c| c.id == CheckId::Etcd)
            .collect()
    }

    fn verdicts(checks: &[Check]) -> Vec<Verdict> {
        checks.iter().map(|c| c.verdict).collect()
    }

    const ETCD_3_5: &str = "registry.k8s.io/etcd:3.5.24-0";

    #[test]
    fn health_comes_from_the_apiserver_and_from_each_member_when_asked() {
        let checks = etcd_checks(
            observation(ApiserverEtcd::Ready, None, &[ETCD_3_5]),
            "v1.33.2",
            false,
        );
        assert_eq!(
            verdicts(&checks),
            [Verdict::Pass, Verdict::Pass],
            "{checks:?}"
        );
        assert!(
            checks[0].message.contains("/readyz/etcd ok")
                && checks[0].message.contains("--etcd-endpoints"),
            "{checks:?}"
        );
        assert!(
            checks[1]
                .message
                .contains("etcd 3.5.24-0 (cp-1's etcd pod)")
                && checks[1]
                    .message
                    .contains("kubeadm pairs v1.33 with etcd 3.5 (3.5.24-0)"),
            "{checks:?}"
        );

        let down = etcd_checks(
            observation(
                ApiserverEtcd::NotReady {
                    said: "500: etcd check failed".into(),
                },
                None,
                &[ETCD_3_5],
            ),
            "v1.33.2",
            false,
        );
        assert_eq!(down[0].verdict, Verdict::Fail, "{down:?}");
        assert!(
            down[0]
                .message
                .contains("does not reach https://127.0.0.1:2379: /readyz/etcd 500"),
            "{down:?}"
        );

        let unasked = etcd_checks(
            observation(
                ApiserverEtcd::Unknown {
                    why: "forbidden: needs get on /readyz/etcd".into(),
                },
                None,
                &[ETCD_3_5],
            ),
            "v1.33.2",
            false,
        );
        assert_eq!(unasked[0].verdict, Verdict::Warn, "{unasked:?}");
        assert!(
            unasked[0]
                .message
                .starts_with("cannot ask the kube-apiserver")
                && unasked[0]
                    .fix
                    .as_deref()
                    .is_some_and(|f| f.contains("/readyz/etcd")),
            "{unasked:?}"
        );

        let members = vec![
            member("https://10.0.0.1:2379", true, "3.5.24"),
            member("https://10.0.0.2:2379", false, "3.5.24"),
        ];
        for (force, verdict) in [(false, Verdict::Fail), (true, Verdict::Warn)] {
            let checks = etcd_checks(
                observation(ApiserverEtcd::Ready, Some(members.clone()), &[]),
                "v1.33.2",
                force,
            );
            assert_eq!(checks[0].verdict, verdict, "{checks:?}");
            assert!(
                checks[0].message.starts_with(
                    "1 of 2 etcd member(s) unhealthy: https://10.0.0.2:2379: /health says it is \
                     not healthy: RAFT NO LEADER"
                ),
                "{checks:?}"
            );
            // The versions the members report win over the pods'.
            assert!(
                checks[1].message.contains("https://10.0.0.1:2379"),
                "{checks:?}"
            );
        }
    }

    #[test]
    fn the_version_is_judged_against_the_line_kubeadm_pairs_with_the_target() {
        // (image, target, verdict, words)
        let table: &[(&str, &str, Verdict, &str)] = &[
            (ETCD_3_5, "v1.33.2", Verdict::Pass, "etcd 3.5.24-0"),
            (
                ETCD_3_5,
                "v1.34.0",
                Verdict::Warn,
                "kubeadm pairs v1.34 with etcd 3.6 (3.6.9-0): selfhost leaves etcd as it is",
            ),
            (
                "registry.k8s.io/etcd:3.5.3-0",
                "v1.33.2",
                Verdict::Warn,
                "older than 3.5.6",
            ),
            (
                "registry.k8s.io/etcd:3.4.13-0",
                "v1.33.2",
                Verdict::Fail,
                "a line the etcd project no longer supports",
            ),
            (
                "registry.k8s.io/etcd:3.6.9-0",
                "v1.33.2",
                Verdict::Warn,
                "newer than tested",
            ),
            (
                "registry.k8s.io/etcd:latest",
                "v1.33.2",
                Verdict::Warn,
                "not a version selfhost can read",
            ),
        ];
        for (image, to, verdict, words) in table {
            let checks = etcd_checks(observation(ApiserverEtcd::Ready, None, &[image]), to, false);
            assert_eq!(checks[1].verdict, *verdict, "{image} to {to}: {checks:?}");
            assert!(
                checks[1].message.contains(words),
                "{image} to {to}: {checks:?}"
            );
        }
        let unknown = etcd_checks(
            observation(ApiserverEtcd::Ready, None, &[]),
            "v1.33.2",
            false,
        );
        assert_eq!(unknown[1].verdict, Verdict::NotRun, "{unknown:?}");
        assert!(unknown[1].message.contains("external etcd?"), "{unknown:?}");
        // A failure outranks a warning, whichever member shows it.
        let mixed = etcd_checks(
            observation(
                ApiserverEtcd::Ready,
                None,
                &[
                    "registry.k8s.io/etcd:3.6.9-0",
                    "registry.k8s.io/etcd:3.4.13-0",
                ],
            ),
            "v1.33.2",
            false,
        );
        assert_eq!(mixed[1].verdict, Verdict::Fail, "{mixed:?}");
        assert!(mixed[1].message.starts_with("cp-2's etcd pod"), "{mixed:?}");
    }
}
