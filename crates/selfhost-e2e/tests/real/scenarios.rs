//! The scenarios: steps an operator takes on a bed, each checking what the operator would
//! check afterwards (with kubectl where it can).

use std::time::Duration;

use selfhost_e2e::bed::{BedNode, ImageFault, TestBed};
use selfhost_e2e::binaries::{Binaries, TO_TAG};

use crate::support::{
    Figures, LeaderWatch, Probers, control_plane_images, eventually, kubectl, selfhost_binary,
    selfhost_output, selfhost_to_end,
};

/// The checkpointer's image: the bed's kubelets run the `selfhost` binary for it
/// ([`crate::support::bed`]).
pub const CHECKPOINTER_IMAGE: &str = "selfhost.test/selfhost:e2e";

/// Where a node keeps the checkpointer's static pod and its checkpoints.
const CHECKPOINTER_MANIFEST: &str = "/etc/kubernetes/manifests/selfhost-checkpointer.yaml";
const CHECKPOINTS: &str = "/etc/kubernetes/selfhost-checkpoints";
/// Where a node keeps its API front's static pod.
const FRONT_MANIFEST: &str = "/etc/kubernetes/manifests/selfhost-front.yaml";

const COMPONENTS: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// The loopback addresses a node's kube-apiservers listen on behind its API front: of the
/// node's own slot, so that beds side by side on this machine never share one.
fn front_addresses(node: &BedNode) -> String {
    let [_, _, slot, _] = node.address.octets();
    format!("127.0.{slot}.201,127.0.{slot}.202")
}

/// Whether a conversion puts each node's API front before its kube-apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fronts {
    /// With the front, as `convert` does by default: only on a bed of one node, since the
    /// bed's nodes share one network namespace and the DaemonSet's kube-apiservers would all
    /// listen on one loopback address.
    Behind,
    /// `--no-front`.
    Without,
}

/// Runs `selfhost convert <direction>` on every node in turn, as an operator does; each
/// finishes with exit 0.
async fn convert_each_node(bed: &TestBed, direction: &str, fronts: Fronts) {
    for node in bed.nodes() {
        let addresses = front_addresses(node);
        // selfhost runs outside the node's filesystem, as from a container with the host
        // mounted: the paths are the node's, beneath its root.
        let root = node.root.display().to_string();
        let mut args = vec![
            "convert",
            direction,
            "--node",
            &node.name,
            "--host-root",
            &root,
            "--manifests-dir",
            "/etc/kubernetes/manifests",
        ];
        if direction == "to-self-hosted" {
            args.extend(["--checkpointer-image", CHECKPOINTER_IMAGE]);
            match fronts {
                Fronts::Behind => args.extend([
                    "--front-image",
                    CHECKPOINTER_IMAGE,
                    "--front-addresses",
                    &addresses,
                ]),
                Fronts::Without => args.push("--no-front"),
            }
        }
        let run = selfhost_to_end(bed, &args).await;
        assert_eq!(
            run.code,
            Some(0),
            "convert {direction} on {}: {:?}\n{}",
            node.name,
            run.result(),
            run.stderr
        );
        eprintln!(
            "convert {direction} on {}: {:.1} s",
            node.name,
            run.wall.as_secs_f64()
        );
    }
}

/// Converts every node of the bed to self-hosted without fronts; each component then has its
/// DaemonSet.
pub async fn convert_to_self_hosted(bed: &TestBed) {
    convert_to_self_hosted_with(bed, Fronts::Without).await;
}

/// Converts every node of the bed to self-hosted, with or without the nodes' API fronts; each
/// component then has its DaemonSet, and behind fronts each node runs its front.
pub async fn convert_to_self_hosted_with(bed: &TestBed, fronts: Fronts) {
    convert_each_node(bed, "to-self-hosted", fronts).await;
    if fronts == Fronts::Behind {
        let pods = kubectl(bed, &["-n", "kube-system", "get", "pods", "-o", "name"]);
        for node in bed.nodes() {
            assert!(
                pods.contains(&format!("selfhost-front-{}", node.name)),
                "{} runs its front: {pods}",
                node.name
            );
        }
    }
    let daemonsets = kubectl(
        bed,
        &["-n", "kube-system", "get", "daemonsets", "-o", "name"],
    );
    for component in COMPONENTS {
        assert!(daemonsets.contains(component), "{daemonsets}");
    }
}

/// Every control-plane pod runs `tag`.
pub fn assert_on(bed: &TestBed, tag: &str) {
    let images = control_plane_images(bed);
    assert_eq!(images.len(), 3 * bed.nodes().len(), "{images:?}");
    for line in &images {
        assert!(line.ends_with(&format!(":{tag}")), "{images:?}");
    }
    let version = kubectl(bed, &["version", "-o", "json"]);
    let value: serde_json::Value = serde_json::from_str(&version).expect("kubectl version json");
    assert_eq!(value["serverVersion"]["gitVersion"], tag, "{version}");
}

/// The image tag of each component's real DaemonSet.
fn daemonset_images(bed: &TestBed) -> Vec<String> {
    let text = kubectl(
        bed,
        &[
            "-n",
            "kube-system",
            "get",
            "daemonsets",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {.spec.template.spec.containers[0].image}{\"\\n\"}{end}",
        ],
    );
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

/// A failed target is rolled back: exit 1, every DaemonSet back on its original image, every
/// pod Ready again, the API up.
pub async fn rolled_back(bed: &TestBed, target: &str, original: &str) {
    rolled_back_with(bed, target, original, &[]).await;
}

/// [`rolled_back`], `apply` given `extra` flags too.
async fn rolled_back_with(bed: &TestBed, target: &str, original: &str, extra: &[&str]) {
    let probers = Probers::start(bed).await;
    let mut args = vec!["apply", target, "--force", "--timeout", "3m"];
    args.extend_from_slice(extra);
    let run = selfhost_to_end(bed, &args).await;
    let availability = probers.stop().await;
    assert_eq!(
        run.code,
        Some(1),
        "apply {target} rolls back: {:?}\n{}",
        run.result(),
        run.stderr
    );
    let figures = Figures {
        wall: run.wall,
        availability,
        leader_changes: Vec::new(),
        api_requests: run.api_requests(),
    };
    eprintln!(
        "{}",
        figures.line(&format!("rollback from {target}"), bed.nodes().len())
    );
    for line in run.step_seconds() {
        eprintln!("  {line}");
    }
    for line in figures.failure_lines() {
        eprintln!("  failed probes, {line}");
    }
    let images = daemonset_images(bed);
    assert_eq!(images.len(), 3, "{images:?}");
    for line in &images {
        assert!(line.ends_with(&format!(":{original}")), "{images:?}");
    }
    control_plane_serves(bed, "every control-plane pod Ready again").await;
    assert_on(bed, original);
}

/// Kill points, one inside each component's pivot, reached by successive runs of the same
/// command: each re-run continues where the last one stopped.
const KILL_POINTS: [(&str, &str); 3] = [
    ("kube-apiserver", "update-real"),
    ("kube-controller-manager", "update-real"),
    ("kube-scheduler", "update-real"),
];

/// `apply` killed with SIGKILL inside each component's pivot in turn, each time run again;
/// the last run finishes.
pub async fn killed_runs_resume(bed: &TestBed) {
    let leaders = LeaderWatch::start(bed).await;
    let probers = Probers::start(bed).await;
    let started = std::time::Instant::now();
    for (component, step) in KILL_POINTS {
        let run = crate::support::selfhost(bed, &["apply", TO_TAG, "--force"], move |e| {
            crate::support::is_step(e, component, step)
        })
        .await;
        assert!(
            run.events
                .iter()
                .any(|e| crate::support::is_step(e, component, step)),
            "the run reached {component}/{step}: {:?}\n{}{}",
            run.result(),
            run.refusals().join("\n"),
            run.stderr
        );
        assert_eq!(run.code, None, "killed at {component}/{step}");
    }
    let run = selfhost_to_end(bed, &["apply", TO_TAG, "--force"]).await;
    // The killed runs report nothing: their requests are not counted.
    let figures = Figures {
        wall: started.elapsed(),
        availability: probers.stop().await,
        leader_changes: leaders.stop().await,
        api_requests: None,
    };
    eprintln!(
        "{}",
        figures.line(
            "apply killed in each pivot and run again",
            bed.nodes().len()
        )
    );
    assert_eq!(
        run.code,
        Some(0),
        "the last re-run finishes: {:?}\n{}",
        run.result(),
        run.stderr
    );
    assert_on(bed, TO_TAG);
    let daemonsets = kubectl(
        bed,
        &["-n", "kube-system", "get", "daemonsets", "-o", "name"],
    );
    assert!(
        !daemonsets.contains("temp-upgrade"),
        "no backup is left: {daemonsets}"
    );
}

/// The same command again after success: nothing to do, nothing changed.
pub async fn nothing_to_do(bed: &TestBed, target: &str) {
    let again = selfhost_to_end(bed, &["apply", target, "--force"]).await;
    assert_eq!(
        again.code,
        Some(0),
        "{:?}\n{}",
        again.result(),
        again.stderr
    );
    assert!(
        !again.events.iter().any(|e| e["event"] == "action"),
        "a second apply changes nothing: {:?}",
        again.events
    );
}

/// Waits (up to two minutes) until every node runs every component Ready and both
/// controllers lead; `what` names the wait in a failure.
async fn control_plane_serves(bed: &TestBed, what: &str) {
    let nodes = bed.nodes().len();
    let client = bed.client().await.expect("client");
    eventually(what, Duration::from_secs(120), || {
        let client = client.clone();
        async move {
            selfhost_e2e::bed::control_plane_state(&client)
                .await
                .is_ok_and(|s| s.serving(nodes))
        }
    })
    .await;
}

/// Converts every node back to static pods; the static control plane serves and no
/// DaemonSet is left.
pub async fn convert_to_static(bed: &TestBed) {
    convert_each_node(bed, "to-static", Fronts::Without).await;
    control_plane_serves(bed, "the static control plane serves").await;
    for node in bed.nodes() {
        assert!(
            !node.path(CHECKPOINTER_MANIFEST).exists() && !node.path(CHECKPOINTS).exists(),
            "the checkpointer and its checkpoints are gone from {}",
            node.name
        );
        assert!(
            !node.path(FRONT_MANIFEST).exists(),
            "the API front is gone from {}",
            node.name
        );
    }
    let daemonsets = kubectl(
        bed,
        &["-n", "kube-system", "get", "daemonsets", "-o", "name"],
    );
    assert!(
        daemonsets.trim().is_empty(),
        "no DaemonSet is left: {daemonsets}"
    );
}

/// The two failed targets: a tag with no binary (the image cannot be pulled) and one whose
/// kube-apiserver exits at start; each is rolled back to `original`.
pub async fn failed_targets_roll_back(bed: &TestBed, binaries: &Binaries, original: &str) {
    etcd_snapshot_before_a_rollback(bed, "v1.20.4", original).await;
    bed.add_fault_image(
        "v1.20.5",
        "kube-apiserver",
        ImageFault::ExitsAtStart,
        binaries,
    )
    .expect("fault image");
    rolled_back(bed, "v1.20.5", original).await;
}

/// `apply --etcd-snapshot` against the bed's etcd (a real etcd, reached with the etcd
/// client certificate at kubeadm's paths on the node): the snapshot is taken before the
/// first change of a run that then rolls back, and etcd's own client reads it as a snapshot
/// of its database and restores it, checking the hash it ends with.
async fn etcd_snapshot_before_a_rollback(bed: &TestBed, target: &str, original: &str) {
    let node = bed.nodes()[0].clone();
    let file = |path: &str| node.path(path).display().to_string();
    let (ca, cert, key) = (
        file("/etc/kubernetes/pki/etcd/ca.crt"),
        file("/etc/kubernetes/pki/apiserver-etcd-client.crt"),
        file("/etc/kubernetes/pki/apiserver-etcd-client.key"),
    );
    let dir = tempfile::tempdir().expect("a directory");
    let into = dir.path().join("snapshots");
    let into_shown = into.display().to_string();
    let etcd = [
        "--etcd-endpoints",
        bed.etcd_url(),
        "--etcd-cacert",
        &ca,
        "--etcd-cert",
        &cert,
        "--etcd-key",
        &key,
    ];
    let (plan, _) = selfhost_output(bed, &[&["plan", target][..], &etcd[..]].concat()).await;
    let said = String::from_utf8_lossy(&plan.stdout);
    assert!(
        said.contains(&format!(
            "PASS  etcd: 1 etcd member(s) healthy ({}), and the kube-apiserver reaches them",
            bed.etcd_url()
        )),
        "{said}"
    );
    let mut extra = vec!["--etcd-snapshot", into_shown.as_str()];
    extra.extend_from_slice(&etcd);
    rolled_back_with(bed, target, original, &extra).await;

    let taken: Vec<_> = std::fs::read_dir(&into)
        .expect("the snapshot directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    assert_eq!(taken.len(), 1, "{taken:?}");
    let status = std::process::Command::new("etcdctl")
        .args(["snapshot", "status", "-w", "json"])
        .arg(&taken[0])
        .output()
        .expect("etcdctl runs");
    assert!(
        status.status.success(),
        "etcdctl snapshot status: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&status.stdout).expect("etcdctl's JSON");
    assert!(
        status["totalKey"].as_u64().is_some_and(|keys| keys > 0),
        "{status}"
    );
    let restored = dir.path().join("restored");
    let restore = std::process::Command::new("etcdctl")
        .args(["snapshot", "restore"])
        .arg(&taken[0])
        .arg("--data-dir")
        .arg(&restored)
        .output()
        .expect("etcdctl runs");
    assert!(
        restore.status.success(),
        "etcdctl snapshot restore checks the hash: {}",
        String::from_utf8_lossy(&restore.stderr)
    );
    eprintln!(
        "etcd snapshot before the rollback from {target}: {} bytes, {} keys",
        std::fs::metadata(&taken[0]).map(|m| m.len()).unwrap_or(0),
        status["totalKey"]
    );
}

/// Whether any node runs a checkpoint's static copy.
fn copies_active(bed: &TestBed) -> bool {
    bed.nodes().iter().any(|node| {
        std::fs::read_dir(node.manifests_dir()).is_ok_and(|d| {
            d.flatten().any(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("selfhost-checkpoint-")
            })
        })
    })
}

/// What each node's checkpointer wrote to its log: every line of every run of its container.
fn checkpointer_log(bed: &TestBed) -> String {
    let mut text = String::new();
    for node in bed.nodes() {
        let Ok(pods) = std::fs::read_dir(node.path("/var/log/pods")) else {
            continue;
        };
        for pod in pods.flatten() {
            if !pod
                .file_name()
                .to_string_lossy()
                .contains("selfhost-checkpointer")
            {
                continue;
            }
            let Ok(containers) = std::fs::read_dir(pod.path()) else {
                continue;
            };
            for container in containers.flatten() {
                for run in std::fs::read_dir(container.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    text.push_str(&std::fs::read_to_string(run.path()).unwrap_or_default());
                }
            }
        }
    }
    text
}

/// Waits (up to five minutes) until no static copy is active and every node's DaemonSet pods
/// serve: the control plane handed back from the checkpoints; `what` names the wait.
async fn handed_back(bed: &TestBed, client: &kube::Client, what: &str) {
    let nodes = bed.nodes().len();
    eventually(what, Duration::from_secs(300), || {
        let client = client.clone();
        async move {
            !copies_active(bed)
                && selfhost_e2e::bed::control_plane_state(&client)
                    .await
                    .is_ok_and(|s| s.serving(nodes))
        }
    })
    .await;
}

/// The load balancer gone for longer than the checkpointers' grace while every node's
/// processes run (an outage of the balancer, a partition): the API is unreachable from every
/// node, but each checkpointer finds its node's components taking connections on their own
/// ports, starts no copy beside them, and the control plane serves again once the balancer
/// is back.
pub async fn balancer_outage_starts_no_copy(bed: &mut TestBed) {
    /// The outage: more than twice the checkpointers' grace (10 s).
    const OUTAGE: Duration = Duration::from_secs(25);
    let before = checkpointer_log(bed).matches("serves on this node").count();
    bed.stop_balancer().await;
    let until = tokio::time::Instant::now() + OUTAGE;
    while tokio::time::Instant::now() < until {
        assert!(
            !copies_active(bed),
            "no copy is started beside running processes:\n{}",
            checkpointer_log(bed)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Each component of each node said why it started nothing.
    let said = checkpointer_log(bed).matches("serves on this node").count() - before;
    assert!(
        said >= 3 * bed.nodes().len(),
        "every checkpointer found its node's components running: {said} lines\n{}",
        checkpointer_log(bed)
    );
    assert!(
        !copies_active(bed),
        "no copy is started beside running processes"
    );
    bed.start_balancer().expect("the balancer starts again");
    control_plane_serves(bed, "the control plane serves again through the balancer").await;
    assert!(!copies_active(bed), "nothing to retire afterwards");
}

/// The power of every node cut and given back once every node keeps a checkpoint of each
/// component: the control plane comes back by itself on the checkpoints, then hands back to
/// its DaemonSet pods and the copies are retired. Prints the times from power-on.
pub async fn power_cut_comes_back(bed: &mut TestBed) {
    eventually(
        "every node keeps a checkpoint of every component",
        Duration::from_secs(120),
        || async {
            bed.nodes().iter().all(|node| {
                COMPONENTS.iter().all(|c| {
                    node.path(&format!("{CHECKPOINTS}/{c}/checkpoint.json"))
                        .is_file()
                })
            })
        },
    )
    .await;
    assert!(
        !copies_active(bed),
        "nothing is active while the API serves"
    );
    bed.power_cycle().await.expect("the kubelets start again");
    let power_on = tokio::time::Instant::now();
    let nodes = bed.nodes().len();
    let client = bed.client().await.expect("client");
    eventually("the API serves again", Duration::from_secs(300), || {
        let client = client.clone();
        async move { client.apiserver_version().await.is_ok() }
    })
    .await;
    let serving = power_on.elapsed();
    let bed = &*bed;
    handed_back(
        bed,
        &client,
        "the DaemonSet pods serve and every copy is retired",
    )
    .await;
    let retired = power_on.elapsed();
    // The operator's next command is an upgrade: its preflight refuses while the DaemonSets'
    // status is stale, which lasts until the controllers have their leaders again.
    let deadline = power_on + Duration::from_secs(300);
    loop {
        let (proceeds, text) = crate::support::plan(bed, TO_TAG).await;
        if proceeds {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the plan to {TO_TAG} still refuses 300 s after power-on:\n{text}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "power cut of every node ({nodes} node(s)), from power-on: API serving {:.1} s; \
         static copies retired {:.1} s; an upgrade's preflight passes {:.1} s",
        serving.as_secs_f64(),
        retired.as_secs_f64(),
        power_on.elapsed().as_secs_f64()
    );
    // What the checkpointers made of the Leases: releases of stopped leaders, or why they
    // could not read them.
    let log = checkpointer_log(bed);
    for line in log
        .lines()
        .filter(|l| l.contains("release the Lease") || l.contains("may not read the kube-system"))
    {
        eprintln!("checkpointer: {line}");
    }
}

/// Whether the process `pid` that started at `start_ticks` (clock ticks since boot) still runs:
/// not reaped, not a zombie, its pid not reused.
fn process_runs(pid: u32, start_ticks: u64) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The fields after the command's closing parenthesis, from field 3 (the state) on.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    fields.first().is_some_and(|state| *state != "Z")
        && fields.get(19).and_then(|t| t.parse::<u64>().ok()) == Some(start_ticks)
}

/// Whether a container of a pod whose name contains `pod` runs on `node`.
fn pod_runs(node: &BedNode, pod: &str) -> bool {
    selfhost_e2e::kubelet::recorded_containers(&node.root)
        .unwrap_or_default()
        .iter()
        .any(|r| {
            r.pod_name.contains(pod)
                && r.exit.is_none()
                && process_runs(r.pid, r.process_start_ticks)
        })
}

/// The checkpointer and its checkpoints taken off the node, then a power cut: nothing brings
/// the control plane back by itself. `selfhost recover` reads it from etcd (over TLS with the
/// kube-apiserver's etcd client certificate, as on kubeadm's nodes), writes it as static pods,
/// and the API serves again; the command it names next (installing the checkpointer) hands
/// back to the DaemonSet pods and retires the static copies. Prints the times from power-on.
/// One node: recover brings back the node it runs on.
pub async fn recover_without_checkpoints(bed: &mut TestBed) {
    assert_eq!(bed.nodes().len(), 1, "recover brings back one node");
    let node = bed.nodes()[0].clone();
    // The checkpointer first, so that it writes no checkpoint after they are removed.
    std::fs::remove_file(node.path(CHECKPOINTER_MANIFEST)).expect("the checkpointer's manifest");
    eventually(
        "the kubelet stops the checkpointer",
        Duration::from_secs(60),
        || async { !pod_runs(&node, "selfhost-checkpointer") },
    )
    .await;
    std::fs::remove_dir_all(node.path(CHECKPOINTS)).expect("the checkpoints");

    bed.power_cycle().await.expect("the kubelets start again");
    let power_on = tokio::time::Instant::now();
    let client = bed.client().await.expect("client");
    // Nothing comes back by itself: with no checkpoint, the kubelet has no static pod of the
    // control plane to start, and its DaemonSet pods need the API.
    while power_on.elapsed() < Duration::from_secs(3) {
        assert!(
            client.apiserver_version().await.is_err(),
            "the API answers after a power cut with no checkpoint"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let root = node.root.display().to_string();
    // selfhost runs outside the node's filesystem, as from a container with the host mounted:
    // the manifests directory is given as the node sees it, and the etcd files are at
    // kubeadm's paths on the node, both read beneath --host-root.
    let (output, wall) = selfhost_output(
        bed,
        &[
            "recover",
            "--node",
            &node.name,
            "--host-root",
            &root,
            "--manifests-dir",
            "/etc/kubernetes/manifests",
            "--etcd-endpoints",
            bed.etcd_url(),
            "-o",
            "json",
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "recover: {stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("recover's JSON report");
    eventually("the API serves again", Duration::from_secs(60), || {
        let client = client.clone();
        async move { client.apiserver_version().await.is_ok() }
    })
    .await;
    let serving = power_on.elapsed();
    let nodes_listed = kubectl(bed, &["get", "nodes", "-o", "name"]);
    assert!(nodes_listed.contains(&node.name), "{nodes_listed}");
    control_plane_serves(bed, "the recovered control plane serves").await;
    let controllers = power_on.elapsed();

    // What recover says to do next, pasted as printed: it names the node's root and the
    // bed's kubeconfig itself; only the bed's checkpointer image is added.
    let next = report["next"]
        .as_str()
        .expect("recover names the next step");
    let words: Vec<&str> = next.split_whitespace().collect();
    assert_eq!(
        words.get(..3),
        Some(&["selfhost", "checkpoint", "install"][..]),
        "the next step: {next}"
    );
    assert!(
        next.contains(&format!(" --host-root {root}")),
        "the next step acts on the node's root: {next}"
    );
    let installed = tokio::process::Command::new(selfhost_binary())
        .args(&words[1..])
        .args(["--checkpointer-image", CHECKPOINTER_IMAGE])
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("selfhost runs");
    assert!(
        installed.status.success(),
        "{next}: {}{}",
        String::from_utf8_lossy(&installed.stdout),
        String::from_utf8_lossy(&installed.stderr)
    );
    let nodes = bed.nodes().len();
    let bed = &*bed;
    handed_back(
        bed,
        &client,
        "the DaemonSet pods serve and the recovered copies are retired",
    )
    .await;
    eprintln!(
        "power cut with no checkpoint ({nodes} node(s)), from power-on: recover ran {:.1} s \
         (API serving {:.1} s after its static pods were written); API serving {:.1} s; \
         every component Ready with both leaders {:.1} s; self-hosted again, copies retired \
         {:.1} s",
        wall.as_secs_f64(),
        report["served_after_seconds"].as_f64().unwrap_or(f64::NAN),
        serving.as_secs_f64(),
        controllers.as_secs_f64(),
        power_on.elapsed().as_secs_f64()
    );
}

/// `apply` to `target` with both probers running; returns the figures.
pub async fn upgrade_probed(bed: &TestBed, target: &str) -> Figures {
    let leaders = LeaderWatch::start(bed).await;
    let probers = Probers::start(bed).await;
    let run = selfhost_to_end(bed, &["apply", target, "--force"]).await;
    let availability = probers.stop().await;
    let leader_changes = leaders.stop().await;
    assert_eq!(
        run.code,
        Some(0),
        "apply {target}: {:?}\n{}",
        run.result(),
        run.stderr
    );
    assert_on(bed, target);
    for line in run.step_seconds() {
        println!("  {line}");
    }
    Figures {
        wall: run.wall,
        availability,
        leader_changes,
        api_requests: run.api_requests(),
    }
}
