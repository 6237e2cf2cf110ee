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

fn etcd_args(sim: &SimCluster) -> Vec<OsString> {
    let files = sim.etcd().client_files();
    vec![
        "--etcd-endpoints".into(),
        sim.etcd().endpoint().into(),
        "--etcd-cacert".into(),
        files.ca.clone().into(),
        "--etcd-cert".into(),
        files.cert.clone().into(),
        "--etcd-key".into(),
        files.key.clone().into(),
    ]
}

fn manifests(sim: &SimCluster) -> PathBuf {
    sim.manifests_dir("cp-1").expect("cp-1").to_path_buf()
}

/// `selfhost recover --node cp-1` against `sim`, files beneath `host`, and `extra` flags.
fn recover(sim: &SimCluster, host: &Path, extra: &[&str]) -> assert_cmd::Command {
    recover_with(sim, host, etcd_args(sim), extra)
}

/// The same with `etcd` as the etcd flags.
fn recover_with(
    sim: &SimCluster,
    host: &Path,
    etcd: Vec<OsString>,
    extra: &[&str],
) -> assert_cmd::Command {
    let mut cmd = crate::selfhost();
    cmd.arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["recover", "--node", "cp-1"])
        .args(etcd)
        .arg("--manifests-dir")
        .arg(manifests(sim))
        .arg("--host-root")
        .arg(host)
        .args(["--timeout", "60s"])
        .args(extra);
    cmd
}

/// The etcd flags with `flag` given `value` instead.
fn etcd_args_with(sim: &SimCluster, flag: &str, value: &str) -> Vec<OsString> {
    let mut args = etcd_args(sim);
    if let Some(at) = args.iter().position(|a| a == flag) {
        args[at + 1] = value.into();
    }
    args
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

/// Asserts that `cmd` exits `code` saying `says` on stderr, with nothing changed on the node.
async fn refused(sim: &SimCluster, host: &Path, cmd: assert_cmd::Command, code: i32, says: &str) {
    let before = files(&[&manifests(sim), host]);
    let out = output(cmd).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{says}: {stderr}");
    assert!(stderr.contains(says), "expected {says:?} in: {stderr}");
    assert!(!stderr.contains(KEY_MATERIAL), "no Secret data: {stderr}");
    assert_eq!(
        files(&[&manifests(sim), host]),
        before,
        "{says}: nothing changed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refusal_says_why_and_changes_nothing() {
    let sim = crate::one_self_hosted_node().await;
    let host = tempfile::tempdir().expect("host root");
    let host = host.path();
    refused(
        &sim,
        host,
        recover(&sim, host, &[]),
        3,
        "an API server answers",
    )
    .await;
    sim.shutdown().await;

    let sim = gone_without_checkpoint().await;
    refused(
        &sim,
        host,
        recover(&sim, host, &["--timeout", "soon"]),
        2,
        "--timeout",
    )
    .await;
    let plain_http = etcd_args_with(&sim, "--etcd-endpoints", "http://127.0.0.1:2379");
    let plain_http = recover_with(&sim, host, plain_http, &[]);
    refused(&sim, host, plain_http, 2, "https://HOST:PORT").await;
    let no_key = etcd_args_with(&sim, "--etcd-key", "/nonexistent/apiserver-etcd-client.key");
    refused(
        &sim,
        host,
        recover_with(&sim, host, no_key, &[]),
        2,
        "--etcd-key",
    )
    .await;

    // A port where nothing listens: etcd is down.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let closed = format!("https://127.0.0.1:{port}");
    let unreachable = etcd_args_with(&sim, "--etcd-endpoints", &closed);
    refused(
        &sim,
        host,
        recover_with(&sim, host, unreachable, &[]),
        3,
        "cannot read etcd",
    )
    .await;

    let kubeadm = manifests(&sim).join("kube-apiserver.yaml");
    std::fs::write(&kubeadm, "apiVersion: v1\nkind: Pod\n").expect("kubeadm's manifest");
    refused(
        &sim,
        host,
        recover(&sim, host, &[]),
        3,
        "kubeadm's static pod manifest",
    )
    .await;
    std::fs::remove_file(&kubeadm).expect("removed");

    sim.etcd().encrypt_at_rest("secrets");
    refused(
        &sim,
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
        &sim,
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
    let host_dir = tempfile::tempdir().expect("host root");
    let host = host_dir.path();
    let manifests = manifests(&sim);

    // A dry run shows the files, images and flags, and writes nothing.
    let before = files(&[&manifests, host]);
    let dry = output(recover(&sim, host, &["--dry-run"])).await;
    let stdout = String::from_utf8_lossy(&dry.stdout);
    assert_eq!(
        dry.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    for shown in [
        "selfhost-checkpoint-kube-apiserver.yaml",
        "registry.k8s.io/kube-apiserver:v1.33.1",
        "--permit-port-sharing=true",
        "etc/kubernetes/pki/ca.key (0600, from Secret kube-system/apiserver-certs key ca.key)",
        "nothing was written",
    ] {
        assert!(stdout.contains(shown), "{shown:?} in {stdout}");
    }
    assert!(
        !stdout.contains(KEY_MATERIAL) && !stdout.contains(CERT),
        "{stdout}"
    );
    assert_eq!(
        files(&[&manifests, host]),
        before,
        "a dry run writes nothing"
    );
    assert!(!sim.is_api_up());

    let run = output(recover(&sim, host, &[])).await;
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("serves again"), "{stdout}");
    assert!(
        stdout.contains("selfhost checkpoint install --node cp-1"),
        "{stdout}"
    );
    assert!(!format!("{stdout}{stderr}").contains(KEY_MATERIAL));
    assert!(sim.is_api_up(), "the API serves");

    // The checkpointer's active copies, as it would have written them.
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        let path = manifests.join(format!("selfhost-checkpoint-{component}.yaml"));
        let pod: Value = serde_saphyr::from_str(&std::fs::read_to_string(&path).expect("written"))
            .expect("YAML");
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
    }
    let key = host.join("etc/kubernetes/pki/ca.key");
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
    refused(
        &sim,
        host,
        recover(&sim, host, &[]),
        3,
        "is on this node already",
    )
    .await;
    sim.shutdown().await;
}
