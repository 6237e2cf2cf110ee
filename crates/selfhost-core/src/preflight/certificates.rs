//! `certificates`: every certificate the control-plane templates read (etcd's client and CA
//! certificates included) is valid now and for a while yet. An expired one fails, since a
//! component restarted by the upgrade would not come back; one that expires within the
//! warning window, or that cannot be read, warns. Only dates and subjects are shown.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::{Check, CheckId, ClusterObservation, PreflightTarget, Report, Verdict};
use crate::certificates::{
    CertificateContent, CertificateDates, CertificateReading, CertificateSource,
    CertificatesObserved,
};

/// The warning window when none is given: kubeadm's own `certs check-expiration` shows the
/// residual time; 30 days leaves room to renew before the next maintenance window.
pub const DEFAULT_CERTIFICATE_WARNING: Duration = Duration::from_secs(30 * 24 * 3600);

const DAY: i64 = 24 * 3600;

pub(super) fn check(report: &mut Report, cluster: &ClusterObservation, target: &PreflightTarget) {
    if let Some(observed) = &cluster.certificates {
        report
            .0
            .extend(certificate_checks(observed, target.certificate_warning));
    }
}

/// The `certificates` check's results for what was read: one per certificate that fails or
/// warns, one per file that could not be read, one for the files on the nodes' disks, and a
/// pass naming the first to expire when all are fine. `warning` is the window within which
/// an expiry warns.
pub fn certificate_checks(observed: &CertificatesObserved, warning: Duration) -> Vec<Check> {
    let mut report = Report(Vec::new());
    let report = &mut report;
    let window = i64::try_from(warning.as_secs()).unwrap_or(i64::MAX);
    let mut on_nodes = Vec::new();
    let mut problems = 0;
    // (seconds left, what) of the certificate that expires first, for the passing line.
    let mut soonest: Option<(i64, String)> = None;
    let mut count = 0;
    for reading in &observed.readings {
        match &reading.content {
            CertificateContent::OnNodes => on_nodes.push(reading.file.path.as_str()),
            CertificateContent::Unreadable { reason } => {
                problems += 1;
                report.add(
                    CheckId::Certificates,
                    None,
                    Verdict::Warn,
                    format!(
                        "{}: cannot read {} ({}): {reason}",
                        readers(reading),
                        reading.file.path,
                        reading.file.source
                    ),
                    Some(unreadable_fix(&reading.file.source)),
                );
            }
            CertificateContent::Read { certificates } => {
                for certificate in certificates {
                    count += 1;
                    let left = certificate.not_after.as_second() - observed.at.as_second();
                    let what = format!(
                        "{} in {} expires {}",
                        certificate.subject,
                        reading.file.path,
                        date(certificate.not_after)
                    );
                    if soonest.as_ref().is_none_or(|(s, _)| left < *s) {
                        soonest = Some((left, what));
                    }
                    if let Some((verdict, message)) = judge(certificate, observed.at, left, window)
                    {
                        problems += 1;
                        report.add(
                            CheckId::Certificates,
                            None,
                            verdict,
                            format!(
                                "{} ({}), read by {}: {message}",
                                reading.file.path,
                                reading.file.source,
                                readers(reading)
                            ),
                            Some(renew_fix(reading, certificate)),
                        );
                    }
                }
            }
        }
    }
    if !on_nodes.is_empty() {
        // The directories, not each file: kubeadm keeps them in two.
        let mut dirs: Vec<&str> = on_nodes
            .iter()
            .map(|path| path.rsplit_once('/').map_or(*path, |(dir, _)| dir))
            .collect();
        dirs.sort_unstable();
        dirs.dedup();
        report.add(
            CheckId::Certificates,
            None,
            Verdict::NotRun,
            format!(
                "{} certificate file(s) are on the control-plane nodes' disks (hostPath, in {}): \
                 plan cannot read them through the API; check them on each control-plane node \
                 (`kubeadm certs check-expiration`)",
                on_nodes.len(),
                dirs.join(", ")
            ),
            None,
        );
    }
    if problems == 0 && (count > 0 || on_nodes.is_empty()) {
        let message = match soonest {
            Some((left, what)) => format!(
                "{count} certificate(s) valid for more than {} days; the first to expire: {what} \
                 (in {} days)",
                window / DAY,
                left / DAY
            ),
            None => "the templates read no certificate".to_string(),
        };
        report.add(CheckId::Certificates, None, Verdict::Pass, message, None);
    }
    std::mem::take(&mut report.0)
}

/// The verdict on one certificate, if it is not simply fine.
fn judge(
    certificate: &CertificateDates,
    at: Timestamp,
    left: i64,
    window: i64,
) -> Option<(Verdict, String)> {
    if left <= 0 {
        return Some((
            Verdict::Fail,
            format!(
                "{} expired {} ({} days ago): a component restarted by the upgrade would not \
                 come back",
                certificate.subject,
                date(certificate.not_after),
                -left / DAY
            ),
        ));
    }
    if certificate.not_before > at {
        return Some((
            Verdict::Warn,
            format!(
                "{} is not valid until {} (is this machine's clock or the issuer's wrong?)",
                certificate.subject,
                date(certificate.not_before)
            ),
        ));
    }
    (left <= window).then(|| {
        (
            Verdict::Warn,
            format!(
                "{} expires {}, in {} days (warning within {} days, --certificate-warning-days)",
                certificate.subject,
                date(certificate.not_after),
                left / DAY,
                window / DAY
            ),
        )
    })
}

fn readers(reading: &CertificateReading) -> String {
    reading.file.used_by.join(", ")
}

fn date(t: Timestamp) -> String {
    t.strftime("%Y-%m-%d %H:%M UTC").to_string()
}

/// kubeadm's name for the certificate or kubeconfig at `path`, as `kubeadm certs renew`
/// takes it.
pub(crate) fn kubeadm_name(path: &str) -> Option<&'static str> {
    const NAMES: &[(&str, &str)] = &[
        ("etcd/server.crt", "etcd-server"),
        ("etcd/peer.crt", "etcd-peer"),
        ("etcd/healthcheck-client.crt", "etcd-healthcheck-client"),
        ("apiserver-etcd-client.crt", "apiserver-etcd-client"),
        ("apiserver-kubelet-client.crt", "apiserver-kubelet-client"),
        ("front-proxy-client.crt", "front-proxy-client"),
        ("apiserver.crt", "apiserver"),
        ("controller-manager.conf", "controller-manager.conf"),
        ("scheduler.conf", "scheduler.conf"),
        ("super-admin.conf", "super-admin.conf"),
        ("admin.conf", "admin.conf"),
    ];
    NAMES
        .iter()
        .find(|(file, _)| path.ends_with(&format!("/{file}")) || path == *file)
        .map(|(_, name)| *name)
}

fn renew_fix(reading: &CertificateReading, certificate: &CertificateDates) -> String {
    let store = match &reading.file.source {
        CertificateSource::Secret { name, key } => {
            format!(", then store the new file in Secret kube-system/{name} (key {key})")
        }
        _ => String::new(),
    };
    if certificate.ca {
        return format!(
            "a CA is not renewed by `kubeadm certs renew`: rotate it (Kubernetes docs, \"Manual \
             Rotation of CA Certificates\"), reissuing what it signed{store}"
        );
    }
    match kubeadm_name(&reading.file.path) {
        Some(name) => format!(
            "renew it on every control-plane node: `kubeadm certs renew {name}`{store}; the \
             component reads it when it restarts"
        ),
        None => format!("reissue it from its CA{store}; the component reads it when it restarts"),
    }
}

fn unreadable_fix(source: &CertificateSource) -> String {
    match source {
        CertificateSource::Secret { name, .. } => format!(
            "check that Secret kube-system/{name} exists and that this account may get it \
             (`kubectl -n kube-system get secret {name}`)"
        ),
        CertificateSource::HostFile { path } => {
            format!("check the file on the node: `openssl x509 -noout -dates -in {path}`")
        }
        CertificateSource::Unmounted => {
            "mount the file into the pod (hostPath or Secret) or correct the flag".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificates::{CertificateFile, FileKind};

    const AT: i64 = 1_800_000_000;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(seconds).expect("in range")
    }

    fn file(path: &str, source: CertificateSource) -> CertificateFile {
        CertificateFile {
            path: path.into(),
            kind: FileKind::Certificates,
            source,
            used_by: vec!["kube-apiserver --tls-cert-file".into()],
        }
    }

    fn host(path: &str) -> CertificateSource {
        CertificateSource::HostFile { path: path.into() }
    }

    /// A file holding one certificate that ends `days` after [`AT`].
    fn ending(path: &str, source: CertificateSource, days: i64, ca: bool) -> CertificateReading {
        CertificateReading {
            file: file(path, source),
            content: CertificateContent::Read {
                certificates: vec![CertificateDates {
                    subject: "CN=kube-apiserver".into(),
                    ca,
                    not_before: at(AT - 10 * DAY),
                    not_after: at(AT + days * DAY),
                }],
            },
        }
    }

    fn checks(readings: Vec<CertificateReading>) -> Vec<(Verdict, String, String)> {
        certificate_checks(
            &CertificatesObserved {
                at: at(AT),
                readings,
            },
            DEFAULT_CERTIFICATE_WARNING,
        )
        .into_iter()
        .map(|c| (c.verdict, c.message, c.fix.unwrap_or_default()))
        .collect()
    }

    const APISERVER: &str = "/etc/kubernetes/pki/apiserver.crt";

    #[test]
    fn each_certificate_is_judged_by_the_days_it_has_left() {
        // (days left, verdict, words in the message)
        let table: &[(i64, Verdict, &str)] = &[
            (365, Verdict::Pass, "valid for more than 30 days"),
            (31, Verdict::Pass, "(in 31 days)"),
            (30, Verdict::Warn, "in 30 days (warning within 30 days"),
            (1, Verdict::Warn, "in 1 days"),
            (0, Verdict::Fail, "expired"),
            (-3, Verdict::Fail, "(3 days ago)"),
        ];
        for (days, verdict, words) in table {
            let found = checks(vec![ending(APISERVER, host(APISERVER), *days, false)]);
            assert_eq!(found.len(), 1, "{days}: {found:?}");
            assert_eq!(found[0].0, *verdict, "{days}: {found:?}");
            assert!(found[0].1.contains(words), "{days}: {found:?}");
        }
    }

    #[test]
    fn the_fix_names_kubeadms_renewal_or_the_ca_rotation_and_the_secret_to_update() {
        let secret = CertificateSource::Secret {
            name: "apiserver".into(),
            key: "tls.crt".into(),
        };
        let found = checks(vec![ending(APISERVER, secret, -1, false)]);
        assert_eq!(found[0].0, Verdict::Fail);
        assert!(
            found[0].1.starts_with(
                "/etc/kubernetes/pki/apiserver.crt (Secret kube-system/apiserver key tls.crt), \
                 read by kube-apiserver --tls-cert-file: CN=kube-apiserver expired"
            ),
            "{found:?}"
        );
        assert!(
            found[0].2.contains("`kubeadm certs renew apiserver`")
                && found[0]
                    .2
                    .contains("store the new file in Secret kube-system/apiserver (key tls.crt)"),
            "{found:?}"
        );

        let ca = "/etc/kubernetes/pki/ca.crt";
        let found = checks(vec![ending(ca, host(ca), 10, true)]);
        assert_eq!(found[0].0, Verdict::Warn);
        assert!(
            found[0]
                .2
                .contains("a CA is not renewed by `kubeadm certs renew`"),
            "{found:?}"
        );
    }

    #[test]
    fn unreadable_files_warn_and_files_on_the_nodes_are_one_line_not_run() {
        let found = checks(vec![
            CertificateReading {
                file: file(
                    APISERVER,
                    CertificateSource::Secret {
                        name: "apiserver".into(),
                        key: "tls.crt".into(),
                    },
                ),
                content: CertificateContent::Unreadable {
                    reason: "Secret kube-system/apiserver does not exist".into(),
                },
            },
            CertificateReading {
                file: file(
                    "/etc/kubernetes/pki/ca.crt",
                    host("/etc/kubernetes/pki/ca.crt"),
                ),
                content: CertificateContent::OnNodes,
            },
            CertificateReading {
                file: file(
                    "/etc/kubernetes/pki/front-proxy-ca.crt",
                    host("/etc/kubernetes/pki/front-proxy-ca.crt"),
                ),
                content: CertificateContent::OnNodes,
            },
        ]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].0, Verdict::Warn);
        assert!(found[0].1.contains("does not exist"), "{found:?}");
        assert!(
            found[0]
                .2
                .contains("kubectl -n kube-system get secret apiserver"),
            "{found:?}"
        );
        assert_eq!(found[1].0, Verdict::NotRun);
        assert!(
            found[1]
                .1
                .starts_with("2 certificate file(s) are on the control-plane nodes' disks"),
            "{found:?}"
        );
    }

    #[test]
    fn a_certificate_not_yet_valid_warns_and_the_pass_names_the_first_to_expire() {
        let mut early = ending(APISERVER, host(APISERVER), 300, false);
        if let CertificateContent::Read { certificates } = &mut early.content {
            certificates[0].not_before = at(AT + DAY);
        }
        let found = checks(vec![early]);
        assert_eq!(found[0].0, Verdict::Warn);
        assert!(found[0].1.contains("is not valid until"), "{found:?}");

        let ca = "/etc/kubernetes/pki/ca.crt";
        let found = checks(vec![
            ending(ca, host(ca), 3000, true),
            ending(APISERVER, host(APISERVER), 200, false),
        ]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, Verdict::Pass);
        assert!(
            found[0]
                .1
                .starts_with("2 certificate(s) valid for more than 30 days")
                && found[0].1.contains("in /etc/kubernetes/pki/apiserver.crt")
                && found[0].1.ends_with("(in 200 days)"),
            "{found:?}"
        );
    }

    #[test]
    fn kubeadm_names_cover_its_leaf_certificates_and_kubeconfigs() {
        for (path, name) in [
            ("/etc/kubernetes/pki/apiserver.crt", Some("apiserver")),
            (
                "/etc/kubernetes/pki/apiserver-etcd-client.crt",
                Some("apiserver-etcd-client"),
            ),
            ("/etc/kubernetes/pki/etcd/server.crt", Some("etcd-server")),
            (
                "/etc/kubernetes/controller-manager.conf",
                Some("controller-manager.conf"),
            ),
            ("/etc/kubernetes/pki/ca.crt", None),
            ("/srv/other.crt", None),
        ] {
            assert_eq!(kubeadm_name(path), name, "{path}");
        }
    }
}
