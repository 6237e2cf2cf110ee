//! Why a version string was refused, worded for the person who typed it.

use std::fmt;

/// The forms [`super::KubeVersion::parse`] accepts, shown with every refusal so that the fix is
/// on the screen next to the problem.
pub const ACCEPTED_FORMS: &str = "Accepted forms: v1.33.2 or 1.33.2, optionally with a \
     pre-release (v1.34.0-rc.1, v1.34.0-beta.0, v1.34.0-alpha.3), a vendor suffix \
     (v1.30.14-eks-931bdca, v1.30.5-gke.1200) or build metadata (v1.33.2+k3s1)";

/// The longest version accepted. A version becomes a container image tag, and registries
/// refuse tags longer than 128 characters.
pub const MAX_VERSION_LEN: usize = 128;

/// Where a version string came from; it changes who can fix a bad one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionOrigin {
    /// Typed by a user (command line, configuration file): the message tells them what to write.
    Input,
    /// Reported by a kube-apiserver's `/version` endpoint as `gitVersion`.
    GitVersion,
}

/// The three numbers of a version, named in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The major number (`1` in `v1.33.2`).
    Major,
    /// The minor number (`33` in `v1.33.2`).
    Minor,
    /// The patch number (`2` in `v1.33.2`).
    Patch,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::Major => "major",
            Part::Minor => "minor",
            Part::Patch => "patch",
        })
    }
}

/// What exactly is wrong with a version string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionProblem {
    /// Nothing (or only whitespace) was given.
    #[error("it is empty")]
    Empty,
    /// Longer than [`MAX_VERSION_LEN`].
    #[error(
        "it is {0} characters long, more than the {MAX_VERSION_LEN} a container image tag allows"
    )]
    TooLong(usize),
    /// Whitespace between the characters (leading and trailing whitespace is ignored).
    #[error("it contains whitespace")]
    Whitespace,
    /// A character outside ASCII, such as a look-alike digit or dash.
    #[error("it contains the non-ASCII character {0:?}")]
    NonAscii(char),
    /// A release label such as `latest` or `stable-1.33`, which would need a download to resolve.
    #[error(
        "release labels such as \"latest\" or \"stable\" are not resolved (that would need a \
         download); give an exact version such as v1.33.2"
    )]
    ReleaseLabel,
    /// `V1.33.2`.
    #[error("the prefix must be a lowercase \"v\"")]
    UppercasePrefix,
    /// A number is missing, e.g. `1.33` has no patch number.
    #[error("it has no {part} number; give a full version such as {example}")]
    Missing {
        /// The missing number.
        part: Part,
        /// A complete version built from what was given, e.g. `v1.33.0` for `1.33`.
        example: String,
    },
    /// A number with a minus sign.
    #[error("the {0} number is negative")]
    Negative(Part),
    /// Something that is not a number where a number belongs, e.g. `x` in `v1.33.x`.
    #[error("the {part} number is {found:?}, which is not a number")]
    NotANumber {
        /// Which number.
        part: Part,
        /// What was found instead.
        found: String,
    },
    /// `v1.033.2`: leading zeros make the same version spellable in several ways, and no image
    /// tag is written that way.
    #[error("the {part} number {found:?} has a leading zero")]
    LeadingZero {
        /// Which number.
        part: Part,
        /// The number as written.
        found: String,
    },
    /// A number beyond 18446744073709551615.
    #[error("the {0} number is too large")]
    TooLarge(Part),
    /// `1.33.2.4`.
    #[error("it has more than three numbers; Kubernetes versions are major.minor.patch")]
    ExtraNumber,
    /// A character that cannot follow the patch number.
    #[error("unexpected {0:?} after the patch number; a suffix starts with \"-\" or \"+\"")]
    Unexpected(char),
    /// Something that starts like a pre-release but is not written as Kubernetes writes them.
    #[error(
        "the pre-release {0:?} is malformed; Kubernetes writes pre-releases in lowercase as \
         alpha.N, beta.N or rc.N, e.g. v1.34.0-rc.1"
    )]
    MalformedPreRelease(String),
    /// A `-suffix` that is neither a pre-release nor a vendor suffix.
    #[error(
        "the suffix {0:?} is neither a pre-release (alpha.N, beta.N, rc.N) nor a vendor suffix \
         (a letter, then letters, digits, dots and dashes, e.g. eks-931bdca or gke.1200)"
    )]
    BadSuffix(String),
    /// A `+build` part that is empty or holds characters outside letters, digits, `.` and `-`.
    #[error(
        "the build metadata {0:?} is not valid; after \"+\" come letters, digits, dots and \
         dashes, e.g. +k3s1"
    )]
    BadBuildMetadata(String),
}

/// A version string that could not be parsed: what was given, where it came from and why it
/// was refused. The message always ends with the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionError {
    input: String,
    origin: VersionOrigin,
    problem: VersionProblem,
}

/// How much of a refused input is repeated in the message: enough to recognise it, not a
/// screenful when someone passes a file's contents by mistake.
const ECHO_LIMIT: usize = 64;

impl VersionError {
    pub(super) fn new(input: &str, origin: VersionOrigin, problem: VersionProblem) -> Self {
        let input = match input.char_indices().nth(ECHO_LIMIT) {
            Some((cut, _)) => format!("{}…", &input[..cut]),
            None => input.to_string(),
        };
        VersionError {
            input,
            origin,
            problem,
        }
    }

    /// The refused text as given (shortened to 64 characters and `…` when longer).
    pub fn input(&self) -> &str {
        &self.input
    }

    /// Where the text came from.
    pub fn origin(&self) -> VersionOrigin {
        self.origin
    }

    /// What is wrong with it.
    pub fn problem(&self) -> &VersionProblem {
        &self.problem
    }
}

impl fmt::Display for VersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.origin {
            VersionOrigin::Input => write!(f, "invalid Kubernetes version {:?}", self.input)?,
            VersionOrigin::GitVersion => write!(
                f,
                "the API server reported gitVersion {:?}, which is not a Kubernetes version",
                self.input
            )?,
        }
        write!(f, ": {}. {ACCEPTED_FORMS}", self.problem)
    }
}

impl std::error::Error for VersionError {}
