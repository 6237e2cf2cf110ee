//! Version-skew violations of each kind the policy knows, on the shared cluster (v1.33.1,
//! kubelets v1.33.1). Each is refused (exit 3) with the rule's id and the way out, and the
//! cluster is left alone. (A target two or more minors ahead is chained: `chain.rs`.)

use super::{Case, On};

/// `apply <version> --yes` against the shared cluster.
fn apply(version: &'static str) -> Case {
    Case::new(&["apply", version, "--yes"]).on(On::Sim).exits(3)
}

crate::hostile_cases! {
    skew_downgrade_skips_a_minor => apply("v1.31.0")
        .says(&["downgrade-skips-minor", "downgrade to v1.32.x first", "nothing was changed"]),
    skew_upgrade_across_a_major => apply("v2.0.0")
        .says(&["upgrade-skips-minor", "across major versions"]),
    skew_release_candidate_not_allowed => apply("v1.34.0-rc.1")
        .says(&["pre-release-not-allowed", "--allow-release-candidate-upgrades"]),
    skew_alpha_not_allowed_by_the_rc_flag => Case::new(&["apply", "v1.34.0-alpha.1", "--yes", "--allow-release-candidate-upgrades"])
        .on(On::Sim)
        .exits(3)
        .says(&["pre-release-not-allowed", "an alpha", "--allow-experimental-upgrades"]),
    skew_kubelet_newer_than_target => apply("v1.32.0")
        .says(&["kubelet-newer-than-target", "downgrade the kubelets on nodes cp-1", "--force"]),
    skew_kubelet_too_old_and_target_unsupported => apply("v1.38.0")
        .says(&["kubelet-too-old", "upgrade the kubelets on nodes cp-1 to at least v1.35", "target-unsupported", "use a release of selfhost that supports v1.38"]),
    skew_target_below_the_supported_range => Case::new(&["plan", "v1.28.3", "--force"])
        .on(On::Sim)
        .exits(3)
        .says(&["target-unsupported", "proceeding anyway because --force was given", "downgrade-skips-minor", "--force does not override this check"]),
}

/// A cluster older than selfhost supports (v1.28) asked to move up one minor: refused unless
/// forced, with the supported range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skew_cluster_below_the_supported_range() {
    let sim = selfhost_sim::SimCluster::builder()
        .control_plane_nodes(1)
        .version("v1.28.15")
        .control_plane_releases(28..=29, 15)
        .mode(selfhost_sim::bootstrap::BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(selfhost_sim::SimTimings::fast())
        .start()
        .await
        .expect("cluster starts");
    super::run_on(
        &sim,
        &["apply", "v1.29.0", "--yes"],
        3,
        &[
            "cluster-unsupported",
            "kube-apiserver v1.28.15 on cp-1",
            "v1.29 to v1.37",
            "pass --force",
        ],
    )
    .await;
    sim.shutdown().await;
}
