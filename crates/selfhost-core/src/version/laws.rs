//! Laws of version ordering, checked on generated versions.

use super::*;
use proptest::prelude::*;
use std::collections::hash_map::DefaultHasher;

/// A generated version: its full spelling and the same version without vendor suffix and
/// build metadata (which must compare equal to it).
#[derive(Debug, Clone)]
struct Spelled {
    full: String,
    bare: String,
}

/// Small numbers most of the time, so that generated versions often tie or neighbour each
/// other and the laws see equal and adjacent pairs; sometimes any number.
fn number() -> impl Strategy<Value = u64> {
    prop_oneof![6 => 0u64..3, 1 => any::<u64>()]
}

fn pre_release() -> impl Strategy<Value = Option<String>> {
    let kind = prop_oneof![Just("alpha"), Just("beta"), Just("rc")];
    let numbers = proptest::collection::vec(0u64..3, 0..3);
    proptest::option::of((kind, numbers).prop_map(|(kind, numbers)| {
        std::iter::once(kind.to_string())
            .chain(numbers.iter().map(u64::to_string))
            .collect::<Vec<_>>()
            .join(".")
    }))
}

fn spelled() -> impl Strategy<Value = Spelled> {
    let vendor = proptest::option::of("(eks|gke|aks|vmware)([.-][a-z0-9]{1,7}){0,3}");
    let build = proptest::option::of("[a-zA-Z0-9-]{1,8}(\\.[a-zA-Z0-9-]{1,8}){0,2}");
    (
        any::<bool>(),
        number(),
        number(),
        number(),
        pre_release(),
        vendor,
        build,
    )
        .prop_map(|(v_prefix, major, minor, patch, pre, vendor, build)| {
            let mut bare = format!("{}{major}.{minor}.{patch}", if v_prefix { "v" } else { "" });
            if let Some(pre) = pre {
                bare = format!("{bare}-{pre}");
            }
            let mut full = bare.clone();
            if let Some(vendor) = vendor {
                full = format!("{full}-{vendor}");
            }
            if let Some(build) = build {
                full = format!("{full}+{build}");
            }
            Spelled { full, bare }
        })
        .prop_filter("fits an image tag", |s| s.full.len() <= MAX_VERSION_LEN)
}

fn parsed(spelled: &Spelled) -> KubeVersion {
    KubeVersion::parse(&spelled.full).unwrap_or_else(|e| panic!("{spelled:?}: {e}"))
}

fn hash_of(version: &KubeVersion) -> u64 {
    let mut hasher = DefaultHasher::new();
    version.hash(&mut hasher);
    hasher.finish()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn display_round_trips_through_parse(s in spelled()) {
        let version = parsed(&s);
        let shown = version.to_string();
        let again = KubeVersion::parse(&shown).unwrap();
        prop_assert_eq!(again.to_string(), shown.clone());
        prop_assert_eq!(again.cmp(&version), Ordering::Equal);
        let written = s.full.strip_prefix('v').unwrap_or(&s.full);
        prop_assert_eq!(shown, format!("v{written}"));
    }

    #[test]
    fn ordering_is_antisymmetric_and_agrees_with_equality_and_hash(a in spelled(), b in spelled()) {
        let (a, b) = (parsed(&a), parsed(&b));
        prop_assert_eq!(a.cmp(&b), b.cmp(&a).reverse());
        prop_assert_eq!(a.partial_cmp(&b), Some(a.cmp(&b)));
        prop_assert_eq!(a == b, a.cmp(&b) == Ordering::Equal);
        if a == b {
            prop_assert_eq!(hash_of(&a), hash_of(&b));
        }
    }

    #[test]
    fn ordering_is_transitive(a in spelled(), b in spelled(), c in spelled()) {
        let (a, b, c) = (parsed(&a), parsed(&b), parsed(&c));
        if a <= b && b <= c {
            prop_assert!(a <= c, "{} <= {} <= {} but not {} <= {}", a, b, c, a, c);
        }
        if a == b && b == c {
            prop_assert!(a == c);
        }
        if a < b && b < c {
            prop_assert!(a < c);
        }
    }

    #[test]
    fn vendor_suffix_and_build_metadata_never_change_the_order(s in spelled(), other in spelled()) {
        let (full, bare, other) = (parsed(&s), KubeVersion::parse(&s.bare).unwrap(), parsed(&other));
        prop_assert_eq!(full.cmp(&bare), Ordering::Equal);
        prop_assert_eq!(full.cmp(&other), bare.cmp(&other));
        prop_assert_eq!(hash_of(&full), hash_of(&bare));
    }

    #[test]
    fn a_release_sorts_after_all_its_pre_releases(s in spelled()) {
        let version = parsed(&s);
        let release = KubeVersion::new(version.major(), version.minor(), version.patch());
        prop_assert_eq!(version < release, version.is_pre_release());
        prop_assert_eq!(version.minor_version(), release.minor_version());
    }

    #[test]
    fn image_tags_hold_only_characters_registries_accept(s in spelled()) {
        let tag = parsed(&s).image_tag();
        prop_assert!(tag.len() <= MAX_VERSION_LEN);
        prop_assert!(tag.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)), "{}", tag);
    }

    #[test]
    fn parse_never_panics_on_arbitrary_text(text in ".{0,140}") {
        let _ = KubeVersion::parse(&text);
        let _ = KubeVersion::from_git_version(&text);
    }
}
