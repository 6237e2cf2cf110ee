//! kubectl as an independent, real client of the simulator: what a user types, what they
//! read back, and the objects that result (read through kube-rs).
//!
//! Every test is skipped, with a message, when `kubectl` is not on the PATH. kubectl always
//! runs with `--kubeconfig <the simulator's>` and a private HOME and cache directory, so the
//! user's `~/.kube` is never read or written, and with a deadline.

mod generators;
mod init_containers;
mod inspect;
mod reads;
mod validation;
mod writes;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use selfhost_sim::{SimServer, SimServerOptions};
use serde_json::{Value, json};

use crate::common::object;

/// How long one kubectl invocation may take on a loaded machine.
const KUBECTL_DEADLINE: Duration = Duration::from_secs(60);

/// The self-hosted kube-apiserver DaemonSet the suite applies, as a user would write it.
const APISERVER_DAEMONSET: &str = include_str!("kubectl/fixtures/self-hosted-kube-apiserver.yaml");

/// The `kubectl` executable on the PATH, if there is one.
fn kubectl_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|candidate| candidate.is_file())
}

/// What one kubectl run printed.
#[derive(Debug)]
struct Output {
    success: bool,
    stdout: String,
    stderr: String,
}

/// kubectl pointed at one simulator.
struct Kubectl {
    program: PathBuf,
    kubeconfig: PathBuf,
    /// HOME and `--cache-dir` for kubectl, so nothing outside this directory is touched.
    home: tempfile::TempDir,
}

impl Kubectl {
    /// kubectl for `sim`, or `None` (after saying so) when kubectl is not installed.
    fn for_sim(sim: &SimServer, test: &str) -> Option<Kubectl> {
        let Some(program) = kubectl_on_path() else {
            eprintln!("skipping {test}: kubectl is not on the PATH");
            return None;
        };
        Some(Kubectl {
            program,
            kubeconfig: sim.kubeconfig_path().to_path_buf(),
            home: tempfile::tempdir().expect("a temporary HOME for kubectl"),
        })
    }

    fn cache_dir(&self) -> PathBuf {
        self.home.path().join("cache")
    }

    /// Runs `kubectl <args>`, failing the test if it does not finish in time.
    async fn run(&self, args: &[&str]) -> Output {
        let mut command = tokio::process::Command::new(&self.program);
        command
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache_dir())
            .args(args)
            .env_remove("KUBECONFIG")
            .env("HOME", self.home.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let output = tokio::time::timeout(KUBECTL_DEADLINE, command.output())
            .await
            .unwrap_or_else(|_| {
                panic!("kubectl {args:?} did not finish within {KUBECTL_DEADLINE:?}")
            })
            .expect("kubectl starts");
        Output {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs kubectl and returns its stdout, failing the test with kubectl's stderr if it
    /// does not succeed.
    async fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args).await;
        assert!(
            output.success,
            "kubectl {args:?} failed\nstdout:\n{}\nstderr:\n{}",
            output.stdout, output.stderr
        );
        output.stdout
    }

    /// Writes `contents` to a file in kubectl's private directory and returns its path.
    fn file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.home.path().join(name);
        std::fs::write(&path, contents).expect("write a manifest for kubectl");
        path
    }
}

fn path_arg(path: &Path) -> &str {
    path.to_str().expect("temporary paths are UTF-8")
}

/// A simulator with a control-plane node, a kube-apiserver pod on it, and the self-hosted
/// kube-apiserver DaemonSet (created through kube-rs).
async fn cluster() -> SimServer {
    let sim = SimServer::start(SimServerOptions::default())
        .await
        .expect("the simulator starts");
    seed(&sim).await;
    sim
}

async fn seed(sim: &SimServer) {
    let nodes: Api<Node> = Api::all(sim.client());
    nodes
        .create(&PostParams::default(), &object(node("cp-1")))
        .await
        .expect("create node cp-1");
    let node_status = node("cp-1")["status"].clone();
    nodes
        .patch_status(
            "cp-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": node_status})),
        )
        .await
        .expect("report node cp-1 Ready");
    let pods: Api<Pod> = Api::namespaced(sim.client(), "kube-system");
    for (name, component) in [
        ("kube-apiserver-cp-1", "kube-apiserver"),
        ("kube-scheduler-cp-1", "kube-scheduler"),
    ] {
        pods.create(
            &PostParams::default(),
            &object(control_plane_pod(name, component)),
        )
        .await
        .expect("create a control-plane pod");
        pods.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(running(component)),
        )
        .await
        .expect("report the pod running");
    }
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let ds: DaemonSet =
        serde_saphyr::from_str(APISERVER_DAEMONSET).expect("the fixture is valid YAML");
    daemonsets
        .create(&PostParams::default(), &ds)
        .await
        .expect("create the kube-apiserver DaemonSet");
}

fn node(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "node-role.kubernetes.io/control-plane": ""}},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.11"}],
            "nodeInfo": {"kubeletVersion": "v1.32.4", "osImage": "Simulated Linux", "kernelVersion": "6.1.0",
                         "containerRuntimeVersion": "containerd://1.7.0", "architecture": "amd64", "operatingSystem": "linux",
                         "bootID": "", "kubeProxyVersion": "", "machineID": "", "systemUUID": ""}
        }
    })
}

fn control_plane_pod(name: &str, component: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"component": component, "tier": "control-plane"}},
        "spec": {"nodeName": "cp-1", "hostNetwork": true,
                 "containers": [{"name": component, "image": format!("registry.k8s.io/{component}:v1.32.4")}]}
    })
}

/// The status a kubelet reports for a running, ready single-container pod.
fn running(container: &str) -> Value {
    json!({"status": {
        "phase": "Running",
        "podIP": "10.0.0.11",
        "podIPs": [{"ip": "10.0.0.11"}],
        "conditions": [{"type": "Ready", "status": "True"}],
        "containerStatuses": [{"name": container, "ready": true, "restartCount": 0, "image": "", "imageID": "",
                               "state": {"running": {"startedAt": "2025-01-01T00:00:00Z"}}}]
    }})
}

/// The tables kubectl printed: one per block, each row as column name → cell. Cells are cut
/// at the columns' header positions, so empty cells (a kind without short names) stay empty.
fn tables(stdout: &str) -> Vec<Vec<std::collections::BTreeMap<String, String>>> {
    stdout
        .split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut lines = block.lines().filter(|l| !l.trim().is_empty());
            let header = lines.next().unwrap_or_default();
            let mut columns: Vec<(usize, &str)> = Vec::new();
            let mut at = 0;
            for name in header.split("  ").map(str::trim).filter(|n| !n.is_empty()) {
                let start = at + header[at..].find(name).unwrap_or(0);
                columns.push((start, name));
                at = start + name.len();
            }
            lines
                .map(|line| {
                    columns
                        .iter()
                        .enumerate()
                        .map(|(i, (start, name))| {
                            let end = columns.get(i + 1).map_or(line.len(), |(next, _)| *next);
                            let cell = line.get(*start..end.min(line.len())).unwrap_or_default();
                            (name.to_string(), cell.trim().to_string())
                        })
                        .collect()
                })
                .collect()
        })
        .collect()
}

/// The row whose NAME is `name`, from any table.
fn row(stdout: &str, name: &str) -> std::collections::BTreeMap<String, String> {
    tables(stdout)
        .into_iter()
        .flatten()
        .find(|row| row.get("NAME").map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row named {name} in:\n{stdout}"))
}
