//! `selfhost convert`: bad input refused with the documented exit codes and nothing changed;
//! each step of both conversions killed with SIGKILL and the command run again: it continues
//! from what the cluster and the node's disk show, finishes, and leaves nothing behind.

mod config;
mod dry_run;

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::ProberOptions;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::{SimCluster, SimTimings};

async fn static_cluster(port_sharing: bool) -> SimCluster {
    let sim = SimCluster::builder()
        .control_plane_nodes(1)
        .version("v1.33.1")
        .mode(BootstrapMode::Static)
        .port_sharing(port_sharing)
        .timings(SimTimings::scaled(100))
        // The node's API front's image: its pod starts, runs and is Ready.
        .image(selfhost::DEFAULT_IMAGE, ImageBehaviour::default())
        .start()
        .await
        .expect("cluster starts");
    crate::settled(sim).await
}

/// Runs `selfhost convert <direction> --node cp-1 --manifests-dir DIR --yes -o json ARGS`;
/// kills it with SIGKILL right after it reports the action `step` of `component`, if given.
async fn convert(
    sim: &SimCluster,
    direction: &str,
    args: &[&str],
    kill_at: Option<(&str, &str)>,
) -> (Vec<serde_json::Value>, Option<i32>) {
    let dir = sim.manifests_dir("cp-1").expect("dir");
    let mut all: Vec<std::ffi::OsString> =
        ["convert", direction, "--node", "cp-1", "--manifests-dir"]
            .map(Into::into)
            .to_vec();
    all.push(dir.into());
    // The checkpointer's own part in a conversion is tested where it runs for real
    // (`power_cuts.rs`); here it would be a modelled process that keeps nothing.
    if direction == "to-self-hosted" {
        all.push("--no-checkpointer".into());
    }
    all.extend(args.iter().map(Into::into));
    let kill_at = kill_at.map(|(c, s)| (c.to_string(), s.to_string()));
    crate::run_json_events(sim.kubeconfig_path().to_path_buf(), all, move |event| {
        kill_at
            .as_ref()
            .is_some_and(|(component, step)| crate::is_event(event, "action", component, step))
    })
    .await
}

/// The self-hosted DaemonSets and the gate labels left in the cluster.
async fn leftovers(sim: &SimCluster) -> (Vec<String>, Vec<String>) {
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let names = daemonsets
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect();
    let nodes: Api<Node> = Api::all(sim.client());
    let labels = nodes
        .list(&Default::default())
        .await
        .expect("nodes")
        .items
        .into_iter()
        .flat_map(|n| n.metadata.labels.unwrap_or_default().into_keys())
        .filter(|k| k.starts_with("selfhost.dev/"))
        .collect();
    (names, labels)
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

const FRONT_MANIFEST: &str = "selfhost-front.yaml";

/// `status` shows the node's front running, the DaemonSet's kube-apiserver Ready behind it
/// and no backup.
async fn front_in_status(sim: &SimCluster) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        let output = crate::selfhost()
            .arg("--kubeconfig")
            .arg(sim.kubeconfig_path())
            .args(["status", "-o", "json"])
            .output()
            .expect("runs");
        last = String::from_utf8_lossy(&output.stdout).into_owned();
        let status: serde_json::Value = serde_json::from_str(&last).unwrap_or_default();
        let front = &status["fronts"][0];
        if front["node"] == "cp-1"
            && front["front"] == "running"
            && front["backends"][0]["address"] == "127.0.0.1"
            && front["backends"][0]["ready"] == true
            && front["backends"][1]["address"] == "127.0.0.2"
            && front["backends"][1]["pod"].is_null()
        {
            let text = crate::selfhost()
                .arg("--kubeconfig")
                .arg(sim.kubeconfig_path())
                .arg("status")
                .output()
                .expect("runs");
            let text = String::from_utf8_lossy(&text.stdout);
            assert!(text.contains("API FRONT"), "{text}");
            assert!(text.contains("127.0.0.1 ready, 127.0.0.2 -"), "{text}");
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("status never showed the front running with its backend Ready: {last}");
}

const MANIFESTS: [&str; 3] = [
    "kube-apiserver.yaml",
    "kube-controller-manager.yaml",
    "kube-scheduler.yaml",
];

/// One kill per entry, alternating directions on one cluster: every action of the apiserver's
/// hand-over both ways, and the moves of the controllers. The cluster's static pods start
/// without port sharing, so the first conversion restarts them with it (`add-port-sharing`);
/// every static manifest written back from a DaemonSet shares its port.
const KILL_POINTS: &[(&str, &str, &str)] = &[
    ("to-self-hosted", "kube-apiserver", "add-port-sharing"),
    ("to-static", "kube-scheduler", "unlabel-node"),
    ("to-self-hosted", "kube-apiserver", "create-daemonset"),
    ("to-static", "kube-apiserver", "write-manifest"),
    ("to-self-hosted", "kube-apiserver", "label-node"),
    ("to-static", "kube-apiserver", "remove-front"),
    ("to-self-hosted", "kube-apiserver", "write-front"),
    ("to-static", "kube-apiserver", "unlabel-node"),
    ("to-self-hosted", "kube-apiserver", "move-manifest-aside"),
    ("to-static", "kube-apiserver", "delete-daemonset"),
    ("to-self-hosted", "kube-scheduler", "move-manifest-aside"),
    ("to-static", "kube-controller-manager", "write-manifest"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_each_step_of_both_conversions_the_rerun_completes() {
    let sim = static_cluster(false).await;
    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let backup: PathBuf = dir
        .parent()
        .expect("parent")
        .join("selfhost-backup/static-pods");
    let mut prober = None;
    for (round, (direction, component, step)) in KILL_POINTS.iter().enumerate() {
        if round == 2 {
            // From the first round trip on, the static pods share their port.
            prober = Some(sim.prober(ProberOptions::default()).await.expect("prober"));
        }
        let (events, code) = convert(&sim, direction, &["--yes"], Some((component, step))).await;
        assert!(
            events.iter().any(|e| e["step"] == *step),
            "{direction} reached {component}/{step} before it was killed: {events:?}"
        );
        assert_ne!(code, Some(0), "a killed run does not report success");
        let (events, code) = convert(&sim, direction, &["--yes"], None).await;
        let last = events.last().cloned().unwrap_or_default();
        assert_eq!(
            code,
            Some(0),
            "the re-run of {direction} after a kill at {component}/{step} finishes: {last}"
        );
        assert_eq!(last["event"], "result");
        assert_eq!(last["outcome"], "done");
        let figures = last["components"].as_array().cloned().unwrap_or_default();
        let nothing_to_do = last["message"]
            .as_str()
            .is_some_and(|m| m.contains("nothing to do"));
        // Killed after the last step that is ours (the scheduler's manifest moved aside), what
        // is left is the cluster's: the re-run waits for it and finds nothing to do.
        assert!(
            (nothing_to_do && *component == "kube-scheduler" && *step == "move-manifest-aside")
                || (figures.len() == 3 && figures.iter().all(|f| f["api_gap_seconds"].is_number())),
            "the result carries each component's apiserver and leaderless gaps: {last}"
        );
        let (daemonsets, labels) = leftovers(&sim).await;
        if *direction == "to-self-hosted" {
            assert_eq!(
                files(&dir),
                [FRONT_MANIFEST],
                "kubeadm's manifests moved aside, the node's API front in their place"
            );
            assert_eq!(daemonsets.len(), 3, "{daemonsets:?}");
            let apiserver = Api::<DaemonSet>::namespaced(sim.client(), "kube-system")
                .get("self-hosted-kube-apiserver")
                .await
                .expect("apiserver DaemonSet");
            assert_eq!(
                selfhost::FrontLayout::of_daemonset(&apiserver),
                Ok(Some(selfhost::FrontLayout::default())),
                "it listens behind the front"
            );
            if round == 0 {
                front_in_status(&sim).await;
            }
            assert_eq!(labels.len(), 3, "{labels:?}");
        } else {
            assert_eq!(
                files(&dir),
                MANIFESTS,
                "kubeadm's manifests back, the front gone"
            );
            assert_eq!(
                (daemonsets, labels),
                (vec![], vec![]),
                "nothing left behind"
            );
        }
        for file in MANIFESTS {
            assert!(files(&backup).iter().any(|f| f == file), "{file} is kept");
        }
    }
    let probes = prober.expect("started").stop().await;
    assert_eq!(
        (probes.reads.failures(), probes.writes.failures()),
        (0, 0),
        "with port sharing the node never stopped serving"
    );
    // Once more, right away (a leader may still be being elected, a new static pod judged
    // serving): a no-op that says so.
    let (events, code) = convert(&sim, "to-static", &["--yes"], None).await;
    assert_eq!(code, Some(0));
    let last = events.last().cloned().unwrap_or_default();
    assert!(
        last["message"]
            .as_str()
            .is_some_and(|m| m.contains("nothing to do")),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exits_2_or_3_and_changes_nothing() {
    let sim = static_cluster(true).await;
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let scratch = tempfile::tempdir().expect("scratch");
    let with_scheduler = |name: &str, scheduler: &str| {
        let copy = scratch.path().join(name);
        std::fs::create_dir(&copy).expect("dir");
        for file in MANIFESTS {
            std::fs::copy(dir.join(file), copy.join(file)).expect("copy");
        }
        std::fs::write(copy.join("kube-scheduler.yaml"), scheduler).expect("write");
        copy.display().to_string()
    };
    let not_a_pod = with_scheduler(
        "not-a-pod",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
    );
    let not_yaml = with_scheduler("not-yaml", "apiVersion: v1\nkind: Pod\nspec: [unclosed\n");
    let incomplete = scratch.path().join("incomplete");
    std::fs::create_dir(&incomplete).expect("dir");
    std::fs::copy(
        dir.join("kube-apiserver.yaml"),
        incomplete.join("kube-apiserver.yaml"),
    )
    .expect("copy");
    let incomplete = incomplete.display().to_string();
    let missing = scratch.path().join("missing").display().to_string();
    let bad_config = scratch.path().join("bad-config.yaml");
    std::fs::write(
        &bad_config,
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nnetworking: 7\n",
    )
    .expect("write");
    let bad_config = bad_config.display().to_string();
    let here = dir.display().to_string();
    let unadvertised = scratch.path().join("unadvertised");
    std::fs::create_dir(&unadvertised).expect("dir");
    for file in MANIFESTS {
        let text = std::fs::read_to_string(dir.join(file)).expect("read");
        let text: String = text
            .lines()
            .filter(|l| !l.contains("--advertise-address"))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(unadvertised.join(file), text).expect("write");
    }
    let unadvertised = unadvertised.display().to_string();
    // The release this kube-apiserver runs removed --insecure-port: the converted pod would
    // never start.
    let refused_flag = scratch.path().join("refused-flag");
    std::fs::create_dir(&refused_flag).expect("dir");
    for file in MANIFESTS {
        let text = std::fs::read_to_string(dir.join(file)).expect("read");
        let text = if file == "kube-apiserver.yaml" {
            text.lines()
                .map(|l| match l.find("--advertise-address") {
                    Some(at) if l.trim_start().starts_with('-') => {
                        format!("{}--insecure-port=0\n{l}\n", &l[..at])
                    }
                    _ => format!("{l}\n"),
                })
                .collect()
        } else {
            text
        };
        std::fs::write(refused_flag.join(file), text).expect("write");
    }
    let refused_flag = refused_flag.display().to_string();

    let case = |what, direction, node, manifests: &str, more: &[&str], code, message| BadInput {
        what,
        direction,
        node,
        manifests: manifests.to_string(),
        more: more.iter().map(|a| a.to_string()).collect(),
        code,
        message,
    };
    let yes: &[&str] = &["--yes"];
    let cases = [
        case(
            "a manifests directory that does not exist",
            "to-self-hosted",
            "cp-1",
            &missing,
            yes,
            2,
            "does not exist",
        ),
        case(
            "a manifests directory that does not exist, back",
            "to-static",
            "cp-1",
            &missing,
            yes,
            2,
            "does not exist",
        ),
        case(
            "a node the cluster does not have",
            "to-self-hosted",
            "cp-9",
            &here,
            yes,
            2,
            "no node named \"cp-9\"",
        ),
        case(
            "a node the cluster does not have, back",
            "to-static",
            "cp-9",
            &here,
            yes,
            2,
            "no node named \"cp-9\"",
        ),
        case(
            "a manifest that is not a Pod",
            "to-self-hosted",
            "cp-1",
            &not_a_pod,
            yes,
            2,
            "expected apiVersion v1 and kind Pod, found apiVersion \"apps/v1\" and kind \"Deployment\"",
        ),
        case(
            "a manifest that is not YAML",
            "to-self-hosted",
            "cp-1",
            &not_yaml,
            yes,
            2,
            "is not a static pod manifest: not YAML",
        ),
        case(
            "components missing on disk",
            "to-self-hosted",
            "cp-1",
            &incomplete,
            yes,
            3,
            "has no static manifest of kube-controller-manager",
        ),
        case(
            "no --yes without a terminal",
            "to-self-hosted",
            "cp-1",
            &here,
            &[],
            2,
            "pass --yes",
        ),
        case(
            "a timeout that is not a duration",
            "to-self-hosted",
            "cp-1",
            &here,
            &["--yes", "--timeout", "soon"],
            2,
            "invalid --timeout",
        ),
        case(
            "a front's addresses that are one",
            "to-self-hosted",
            "cp-1",
            &here,
            &["--yes", "--front-addresses", "127.0.0.1,127.0.0.1"],
            2,
            "the kube-apiserver and its backup cannot both listen on 127.0.0.1",
        ),
        case(
            "a front's backend on the wildcard address",
            "to-self-hosted",
            "cp-1",
            &here,
            &["--yes", "--front-addresses", "0.0.0.0,127.0.0.2"],
            2,
            "the front would be its own backend",
        ),
        case(
            "a kube-apiserver that advertises no address to put the front on",
            "to-self-hosted",
            "cp-1",
            &unadvertised,
            yes,
            3,
            "has no --advertise-address, so the node's API address to put the front on is unknown",
        ),
        case(
            "a kube-apiserver whose release refuses one of its flags",
            "to-self-hosted",
            "cp-1",
            &refused_flag,
            yes,
            3,
            "--insecure-port was removed in v1.24",
        ),
        case(
            "a configuration file that does not exist",
            "to-self-hosted",
            "cp-1",
            &here,
            &["--yes", "--config", &missing],
            2,
            "cannot read the configuration file",
        ),
        case(
            "a configuration file that is not valid",
            "to-self-hosted",
            "cp-1",
            &here,
            &["--yes", "--config", &bad_config],
            2,
            "is not a valid kubeadm configuration",
        ),
    ];
    for case in cases {
        let before = dry_run::everything(&sim, &dir).await;
        let output = crate::selfhost()
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["convert", case.direction, "--node", case.node])
            .args(["--manifests-dir", &case.manifests])
            .args(&case.more)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let what = case.what;
        assert_eq!(output.status.code(), Some(case.code), "{what}: {stderr}");
        assert!(
            stderr.contains(case.message),
            "{what}: {:?} in {stderr}",
            case.message
        );
        assert_eq!(
            dry_run::everything(&sim, &dir).await,
            before,
            "{what}: nothing changed, in the cluster or on disk"
        );
        assert_eq!(leftovers(&sim).await, (vec![], vec![]), "{what}");
    }
}

/// A checkpointer the kubelet cannot run (its image cannot be pulled) is met before anything
/// else changes: exit 3, its static pod taken away again, and the node as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpointer_that_does_not_run_refuses_the_conversion_and_is_taken_away() {
    let sim = static_cluster(true).await;
    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let output = crate::selfhost()
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["convert", "to-self-hosted", "--node", "cp-1", "--yes"])
        .arg("--manifests-dir")
        .arg(&dir)
        .args(["--checkpointer-image", "registry.example/selfhost:missing"])
        .args(["--timeout", "10s"])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    for said in [
        "nothing was changed on node cp-1: the checkpointer does not run: its container waits:",
        "taken away again",
        "--no-checkpointer",
    ] {
        assert!(stderr.contains(said), "{said:?} in {stderr}");
    }
    assert_eq!(files(&dir), MANIFESTS, "kubeadm's manifests only");
    assert_eq!(leftovers(&sim).await, (vec![], vec![]));
    let grant: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(sim.client(), "kube-system");
    assert!(
        grant
            .get_opt("selfhost:checkpointer")
            .await
            .expect("read")
            .is_none(),
        "the node's access this run granted is taken away again"
    );
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let mirror = "selfhost-checkpointer-cp-1";
    crate::checkpointed::until(
        std::time::Duration::from_secs(30),
        "the checkpointer's mirror pod gone",
        async || pods.get_opt(mirror).await.is_ok_and(|p| p.is_none()),
    )
    .await;
}

/// One bad input: what it is, the command's arguments, and the exit code and message.
struct BadInput {
    what: &'static str,
    direction: &'static str,
    node: &'static str,
    manifests: String,
    more: Vec<String>,
    code: i32,
    message: &'static str,
}
