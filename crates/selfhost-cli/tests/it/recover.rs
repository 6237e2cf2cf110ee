//! `selfhost recover` on a simulated self-hosted control plane that a power cut took with no
//! checkpointer: it reads the DaemonSets and their Secrets from the simulator's etcd, writes
//! the checkpointer's active copies and the Secret files, and the API serves again; every
//! refusal changes nothing.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use selfhost_sim::SimCluster;
use selfhost_sim::resources::{DAEMONSETS, SECRETS};
use selfhost_sim::store::{DeleteOptions, Subresource, WriteOptions};
use serde_json::{Value, json};

/// What the test's Secret holds; it must never reach stdout or stderr.
const KEY_MATERIAL: &str = "PRIVATE-KEY-MATERIAL-recover-test";
const CERT: &str = "CERTIFICATE-recover-test";

/// A one-node self-hosted cluster whose kube-apiserver mounts its certificates from a Secret,
/// after a power cut of every node with no checkpointer: its API is gone for good.
async fn gone_without_checkpoint() -> SimCluster {
    let sim = crate::one_self_hosted_node().await;
    sim.power_cycle(Duration::from_millis(300)).await;
    assert!(
        !sim.is_api_up(),
        "no API after a power cut without checkpoints"
    );
    // What etcd held all along: the certificates in a Secret, mounted by the template.
    sim.store()
        .create(
            &SECRETS,
            "kube-system",
            json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": "apiserver-certs", "namespace": "kube-system"},
                   "data": {"ca.crt": STANDARD.encode(CERT),
                            "ca.key": STANDARD.encode(KEY_MATERIAL)}}),
            &WriteOptions::default(),
        )
        .expect("the Secret");
    sim.store()
        .modify(
            &DAEMONSETS,
            "kube-system",
            "self-hosted-kube-apiserver",
            Subresource::Main,
            &WriteOptions::default(),
            |ds| {
                let mut ds = ds.clone();
                let volumes = ds["spec"]["template"]["spec"]["volumes"]
                    .as_array_mut()
                    .expect("volumes");
                for volume in volumes.iter_mut() {
                    if volume["name"] == "k8s-certs" {
                        *volume = json!({"name": "k8s-certs", "projected": {"sources": [
                            {"secret": {"name": "apiserver-certs", "items": [
                                {"key": "ca.crt", "path": "ca.crt"},
                                {"key": "ca.key", "path": "ca.key"}]}}]}});
                    }
                }
                Ok(ds)
            },
        )
        .expect("the template mounts the Secret");
    sim
}

/// kubeadm's paths of the etcd CA and the API server's etcd client certificate and key, where
/// recover reads them by default.
const ETCD_FILES: [&str; 3] = [
    "/etc/kubernetes/pki/etcd/ca.crt",
    "/etc/kubernetes/pki/apiserver-etcd-client.crt",
    "/etc/kubernetes/pki/apiserver-etcd-client.key",
];

/// Where the kubelet reads static pods, as the node sees it.
const MANIFESTS: &str = "/etc/kubernetes/manifests";

/// cp-1's root filesystem, laid out as a kubeadm node: the kubelet's manifests directory and
/// the files that reach the simulator's etcd at kubeadm's paths beneath it. recover runs
/// outside it, as from a container with the host mounted, and is given it as --host-root.
fn node_root(sim: &SimCluster) -> PathBuf {
    let root = sim.node_root("cp-1").expect("cp-1");
    let files = sim.etcd().client_files();
    for (from, on_node) in [&files.ca, &files.cert, &files.key]
        .into_iter()
        .zip(ETCD_FILES)
    {
        let to = root.join(on_node.trim_start_matches('/'));
        std::fs::create_dir_all(to.parent().expect("a directory")).expect("the pki directory");
        std::fs::copy(from, &to).expect("the etcd client file on the node");
    }
    assert_eq!(
        root.join(MANIFESTS.trim_start_matches('/')),
        manifests(sim),
        "the kubelet reads the manifests directory beneath the node's root"
    );
    root
}

/// The etcd flags: the endpoint only, the files at kubeadm's default paths on the node.
fn etcd_args(sim: &SimCluster) -> Vec<OsString> {
    vec!["--etcd-endpoints".into(), sim.etcd().endpoint().into()]
}

fn manifests(sim: &SimCluster) -> PathBuf {
    sim.manifests_dir("cp-1").expect("cp-1").to_path_buf()
}

/// `selfhost recover --node cp-1` against `sim`, with the node's root `root` as --host-root,
/// its paths as the node sees them, and `extra` flags.
fn recover(sim: &SimCluster, root: &Path, extra: &[&str]) -> assert_cmd::Command {
    recover_with(sim, root, etcd_args(sim), extra)
}

/// The same with `etcd` as the etcd flags.
fn recover_with(
    sim: &SimCluster,
    root: &Path,
    etcd: Vec<OsString>,
    extra: &[&str],
) -> assert_cmd::Command {
    let mut cmd = crate::selfhost();
    cmd.arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["recover", "--node", "cp-1"])
        .args(etcd)
        .args(["--manifests-dir", MANIFESTS])
        .arg("--host-root")
        .arg(root)
        .args(["--timeout", "60s"])
        .args(extra);
    cmd
}

/// The etcd flags with `flag` given `value` as well.
fn etcd_args_with(sim: &SimCluster, flag: &str, value: &str) -> Vec<OsString> {
    let mut args = etcd_args(sim);
    match args.iter().position(|a| a == flag) {
        Some(at) => args[at + 1] = value.into(),
        None => args.extend([flag.into(), value.into()]),
    }
    args
}

/// The command recover names as the next step, from its text output.
fn next_step(stdout: &str) -> String {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("Next: "))
        .unwrap_or_else(|| panic!("recover names the next step: {stdout}"))
        .to_string()
}

/// What an operator would paste after recover named `next` in its output (no path in these
/// tests holds a space).
fn paste(next: &str) -> assert_cmd::Command {
    let mut words = next.split_whitespace();
    assert_eq!(words.next(), Some("selfhost"), "{next}");
    let mut cmd = crate::selfhost();
    cmd.args(words);
    cmd
}

/// Every file beneath `dirs` with its content: what a refusal must leave as it was.
fn files(dirs: &[&Path]) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    for dir in dirs {
        walk(dir, &mut out);
    }
    out
}

/// Runs `cmd` on a blocking thread (the simulator keeps serving) and returns its output.
async fn output(mut cmd: assert_cmd::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().expect("selfhost runs"))
        .await
        .expect("joined")
}

/// Asserts that `cmd` exits `code` saying `says` on stderr, with nothing changed on the node
/// whose root is `root`.
async fn refused(root: &Path, cmd: assert_cmd::Command, code: i32, says: &str) {
    let before = files(&[root]);
    let out = output(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{says}: {stderr}");
    assert!(stderr.contains(says), "expected {says:?} in: {stderr}");
    assert!(!stderr.contains(KEY_MATERIAL), "no Secret data: {stderr}");
    assert_eq!(files(&[root]), before, "{says}: nothing changed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_says_why_and_changes_nothing() {
    let sim = crate::one_self_hosted_node().await;
    let root = node_root(&sim);
    // The command it names runs on the same node's files and cluster.
    let install = format!(
        "the control plane is not gone, and nothing was written. To keep it through the next \
         power cut, run `selfhost checkpoint install --node cp-1 --host-root {} --kubeconfig {}`",
        root.display(),
        sim.kubeconfig_path().display()
    );
    refused(&root, recover(&sim, &root, &[]), 3, &install).await;
    sim.shutdown().await;

    let sim = gone_without_checkpoint().await;
    let root = node_root(&sim);
    let host = root.as_path();
    refused(
        host,
        recover(&sim, host, &["--timeout", "soon"]),
        2,
        "--timeout",
    )
    .await;
    let plain_http = etcd_args_with(&sim, "--etcd-endpoints", "http://127.0.0.1:2379");
    let plain_http = recover_with(&sim, host, plain_http, &[]);
    refused(host, plain_http, 2, "https://HOST:PORT").await;
    // The key is looked for on the node, beneath its root.
    let no_key = etcd_args_with(&sim, "--etcd-key", "/nonexistent/apiserver-etcd-client.key");
    refused(
        host,
        recover_with(&sim, host, no_key, &[]),
        2,
        &format!(
            "--etcd-key {}: ",
            host.join("nonexistent/apiserver-etcd-client.key").display()
        ),
    )
    .await;
    // A manifests directory the node lacks is looked for beneath its root too, never on the
    // machine recover runs on.
    let mut elsewhere = crate::selfhost();
    elsewhere
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["recover", "--node", "cp-1"])
        .args(etcd_args(&sim))
        .args(["--manifests-dir", "/var/lib/kubelet/manifests"])
        .arg("--host-root")
        .arg(host);
    refused(
        host,
        elsewhere,
        2,
        &format!(
            "the manifests directory {} does not exist",
            host.join("var/lib/kubelet/manifests").display()
        ),
    )
    .await;

    // A port where nothing listens: etcd is down.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let closed = format!("https://127.0.0.1:{port}");
    let unreachable = etcd_args_with(&sim, "--etcd-endpoints", &closed);
    refused(
        host,
        recover_with(&sim, host, unreachable, &[]),
        3,
        "cannot read etcd",
    )
    .await;

    let kubeadm = manifests(&sim).join("kube-apiserver.yaml");
    std::fs::write(&kubeadm, "apiVersion: v1\nkind: Pod\n").expect("kubeadm's manifest");
    refused(
        host,
        recover(&sim, host, &[]),
        3,
        "kubeadm's static pod manifest",
    )
    .await;
    std::fs::remove_file(&kubeadm).expect("removed");

    sim.etcd().encrypt_at_rest("secrets");
    refused(
        host,
        recover(&sim, host, &[]),
        3,
        "cannot read encrypted Secrets",
    )
    .await;

    sim.store()
        .delete(
            &DAEMONSETS,
            "kube-system",
            "self-hosted-kube-scheduler",
            &DeleteOptions::default(),
        )
        .expect("deleted");
    refused(
        host,
        recover(&sim, host, &[]),
        3,
        "/registry/daemonsets/kube-system/self-hosted-kube-scheduler is not in etcd",
    )
    .await;
    assert!(!sim.is_api_up(), "nothing was started");
    sim.shutdown().await;
}

fn kubectl(sim: &SimCluster, home: &Path, args: &[&str]) -> Option<std::process::Output> {
    Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .arg("--request-timeout=10s")
        .args(args)
        .env("HOME", home)
        .output()
        .ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_plane_gone_without_checkpoints_comes_back_from_etcd() {
    let sim = gone_without_checkpoint().await;
    let root = node_root(&sim);
    let host = root.as_path();
    let manifests = manifests(&sim);
    let apiserver_copy = manifests.join("selfhost-checkpoint-kube-apiserver.yaml");
    let key = host.join("etc/kubernetes/pki/ca.key");
    // What to run next names the node's files and the cluster recover was given.
    let next = format!(
        "selfhost checkpoint install --node cp-1 --host-root {} --kubeconfig {}",
        host.display(),
        sim.kubeconfig_path().display()
    );

    // A dry run shows where the files would land on this machine, the images and flags, and
    // writes nothing.
    let before = files(&[host]);
    let dry = output(recover(&sim, host, &["--dry-run"])).await;
    let stdout = String::from_utf8_lossy(&dry.stdout);
    assert_eq!(
        dry.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    for shown in [
        format!("kube-apiserver: {}\n", apiserver_copy.display()),
        "registry.k8s.io/kube-apiserver:v1.33.1".into(),
        "--permit-port-sharing=true".into(),
        format!(
            "{} (0600, from Secret kube-system/apiserver-certs key ca.key)",
            key.display()
        ),
        "nothing was written".into(),
        format!("Next: {next}\n"),
    ] {
        assert!(stdout.contains(&shown), "{shown:?} in {stdout}");
    }
    assert!(
        !stdout.contains(KEY_MATERIAL) && !stdout.contains(CERT),
        "{stdout}"
    );
    let json = output(recover(&sim, host, &["--dry-run", "-o", "json"])).await;
    let report: Value = serde_json::from_slice(&json.stdout).expect("the JSON report");
    assert_eq!(report["next"], next.as_str(), "{report}");
    assert_eq!(
        report["components"][0]["manifest"],
        apiserver_copy.display().to_string(),
        "{report}"
    );
    assert_eq!(files(&[host]), before, "a dry run writes nothing");
    assert!(!sim.is_api_up());

    let run = output(recover(&sim, host, &[])).await;
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("serves again"), "{stdout}");
    assert_eq!(next_step(&stdout), next, "{stdout}");
    assert!(!format!("{stdout}{stderr}").contains(KEY_MATERIAL));
    assert!(sim.is_api_up(), "the API serves");

    // The checkpointer's active copies, as it would have written them, in the manifests
    // directory beneath the node's root.
    let shown_root = host.display().to_string();
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        let path = manifests.join(format!("selfhost-checkpoint-{component}.yaml"));
        let text = std::fs::read_to_string(&path).expect("written");
        let pod: Value = serde_saphyr::from_str(&text).expect("YAML");
        assert_eq!(
            pod["metadata"]["name"],
            format!("selfhost-checkpoint-{component}")
        );
        let annotations = &pod["metadata"]["annotations"];
        assert!(
            annotations["selfhost.dev/checkpoint-revision"]
                .as_str()
                .is_some_and(|r| r.starts_with("generation-")),
            "{annotations}"
        );
        assert!(annotations["selfhost.dev/checkpoint-activated-at"].is_string());
        // The kubelet on the node reads it: every path in it is the node's own.
        assert!(
            !text.contains(&shown_root),
            "{component} names paths beneath the host root: {text}"
        );
    }
    let apiserver: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(&apiserver_copy).expect("written"))
            .expect("YAML");
    let certs = apiserver["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["name"] == "k8s-certs")
        .expect("the certificates' volume");
    assert_eq!(
        certs["hostPath"]["path"], "/etc/kubernetes/pki",
        "the Secret's files are on the node at {certs}"
    );
    assert_eq!(std::fs::read_to_string(&key).expect("key"), KEY_MATERIAL);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for file in ["ca.key", "ca.crt"] {
            let mode = std::fs::metadata(host.join("etc/kubernetes/pki").join(file))
                .expect("file")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{file}");
        }
    }

    // The next step, pasted as printed, acts on the same node's files.
    let mut pasted = paste(&next);
    pasted.arg("--dry-run");
    let install = output(pasted).await;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&install.stdout),
        String::from_utf8_lossy(&install.stderr)
    );
    assert_eq!(install.status.code(), Some(0), "{next} --dry-run: {said}");
    let checkpointer = manifests.join("selfhost-checkpointer.yaml");
    assert!(
        said.contains(&format!(
            "would write the checkpointer {}",
            checkpointer.display()
        )),
        "{next} --dry-run: {said}"
    );

    // kubectl, an independent client, reads the cluster again.
    let home = tempfile::tempdir().expect("HOME for kubectl");
    match kubectl(
        &sim,
        home.path(),
        &["-n", "kube-system", "get", "daemonsets", "-o", "name"],
    ) {
        Some(out) => {
            let listed = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                listed.contains("daemonset.apps/self-hosted-kube-apiserver"),
                "{listed}"
            );
        }
        None => eprintln!("kubectl is not on the PATH: the API was checked through the simulator"),
    }

    // Run again: the copies are there, so it refuses and changes nothing.
    refused(host, recover(&sim, host, &[]), 3, "is on this node already").await;
    sim.shutdown().await;
}
