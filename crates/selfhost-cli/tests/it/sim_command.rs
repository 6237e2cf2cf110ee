//! `selfhost sim` as a user runs it: a foreground process that prints how to reach the
//! cluster, answers kubectl, and stops cleanly on Ctrl-C.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn kubectl(
    kubeconfig: &std::path::Path,
    home: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .arg("--request-timeout=20s")
        .args(args)
        .env("HOME", home)
        .output()
        .expect("kubectl runs")
}

#[test]
fn sim_serves_kubectl_and_stops_on_sigint() {
    if Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_err()
    {
        eprintln!("skipping sim_serves_kubectl_and_stops_on_sigint: kubectl is not on the PATH");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
        .args([
            "sim",
            "--fast",
            "--control-plane-nodes",
            "2",
            "--workers",
            "1",
            "--kubeconfig",
        ])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("selfhost sim starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut printed = String::new();
    for line in lines.by_ref() {
        let line = line.expect("line");
        printed.push_str(&line);
        printed.push('\n');
        if line.contains("Press Ctrl-C to stop") || Instant::now() > deadline {
            break;
        }
    }
    assert!(
        printed.contains(&format!("export KUBECONFIG={}", kubeconfig.display())),
        "{printed}"
    );

    let nodes = kubectl(&kubeconfig, dir.path(), &["get", "nodes"]);
    let text = String::from_utf8_lossy(&nodes.stdout);
    assert!(
        nodes.status.success(),
        "{}",
        String::from_utf8_lossy(&nodes.stderr)
    );
    for node in ["cp-1", "cp-2", "worker-1"] {
        assert!(text.contains(node), "{text}");
    }
    let ds = kubectl(&kubeconfig, dir.path(), &["get", "ds", "-n", "kube-system"]);
    assert!(String::from_utf8_lossy(&ds.stdout).contains("self-hosted-kube-apiserver"));
    let rollout = kubectl(
        &kubeconfig,
        dir.path(),
        &[
            "rollout",
            "status",
            "ds/self-hosted-kube-apiserver",
            "-n",
            "kube-system",
            "--timeout=30s",
        ],
    );
    assert!(
        String::from_utf8_lossy(&rollout.stdout).contains("successfully rolled out"),
        "{}{}",
        String::from_utf8_lossy(&rollout.stdout),
        String::from_utf8_lossy(&rollout.stderr)
    );

    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(interrupted.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "selfhost sim did not stop within 30 s of SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0));
}

/// A `selfhost sim` in the background: its kubeconfig, and its stderr lines as they come.
struct Running {
    child: std::process::Child,
    kubeconfig: std::path::PathBuf,
    home: tempfile::TempDir,
    said: std::sync::mpsc::Receiver<String>,
    banner: Vec<String>,
}

impl Running {
    fn start(args: &[&str]) -> Running {
        let home = tempfile::tempdir().expect("tempdir");
        let kubeconfig = home.path().join("kubeconfig");
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
            .args(["sim", "--fast"])
            .args(args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("selfhost sim starts");
        let stdout = child.stdout.take().expect("stdout");
        let banner: Vec<String> = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .take_while(|l| !l.contains("Press Ctrl-C to stop"))
            .collect();
        assert!(
            banner.iter().any(|l| l.contains("kill -USR1")),
            "the banner says how to reboot: {banner:#?}"
        );
        let stderr = child.stderr.take().expect("stderr");
        let (tx, said) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Running {
            child,
            kubeconfig,
            home,
            said,
            banner,
        }
    }

    fn signal(&self, name: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
    }

    /// Waits until the simulator says `what`.
    fn until_said(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.said.recv_timeout(left) {
                Ok(line) if line.contains(what) => return,
                Ok(_) => {}
                Err(_) => panic!("selfhost sim did not say {what:?} within 30 s"),
            }
        }
    }

    /// cp-1's manifests directory, as the banner names it.
    fn manifests_dir(&self) -> std::path::PathBuf {
        let line = self
            .banner
            .iter()
            .find_map(|l| l.trim().strip_prefix("cp-1's manifests directory: "))
            .expect("the banner names cp-1's manifests directory");
        line.into()
    }

    fn nodes_answer(&self) -> bool {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.home.path().join("cache"))
            .args(["--request-timeout=2s", "get", "nodes"])
            .env("HOME", self.home.path())
            .output()
            .expect("kubectl runs")
            .status
            .success()
    }
}

impl Drop for Running {
    /// Stops it as a user does, with Ctrl-C, so that it stops what it runs (the checkpointers'
    /// processes among them); SIGKILL only if it does not stop in time.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn has_kubectl() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok()
}

/// The signals the banner names reboot the simulated machines as real ones reboot: a kubelet
/// restart loses nothing, and a power cut leaves a self-hosted control plane dead (nothing
/// starts its kube-apiserver, whose pod only the API knew).
#[test]
fn sim_signals_restart_kubelets_and_cut_the_power() {
    if !has_kubectl() {
        eprintln!("skipping: kubectl is not on the PATH");
        return;
    }
    let sim = Running::start(&["--control-plane-nodes", "1", "--no-checkpointer"]);
    assert!(sim.nodes_answer());
    sim.signal("HUP");
    sim.until_said("every kubelet restarted");
    assert!(
        sim.nodes_answer(),
        "a kubelet restart keeps the API serving"
    );
    sim.signal("USR1");
    sim.until_said("power back");
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(5) {
        assert!(
            !sim.nodes_answer(),
            "a self-hosted control plane does not come back from a power cut by itself"
        );
    }
}

/// With the checkpointer `convert to-self-hosted` installs, which `selfhost sim` builds too, a
/// self-hosted control plane comes back from a power cut by itself.
#[test]
fn sim_with_its_checkpointers_comes_back_from_a_power_cut() {
    if !has_kubectl() {
        eprintln!("skipping: kubectl is not on the PATH");
        return;
    }
    let sim = Running::start(&["--control-plane-nodes", "1"]);
    assert!(
        sim.banner
            .iter()
            .any(|l| l.contains("a checkpointer on every control-plane node")),
        "{:#?}",
        sim.banner
    );
    // kubeadm's layout: the checkpoints beside the manifests directory.
    let checkpoints = sim
        .manifests_dir()
        .parent()
        .expect("/etc/kubernetes")
        .join("selfhost-checkpoints");
    let deadline = Instant::now() + Duration::from_secs(30);
    while ![
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ]
    .iter()
    .all(|c| checkpoints.join(c).join("checkpoint.json").is_file())
    {
        assert!(
            Instant::now() < deadline,
            "every component is kept within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sim.signal("USR1");
    sim.until_said("power back");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !sim.nodes_answer() {
        assert!(
            Instant::now() < deadline,
            "the API serves again on the checkpoints within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Stopped as a user stops it, it stops its checkpointers' processes too.
    let manifests = sim.manifests_dir().display().to_string();
    drop(sim);
    let agents = || {
        std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        std::fs::read(e.path().join("cmdline"))
                            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&manifests))
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while agents() > 0 {
        assert!(
            Instant::now() < deadline,
            "no checkpointer outlives selfhost sim"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A kubeadm static-pod control plane comes back from a reboot by itself: the kubelet starts
/// its static pods from disk.
#[test]
fn sim_reboots_a_static_pod_node_that_comes_back() {
    if !has_kubectl() {
        eprintln!("skipping: kubectl is not on the PATH");
        return;
    }
    let sim = Running::start(&["--mode", "static", "--control-plane-nodes", "1"]);
    sim.signal("USR2");
    sim.until_said("cp-1 boots");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !sim.nodes_answer() {
        assert!(
            Instant::now() < deadline,
            "the static kube-apiserver is back within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
