//! Kubernetes versions as users, API servers and kubelets write them.
//!
//! Grammar (a leading `v` is optional; leading and trailing whitespace is ignored):
//!
//! ```text
//! version     = ["v"] major "." minor "." patch ["-" suffix] ["+" build]
//! suffix      = pre-release ["-" vendor] | vendor
//! pre-release = ("alpha" | "beta" | "rc") *("." number)
//! vendor      = letter *(letter | digit | "." | "-")
//! build       = identifier *("." identifier), identifier = 1*(letter | digit | "-")
//! ```
//!
//! Vendor suffixes (`-eks-931bdca`, `-gke.1200`, `-eks-1-30-1`) mark a vendor's build of a
//! Kubernetes *release*: EKS and GKE put them on their stable versions. They are therefore not
//! pre-releases even though semver would read a `-suffix` as one; only `alpha`, `beta` and `rc`
//! (the forms Kubernetes itself publishes) are. The suffix is kept as written for display and
//! image tags. A suffix that *looks* like a pre-release but is not written as one (`rc1`,
//! `RC.1`) is refused rather than silently taken for a release.
//!
//! Ordering is on (major, minor, patch), then the pre-release: `alpha < beta < rc < release`,
//! and within a kind numerically by the dot-separated numbers (`rc.2 < rc.10`, `alpha.0 <
//! alpha.0.1234`, the latter being a development build). Vendor suffixes and build metadata do
//! not take part, and equality follows ordering: `v1.33.2+k3s1 == v1.33.2-eks-abc == v1.33.2`,
//! because they ship the same Kubernetes code. Compare the displayed strings when the exact
//! spelling matters.

mod error;

/// The version in an image reference's tag, e.g. `v1.33.1` in
/// `registry.k8s.io/kube-apiserver:v1.33.1`.
pub fn image_version(image: &str) -> Option<KubeVersion> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last = without_digest.rsplit('/').next().unwrap_or(without_digest);
    let (_, tag) = last.rsplit_once(':')?;
    KubeVersion::parse(tag).ok()
}

#[cfg(test)]
mod laws;
#[cfg(test)]
mod tests;

pub use error::{
    ACCEPTED_FORMS, MAX_VERSION_LEN, Part, VersionError, VersionOrigin, VersionProblem,
};

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

/// The kind of a Kubernetes pre-release, in release order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PreReleaseKind {
    /// `alpha.N`: early development builds of a minor.
    Alpha,
    /// `beta.N`: feature-complete builds of a minor.
    Beta,
    /// `rc.N`: release candidates.
    Rc,
}

impl PreReleaseKind {
    fn word(self) -> &'static str {
        match self {
            PreReleaseKind::Alpha => "alpha",
            PreReleaseKind::Beta => "beta",
            PreReleaseKind::Rc => "rc",
        }
    }
}

/// A parsed pre-release; `text` is its canonical spelling, kept so that it can be lent out.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PreRelease {
    kind: PreReleaseKind,
    numbers: Vec<u64>,
    text: String,
}

/// A Kubernetes version such as `v1.33.2`, `v1.34.0-rc.1`, `v1.33.2+k3s1` or
/// `v1.30.14-eks-931bdca`. See the module documentation for the grammar and the ordering.
#[derive(Debug, Clone)]
pub struct KubeVersion {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Option<PreRelease>,
    vendor: Option<String>,
    build: Option<String>,
}

/// A Kubernetes minor release line such as `v1.33`: the unit of the version-skew policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MinorVersion {
    major: u64,
    minor: u64,
}

impl MinorVersion {
    /// The release line `major.minor`.
    pub const fn new(major: u64, minor: u64) -> Self {
        MinorVersion { major, minor }
    }

    /// Major version number.
    pub fn major(self) -> u64 {
        self.major
    }

    /// Minor version number.
    pub fn minor(self) -> u64 {
        self.minor
    }

    /// The next release line of the same major (`v1.33` → `v1.34`); Kubernetes has never
    /// bumped its major, so neither do we.
    pub fn next(self) -> Self {
        MinorVersion::new(self.major, self.minor.saturating_add(1))
    }

    /// The previous release line of the same major, or `None` for `vN.0`.
    pub fn previous(self) -> Option<Self> {
        Some(MinorVersion::new(self.major, self.minor.checked_sub(1)?))
    }

    /// How many minor releases `self` is ahead of `other`: `Some(0)` when equal or behind,
    /// `None` when the majors differ (the skew policy has no answer across majors).
    pub fn minors_ahead_of(self, other: MinorVersion) -> Option<u64> {
        (self.major == other.major).then(|| self.minor.saturating_sub(other.minor))
    }
}

impl fmt::Display for MinorVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}", self.major, self.minor)
    }
}

impl serde::Serialize for MinorVersion {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl KubeVersion {
    /// A release version from its numbers, without suffix or metadata.
    pub fn new(major: u64, minor: u64, patch: u64) -> Self {
        KubeVersion {
            major,
            minor,
            patch,
            pre: None,
            vendor: None,
            build: None,
        }
    }

    /// Parses a version given by a user (command line, configuration file), with or without
    /// the leading `v`. Refuses anything outside the grammar of the module documentation with
    /// a message that says what is wrong and shows the accepted forms.
    pub fn parse(input: &str) -> Result<Self, VersionError> {
        parse_with(input, VersionOrigin::Input)
    }

    /// Parses the `gitVersion` of an API server's `/version` response (`v1.33.2`,
    /// `v1.33.2+k3s1`, `v1.30.14-eks-931bdca`, development builds such as
    /// `v1.35.0-alpha.0.123+0123456789ab`). Same grammar as [`KubeVersion::parse`]; the error
    /// says the server reported it, since the person reading it did not type it.
    pub fn from_git_version(git_version: &str) -> Result<Self, VersionError> {
        parse_with(git_version, VersionOrigin::GitVersion)
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

    /// The release line of this version, e.g. `v1.33` for `v1.33.2`.
    pub fn minor_version(&self) -> MinorVersion {
        MinorVersion::new(self.major, self.minor)
    }

    /// The pre-release part as written (`rc.1`), if this is a pre-release.
    pub fn pre_release(&self) -> Option<&str> {
        self.pre.as_ref().map(|pre| pre.text.as_str())
    }

    /// The kind of pre-release, if this is one.
    pub fn pre_release_kind(&self) -> Option<PreReleaseKind> {
        self.pre.as_ref().map(|pre| pre.kind)
    }

    /// Whether this is an alpha, beta or release candidate rather than a release. Vendor
    /// builds of releases (`v1.30.14-eks-931bdca`) are releases.
    pub fn is_pre_release(&self) -> bool {
        self.pre.is_some()
    }

    /// The vendor suffix as written (`eks-931bdca` in `v1.30.14-eks-931bdca`), if any.
    pub fn vendor_suffix(&self) -> Option<&str> {
        self.vendor.as_deref()
    }

    /// The build metadata after `+` (`k3s1` in `v1.33.2+k3s1`), if any.
    pub fn build_metadata(&self) -> Option<&str> {
        self.build.as_deref()
    }

    /// The container image tag for this version, e.g. `v1.33.2`; as kubeadm does, characters
    /// that image tags do not allow (anything outside `[-a-zA-Z0-9_.]`, here only the `+` of
    /// build metadata) become `_`, so `v1.33.2+k3s1` is tagged `v1.33.2_k3s1`.
    pub fn image_tag(&self) -> String {
        self.to_string()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }
}

fn parse_with(raw: &str, origin: VersionOrigin) -> Result<KubeVersion, VersionError> {
    let fail = |problem| VersionError::new(raw, origin, problem);
    let text = raw.trim();
    if text.is_empty() {
        return Err(fail(VersionProblem::Empty));
    }
    let length = text.chars().count();
    if length > MAX_VERSION_LEN {
        return Err(fail(VersionProblem::TooLong(length)));
    }
    if let Some(c) = text.chars().find(|c| !c.is_ascii()) {
        return Err(fail(VersionProblem::NonAscii(c)));
    }
    if text.chars().any(|c| c.is_ascii_whitespace()) {
        return Err(fail(VersionProblem::Whitespace));
    }
    let lower = text.to_ascii_lowercase();
    if ["latest", "stable", "ci/", "release/"]
        .iter()
        .any(|label| lower.starts_with(label))
    {
        return Err(fail(VersionProblem::ReleaseLabel));
    }
    if text.starts_with('V') {
        return Err(fail(VersionProblem::UppercasePrefix));
    }
    parse_ascii(text.strip_prefix('v').unwrap_or(text)).map_err(fail)
}

/// Parses the ASCII text after the optional `v`.
fn parse_ascii(text: &str) -> Result<KubeVersion, VersionProblem> {
    let (numbers, rest) = parse_numbers(text)?;
    let [major, minor, patch] = numbers;
    let (suffix, build) = match rest.split_once('+') {
        Some((suffix, build)) => (suffix, Some(build)),
        None => (rest, None),
    };
    let (pre, vendor) = match suffix.strip_prefix('-') {
        Some(suffix) => parse_suffix(suffix)?,
        None => (None, None),
    };
    let build = build.map(parse_build).transpose()?;
    Ok(KubeVersion {
        major,
        minor,
        patch,
        pre,
        vendor,
        build,
    })
}

/// Reads `major.minor.patch` and returns the numbers and the rest (empty, or starting with
/// `-` or `+`).
fn parse_numbers(text: &str) -> Result<([u64; 3], &str), VersionProblem> {
    let mut numbers = [0u64; 3];
    let mut rest = text;
    for (index, part) in [Part::Major, Part::Minor, Part::Patch]
        .into_iter()
        .enumerate()
    {
        if index > 0 {
            match rest.strip_prefix('.') {
                Some(after_dot) => rest = after_dot,
                None => {
                    return Err(VersionProblem::Missing {
                        part,
                        example: example_of(&numbers[..index]),
                    });
                }
            }
        }
        let end = rest.find(['.', '-', '+']).unwrap_or(rest.len());
        let (digits, after) = rest.split_at(end);
        if digits.is_empty() {
            let negative = after
                .strip_prefix('-')
                .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()));
            return Err(if negative {
                VersionProblem::Negative(part)
            } else {
                VersionProblem::Missing {
                    part,
                    example: example_of(&numbers[..index]),
                }
            });
        }
        numbers[index] = parse_number(digits).map_err(|problem| match problem {
            NumberProblem::NotDigits => VersionProblem::NotANumber {
                part,
                found: digits.to_string(),
            },
            NumberProblem::LeadingZero => VersionProblem::LeadingZero {
                part,
                found: digits.to_string(),
            },
            NumberProblem::TooLarge => VersionProblem::TooLarge(part),
        })?;
        rest = after;
    }
    if let Some(after_dot) = rest.strip_prefix('.') {
        return Err(if after_dot.starts_with(|c: char| c.is_ascii_digit()) {
            VersionProblem::ExtraNumber
        } else {
            VersionProblem::Unexpected('.')
        });
    }
    Ok((numbers, rest))
}

/// A complete version that starts with the numbers given so far, for "give a full version such
/// as …": `1.33` suggests `v1.33.0`.
fn example_of(given: &[u64]) -> String {
    match given {
        [major, minor] => format!("v{major}.{minor}.0"),
        [major] => format!("v{major}.0.0"),
        _ => "v1.33.0".to_string(),
    }
}

enum NumberProblem {
    NotDigits,
    LeadingZero,
    TooLarge,
}

fn parse_number(digits: &str) -> Result<u64, NumberProblem> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(NumberProblem::NotDigits);
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return Err(NumberProblem::LeadingZero);
    }
    digits.parse().map_err(|_| NumberProblem::TooLarge)
}

/// Splits the text after the first `-` into a pre-release and a vendor suffix.
fn parse_suffix(suffix: &str) -> Result<(Option<PreRelease>, Option<String>), VersionProblem> {
    let (first, after) = match suffix.split_once('-') {
        Some((first, after)) => (first, Some(after)),
        None => (suffix, None),
    };
    if !looks_like_pre_release(first) {
        return Ok((None, Some(parse_vendor(suffix)?)));
    }
    let pre = parse_pre_release(first)
        .ok_or_else(|| VersionProblem::MalformedPreRelease(first.to_string()))?;
    let vendor = after.map(parse_vendor).transpose()?;
    Ok((Some(pre), vendor))
}

/// Whether a suffix segment is meant as a pre-release: it starts with a pre-release word (in
/// any case) followed by nothing, a dot or a digit. `rcx` is a vendor's name; `rc1` and `RC.1`
/// are pre-releases written wrongly.
fn looks_like_pre_release(segment: &str) -> bool {
    let lower = segment.to_ascii_lowercase();
    ["alpha", "beta", "rc"].iter().any(|word| {
        lower.strip_prefix(word).is_some_and(|rest| {
            rest.is_empty() || rest.starts_with(|c: char| c == '.' || c.is_ascii_digit())
        })
    })
}

/// Parses `kind(.number)*` exactly as Kubernetes writes it, or `None`.
fn parse_pre_release(segment: &str) -> Option<PreRelease> {
    let mut fields = segment.split('.');
    let kind = match fields.next()? {
        "alpha" => PreReleaseKind::Alpha,
        "beta" => PreReleaseKind::Beta,
        "rc" => PreReleaseKind::Rc,
        _ => return None,
    };
    let numbers = fields
        .map(|field| parse_number(field).ok())
        .collect::<Option<Vec<u64>>>()?;
    let text = std::iter::once(kind.word().to_string())
        .chain(numbers.iter().map(u64::to_string))
        .collect::<Vec<_>>()
        .join(".");
    Some(PreRelease {
        kind,
        numbers,
        text,
    })
}

fn parse_vendor(vendor: &str) -> Result<String, VersionProblem> {
    let starts_with_letter = vendor.starts_with(|c: char| c.is_ascii_alphabetic());
    let valid = starts_with_letter && !vendor.ends_with('-') && identifiers_valid(vendor);
    if valid {
        Ok(vendor.to_string())
    } else {
        Err(VersionProblem::BadSuffix(vendor.to_string()))
    }
}

fn parse_build(build: &str) -> Result<String, VersionProblem> {
    if identifiers_valid(build) {
        Ok(build.to_string())
    } else {
        Err(VersionProblem::BadBuildMetadata(build.to_string()))
    }
}

/// Dot-separated, non-empty identifiers of letters, digits and dashes (semver's rule).
fn identifiers_valid(text: &str) -> bool {
    text.split('.').all(|identifier| {
        !identifier.is_empty()
            && identifier
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    })
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)?;
        if let Some(pre) = &self.pre {
            write!(f, "-{}", pre.text)?;
        }
        if let Some(vendor) = &self.vendor {
            write!(f, "-{vendor}")?;
        }
        if let Some(build) = &self.build {
            write!(f, "+{build}")?;
        }
        Ok(())
    }
}

/// The part of a version that ordering, equality and hashing look at, arranged so that the
/// tuple's own ordering is the version's: numbers first; then `false` (a pre-release) before
/// `true` (the release); then the pre-release kind and its numbers, where a shorter list that
/// is a prefix sorts first (`alpha.0 < alpha.0.1234`, a later development build).
type Precedence<'a> = (u64, u64, u64, bool, Option<(PreReleaseKind, &'a [u64])>);

impl KubeVersion {
    fn precedence(&self) -> Precedence<'_> {
        let pre = self
            .pre
            .as_ref()
            .map(|pre| (pre.kind, pre.numbers.as_slice()));
        (self.major, self.minor, self.patch, pre.is_none(), pre)
    }
}

impl Ord for KubeVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.precedence().cmp(&other.precedence())
    }
}

impl PartialOrd for KubeVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for KubeVersion {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for KubeVersion {}

impl Hash for KubeVersion {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Exactly the fields equality looks at, so that equal versions hash alike.
        self.precedence().hash(state);
    }
}

impl FromStr for KubeVersion {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KubeVersion::parse(s)
    }
}

impl serde::Serialize for KubeVersion {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for KubeVersion {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        KubeVersion::parse(&text).map_err(serde::de::Error::custom)
    }
}
