//! Versions that are not versions, on the command line. `plan` parses the version before it
//! connects, so these run against the shared cluster and prove it is left alone.

use super::{Case, On};

/// `plan <version>` against the shared cluster.
fn plan(version: &'static str) -> Case {
    Case::new(&["plan", version]).on(On::Sim).exits(2)
}

crate::hostile_cases! {
    version_empty => plan("").says(&["is empty", "accepted forms: v1.33.2"]),
    version_release_label => plan("latest").says(&["release labels", "give an exact version"]),
    version_uppercase_prefix => plan("V1.34.0").says(&["lowercase \"v\""]),
    version_patch_not_a_number => plan("v1.34.x").says(&["patch number is \"x\"", "accepted forms"]),
    version_leading_zero => plan("v1.034.0").says(&["leading zero", "accepted forms"]),
    version_number_too_large => plan("v1.99999999999999999999.0").says(&["minor number is too large"]),
    version_four_numbers => plan("1.34.0.1").says(&["more than three numbers", "major.minor.patch"]),
    version_non_ascii_digit => plan("v1.34.\u{ff10}").says(&["non-ascii character", "accepted forms"]),
    version_negative_minor => plan("v1.-34.0").says(&["minor number is negative"]),
    version_malformed_pre_release => plan("v1.34.0-RC1").says(&["pre-release \"rc1\" is malformed", "v1.34.0-rc.1"]),
    version_longer_than_an_image_tag => Case::new(&["manifests", "v1.34.0-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"])
        .exits(2)
        .says(&["characters long", "128"]),
}
