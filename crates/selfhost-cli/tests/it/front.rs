//! `selfhost front`: bad input exits 2 with what was wrong and how to fix it; before a
//! simulated kube-apiserver serving TLS it passes requests through, says each change once, and
//! on SIGTERM stops accepting, lets its connections finish and exits 0. A second front takes
//! the first one's listening socket over; the first idles until SIGTERM, then exits at once.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use predicates::prelude::*;
use selfhost_sim::{SimServer, SimServerOptions};

use crate::selfhost;

#[test]
fn bad_input_exits_2_and_says_what_to_fix() {
    let dir = tempfile::tempdir().unwrap();
    let not_pem = dir.path().join("not-pem.crt");
    std::fs::write(&not_pem, "not a certificate\n").unwrap();
    let missing = dir.path().join("missing.crt");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let (not_pem, missing) = (not_pem.to_str().unwrap(), missing.to_str().unwrap());
    let rows: &[(&[&str], &[&str])] = &[
        (
            &["--listen", "127.0.0.1:0", "--ca-file", not_pem],
            &["no backend", "--backend ADDR:PORT"],
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--backend",
                "127.0.0.1:6444",
                "--ca-file",
                missing,
            ],
            &["cannot read the cluster CA", "missing.crt", "--ca-file"],
        ),
        (
            &[
                "--listen",
                "127.0.0.1:0",
                "--backend",
                "127.0.0.1:6444",
                "--ca-file",
                not_pem,
            ],
            &[
                "not-pem.crt holds no PEM certificate",
                "-----BEGIN CERTIFICATE-----",
            ],
        ),
    ];
    for (args, says) in rows {
        let mut stderr = predicate::str::starts_with("error: ").boxed();
        for s in *says {
            stderr = stderr.and(predicate::str::contains(*s)).boxed();
        }
        selfhost()
            .arg("front")
            .args(*args)
            .assert()
            .code(2)
            .stderr(stderr);
    }
    // A CA that is fine, and a hand-over socket whose directory cannot be made: a file is
    // where it would be.
    let sim_ca = dir.path().join("ca.crt");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let sim = runtime.block_on(tls_sim());
    std::fs::write(&sim_ca, sim.ca_pem().unwrap()).unwrap();
    selfhost()
        .args([
            "front",
            "--listen",
            "127.0.0.1:0",
            "--backend",
            "127.0.0.1:6444",
        ])
        .arg("--ca-file")
        .arg(&sim_ca)
        .arg("--handover-socket")
        .arg(Path::new(not_pem).join("run").join("handover.sock"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot make"))
        .stderr(predicate::str::contains("not-pem.crt/run"))
        .stderr(predicate::str::contains("--handover-socket"));
    selfhost()
        .args([
            "front",
            "--listen",
            "127.0.0.1:0",
            "--backend",
            "127.0.0.1:6444",
        ])
        .args(["--start-patience", "0s"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--start-patience"));
    // A listen address in use: its backend never answers, so the front tries once its
    // patience is spent.
    selfhost()
        .args(["front", "--listen", &taken, "--backend", "127.0.0.1:6444"])
        .args(["--start-patience", "100ms"])
        .arg("--ca-file")
        .arg(&sim_ca)
        .arg("--handover-socket")
        .arg(dir.path().join("handover.sock"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "cannot listen on {taken}"
        )))
        .stderr(predicate::str::contains("another process listens there"));
    runtime.block_on(sim.shutdown());
}

async fn tls_sim() -> SimServer {
    SimServer::start(SimServerOptions {
        tls: true,
        ..SimServerOptions::default()
    })
    .await
    .expect("simulator starts")
}

/// The next line of stderr that `wanted` accepts, within 10 s; the lines before it too.
fn line_with(lines: &mpsc::Receiver<String>, seen: &mut Vec<String>, wanted: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push(line.clone());
                if line.contains(wanted) {
                    return line;
                }
            }
            Err(e) => panic!("no line with {wanted:?} ({e}); stderr so far: {seen:#?}"),
        }
    }
}

// Several threads: the test blocks on the child's stderr while the simulator serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_requests_through_says_each_change_once_and_drains_on_sigterm() {
    let sim = tls_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, sim.ca_pem().unwrap()).unwrap();
    let (mut child, lines) = spawn_front(
        &[
            "--listen",
            "127.0.0.1:0",
            "--backend",
            &sim.address().to_string(),
        ],
        &ca,
        &dir.path().join("handover.sock"),
    );
    let mut seen = Vec::new();
    let listening = line_with(&lines, &mut seen, "front: listening on ");
    let addr = listening
        .trim_start_matches("front: listening on ")
        .split(',')
        .next()
        .unwrap()
        .to_string();
    line_with(&lines, &mut seen, "front: serving");

    // kube-rs through the front, verifying the simulator's certificate as for the simulator.
    let mut config = sim.config().await.unwrap();
    config.cluster_url = format!("https://{addr}").parse().unwrap();
    config.auth_info = kube::config::AuthInfo::default();
    let client = kube::Client::try_from(config).unwrap();
    for _ in 0..5 {
        let version = client.apiserver_version().await.unwrap();
        assert_eq!(version.git_version, sim.version());
    }

    // kubectl, an independent client, through the front: the simulator's own kubeconfig (its
    // CA and token) with the front's address as the server.
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let server = format!("https://{addr}");
    let kubectl = tokio::task::spawn_blocking(move || {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["--server", &server, "get", "--raw", "/version"])
            .stdin(Stdio::null())
            .output()
            .expect("kubectl runs")
    })
    .await
    .unwrap();
    assert!(
        kubectl.status.success(),
        "kubectl through the front: {}",
        String::from_utf8_lossy(&kubectl.stderr)
    );
    assert!(
        String::from_utf8_lossy(&kubectl.stdout).contains(&sim.version()),
        "kubectl reads the backend's version through the front"
    );

    // The backend fails /readyz: said once, however many checks fail.
    sim.set_health_check_failing("shutdown", true);
    line_with(&lines, &mut seen, "is not ready");
    line_with(&lines, &mut seen, "no backend is ready");
    sim.set_health_check_failing("shutdown", false);
    line_with(&lines, &mut seen, "front: serving");
    client.apiserver_version().await.unwrap();
    // Its kept-alive connection closes: the drain has nothing left to wait for.
    drop(client);

    terminate(&child);
    line_with(&lines, &mut seen, "SIGTERM: no longer accepting");
    line_with(&lines, &mut seen, "front: stopped");
    let status = exit_within(&mut child, Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "stderr: {seen:#?}");
    let not_ready = seen.iter().filter(|l| l.contains("is not ready")).count();
    assert_eq!(not_ready, 1, "said once: {seen:#?}");
}

/// A `selfhost front` process with `args`, trusting `ca`, its hand-over socket at `handover`
/// (checking every 50 ms), and its stderr line by line.
fn spawn_front(args: &[&str], ca: &Path, handover: &Path) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
        .arg("front")
        .args(args)
        .args(["--check-interval", "50ms"])
        .arg("--ca-file")
        .arg(ca)
        .arg("--handover-socket")
        .arg(handover)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                break;
            }
        }
    });
    (child, lines)
}

fn terminate(child: &Child) {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// Its exit status, within `limit`.
fn exit_within(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "still running {limit:?} after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_front_takes_over_and_the_old_one_idles_until_sigterm_then_exits_at_once() {
    let sim = tls_sim().await;
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.crt");
    std::fs::write(&ca, sim.ca_pem().unwrap()).unwrap();
    let handover = dir.path().join("run").join("handover.sock");
    let backend = sim.address().to_string();
    let (mut old, old_lines) = spawn_front(
        &["--listen", "127.0.0.1:0", "--backend", &backend],
        &ca,
        &handover,
    );
    let mut old_seen = Vec::new();
    let listening = line_with(&old_lines, &mut old_seen, "front: listening on ");
    assert!(
        listening.contains("bound afresh (no front to take over from)"),
        "{listening}"
    );
    let addr = listening
        .trim_start_matches("front: listening on ")
        .split(',')
        .next()
        .unwrap()
        .to_string();
    line_with(&old_lines, &mut old_seen, "front: serving");

    let mut config = sim.config().await.unwrap();
    config.cluster_url = format!("https://{addr}").parse().unwrap();
    config.auth_info = kube::config::AuthInfo::default();
    let version = || {
        let client = kube::Client::try_from(config.clone()).unwrap();
        async move { client.apiserver_version().await.map(|v| v.git_version) }
    };
    assert_eq!(version().await.unwrap(), sim.version());

    let (mut new, new_lines) =
        spawn_front(&["--listen", &addr, "--backend", &backend], &ca, &handover);
    let mut new_seen = Vec::new();
    line_with(&new_lines, &mut new_seen, "1 of 1 ready");
    let listening = line_with(&new_lines, &mut new_seen, "front: listening on ");
    assert!(
        listening.contains("taken over from the front at"),
        "{listening}"
    );
    line_with(
        &old_lines,
        &mut old_seen,
        "a new front took the listening socket",
    );
    line_with(&old_lines, &mut old_seen, "idle until stopped");
    assert_eq!(
        version().await.unwrap(),
        sim.version(),
        "the new front serves"
    );

    // The old front stays until told, then exits at once.
    assert!(old.try_wait().unwrap().is_none(), "{old_seen:#?}");
    terminate(&old);
    line_with(&old_lines, &mut old_seen, "SIGTERM: stopping");
    line_with(&old_lines, &mut old_seen, "a new front serves in its place");
    let status = exit_within(&mut old, Duration::from_secs(2));
    assert_eq!(status.code(), Some(0), "stderr: {old_seen:#?}");
    assert_eq!(
        version().await.unwrap(),
        sim.version(),
        "the new front serves on"
    );

    terminate(&new);
    line_with(&new_lines, &mut new_seen, "front: stopped");
    let status = exit_within(&mut new, Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "stderr: {new_seen:#?}");
}
