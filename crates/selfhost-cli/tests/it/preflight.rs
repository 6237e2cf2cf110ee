//! `plan` and `apply` against clusters that must not be upgraded: each refusal says what is
//! wrong and how to fix it, exits 3, and changes nothing; bad input exits 2 and changes
//! nothing. (The table of hostile input is in `hostile/`.)

use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::controllers::kubelet::NodeState;
use selfhost_sim::{SimCluster, SimTimings};
use serde_json::json;

use crate::hostile::snapshot::{Snapshot, assert_unchanged};

async fn cluster(nodes: usize) -> SimCluster {
    SimCluster::builder()
        .control_plane_nodes(nodes)
        .version("v1.33.1")
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::fast())
        .start()
        .await
        .expect("cluster starts")
}

/// Runs the binary from a blocking thread, so the simulator keeps serving meanwhile.
async fn selfhost(sim: &SimCluster, args: &[&str]) -> Output {
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        crate::selfhost()
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(&args)
            .timeout(Duration::from_secs(90))
            .output()
    })
    .await
    .expect("joined")
    .expect("runs")
}

/// The cluster's state as the hostile cases compare it.
async fn snapshot(sim: &SimCluster) -> Snapshot {
    crate::hostile::snapshot::snapshot(&sim.client()).await
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_skew_violation_is_refused_with_the_path_to_take() {
    // Upgrades two minors ahead are chained (tests/it/chain.rs); a downgrade is not.
    let sim = cluster(1).await;
    let before = snapshot(&sim).await;
    let out = selfhost(&sim, &["apply", "v1.31.0", "--yes"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("downgrade to v1.32.x first, then to v1.31.x"),
        "{}",
        text(&out)
    );
    assert_eq!(
        snapshot(&sim).await,
        before,
        "a refused run changes nothing"
    );
    let plan = selfhost(&sim, &["plan", "v1.31.0"]).await;
    assert_eq!(plan.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&plan.stdout).contains("apply would refuse"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_ready_control_plane_node_is_refused() {
    let sim = cluster(3).await;
    sim.set_node_state("cp-2", NodeState::NotReady)
        .expect("node exists");
    let nodes: Api<Node> = Api::all(sim.client());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let node = nodes.get("cp-2").await.expect("node");
        let ready = node
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Ready");
        if ready.is_some_and(|c| c.status != "True") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "cp-2 never reported NotReady"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = snapshot(&sim).await;
    let out = selfhost(&sim, &["apply", "v1.34.0", "--yes"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("cp-2"), "{}", text(&out));
    assert_unchanged(&before, &snapshot(&sim).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_that_is_not_converged_is_refused() {
    let sim = cluster(3).await;
    sim.registry()
        .make_unpullable("registry.k8s.io/kube-scheduler:v1.33.9");
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "kube-scheduler", "image": "registry.k8s.io/kube-scheduler:v1.33.9"}]}}}});
    daemonsets
        .patch(
            "self-hosted-kube-scheduler",
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await
        .expect("patched");
    let out = selfhost(&sim, &["plan", "v1.34.0"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("FAIL  daemonsets-converged (kube-scheduler)"),
        "{}",
        text(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_for_another_target_is_refused_unless_forced() {
    let sim = cluster(1).await;
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let real = daemonsets
        .get("self-hosted-kube-scheduler")
        .await
        .expect("real");
    let target = selfhost_core::KubeVersion::parse("v1.34.2").expect("version");
    let backup =
        selfhost_core::backup::derive_backup(&real, selfhost_core::Component::Scheduler, &target)
            .expect("backup");
    daemonsets
        .create(&Default::default(), &backup)
        .await
        .expect("created");
    // Let the backup's pod come up first: its creation is the DaemonSet controller's doing,
    // not the run's.
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    let selector = ListParams::default().labels("temp-upgrade-component=kube-scheduler");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let ready = pods
            .list(&selector)
            .await
            .expect("list")
            .items
            .iter()
            .any(|p| {
                let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
                conditions
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            });
        if ready {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the backup pod never became Ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = snapshot(&sim).await;
    let out = selfhost(&sim, &["apply", "v1.34.0", "--yes"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("v1.34.2"),
        "names the other run's target: {}",
        text(&out)
    );
    assert!(
        text(&out).contains("--force"),
        "says how to proceed: {}",
        text(&out)
    );
    assert_unchanged(&before, &snapshot(&sim).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_exits_2_and_changes_nothing() {
    let sim = cluster(1).await;
    let before = snapshot(&sim).await;
    let rows: &[(&[&str], &str)] = &[
        (&["apply", "v1.34"], "no patch number"),
        (
            &["apply", "v1.34.0", "--timeout", "5 parsecs"],
            "invalid --timeout",
        ),
        (
            &["apply", "v1.34.0", "--timeout", "1s"],
            "shorter than a control-plane pod takes to start",
        ),
        (&["apply", "v1.34.0"], "pass --yes"),
        (
            &["plan", "v1.34.0", "--config", "/no/such/file.yaml"],
            "cannot read the configuration file",
        ),
    ];
    for (args, says) in rows {
        let out = selfhost(&sim, args).await;
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
    }
    assert_unchanged(&before, &snapshot(&sim).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_versions_per_node() {
    let sim = cluster(3).await;
    let out = selfhost(&sim, &["status"]).await;
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("self-hosted-kube-apiserver") && said.contains("v1.33.1 (cp-1, cp-2, cp-3)"),
        "{said}"
    );
    let json = selfhost(&sim, &["status", "-o", "json"]).await;
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(value["components"].as_array().map(Vec::len), Some(3));
}

/// An operator reads the plan of a three-node cluster on one screen: the checks every
/// component passes are one line each, and what each found, with why the disruption is what
/// it is, comes with `-v`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_node_plan_fits_one_screen_and_explains_itself_with_verbose() {
    let sim = cluster(3).await;
    let out = selfhost(&sim, &["plan", "v1.34.0"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan = String::from_utf8_lossy(&out.stdout).to_string();
    // 63 lines on a cluster with its checkpointers; here their warning and its fix add two.
    assert!(
        plan.lines().count() <= 65,
        "{} lines:\n{plan}",
        plan.lines().count()
    );
    for line in [
        "  PASS  daemonsets-converged: kube-apiserver, kube-controller-manager, kube-scheduler",
        "  PASS  expected-disruption: kube-apiserver, kube-controller-manager, kube-scheduler",
        "apply would proceed: selfhost apply v1.34.0",
        "  WARN  checkpointers: cp-1: none; cp-2: none; cp-3: none; a power cut of every \
         control-plane node, during the upgrade or after it, leaves the control plane down",
    ] {
        assert!(plan.lines().any(|l| l == line), "{line:?} in:\n{plan}");
    }
    assert!(!plan.contains("the Lease is handed over"), "{plan}");
    let verbose = selfhost(&sim, &["plan", "v1.34.0", "-v"]).await;
    let verbose = String::from_utf8_lossy(&verbose.stdout).to_string();
    assert!(
        verbose.contains("PASS  daemonsets-converged (kube-scheduler): "),
        "{verbose}"
    );
    assert!(verbose.contains("the Lease is handed over"), "{verbose}");
}

/// A kube-apiserver told to stop fails only its `shutdown` check while it drains, and keeps
/// the connections it has: the plan says so and waits for it to go rather than refusing an
/// API whose other server already serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apiserver_shutting_down_delays_the_plan_and_does_not_refuse_it() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let sim = cluster(1).await;
    sim.server().set_health_check_failing("shutdown", true);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["plan", "v1.34.0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("selfhost runs");
    let stderr = child.stderr.take().expect("stderr");
    let (lines, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let waiting = tokio::task::spawn_blocking(move || {
        let mut seen = Vec::new();
        while let Ok(line) = said.recv_timeout(Duration::from_secs(30)) {
            let found = line.contains("is shutting down");
            seen.push(line);
            if found {
                return Ok(seen);
            }
        }
        Err(seen)
    })
    .await
    .expect("joined");
    let seen = waiting.expect("the plan says it waits for the stopping kube-apiserver");
    // The stopping server is gone: the serving one answers every probe.
    sim.server().set_health_check_failing("shutdown", false);
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("joined")
        .expect("waited");
    assert_eq!(status.code(), Some(0), "the plan proceeds: {seen:#?}");
}

/// Waits until `name` has rolled its template out to every node.
async fn rolled_out(sim: &SimCluster, name: &str) {
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ds = daemonsets.get(name).await.expect("the DaemonSet");
        let generation = ds.metadata.generation;
        let status = ds.status.unwrap_or_default();
        if status.observed_generation == generation
            && status.desired_number_scheduled > 0
            && status.updated_number_scheduled == Some(status.desired_number_scheduled)
            && status.number_ready == status.desired_number_scheduled
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never rolled out: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flag_the_target_no_longer_accepts_is_refused_by_name_before_any_change() {
    let sim = cluster(1).await;

    // Only the live DaemonSet has it: the target, rendered from the kubeadm configuration,
    // drops it, which is worth a warning and no refusal.
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let name = "self-hosted-kube-apiserver";
    // The cluster as built with the flag: the rollout that puts it there is not the test's.
    sim.set_self_hosting_model(false);
    let mut ds = daemonsets.get(name).await.expect("the DaemonSet");
    let spec = ds
        .spec
        .as_mut()
        .and_then(|s| s.template.spec.as_mut())
        .expect("a pod spec");
    let container = spec.containers.first_mut().expect("a container");
    container
        .command
        .get_or_insert_with(Vec::new)
        .push("--insecure-port=0".into());
    daemonsets
        .replace(name, &Default::default(), &ds)
        .await
        .expect("replaced");
    rolled_out(&sim, name).await;
    sim.set_self_hosting_model(true);
    let plan = selfhost(&sim, &["plan", "v1.34.0"]).await;
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan));
    assert!(
        text(&plan).contains(
            "WARN  flags-and-gates (kube-apiserver): the live template's --insecure-port is not \
             in the target template, so the upgrade drops it"
        ),
        "{}",
        text(&plan)
    );

    // The kubeadm configuration asks for it: the target would not start.
    let config_maps: Api<ConfigMap> = Api::namespaced(sim.client(), "kube-system");
    let mut config = config_maps
        .get("kubeadm-config")
        .await
        .expect("kubeadm-config");
    let data = config.data.get_or_insert_with(Default::default);
    let cluster_configuration = data.entry("ClusterConfiguration".into()).or_default();
    cluster_configuration
        .push_str("apiServer:\n  extraArgs:\n  - name: insecure-port\n    value: \"0\"\n");
    config_maps
        .replace("kubeadm-config", &Default::default(), &config)
        .await
        .expect("replaced");

    let plan = selfhost(&sim, &["plan", "v1.34.0"]).await;
    assert_eq!(plan.status.code(), Some(3), "{}", text(&plan));
    for phrase in [
        "FAIL  flags-and-gates (kube-apiserver): refused by v1.34: --insecure-port was removed \
         in v1.24",
        "fix: edit the cluster's kubeadm configuration (ConfigMap kube-system/kubeadm-config), \
         kube-apiserver's extraArgs: drop --insecure-port",
        "apply would refuse",
    ] {
        assert!(
            text(&plan).contains(phrase),
            "{phrase:?} in {}",
            text(&plan)
        );
    }
    let json = selfhost(&sim, &["-o", "json", "plan", "v1.34.0"]).await;
    let report: serde_json::Value =
        serde_json::from_slice(&json.stdout).expect("plan -o json prints one document");
    let refused: Vec<&serde_json::Value> = report["preflight"]["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == "flags-and-gates" && c["verdict"] == "fail")
        .collect();
    assert_eq!(refused.len(), 1, "{report:#}");
    assert_eq!(refused[0]["component"], "kube-apiserver");

    let before = snapshot(&sim).await;
    let apply = selfhost(&sim, &["apply", "v1.34.0", "--yes"]).await;
    assert_eq!(apply.status.code(), Some(3), "{}", text(&apply));
    assert!(text(&apply).contains("--insecure-port"), "{}", text(&apply));
    assert_unchanged(&before, &snapshot(&sim).await);
}
