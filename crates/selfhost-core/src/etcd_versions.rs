//! Which etcd each Kubernetes release runs with: the release line kubeadm pairs with it, and
//! the minimum patch releases the Kubernetes documentation recommends. selfhost upgrades the
//! control-plane components and leaves etcd alone, so the `etcd` preflight check compares
//! what runs with the target's line and says when etcd needs its own upgrade first.

use std::fmt;

use serde::Serialize;

use crate::version::MinorVersion;

/// An etcd server version, `3.5.21`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct EtcdVersion {
    /// Major.
    pub major: u64,
    /// Minor.
    pub minor: u64,
    /// Patch.
    pub patch: u64,
}

impl EtcdVersion {
    /// `3.5.21`, `v3.5.21`, or an image tag such as kubeadm's `3.5.21-0`.
    pub fn parse(text: &str) -> Option<EtcdVersion> {
        let text = text.trim().trim_start_matches('v');
        let core = text.split(['-', '+']).next()?;
        let mut parts = core.split('.');
        let number = |part: Option<&str>| part.and_then(|p| p.parse::<u64>().ok());
        let version = EtcdVersion {
            major: number(parts.next())?,
            minor: number(parts.next())?,
            patch: number(parts.next())?,
        };
        parts.next().is_none().then_some(version)
    }

    /// The release line, `3.5`.
    pub fn line(self) -> (u64, u64) {
        (self.major, self.minor)
    }
}

impl fmt::Display for EtcdVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The etcd kubeadm pairs with a range of Kubernetes releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KubeadmEtcd {
    /// The first Kubernetes minor of the range.
    pub from: u64,
    /// The last, inclusive.
    pub to: u64,
    /// The etcd release line.
    pub line: (u64, u64),
    /// The image tag kubeadm's `SupportedEtcdVersion` lists, where known.
    pub image: Option<&'static str>,
    /// Where the row comes from.
    pub source: &'static str,
}

/// kubeadm's etcd per Kubernetes release, 1.29 to [`NEWEST_KNOWN`].
pub const KUBEADM_ETCD: &[KubeadmEtcd] = &[
    KubeadmEtcd {
        from: 29,
        to: 30,
        line: (3, 5),
        image: None,
        source: "etcd-io/etcd Documentation/contributor-guide \"Bump etcd Version in Kubernetes\" \
                 (3.5 for release-1.33 and older)",
    },
    KubeadmEtcd {
        from: 31,
        to: 33,
        line: (3, 5),
        image: Some("3.5.24-0"),
        source: "kubernetes/kubernetes cmd/kubeadm/app/constants/constants.go, SupportedEtcdVersion",
    },
    KubeadmEtcd {
        from: 34,
        to: 36,
        line: (3, 6),
        image: Some("3.6.9-0"),
        source: "kubernetes/kubernetes cmd/kubeadm/app/constants/constants.go, SupportedEtcdVersion \
                 (3.6 for release-1.34 and newer)",
    },
];

/// The newest Kubernetes minor [`KUBEADM_ETCD`] covers.
pub const NEWEST_KNOWN: MinorVersion = MinorVersion::new(1, 36);

/// The oldest patch of each supported line the Kubernetes documentation ("Operating etcd
/// clusters for Kubernetes") recommends for production: earlier 3.5 patches have known
/// data-inconsistency bugs.
pub const MINIMUM_RECOMMENDED: &[EtcdVersion] = &[EtcdVersion {
    major: 3,
    minor: 5,
    patch: 6,
}];

/// The oldest line the etcd project still supports (the two newest minors): an older one
/// gets no fixes.
pub const OLDEST_SUPPORTED_LINE: (u64, u64) = (3, 5);

/// What kubeadm pairs with `target`, or `None` beyond the table.
pub fn kubeadm_etcd(target: MinorVersion) -> Option<&'static KubeadmEtcd> {
    KUBEADM_ETCD
        .iter()
        .find(|row| (row.from..=row.to).contains(&target.minor()) && target.major() == 1)
}

/// What a running etcd is, against `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EtcdFit {
    /// The line kubeadm pairs with the target, at a recommended patch.
    Fits,
    /// A line the etcd project no longer supports.
    Unsupported,
    /// Below the documentation's minimum recommended patch of its line.
    BelowMinimum(EtcdVersion),
    /// Older than the line kubeadm pairs with the target (kubeadm would upgrade it).
    OlderLine((u64, u64)),
    /// Newer than the line kubeadm pairs with the target: not tested with it.
    NewerLine((u64, u64)),
    /// The target is newer than the table.
    Beyond,
    /// The target is older than the table: not judged.
    Before,
}

/// How `running` fits `target`.
pub fn fit(running: EtcdVersion, target: MinorVersion) -> EtcdFit {
    // Releases older than the table ran with older etcd lines (1.20 with 3.4): what the
    // etcd project supports today says nothing about them.
    if KUBEADM_ETCD
        .first()
        .is_some_and(|first| target < MinorVersion::new(1, first.from))
    {
        return EtcdFit::Before;
    }
    if running.line() < OLDEST_SUPPORTED_LINE {
        return EtcdFit::Unsupported;
    }
    if let Some(minimum) = MINIMUM_RECOMMENDED
        .iter()
        .find(|m| m.line() == running.line())
        && running < *minimum
    {
        return EtcdFit::BelowMinimum(*minimum);
    }
    let Some(row) = kubeadm_etcd(target) else {
        return EtcdFit::Beyond;
    };
    match running.line().cmp(&row.line) {
        std::cmp::Ordering::Less => EtcdFit::OlderLine(row.line),
        std::cmp::Ordering::Greater => EtcdFit::NewerLine(row.line),
        std::cmp::Ordering::Equal => EtcdFit::Fits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> EtcdVersion {
        EtcdVersion::parse(text).expect("a version")
    }

    #[test]
    fn versions_parse_from_servers_and_image_tags() {
        assert_eq!(v("3.5.21"), v("v3.5.21"));
        assert_eq!(v("3.6.9-0").to_string(), "3.6.9");
        for bad in ["", "3.5", "3.5.x", "3.5.1.2", "latest"] {
            assert_eq!(EtcdVersion::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_table_covers_each_release_once_up_to_the_newest_known() {
        for minor in 29..=NEWEST_KNOWN.minor() {
            let rows = KUBEADM_ETCD
                .iter()
                .filter(|r| (r.from..=r.to).contains(&minor))
                .count();
            assert_eq!(rows, 1, "1.{minor}");
        }
        assert!(KUBEADM_ETCD.iter().all(|r| !r.source.is_empty()));
        for row in KUBEADM_ETCD {
            if let Some(image) = row.image {
                assert_eq!(v(image).line(), row.line, "{image}");
            }
        }
        assert_eq!(kubeadm_etcd(MinorVersion::new(1, 37)), None);
    }

    #[test]
    fn running_etcd_is_judged_against_the_targets_line() {
        let table: &[(&str, (u64, u64), EtcdFit)] = &[
            ("3.5.24", (1, 33), EtcdFit::Fits),
            ("3.6.5", (1, 34), EtcdFit::Fits),
            ("3.5.24", (1, 34), EtcdFit::OlderLine((3, 6))),
            ("3.6.5", (1, 33), EtcdFit::NewerLine((3, 5))),
            ("3.5.3", (1, 33), EtcdFit::BelowMinimum(v("3.5.6"))),
            ("3.4.30", (1, 33), EtcdFit::Unsupported),
            ("3.6.5", (1, 37), EtcdFit::Beyond),
            ("3.4.23", (1, 20), EtcdFit::Before),
        ];
        for (running, (major, minor), expected) in table {
            assert_eq!(
                fit(v(running), MinorVersion::new(*major, *minor)),
                *expected,
                "{running} for {major}.{minor}"
            );
        }
    }
}
