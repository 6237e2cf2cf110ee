//! The `etcd` preflight check and `apply --etcd-snapshot` against the simulator's etcd:
//! each member asked for its health and version, an unhealthy one refused, and a snapshot
//! taken before the first change, verified by the hash etcd sends with it.

use std::ffi::OsString;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use selfhost_sim::SimCluster;

async fn selfhost(sim: &SimCluster, args: Vec<OsString>) -> Output {
    crate::run_selfhost(sim.kubeconfig_path(), args, Duration::from_secs(120)).await
}

fn text(out: &Output) -> String {
    crate::printed(out)
}

/// `args` and the flags that reach the simulator's etcd as a member.
fn with_etcd(sim: &SimCluster, args: &[&str]) -> Vec<OsString> {
    let files = sim.etcd().client_files();
    let mut all: Vec<OsString> = args.iter().map(Into::into).collect();
    all.extend([
        "--etcd-endpoints".into(),
        sim.etcd().endpoint().into(),
        "--etcd-cacert".into(),
        files.ca.clone().into(),
        "--etcd-cert".into(),
        files.cert.clone().into(),
        "--etcd-key".into(),
        files.key.clone().into(),
    ]);
    all
}

async fn templates(sim: &SimCluster) -> Vec<Option<String>> {
    let api: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    api.list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .map(|d| {
            d.spec
                .and_then(|s| s.template.spec)
                .and_then(|s| s.containers.first().and_then(|c| c.image.clone()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_asks_each_member_and_refuses_an_unhealthy_one() {
    let sim = crate::one_self_hosted_node().await;
    let endpoint = sim.etcd().endpoint();

    let out = selfhost(&sim, with_etcd(&sim, &["plan", "v1.34.0"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "PASS  etcd: 1 etcd member(s) healthy ({endpoint}), and the kube-apiserver reaches them"
        )) && text(&out).contains(&format!(
            "WARN  etcd: {endpoint} runs etcd 3.5.24; kubeadm pairs v1.34 with etcd 3.6 \
             (3.6.9-0): selfhost leaves etcd as it is"
        )),
        "{}",
        text(&out)
    );

    sim.etcd().set_version("3.6.9");
    let out = selfhost(&sim, with_etcd(&sim, &["plan", "v1.34.0"])).await;
    assert!(
        text(&out).contains(&format!("PASS  etcd: etcd 3.6.9 ({endpoint})")),
        "{}",
        text(&out)
    );

    sim.etcd().set_healthy(false);
    let before = templates(&sim).await;
    let out = selfhost(&sim, with_etcd(&sim, &["plan", "v1.34.0"])).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "FAIL  etcd: 1 of 1 etcd member(s) unhealthy: {endpoint}: /health says it is not \
             healthy: RAFT NO LEADER"
        )),
        "{}",
        text(&out)
    );
    let out = selfhost(&sim, with_etcd(&sim, &["apply", "v1.34.0", "--yes"])).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(
        templates(&sim).await,
        before,
        "a refused apply changes nothing"
    );

    // A certificate file that is not there is bad input.
    let files = sim.etcd().client_files();
    let args: Vec<OsString> = vec![
        "plan".into(),
        "v1.34.0".into(),
        "--etcd-endpoints".into(),
        endpoint.clone().into(),
        "--etcd-cacert".into(),
        files.ca.clone().into(),
        "--etcd-cert".into(),
        files.cert.clone().into(),
        "--etcd-key".into(),
        "/nonexistent/etcd.key".into(),
    ];
    let out = selfhost(&sim, args).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("--etcd-key /nonexistent/etcd.key: "),
        "{}",
        text(&out)
    );
}

fn snapshots(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    found.sort();
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_takes_a_verified_snapshot_before_the_first_change() {
    let sim = crate::one_self_hosted_node().await;
    let dir = tempfile::tempdir().expect("a directory");
    let into = dir.path().join("snapshots");
    let shown = into.to_str().expect("UTF-8 path");
    let out = selfhost(
        &sim,
        with_etcd(
            &sim,
            &["apply", "v1.34.0", "--yes", "--etcd-snapshot", shown],
        ),
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let taken = snapshots(&into);
    assert_eq!(taken.len(), 1, "{taken:?}");
    let name = taken[0].file_name().and_then(|n| n.to_str()).unwrap_or("");
    assert!(
        name.starts_with("etcd-snapshot-") && name.ends_with(".db"),
        "{name}"
    );
    assert!(
        text(&out).contains(&format!("etcd snapshot: {}", taken[0].display()))
            && text(&out).contains("its SHA-256 checked"),
        "{}",
        text(&out)
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&taken[0])
            .expect("metadata")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "a snapshot holds every Secret");
    }
    // The file ends with the SHA-256 of what precedes it, as etcd's snapshots do.
    let bytes = std::fs::read(&taken[0]).expect("read");
    let (data, hash) = bytes.split_at(bytes.len() - 32);
    assert_eq!(
        ring::digest::digest(&ring::digest::SHA256, data).as_ref(),
        hash
    );
    // Taken before the first change: the DaemonSets are at the version the run started from.
    let contains = |needle: &[u8]| data.windows(needle.len()).any(|w| w == needle);
    assert!(contains(
        b"/registry/daemonsets/kube-system/self-hosted-kube-apiserver"
    ));
    assert!(contains(b"registry.k8s.io/kube-apiserver:v1.33.1"));
    assert!(!contains(b"registry.k8s.io/kube-apiserver:v1.34.0"));
}

/// Without --etcd-endpoints the snapshot comes from the kube-apiserver's --etcd-servers,
/// where nothing of the simulator's listens: preflight passes (etcd is judged by the
/// kube-apiserver) and the snapshot fails, which refuses the upgrade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_that_cannot_be_taken_refuses_the_upgrade_with_nothing_changed() {
    let sim = crate::one_self_hosted_node().await;
    let before = templates(&sim).await;
    let dir = tempfile::tempdir().expect("a directory");
    let files = sim.etcd().client_files();
    let args: Vec<OsString> = vec![
        "apply".into(),
        "v1.34.0".into(),
        "--yes".into(),
        "--etcd-snapshot".into(),
        dir.path().into(),
        "--etcd-cacert".into(),
        files.ca.clone().into(),
        "--etcd-cert".into(),
        files.cert.clone().into(),
        "--etcd-key".into(),
        files.key.clone().into(),
    ];
    let out = selfhost(&sim, args).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("cannot take an etcd snapshot from https://127.0.0.1:2379")
            && text(&out).contains("nothing was changed"),
        "{}",
        text(&out)
    );
    assert_eq!(templates(&sim).await, before, "nothing changed");
    assert!(
        snapshots(dir.path()).is_empty(),
        "no partial file is left: {:?}",
        snapshots(dir.path())
    );
}
