use super::*;
use crate::version::{KubeVersion, MinorVersion};
use Severity::{Mandatory, Skippable};
use SkewRule::*;

fn version(text: &str) -> KubeVersion {
    KubeVersion::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn input(control_plane: &[(&str, &str)], target: &str, kubelets: &[(&str, &str)]) -> SkewInput {
    SkewInput {
        control_plane: control_plane
            .iter()
            .map(|&(name, v)| ApiServerVersion {
                name: name.to_string(),
                version: version(v),
            })
            .collect(),
        target: version(target),
        kubelets: kubelets
            .iter()
            .map(|&(node, v)| KubeletVersion {
                node: node.to_string(),
                version: v.to_string(),
            })
            .collect(),
        supported: SUPPORTED_VERSIONS,
        flags: SkewFlags::default(),
    }
}

const NONE: SkewFlags = SkewFlags {
    allow_experimental: false,
    allow_release_candidate: false,
    force: false,
};
const FORCE: SkewFlags = SkewFlags {
    force: true,
    ..NONE
};
const RC: SkewFlags = SkewFlags {
    allow_release_candidate: true,
    ..NONE
};
const EXPERIMENTAL: SkewFlags = SkewFlags {
    allow_experimental: true,
    ..NONE
};
const EXPERIMENTAL_FORCE: SkewFlags = SkewFlags {
    allow_experimental: true,
    force: true,
    ..NONE
};

/// A finding a case expects: its rule, severity, whether it blocks, and words its message
/// must contain.
type Expected = (SkewRule, Severity, bool, &'static [&'static str]);

struct Case {
    name: &'static str,
    control_plane: &'static [(&'static str, &'static str)],
    target: &'static str,
    kubelets: &'static [(&'static str, &'static str)],
    flags: SkewFlags,
    change: VersionChange,
    findings: &'static [Expected],
}

const ONE: &[(&str, &str)] = &[("cp-1", "v1.33.2")];
const PLEASE_FORCE: &str = ", or pass --force to proceed at your own risk";
const FORCED: &str = "; proceeding anyway because --force was given";
const NOT_OVERRIDDEN: &str = "; --force does not override this check";

#[rustfmt::skip]
const CASES: &[Case] = &[
    Case { name: "patch upgrade", control_plane: &[("cp-1", "v1.33.1")], target: "v1.33.2",
        kubelets: &[("n1", "v1.33.1")], flags: NONE, change: VersionChange::Upgrade, findings: &[] },
    Case { name: "one minor up", control_plane: ONE, target: "v1.34.0",
        kubelets: &[("n1", "v1.31.0"), ("n2", "v1.34.0")], flags: NONE, change: VersionChange::Upgrade, findings: &[] },
    Case { name: "same version is a reconfiguration", control_plane: ONE, target: "v1.33.2",
        kubelets: &[("n1", "v1.33.2")], flags: NONE, change: VersionChange::Reconfigure, findings: &[] },
    Case { name: "same version, other build metadata", control_plane: &[("cp-1", "v1.33.2+k3s1")], target: "1.33.2",
        kubelets: &[("n1", "v1.33.2+k3s1")], flags: NONE, change: VersionChange::Reconfigure, findings: &[] },
    Case { name: "one minor down", control_plane: &[("cp-1", "v1.34.1")], target: "v1.33.5",
        kubelets: &[("n1", "v1.33.5")], flags: NONE, change: VersionChange::Downgrade, findings: &[] },
    Case { name: "patch down", control_plane: ONE, target: "v1.33.1",
        kubelets: &[], flags: NONE, change: VersionChange::Downgrade, findings: &[] },
    Case { name: "two minors up, release", control_plane: ONE, target: "v1.35.0", kubelets: &[], flags: NONE,
        change: VersionChange::Upgrade, findings: &[(UpgradeSkipsMinor, Mandatory, true, &[
            "cannot upgrade kube-apiserver on cp-1 from v1.33.2 to v1.35.0 in one step",
            "one minor version at a time; upgrade to v1.34.x first, then to v1.35.x"])] },
    Case { name: "two minors up, release, forced", control_plane: ONE, target: "v1.35.0", kubelets: &[], flags: FORCE,
        change: VersionChange::Upgrade, findings: &[(UpgradeSkipsMinor, Mandatory, true, &[
            "from v1.33.2 to v1.35.0", NOT_OVERRIDDEN])] },
    Case { name: "two minors up, pre-release", control_plane: ONE, target: "v1.35.0-alpha.0", kubelets: &[],
        flags: EXPERIMENTAL, change: VersionChange::Upgrade, findings: &[(UpgradeSkipsMinor, Skippable, true, &[
            "from v1.33.2 to v1.35.0-alpha.0", "then to v1.35.x", PLEASE_FORCE])] },
    Case { name: "two minors up, pre-release, forced", control_plane: ONE, target: "v1.35.0-alpha.0", kubelets: &[],
        flags: EXPERIMENTAL_FORCE, change: VersionChange::Upgrade, findings: &[(UpgradeSkipsMinor, Skippable, false, &[
            "from v1.33.2 to v1.35.0-alpha.0", FORCED])] },
    Case { name: "three minors up", control_plane: &[("cp-1", "v1.30.4")], target: "v1.33.0", kubelets: &[],
        flags: NONE, change: VersionChange::Upgrade, findings: &[(UpgradeSkipsMinor, Mandatory, true, &[
            "upgrade to v1.31.x first, then to v1.32.x, then to v1.33.x"])] },
    Case { name: "eight minors up", control_plane: &[("cp-1", "v1.29.0")], target: "v1.37.0", kubelets: &[],
        flags: NONE, change: VersionChange::Upgrade, findings: &[(UpgradeSkipsMinor, Mandatory, true, &[
            "upgrade to v1.30.x first, then one minor version at a time to v1.37.x"])] },
    Case { name: "two minors down", control_plane: &[("cp-1", "v1.35.1")], target: "v1.33.0", kubelets: &[],
        flags: NONE, change: VersionChange::Downgrade, findings: &[(DowngradeSkipsMinor, Mandatory, true, &[
            "cannot downgrade kube-apiserver on cp-1 from v1.35.1 to v1.33.0 in one step",
            "downgrade to v1.34.x first, then to v1.33.x"])] },
    Case { name: "two minors down to a pre-release, forced", control_plane: &[("cp-1", "v1.35.1")], target: "v1.33.0-rc.1",
        kubelets: &[], flags: EXPERIMENTAL_FORCE, change: VersionChange::Downgrade, findings: &[
            (DowngradeSkipsMinor, Skippable, false, &["from v1.35.1 to v1.33.0-rc.1", FORCED])] },
    Case { name: "release candidate without flags", control_plane: ONE, target: "v1.34.0-rc.1", kubelets: &[],
        flags: NONE, change: VersionChange::Upgrade, findings: &[(PreReleaseNotAllowed, Mandatory, true, &[
            "the target v1.34.0-rc.1 is a release candidate",
            "pass --allow-release-candidate-upgrades (or --allow-experimental-upgrades)"])] },
    Case { name: "release candidate, forced only", control_plane: ONE, target: "v1.34.0-rc.1", kubelets: &[],
        flags: FORCE, change: VersionChange::Upgrade, findings: &[(PreReleaseNotAllowed, Mandatory, true, &[
            "--allow-release-candidate-upgrades", NOT_OVERRIDDEN])] },
    Case { name: "release candidate allowed", control_plane: ONE, target: "v1.34.0-rc.1", kubelets: &[],
        flags: RC, change: VersionChange::Upgrade, findings: &[] },
    Case { name: "release candidate, experimental allowed", control_plane: ONE, target: "v1.34.0-rc.1", kubelets: &[],
        flags: EXPERIMENTAL, change: VersionChange::Upgrade, findings: &[] },
    Case { name: "beta with the rc flag", control_plane: ONE, target: "v1.34.0-beta.0", kubelets: &[],
        flags: RC, change: VersionChange::Upgrade, findings: &[(PreReleaseNotAllowed, Mandatory, true, &[
            "the target v1.34.0-beta.0 is a beta pre-release", "pass --allow-experimental-upgrades",
            "--allow-release-candidate-upgrades allows release candidates only"])] },
    Case { name: "alpha without flags", control_plane: ONE, target: "v1.34.0-alpha.3", kubelets: &[],
        flags: NONE, change: VersionChange::Upgrade, findings: &[(PreReleaseNotAllowed, Mandatory, true, &[
            "v1.34.0-alpha.3 is an alpha pre-release", "--allow-experimental-upgrades"])] },
    Case { name: "vendor build is not a pre-release", control_plane: &[("cp-1", "v1.30.14-eks-931bdca")],
        target: "v1.31.2-eks-1-31-1", kubelets: &[], flags: NONE, change: VersionChange::Upgrade, findings: &[] },
    Case { name: "kubelets too old", control_plane: ONE, target: "v1.34.0",
        kubelets: &[("d", "v1.34.0"), ("b", "v1.29.9"), ("c", "v1.31.0"), ("a", "v1.30.2")], flags: NONE,
        change: VersionChange::Upgrade, findings: &[(KubeletTooOld, Skippable, true, &[
            "the kubelets on nodes a (v1.30.2), b (v1.29.9) are more than 3 minor versions older than the target v1.34.0",
            "upgrade the kubelets on nodes a, b to at least v1.31 first", PLEASE_FORCE])] },
    Case { name: "kubelets too old, forced", control_plane: ONE, target: "v1.34.0",
        kubelets: &[("a", "v1.30.2")], flags: FORCE, change: VersionChange::Upgrade,
        findings: &[(KubeletTooOld, Skippable, false, &["nodes a (v1.30.2)", FORCED])] },
    Case { name: "many kubelets too old", control_plane: ONE, target: "v1.34.0",
        kubelets: &[("n1", "v1.30.0"), ("n2", "v1.30.0"), ("n3", "v1.30.0"), ("n4", "v1.30.0"),
                    ("n5", "v1.30.0"), ("n6", "v1.30.0"), ("n7", "v1.30.0"), ("n8", "v1.30.0")],
        flags: NONE, change: VersionChange::Upgrade, findings: &[(KubeletTooOld, Skippable, true, &[
            "nodes n1 (v1.30.0), n2 (v1.30.0), n3 (v1.30.0), n4 (v1.30.0), n5 (v1.30.0) and 3 more",
            "nodes n1, n2, n3, n4, n5 and 3 more to at least v1.31"])] },
    Case { name: "kubelet newer than the target", control_plane: &[("cp-1", "v1.34.1")], target: "v1.33.2",
        kubelets: &[("w-1", "v1.34.1"), ("w-2", "v1.33.9"), ("w-3", "v1.34.0+k3s1")], flags: NONE,
        change: VersionChange::Downgrade, findings: &[(KubeletNewerThanTarget, Skippable, true, &[
            "the kubelets on nodes w-1 (v1.34.1), w-3 (v1.34.0+k3s1) are newer than the target v1.33.2",
            "never be newer than kube-apiserver",
            "downgrade the kubelets on nodes w-1, w-3 to v1.33 or older first", PLEASE_FORCE])] },
    Case { name: "unreadable kubelet versions", control_plane: ONE, target: "v1.33.3",
        kubelets: &[("y", ""), ("x", "garbage"), ("z", "v1.33.2")], flags: NONE,
        change: VersionChange::Upgrade, findings: &[(KubeletVersionUnreadable, Skippable, true, &[
            "the kubelet version of nodes x (\"garbage\"), y (\"\") is not a Kubernetes version",
            "against the target v1.33.3 is unknown", "status.nodeInfo.kubeletVersion", PLEASE_FORCE])] },
    Case { name: "no kubelets", control_plane: ONE, target: "v1.34.0", kubelets: &[], flags: NONE,
        change: VersionChange::Upgrade, findings: &[] },
    Case { name: "cluster and target below the supported range", control_plane: &[("cp-1", "v1.27.3")],
        target: "v1.28.0", kubelets: &[], flags: NONE, change: VersionChange::Upgrade, findings: &[
            (ClusterUnsupported, Skippable, true, &[
                "the cluster runs kube-apiserver v1.27.3 on cp-1, outside the versions this release of selfhost supports (v1.29 to v1.37)",
                PLEASE_FORCE]),
            (TargetUnsupported, Skippable, true, &[
                "the target v1.28.0 is outside the versions this release of selfhost supports (v1.29 to v1.37)",
                "choose a target from v1.29 to v1.37", PLEASE_FORCE])] },
    Case { name: "old cluster, forced image bump", control_plane: &[("cp-1", "v1.27.3")],
        target: "v1.27.4", kubelets: &[], flags: FORCE, change: VersionChange::Upgrade, findings: &[
            (ClusterUnsupported, Skippable, false, &["v1.27.3 on cp-1", FORCED]),
            (TargetUnsupported, Skippable, false, &["the target v1.27.4", FORCED])] },
    Case { name: "target above the supported range", control_plane: &[("cp-1", "v1.37.2")], target: "v1.38.0",
        kubelets: &[], flags: NONE, change: VersionChange::Upgrade, findings: &[(TargetUnsupported, Skippable, true, &[
            "the target v1.38.0 is outside", "use a release of selfhost that supports v1.38"])] },
    Case { name: "across majors", control_plane: ONE, target: "v2.0.0", kubelets: &[], flags: NONE,
        change: VersionChange::Upgrade, findings: &[
            (TargetUnsupported, Skippable, true, &["the target v2.0.0"]),
            (UpgradeSkipsMinor, Mandatory, true, &["from v1.33.2 to v2.0.0", "does not move the control plane across major versions"])] },
    Case { name: "HA mid-upgrade, finishing it", control_plane: &[("cp-1", "v1.33.1"), ("cp-2", "v1.34.0"), ("cp-3", "v1.33.1")],
        target: "v1.34.0", kubelets: &[], flags: NONE, change: VersionChange::Upgrade, findings: &[] },
    Case { name: "HA mid-upgrade, going further measures from the oldest", control_plane: &[("cp-1", "v1.33.1"), ("cp-2", "v1.34.0"), ("cp-3", "v1.33.1")],
        target: "v1.35.0", kubelets: &[], flags: NONE, change: VersionChange::Upgrade, findings: &[(UpgradeSkipsMinor, Mandatory, true, &[
            "cannot upgrade kube-apiserver on cp-1, cp-3 from v1.33.1 to v1.35.0", "upgrade to v1.34.x first"])] },
    Case { name: "HA mid-upgrade, rolling back", control_plane: &[("cp-1", "v1.33.1"), ("cp-2", "v1.34.0")],
        target: "v1.33.5", kubelets: &[], flags: NONE, change: VersionChange::Mixed, findings: &[] },
    Case { name: "HA mid-downgrade, going further measures from the newest", control_plane: &[("cp-1", "v1.33.1"), ("cp-2", "v1.34.0")],
        target: "v1.32.0", kubelets: &[], flags: NONE, change: VersionChange::Downgrade, findings: &[(DowngradeSkipsMinor, Mandatory, true, &[
            "cannot downgrade kube-apiserver on cp-2 from v1.34.0 to v1.32.0", "downgrade to v1.33.x first, then to v1.32.x"])] },
    Case { name: "HA two minors apart", control_plane: &[("cp-2", "v1.33.1"), ("cp-1", "v1.31.4"), ("cp-3", "v1.33.1")],
        target: "v1.32.0", kubelets: &[], flags: NONE, change: VersionChange::Mixed, findings: &[(MixedControlPlane, Skippable, true, &[
            "the kube-apiservers are more than one minor version apart (v1.31.4 on cp-1, v1.33.1 on cp-2, cp-3)",
            "bring them within one minor version of each other first", PLEASE_FORCE])] },
    Case { name: "no kube-apiserver known", control_plane: &[], target: "v1.34.0-beta.1", kubelets: &[("n1", "v1.34.0")],
        flags: NONE, change: VersionChange::Unknown, findings: &[
            (NoControlPlaneVersion, Mandatory, true, &["no kube-apiserver version is known, so the move to v1.34.0-beta.1 cannot be checked", "/version"]),
            (PreReleaseNotAllowed, Mandatory, true, &["v1.34.0-beta.1"])] },
];

#[test]
fn every_rule_finds_what_it_should_with_a_message_that_names_versions_and_fix() {
    for case in CASES {
        let mut given = input(case.control_plane, case.target, case.kubelets);
        given.flags = case.flags;
        let report = check(&given);
        let found: Vec<_> = report
            .findings
            .iter()
            .map(|f| (f.rule, f.severity, f.blocking))
            .collect();
        let expected: Vec<_> = case
            .findings
            .iter()
            .map(|&(r, s, b, _)| (r, s, b))
            .collect();
        assert_eq!(found, expected, "{}: {:#?}", case.name, report.findings);
        for (finding, &(_, _, _, words)) in report.findings.iter().zip(case.findings) {
            for word in words {
                assert!(
                    finding.message.contains(word),
                    "{}: {:?} lacks {word:?}",
                    case.name,
                    finding.message
                );
            }
        }
        assert_eq!(report.change, case.change, "{}", case.name);
        assert_eq!(report.forced, case.flags.force, "{}", case.name);
        let blocked = case.findings.iter().any(|&(_, _, blocking, _)| blocking);
        assert_eq!(report.allows_upgrade(), !blocked, "{}", case.name);
    }
}

#[test]
fn every_rule_is_exercised_by_the_table() {
    for rule in SkewRule::ALL {
        assert!(
            CASES
                .iter()
                .any(|case| case.findings.iter().any(|f| f.0 == rule)),
            "no case for {rule}"
        );
    }
}

#[test]
fn force_turns_skippable_findings_into_warnings_and_leaves_mandatory_ones_blocking() {
    // Two minors up to a pre-release (skippable), beta with only the rc flag (mandatory), an
    // old kubelet (skippable).
    let mut given = input(ONE, "v1.35.0-beta.0", &[("n1", "v1.30.0")]);
    given.flags = SkewFlags {
        allow_release_candidate: true,
        ..NONE
    };
    let unforced = check(&given);
    given.flags.force = true;
    let forced = check(&given);

    let rules = |report: &SkewReport| report.findings.iter().map(|f| f.rule).collect::<Vec<_>>();
    assert_eq!(
        rules(&unforced),
        rules(&forced),
        "--force must not hide findings"
    );
    assert_eq!(unforced.blocking().count(), 3);
    assert_eq!(unforced.warnings().count(), 0);
    let blocking: Vec<_> = forced.blocking().map(|f| f.rule).collect();
    let warnings: Vec<_> = forced.warnings().map(|f| f.rule).collect();
    assert_eq!(blocking, [PreReleaseNotAllowed]);
    assert_eq!(warnings, [UpgradeSkipsMinor, KubeletTooOld]);
    assert!(!forced.allows_upgrade());

    given.flags.allow_experimental = true;
    let allowed = check(&given);
    assert!(allowed.allows_upgrade());
    assert_eq!(allowed.warnings().count(), 2);
}

#[test]
fn messages_name_the_supported_bounds_not_the_cluster_version() {
    // kubeadm printed the cluster version where it meant the minimum supported version.
    let report = check(&input(&[("cp-1", "v1.28.9")], "v1.28.10", &[]));
    let target = report
        .findings
        .iter()
        .find(|f| f.rule == TargetUnsupported)
        .unwrap();
    assert!(
        target.message.contains("v1.29 to v1.37"),
        "{}",
        target.message
    );
    assert!(!target.message.contains("v1.28.9"), "{}", target.message);
}

#[test]
fn a_narrower_supported_range_is_honoured() {
    let mut given = input(ONE, "v1.34.0", &[]);
    given.supported = SupportedRange::new(MinorVersion::new(1, 33), MinorVersion::new(1, 33));
    let report = check(&given);
    let rules: Vec<_> = report.findings.iter().map(|f| f.rule).collect();
    assert_eq!(rules, [TargetUnsupported]);
    assert!(report.findings[0].message.contains("(v1.33 to v1.33)"));
}

#[test]
fn supported_range_covers_every_patch_and_pre_release_of_its_minors() {
    let range = SUPPORTED_VERSIONS;
    assert_eq!(range.to_string(), "v1.29 to v1.37");
    for inside in [
        "v1.29.0",
        "v1.29.0-alpha.0",
        "v1.33.2+k3s1",
        "v1.37.99",
        "v1.37.0-rc.1",
    ] {
        assert!(range.contains(&version(inside)), "{inside}");
    }
    for outside in ["v1.28.15", "v1.38.0-alpha.0", "v2.29.0", "v0.37.0"] {
        assert!(!range.contains(&version(outside)), "{outside}");
    }
}

#[test]
fn rule_ids_are_stable_kebab_case_and_match_json() {
    let ids: Vec<&str> = SkewRule::ALL.iter().map(|rule| rule.id()).collect();
    assert_eq!(
        ids,
        [
            "no-control-plane-version",
            "mixed-control-plane",
            "cluster-unsupported",
            "target-unsupported",
            "pre-release-not-allowed",
            "upgrade-skips-minor",
            "downgrade-skips-minor",
            "kubelet-version-unreadable",
            "kubelet-newer-than-target",
            "kubelet-too-old",
        ]
    );
    for rule in SkewRule::ALL {
        assert_eq!(
            serde_json::to_value(rule).unwrap(),
            serde_json::json!(rule.id())
        );
        assert_eq!(rule.to_string(), rule.id());
    }
}

#[test]
fn reports_serialize_for_automation() {
    let mut given = input(ONE, "v1.34.0", &[("n1", "v1.30.0")]);
    given.flags.force = true;
    let json = serde_json::to_value(check(&given)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "change": "upgrade",
            "forced": true,
            "findings": [{
                "rule": "kubelet-too-old",
                "severity": "skippable",
                "blocking": false,
                "message": "the kubelets on nodes n1 (v1.30.0) are more than 3 minor versions \
                    older than the target v1.34.0, more than Kubernetes supports; upgrade the \
                    kubelets on nodes n1 to at least v1.31 first; proceeding anyway because \
                    --force was given",
            }],
        })
    );
}

#[test]
fn long_unreadable_kubelet_versions_are_shortened_in_messages() {
    let long = "x".repeat(500);
    let report = check(&input(ONE, "v1.33.2", &[("n1", &long)]));
    let message = &report.findings[0].message;
    assert!(
        message.contains(&format!("n1 (\"{}…\")", "x".repeat(32))),
        "{message}"
    );
    assert!(message.len() < 400, "{message}");
}
