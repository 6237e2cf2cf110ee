use super::*;

fn v(text: &str) -> KubeVersion {
    KubeVersion::parse(text).unwrap_or_else(|e| panic!("{text:?} should parse: {e}"))
}

/// A parsed version taken apart: numbers, pre-release, its kind, vendor suffix, build metadata
/// and the canonical display.
type Parts<'a> = (
    (u64, u64, u64),
    Option<&'a str>,
    Option<PreReleaseKind>,
    Option<&'a str>,
    Option<&'a str>,
    String,
);

fn parts(version: &KubeVersion) -> Parts<'_> {
    (
        (version.major(), version.minor(), version.patch()),
        version.pre_release(),
        version.pre_release_kind(),
        version.vendor_suffix(),
        version.build_metadata(),
        version.to_string(),
    )
}

#[test]
fn accepted_versions_are_read_into_their_parts() {
    use PreReleaseKind::*;
    // input, numbers, pre-release, kind, vendor, build, canonical display
    #[allow(clippy::type_complexity)]
    let table: &[(
        &str,
        (u64, u64, u64),
        Option<&str>,
        Option<PreReleaseKind>,
        Option<&str>,
        Option<&str>,
        &str,
    )] = &[
        ("v1.33.2", (1, 33, 2), None, None, None, None, "v1.33.2"),
        ("1.33.2", (1, 33, 2), None, None, None, None, "v1.33.2"),
        ("  v1.33.2\n", (1, 33, 2), None, None, None, None, "v1.33.2"),
        ("v1.0.0", (1, 0, 0), None, None, None, None, "v1.0.0"),
        (
            "v1.34.0-rc.1",
            (1, 34, 0),
            Some("rc.1"),
            Some(Rc),
            None,
            None,
            "v1.34.0-rc.1",
        ),
        (
            "1.34.0-beta.0",
            (1, 34, 0),
            Some("beta.0"),
            Some(Beta),
            None,
            None,
            "v1.34.0-beta.0",
        ),
        (
            "v1.34.0-alpha.3",
            (1, 34, 0),
            Some("alpha.3"),
            Some(Alpha),
            None,
            None,
            "v1.34.0-alpha.3",
        ),
        (
            "v1.34.0-rc",
            (1, 34, 0),
            Some("rc"),
            Some(Rc),
            None,
            None,
            "v1.34.0-rc",
        ),
        (
            "v1.33.2+k3s1",
            (1, 33, 2),
            None,
            None,
            None,
            Some("k3s1"),
            "v1.33.2+k3s1",
        ),
        (
            "v1.28.3+rke2r1",
            (1, 28, 3),
            None,
            None,
            None,
            Some("rke2r1"),
            "v1.28.3+rke2r1",
        ),
        (
            "v1.30.14-eks-931bdca",
            (1, 30, 14),
            None,
            None,
            Some("eks-931bdca"),
            None,
            "v1.30.14-eks-931bdca",
        ),
        (
            "v1.30.5-gke.1200",
            (1, 30, 5),
            None,
            None,
            Some("gke.1200"),
            None,
            "v1.30.5-gke.1200",
        ),
        (
            "v1.30.0-eks-1-30-1",
            (1, 30, 0),
            None,
            None,
            Some("eks-1-30-1"),
            None,
            "v1.30.0-eks-1-30-1",
        ),
        (
            "v1.30.0-rcx",
            (1, 30, 0),
            None,
            None,
            Some("rcx"),
            None,
            "v1.30.0-rcx",
        ),
        (
            "v1.34.0-rc.1-eks-abc",
            (1, 34, 0),
            Some("rc.1"),
            Some(Rc),
            Some("eks-abc"),
            None,
            "v1.34.0-rc.1-eks-abc",
        ),
        (
            "v1.34.0-rc.1+k3s1",
            (1, 34, 0),
            Some("rc.1"),
            Some(Rc),
            None,
            Some("k3s1"),
            "v1.34.0-rc.1+k3s1",
        ),
        (
            "v1.35.0-alpha.0.123+0123456789ab-dirty",
            (1, 35, 0),
            Some("alpha.0.123"),
            Some(Alpha),
            None,
            Some("0123456789ab-dirty"),
            "v1.35.0-alpha.0.123+0123456789ab-dirty",
        ),
        (
            "v1.33.18446744073709551615",
            (1, 33, u64::MAX),
            None,
            None,
            None,
            None,
            "v1.33.18446744073709551615",
        ),
    ];
    for &(input, numbers, pre, kind, vendor, build, display) in table {
        let version = v(input);
        let want = (numbers, pre, kind, vendor, build, display.to_string());
        assert_eq!(parts(&version), want, "parts of {input:?}");
        assert_eq!(version.is_pre_release(), pre.is_some(), "{input:?}");
        assert_eq!(
            input.parse::<KubeVersion>().map(|p| p.to_string()),
            Ok(display.to_string())
        );
    }
}

#[test]
fn vendor_builds_of_releases_are_releases_not_pre_releases() {
    for vendor_build in ["v1.30.14-eks-931bdca", "v1.30.5-gke.1200", "v1.29.2-aks.1"] {
        let version = v(vendor_build);
        assert!(!version.is_pre_release(), "{vendor_build}");
        // ...so they sort with the release, after its release candidates.
        let last_candidate = KubeVersion::parse(&format!("v1.{}.0-rc.2", version.minor())).unwrap();
        assert!(
            version > last_candidate,
            "{vendor_build} > {last_candidate}"
        );
    }
}

/// Each refused input with the words its message must contain.
#[test]
fn garbage_is_refused_with_a_message_that_says_what_was_wrong() {
    let table: &[(&str, &[&str])] = &[
        ("", &["empty"]),
        ("   ", &["empty"]),
        ("latest", &["release labels", "exact version", "v1.33.2"]),
        ("stable-1.33", &["release labels"]),
        ("ci/latest", &["release labels"]),
        ("1.33", &["no patch number", "full version such as v1.33.0"]),
        ("v1.33", &["no patch number", "v1.33.0"]),
        ("1.33-rc.1", &["no patch number", "v1.33.0"]),
        ("1", &["no minor number", "v1.0.0"]),
        ("v", &["no major number"]),
        ("1..2", &["no minor number"]),
        ("v1.33.x", &["patch number is \"x\"", "not a number"]),
        ("v1.x.0", &["minor number is \"x\""]),
        ("vv1.33.2", &["major number is \"v1\""]),
        ("1.33.2rc1", &["patch number is \"2rc1\""]),
        (
            "1.33.2.4",
            &["more than three numbers", "major.minor.patch"],
        ),
        ("1.33.2.", &["unexpected '.'"]),
        ("-1.33.2", &["major number is negative"]),
        ("1.-33.2", &["minor number is negative"]),
        ("1.33.-2", &["patch number is negative"]),
        ("1.99999999999999999999.0", &["minor number is too large"]),
        ("1.033.2", &["\"033\"", "leading zero"]),
        ("1.33 .2", &["whitespace"]),
        ("v1.33.2 +k3s1", &["whitespace"]),
        ("v1.33.2\t-rc.1", &["whitespace"]),
        ("v1.３3.2", &["non-ASCII", "'３'"]),
        ("v1.33.2–rc.1", &["non-ASCII", "'–'"]),
        ("V1.33.2", &["lowercase \"v\""]),
        (
            "v1.34.0-rc1",
            &["pre-release \"rc1\" is malformed", "rc.N", "v1.34.0-rc.1"],
        ),
        (
            "v1.34.0-RC.1",
            &["pre-release \"RC.1\" is malformed", "lowercase"],
        ),
        ("v1.34.0-beta.x", &["pre-release \"beta.x\" is malformed"]),
        ("v1.34.0-rc.01", &["malformed"]),
        ("v1.34.0-alpha.", &["malformed"]),
        ("v1.33.2-", &["suffix \"\"", "vendor suffix"]),
        ("1.33.2-1.1", &["suffix \"1.1\"", "vendor suffix"]),
        ("v1.33.2-eks-", &["suffix \"eks-\""]),
        ("v1.33.2-gke..1", &["suffix \"gke..1\""]),
        ("v1.34.0-rc.1-", &["suffix \"\""]),
        ("v1.33.2+", &["build metadata \"\"", "+k3s1"]),
        ("v1.33.2+k3s_1", &["build metadata \"k3s_1\""]),
        ("v1.33.2+a+b", &["build metadata \"a+b\""]),
        (
            "v0.0.0-master+$Format:%H$",
            &["build metadata \"$Format:%H$\""],
        ),
    ];
    for &(input, words) in table {
        let error = KubeVersion::parse(input).expect_err(input);
        let message = error.to_string();
        for word in words {
            assert!(
                message.contains(word),
                "message for {input:?} lacks {word:?}: {message}"
            );
        }
        assert!(
            message.contains(". Accepted forms: v1.33.2 or 1.33.2")
                && message.contains("v1.30.14-eks-931bdca")
                && message.contains("+k3s1"),
            "message for {input:?} does not show the accepted forms: {message}"
        );
        assert!(
            message.starts_with("invalid Kubernetes version"),
            "{message}"
        );
        assert_eq!(error.origin(), VersionOrigin::Input);
    }
}

#[test]
fn a_number_too_large_for_u64_is_refused_and_the_largest_is_not() {
    assert_eq!(
        KubeVersion::parse("1.18446744073709551616.0").map_err(|e| e.problem().clone()),
        Err(VersionProblem::TooLarge(Part::Minor))
    );
    assert_eq!(v("1.18446744073709551615.0").minor(), u64::MAX);
}

#[test]
fn overlong_input_is_refused_and_echoed_shortened() {
    let longest_valid = format!("v1.33.2+{}", "a".repeat(MAX_VERSION_LEN - 8));
    assert_eq!(longest_valid.len(), MAX_VERSION_LEN);
    assert!(KubeVersion::parse(&longest_valid).is_ok());

    let too_long = format!("{longest_valid}b");
    let error = KubeVersion::parse(&too_long).unwrap_err();
    assert_eq!(
        error.problem(),
        &VersionProblem::TooLong(MAX_VERSION_LEN + 1)
    );
    assert!(error.to_string().contains("129 characters long"), "{error}");
    assert!(error.input().ends_with('…'), "{}", error.input());
    assert!(error.input().chars().count() <= 65);
}

#[test]
fn git_versions_of_real_distributions_parse() {
    let table: &[(&str, &str, bool)] = &[
        // gitVersion, minor line, pre-release?
        ("v1.33.2", "v1.33", false),
        ("v1.33.2+k3s1", "v1.33", false),
        ("v1.30.14-eks-931bdca", "v1.30", false),
        ("v1.30.5-gke.1014001", "v1.30", false),
        ("v1.28.3+rke2r1", "v1.28", false),
        ("v1.34.0-rc.0", "v1.34", true),
        ("v1.35.0-alpha.0.1234+0123456789abcd-dirty", "v1.35", true),
    ];
    for &(git_version, minor, pre) in table {
        let version = KubeVersion::from_git_version(git_version)
            .unwrap_or_else(|e| panic!("{git_version}: {e}"));
        assert_eq!(version.to_string(), git_version);
        assert_eq!(version.minor_version().to_string(), minor);
        assert_eq!(version.is_pre_release(), pre, "{git_version}");
    }
}

#[test]
fn a_bad_git_version_is_blamed_on_the_server() {
    let error = KubeVersion::from_git_version("v0.0.0-master+$Format:%H$").unwrap_err();
    assert_eq!(error.origin(), VersionOrigin::GitVersion);
    let message = error.to_string();
    assert!(
        message.starts_with(
            "the API server reported gitVersion \"v0.0.0-master+$Format:%H$\", which is not a \
             Kubernetes version: the build metadata"
        ),
        "{message}"
    );
}

#[test]
fn versions_sort_by_numbers_then_pre_release_kind_then_pre_release_numbers() {
    // Strictly increasing.
    let ascending = [
        "v1.9.9",
        "v1.10.0-alpha.0",
        "v1.10.0-alpha.0.1234",
        "v1.10.0-alpha.1",
        "v1.10.0-alpha.10",
        "v1.10.0-beta",
        "v1.10.0-beta.0",
        "v1.10.0-beta.2",
        "v1.10.0-rc.1",
        "v1.10.0-rc.2",
        "v1.10.0-rc.10",
        "v1.10.0",
        "v1.10.1",
        "v1.10.10",
        "v1.11.0",
        "v2.0.0-alpha.0",
        "v2.0.0",
    ];
    for pair in ascending.windows(2) {
        let (lower, higher) = (v(pair[0]), v(pair[1]));
        assert!(lower < higher, "{} < {}", pair[0], pair[1]);
        assert!(higher > lower, "{} > {}", pair[1], pair[0]);
        assert_ne!(lower, higher);
    }
    let mut shuffled: Vec<KubeVersion> = ascending.iter().rev().map(|s| v(s)).collect();
    shuffled.sort();
    let sorted: Vec<String> = shuffled.iter().map(ToString::to_string).collect();
    assert_eq!(sorted, ascending);
}

#[test]
fn vendor_suffix_and_build_metadata_do_not_affect_ordering_or_equality() {
    use std::collections::HashSet;
    let same = [
        "v1.33.2",
        "1.33.2",
        "v1.33.2+k3s1",
        "v1.33.2-eks-931bdca",
        "v1.33.2-gke.1200+x",
    ];
    let versions: Vec<KubeVersion> = same.iter().map(|s| v(s)).collect();
    for a in &versions {
        for b in &versions {
            assert_eq!(a, b, "{a} == {b}");
            assert_eq!(a.cmp(b), Ordering::Equal);
        }
    }
    let distinct: HashSet<KubeVersion> = versions.into_iter().collect();
    assert_eq!(distinct.len(), 1, "equal versions must hash alike");
    assert!(v("v1.34.0-rc.1-eks-a") == v("v1.34.0-rc.1+b"));
    assert!(v("v1.34.0-rc.1-eks-a") < v("v1.34.0"));
}

#[test]
fn image_tags_replace_characters_registries_refuse() {
    let table = [
        ("v1.33.2", "v1.33.2"),
        ("1.33.2", "v1.33.2"),
        ("v1.34.0-rc.1", "v1.34.0-rc.1"),
        ("v1.33.2+k3s1", "v1.33.2_k3s1"),
        ("v1.30.14-eks-931bdca", "v1.30.14-eks-931bdca"),
        ("v1.35.0-alpha.0.12+abc.def", "v1.35.0-alpha.0.12_abc.def"),
    ];
    for (input, tag) in table {
        assert_eq!(v(input).image_tag(), tag, "{input}");
    }
}

#[test]
fn minor_versions_step_and_measure_release_lines() {
    let line = MinorVersion::new(1, 33);
    assert_eq!(line.to_string(), "v1.33");
    assert_eq!(line.next(), MinorVersion::new(1, 34));
    assert_eq!(line.previous(), Some(MinorVersion::new(1, 32)));
    assert_eq!(MinorVersion::new(1, 0).previous(), None);
    assert_eq!(
        MinorVersion::new(1, u64::MAX).next(),
        MinorVersion::new(1, u64::MAX)
    );
    assert_eq!(MinorVersion::new(1, 35).minors_ahead_of(line), Some(2));
    assert_eq!(line.minors_ahead_of(MinorVersion::new(1, 35)), Some(0));
    assert_eq!(MinorVersion::new(2, 0).minors_ahead_of(line), None);
    assert!(MinorVersion::new(1, 9) < MinorVersion::new(1, 10));
    assert!(MinorVersion::new(1, 99) < MinorVersion::new(2, 0));
    assert_eq!(v("v1.33.2-rc.1+x").minor_version(), line);
}

#[test]
fn versions_serialize_as_their_display_and_deserialize_through_parse() {
    let version = v("1.33.2+k3s1");
    assert_eq!(serde_json::to_string(&version).unwrap(), "\"v1.33.2+k3s1\"");
    assert_eq!(
        serde_json::to_string(&MinorVersion::new(1, 33)).unwrap(),
        "\"v1.33\""
    );
    let back: KubeVersion = serde_json::from_str("\"v1.33.2+k3s1\"").unwrap();
    assert_eq!(back.to_string(), "v1.33.2+k3s1");
    let refused = serde_json::from_str::<KubeVersion>("\"1.33\"").unwrap_err();
    assert!(refused.to_string().contains("no patch number"), "{refused}");
}

#[test]
fn new_builds_a_release() {
    let version = KubeVersion::new(1, 33, 2);
    assert_eq!(version.to_string(), "v1.33.2");
    assert!(!version.is_pre_release());
    assert_eq!(version.vendor_suffix(), None);
    assert_eq!(version.build_metadata(), None);
}
