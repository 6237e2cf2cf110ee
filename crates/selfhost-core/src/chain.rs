//! Chained minor upgrades: a target more than one minor ahead of the control plane is reached
//! one minor at a time, as the version-skew policy requires, through the newest patch of each
//! minor between (or the patches the operator gives). Each hop is an upgrade of its own,
//! planned and checked again when it starts, with its own resume and rollback.

use std::fmt;

use serde::Serialize;

use crate::skew::{Finding, SkewRule};
use crate::version::{KubeVersion, MinorVersion};

/// Where a hop's version comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum HopSource {
    /// The target the operator asked for.
    Target,
    /// Given with `--via`.
    Given,
    /// The newest patch of its minor, as the release index says.
    Newest {
        /// Where that was read.
        from: String,
    },
}

/// One hop of a chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hop {
    /// The version the control plane runs before it.
    pub from: KubeVersion,
    /// The version it runs after it.
    pub to: KubeVersion,
    /// Where `to` comes from.
    pub source: HopSource,
}

impl fmt::Display for Hop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} → {}", self.from, self.to)?;
        match &self.source {
            HopSource::Target => Ok(()),
            HopSource::Given => f.write_str(" (given with --via)"),
            HopSource::Newest { from } => {
                write!(f, " (the newest {} patch, {from})", self.to.minor_version())
            }
        }
    }
}

/// Why no chain can be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// A `--via` version is not on the way.
    #[error(
        "--via {given}: not a minor between {current} and {target}; give one version for each \
         of {between}"
    )]
    NotOnTheWay {
        /// The version given.
        given: String,
        /// Where the control plane is.
        current: String,
        /// The target.
        target: String,
        /// The minors between, e.g. `v1.34, v1.35`.
        between: String,
    },
    /// Two `--via` versions of one minor.
    #[error("--via gives two versions of {minor}: {first} and {second}; give one")]
    Twice {
        /// The minor.
        minor: String,
        /// The first given.
        first: String,
        /// The second given.
        second: String,
    },
    /// `--via` without a chain to shape.
    #[error(
        "--via: the target {target} is at most one minor ahead of {current}, so there is no \
         hop between; leave --via out"
    )]
    NoChain {
        /// Where the control plane is.
        current: String,
        /// The target.
        target: String,
    },
}

/// Whether hops would let the skew policy allow the target: it refuses only for skipping
/// minors. A target refused for anything else (unsupported, kubelets too old for it) is
/// planned as one hop, so that the refusal says why, and no release index is asked.
pub fn chainable(findings: &[Finding]) -> bool {
    let blocking = || findings.iter().filter(|f| f.blocking);
    blocking().any(|f| f.rule == SkewRule::UpgradeSkipsMinor)
        && blocking().all(|f| f.rule == SkewRule::UpgradeSkipsMinor)
}

/// The minors strictly between `current` and `target` (empty unless `target` is two or more
/// minors ahead).
pub fn minors_between(current: MinorVersion, target: MinorVersion) -> Vec<MinorVersion> {
    let mut between = Vec::new();
    if current.major() != target.major() {
        return between;
    }
    let mut minor = current.next();
    while minor < target {
        between.push(minor);
        minor = minor.next();
    }
    between
}

/// Checks `--via` against the way from `current` to `target`: one version per minor between,
/// at most, each on the way.
pub fn check_given(
    current: &KubeVersion,
    target: &KubeVersion,
    given: &[KubeVersion],
) -> Result<(), ChainError> {
    let between = minors_between(current.minor_version(), target.minor_version());
    if !given.is_empty() && between.is_empty() {
        return Err(ChainError::NoChain {
            current: current.to_string(),
            target: target.to_string(),
        });
    }
    for (at, version) in given.iter().enumerate() {
        if !between.contains(&version.minor_version()) {
            return Err(ChainError::NotOnTheWay {
                given: version.to_string(),
                current: current.to_string(),
                target: target.to_string(),
                between: between
                    .iter()
                    .map(|m| m.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if let Some(first) = given[..at]
            .iter()
            .find(|g| g.minor_version() == version.minor_version())
        {
            return Err(ChainError::Twice {
                minor: version.minor_version().to_string(),
                first: first.to_string(),
                second: version.to_string(),
            });
        }
    }
    Ok(())
}

/// The hops from `current` to `target`, given the version of each minor between (`between`,
/// in order, from [`minors_between`]); one hop when there is none between.
pub fn hops(
    current: &KubeVersion,
    target: &KubeVersion,
    between: Vec<(KubeVersion, HopSource)>,
) -> Vec<Hop> {
    let mut chain = Vec::new();
    let mut from = current.clone();
    for (to, source) in between
        .into_iter()
        .chain([(target.clone(), HopSource::Target)])
    {
        chain.push(Hop {
            from: from.clone(),
            to: to.clone(),
            source,
        });
        from = to;
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> KubeVersion {
        KubeVersion::parse(text).expect("a version")
    }

    #[test]
    fn the_minors_between_are_strictly_between() {
        let between = |a: &str, b: &str| -> Vec<String> {
            minors_between(v(a).minor_version(), v(b).minor_version())
                .iter()
                .map(|m| m.to_string())
                .collect()
        };
        assert_eq!(between("v1.33.1", "v1.36.2"), ["v1.34", "v1.35"]);
        assert!(between("v1.33.1", "v1.34.0").is_empty());
        assert!(between("v1.33.1", "v1.33.4").is_empty());
        assert!(between("v1.34.1", "v1.33.4").is_empty());
    }

    #[test]
    fn hops_run_from_the_current_version_through_each_given_one_to_the_target() {
        let chain = hops(
            &v("v1.33.1"),
            &v("v1.36.2"),
            vec![
                (
                    v("v1.34.3"),
                    HopSource::Newest {
                        from: "https://dl.k8s.io/release/stable-1.34.txt".into(),
                    },
                ),
                (v("v1.35.1"), HopSource::Given),
            ],
        );
        let shown: Vec<String> = chain.iter().map(|h| h.to_string()).collect();
        assert_eq!(
            shown,
            [
                "v1.33.1 → v1.34.3 (the newest v1.34 patch, https://dl.k8s.io/release/stable-1.34.txt)",
                "v1.34.3 → v1.35.1 (given with --via)",
                "v1.35.1 → v1.36.2",
            ]
        );
        assert_eq!(hops(&v("v1.33.1"), &v("v1.34.0"), vec![]).len(), 1);
    }

    #[test]
    fn only_a_target_refused_for_skipping_minors_is_chained() {
        use crate::skew::{ApiServerVersion, KubeletVersion, SUPPORTED_VERSIONS, SkewInput};
        let findings = |target: &str, kubelet: &str| {
            crate::skew::check(&SkewInput {
                control_plane: vec![ApiServerVersion {
                    name: "cp-1".into(),
                    version: v("v1.33.1"),
                }],
                target: v(target),
                kubelets: vec![KubeletVersion {
                    node: "cp-1".into(),
                    version: kubelet.into(),
                }],
                supported: SUPPORTED_VERSIONS,
                flags: Default::default(),
            })
            .findings
        };
        assert!(chainable(&findings("v1.36.2", "v1.33.1")));
        // Kubelets four minors behind the target: hops would not help.
        assert!(!chainable(&findings("v1.37.0", "v1.33.1")));
        // Beyond what selfhost supports.
        assert!(!chainable(&findings("v1.38.0", "v1.36.0")));
        // One minor ahead, or a downgrade: nothing to chain.
        assert!(!chainable(&findings("v1.34.0", "v1.33.1")));
        assert!(!chainable(&findings("v1.31.0", "v1.33.1")));
    }

    #[test]
    fn given_versions_must_each_be_one_of_the_minors_between() {
        let (from, to) = (v("v1.33.1"), v("v1.36.2"));
        assert_eq!(
            check_given(&from, &to, &[v("v1.35.1"), v("v1.34.2")]),
            Ok(())
        );
        let err = check_given(&from, &to, &[v("v1.36.0")]).expect_err("not between");
        assert_eq!(
            err.to_string(),
            "--via v1.36.0: not a minor between v1.33.1 and v1.36.2; give one version for each of \
             v1.34, v1.35"
        );
        let err = check_given(&from, &to, &[v("v1.34.1"), v("v1.34.2")]).expect_err("twice");
        assert_eq!(
            err.to_string(),
            "--via gives two versions of v1.34: v1.34.1 and v1.34.2; give one"
        );
        let err = check_given(&from, &v("v1.34.0"), &[v("v1.34.1")]).expect_err("no chain");
        assert!(err.to_string().contains("leave --via out"), "{err}");
    }
}
