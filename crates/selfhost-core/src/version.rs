//! Kubernetes versions as users and API servers write them.
//!
//! (First cut: the version/skew helper hardens this module.)

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// A Kubernetes release version such as `v1.33.2`, `v1.34.0-rc.1` or `v1.33.2+k3s1`.
#[derive(Debug, Clone, Eq)]
pub struct KubeVersion {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Option<String>,
    build: Option<String>,
}

/// A version string that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid Kubernetes version {input:?}: {reason}; expected forms like v1.33.2, 1.33.2, v1.34.0-rc.1 or v1.33.2+k3s1"
)]
pub struct VersionError {
    /// What the user wrote.
    pub input: String,
    /// What was wrong with it.
    pub reason: String,
}

impl KubeVersion {
    /// Builds a release version from its numbers.
    pub fn new(major: u64, minor: u64, patch: u64) -> Self {
        KubeVersion {
            major,
            minor,
            patch,
            pre: None,
            build: None,
        }
    }

    /// Parses a version with or without the leading `v`.
    pub fn parse(input: &str) -> Result<Self, VersionError> {
        let err = |reason: &str| VersionError {
            input: input.to_string(),
            reason: reason.into(),
        };
        let s = input.trim();
        let s = s.strip_prefix('v').unwrap_or(s);
        let (s, build) = match s.split_once('+') {
            Some((a, b)) => (a, Some(b.to_string())),
            None => (s, None),
        };
        let (core, pre) = match s.split_once('-') {
            Some((a, b)) => (a, Some(b.to_string())),
            None => (s, None),
        };
        let nums: Vec<&str> = core.split('.').collect();
        if nums.len() != 3 {
            return Err(err("it must have three numbers, major.minor.patch"));
        }
        let num = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| err("major, minor and patch must be numbers"))
        };
        Ok(KubeVersion {
            major: num(nums[0])?,
            minor: num(nums[1])?,
            patch: num(nums[2])?,
            pre,
            build,
        })
    }

    /// Major version number.
    pub fn major(&self) -> u64 {
        self.major
    }
    /// Minor version number.
    pub fn minor(&self) -> u64 {
        self.minor
    }
    /// Patch version number.
    pub fn patch(&self) -> u64 {
        self.patch
    }
    /// The pre-release part (`rc.1`), if any.
    pub fn pre_release(&self) -> Option<&str> {
        self.pre.as_deref()
    }

    /// The container image tag for this version, e.g. `v1.33.2`; characters that are not
    /// allowed in image tags (such as `+`) become `_`, as kubeadm does.
    pub fn image_tag(&self) -> String {
        self.to_string()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)?;
        if let Some(pre) = &self.pre {
            write!(f, "-{pre}")?;
        }
        if let Some(build) = &self.build {
            write!(f, "+{build}")?;
        }
        Ok(())
    }
}

impl PartialEq for KubeVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl PartialOrd for KubeVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for KubeVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| match (&self.pre, &other.pre) {
                (None, None) => Ordering::Equal,
                (None, Some(_)) => Ordering::Greater,
                (Some(_), None) => Ordering::Less,
                (Some(a), Some(b)) => a.cmp(b),
            })
    }
}

impl FromStr for KubeVersion {
    type Err = VersionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KubeVersion::parse(s)
    }
}
