//! A power cut of every node in each phase of `selfhost apply` and of `selfhost convert
//! to-self-hosted`, the tool's own process killed with its machine: the control plane comes
//! back by itself on the checkpointers, on versions that served, and the same command run
//! again finishes the job.

use std::sync::Arc;
use std::time::Duration;

use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::{FaultAction, RequestMatcher, SimCluster, SimTimings, Verb};
use tokio::time::Instant;

use crate::checkpointed::{self, Served};

/// How much faster than real ones the pods and the checkpointers live.
const SPEED: u32 = 100;
/// How long the machines stay off.
const OFF: Duration = Duration::from_millis(300);
/// How long the control plane may take to serve again after the power comes back: the
/// checkpointer's grace (1 s on this clock) and a kube-apiserver's start, on a busy machine.
const BACK_WITHIN: Duration = Duration::from_secs(60);
/// At most this many runs of the command after the power cut: an operator runs it again
/// after a refusal that says the cluster is not settled yet.
const RERUNS: usize = 3;

/// Where the power goes: right after the `nth` event of `kind` (`step`, announced before it
/// acts, or `action`, once it acted) for `component`'s `step`.
#[derive(Debug, Clone, Copy)]
struct Cut {
    kind: &'static str,
    component: &'static str,
    step: &'static str,
    nth: usize,
}

const fn step(component: &'static str, step: &'static str, nth: usize) -> Cut {
    Cut {
        kind: "step",
        component,
        step,
        nth,
    }
}

const fn action(component: &'static str, step: &'static str, nth: usize) -> Cut {
    Cut {
        kind: "action",
        component,
        step,
        nth,
    }
}

async fn self_hosted(nodes: usize) -> Arc<SimCluster> {
    let builder = SimCluster::builder()
        .control_plane_nodes(nodes)
        .version("v1.33.1")
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::scaled(SPEED));
    let sim = checkpointed::with_checkpointers(builder, SPEED)
        .start()
        .await
        .expect("cluster starts");
    checkpointed::every_node_keeps_every_component(&sim).await;
    Arc::new(sim)
}

/// What one run of the tool printed, and how it ended (`None`: killed).
struct Run {
    events: Vec<serde_json::Value>,
    code: Option<i32>,
    stderr: String,
}

impl Run {
    /// The last event and the last lines of stderr, for messages.
    fn said(&self) -> String {
        let lines: Vec<&str> = self.stderr.lines().collect();
        format!(
            "last event {}\nstderr:\n{}",
            last(&self.events),
            lines[lines.len().saturating_sub(15)..].join("\n")
        )
    }
}

/// Runs `selfhost <args> -o json`; with a cut, SIGKILLs it right after the cut's event.
async fn run(sim: &SimCluster, args: Vec<String>, cut: Option<Cut>) -> Run {
    use std::io::{BufRead, BufReader, Read, Seek};
    use std::process::{Command, Stdio};
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut stderr = tempfile::tempfile().expect("a temporary file");
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
            .env_remove("KUBECONFIG")
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(&args)
            .args(["-o", "json"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr.try_clone().expect("a second handle"))
            .spawn()
            .expect("selfhost runs");
        let stdout = child.stdout.take().expect("stdout");
        let mut events = Vec::new();
        let mut seen = 0;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let event: serde_json::Value =
                serde_json::from_str(&line).expect("every line is one JSON event");
            let hit = cut.is_some_and(|c| {
                crate::is_event(&event, c.kind, c.component, c.step) && {
                    seen += 1;
                    seen == c.nth
                }
            });
            events.push(event);
            if hit {
                child.kill().expect("SIGKILL");
                break;
            }
        }
        let code = child.wait().expect("exits").code();
        let mut text = String::new();
        let _ = stderr.rewind();
        let _ = stderr.read_to_string(&mut text);
        Run {
            events,
            code,
            stderr: text,
        }
    })
    .await
    .expect("joined")
}

/// The last event, for messages.
fn last(events: &[serde_json::Value]) -> String {
    events.last().map(|e| e.to_string()).unwrap_or_default()
}

/// Whether a run stopped with an answer an operator acts on by running it again once the
/// cluster has settled: a refusal, or a stop that names the command to continue.
fn stopped_to_rerun(run: &Run) -> bool {
    match run.code {
        Some(3) => true,
        Some(4) => run.stderr.contains("Continue with"),
        _ => false,
    }
}

/// Cuts the power of every node for [`OFF`], the tool already killed with its machine; waits
/// until the API serves again and checks that what runs served before the cut.
async fn power_cut(sim: &Arc<SimCluster>, served: Served, at: &str) -> Duration {
    sim.power_cycle(OFF).await;
    let back = Instant::now();
    checkpointed::until(
        BACK_WITHIN,
        &format!("API after a cut at {at}"),
        async || checkpointed::api_answers(sim).await,
    )
    .await;
    let after = back.elapsed();
    let served = served.stop();
    let mut unserved = checkpointed::unserved_versions(sim, &served);
    unserved.extend(checkpointed::processes_outside(sim, &served));
    assert!(
        unserved.is_empty(),
        "after a cut at {at} the control plane came back on versions that served \
         ({served:?}): {unserved:#?}"
    );
    after
}

/// Runs `args` again until it finishes, as an operator would after a refusal while the
/// cluster settles; returns the runs it took.
async fn rerun_until_done(sim: &SimCluster, args: &[String], at: &str) -> usize {
    for runs in 1..=RERUNS {
        let rerun = run(sim, args.to_vec(), None).await;
        if rerun.code == Some(0) {
            return runs;
        }
        assert!(
            stopped_to_rerun(&rerun) && runs < RERUNS,
            "run {runs} of {args:?} after a cut at {at} ends with {:?}: {}",
            rerun.code,
            rerun.said()
        );
        // The operator waits until the nodes are back before trying again.
        checkpointed::until(
            Duration::from_secs(30),
            "copies retired before a re-run",
            async || {
                checkpointed::disks(sim)
                    .iter()
                    .all(|d| !d.has_active_copies())
            },
        )
        .await;
    }
    unreachable!("the loop returns or fails")
}

/// One upgrade per cut, a minor up each (the kubelets stay on v1.33: three minors of skew),
/// every node's power cut right after the cut's event.
async fn apply_cut_at(nodes: usize, cuts: &[Cut]) {
    let sim = self_hosted(nodes).await;
    for (i, cut) in cuts.iter().enumerate() {
        let to = format!("v1.{}.0", 34 + i);
        let at = format!("{cut:?} of apply {to} on {nodes} node(s)");
        let args: Vec<String> = ["apply", &to, "--yes"].map(String::from).to_vec();
        let served = Served::track(sim.clone());
        let started = Instant::now();
        let killed = run(&sim, args.clone(), Some(*cut)).await;
        assert_eq!(
            killed.code,
            None,
            "the run reached {at} and was killed there: {}",
            killed.said()
        );
        let back = power_cut(&sim, served, &at).await;
        let runs = rerun_until_done(&sim, &args, &at).await;
        checkpointed::until_on(
            &sim,
            &to,
            Duration::from_secs(30),
            &format!("after {at} and a re-run"),
        )
        .await;
        checkpointed::until(Duration::from_secs(30), "copies retired", async || {
            checkpointed::disks(&sim)
                .iter()
                .all(|d| !d.has_active_copies())
        })
        .await;
        eprintln!(
            "power cut at {at}: API back {:.1} s after power-on, {runs} run(s) after it, {:.1} s in all",
            back.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
    }
    if let Ok(sim) = Arc::try_unwrap(sim) {
        sim.shutdown().await;
    }
}

/// One node: the backup serves beside the new pod, so every phase of the pivot has pods of
/// both versions on the node when the power goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_power_cut_in_the_apiservers_pivot() {
    apply_cut_at(
        1,
        &[
            step("kube-apiserver", "wait-for-backup", 1),
            action("kube-apiserver", "delete-old-pod", 1),
            action("kube-apiserver", "remove-backup", 1),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_node_power_cut_in_the_rollout_and_the_controllers_pivots() {
    apply_cut_at(
        1,
        &[
            step("kube-apiserver", "wait-for-rollout", 1),
            action("kube-controller-manager", "update-real", 1),
            step("kube-scheduler", "wait-for-backup-gone", 1),
        ],
    )
    .await;
}

/// Three nodes: the kube-apiserver's backup is a record only, and its rollout goes one node
/// at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_power_cut_in_the_apiservers_rollout() {
    apply_cut_at(
        3,
        &[
            action("kube-apiserver", "update-real", 1),
            action("kube-apiserver", "delete-old-pod", 2),
            action("kube-apiserver", "restore-update-strategy", 1),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_power_cut_in_the_controllers_pivots() {
    apply_cut_at(
        3,
        &[
            step("kube-apiserver", "wait-for-rollout", 3),
            step("kube-controller-manager", "wait-for-backup", 1),
            action("kube-scheduler", "update-real", 1),
        ],
    )
    .await;
}

/// One static-pod control-plane node as kubeadm leaves it (no port sharing), whose registry
/// holds the checkpointer's and the front's images for `convert` to install.
async fn static_node() -> Arc<SimCluster> {
    let builder = SimCluster::builder()
        .control_plane_nodes(1)
        .version("v1.33.1")
        .mode(BootstrapMode::Static)
        .port_sharing(false)
        .timings(SimTimings::scaled(SPEED))
        // The node's API front's image: its pod starts, runs and is Ready.
        .image(selfhost::DEFAULT_IMAGE, ImageBehaviour::default());
    let sim = checkpointed::with_checkpointer_image(builder)
        .start()
        .await
        .expect("cluster starts");
    Arc::new(crate::settled(sim).await)
}

/// `convert to-self-hosted` on a fresh node per cut, every node's power cut right after the
/// cut's event, then the same command again.
async fn convert_cut_at(cuts: &[Cut]) {
    for cut in cuts {
        let sim = static_node().await;
        let at = format!("{cut:?} of convert to-self-hosted");
        let manifests = sim.manifests_dir("cp-1").expect("a manifests directory");
        // As on a node: its own paths, beneath the node's root (the checkpoints the
        // conversion waits for are there).
        let root = sim.node_root("cp-1").expect("a node directory");
        let args: Vec<String> = vec![
            "convert".into(),
            "to-self-hosted".into(),
            "--node".into(),
            "cp-1".into(),
            "--host-root".into(),
            root.display().to_string(),
            "--manifests-dir".into(),
            "/etc/kubernetes/manifests".into(),
            "--checkpointer-image".into(),
            checkpointed::CHECKPOINTER_IMAGE.into(),
            "--yes".into(),
        ];
        let served = Served::track(sim.clone());
        let started = Instant::now();
        let killed = run(&sim, args.clone(), Some(*cut)).await;
        assert_eq!(
            killed.code,
            None,
            "the run reached {at} and was killed there: {}",
            killed.said()
        );
        let back = power_cut(&sim, served, &at).await;
        let runs = rerun_until_done(&sim, &args, &at).await;
        checkpointed::until_on(
            &sim,
            "v1.33.1",
            Duration::from_secs(30),
            &format!("after {at} and a re-run"),
        )
        .await;
        let mut files: Vec<String> = std::fs::read_dir(manifests)
            .expect("the manifests directory")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            [selfhost::CHECKPOINTER_MANIFEST, selfhost::FRONT_MANIFEST],
            "after {at}: kubeadm's manifests moved aside, the checkpointer and the API front \
             installed"
        );
        eprintln!(
            "power cut at {at}: API back {:.1} s after power-on, {runs} run(s) after it, {:.1} s in all",
            back.as_secs_f64(),
            started.elapsed().as_secs_f64()
        );
        if let Ok(sim) = Arc::try_unwrap(sim) {
            sim.shutdown().await;
        }
    }
}

/// Before the kube-apiserver's static manifest leaves: kubeadm's static pods bring the node
/// back by themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_before_the_apiservers_conversion_is_done() {
    convert_cut_at(&[
        action("kube-apiserver", "create-daemonset", 1),
        action("kube-apiserver", "add-port-sharing", 1),
    ])
    .await;
}

/// After it: the kube-apiserver runs only from its DaemonSet, which no kubelet can learn
/// without an API; `convert` installed the checkpointer first and moved each static manifest
/// aside only once it kept the DaemonSet pod, so the checkpoints bring the node back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_cut_after_the_apiservers_conversion() {
    convert_cut_at(&[
        action("kube-apiserver", "move-manifest-aside", 1),
        action("kube-controller-manager", "add-port-sharing", 1),
        action("kube-scheduler", "move-manifest-aside", 1),
    ])
    .await;
}

/// The API answers while every list of pods fails for longer than the checkpointers' grace (a
/// 429 from priority and fairness, a 500, a denial of the node's credentials): no copy is
/// started beside a control plane that serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_pod_lists_from_an_answering_api_start_no_copy() {
    let sim = self_hosted(1).await;
    let disks = checkpointed::disks(&sim);
    let failing = sim.faults().inject(
        RequestMatcher::resource("pods").verb(Verb::List),
        FaultAction::Status {
            code: 500,
            retry_after: None,
        },
        None,
    );
    // Three times the grace, on this clock.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        assert!(
            disks.iter().all(|d| !d.has_active_copies()),
            "a copy was started while the API answered: {:#?}",
            checkpointed::checkpointer_said(&sim)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sim.faults().remove(failing);
    assert!(checkpointed::api_answers(&sim).await);
    assert!(
        sim.metrics()
            .requests_from(selfhost::CHECKPOINTER_USER_AGENT)
            > 0,
        "the agent's requests say who sends them"
    );
}
