//! Connecting as kubectl does, and the errors a user meets when that goes wrong.

use std::path::PathBuf;

use selfhost::{ClientError, KubeconfigSource, connect_with};
use selfhost::{readyz, server_version};
use selfhost_sim::{SimServer, SimServerOptions};

use crate::sim;

fn from_file(path: impl Into<PathBuf>) -> KubeconfigSource {
    KubeconfigSource::Flag(path.into())
}

#[tokio::test]
async fn connects_with_the_simulators_kubeconfig_and_reads_its_version() {
    let sim = sim().await;
    let clients = connect_with(&from_file(sim.kubeconfig_path()), None)
        .await
        .expect("connects");
    assert_eq!(clients.context, "selfhost-sim");
    let version = server_version(&clients.probe).await.expect("version");
    assert_eq!(version.to_string(), sim.version());
    let ready = readyz(&clients.probe).await;
    assert!(ready.healthy, "{ready:?}");
    assert!(!ready.checks.is_empty(), "verbose checks are listed");
}

#[tokio::test]
async fn tls_with_a_bearer_token_verifies_the_server() {
    let sim = SimServer::start(SimServerOptions {
        tls: true,
        ..SimServerOptions::default()
    })
    .await
    .expect("TLS simulator starts");
    let clients = connect_with(&from_file(sim.kubeconfig_path()), None)
        .await
        .expect("connects");
    assert!(clients.server.starts_with("https://"));
    assert!(readyz(&clients.probe).await.healthy);

    // The same server with a CA it did not sign with: refused, and said so.
    let other = SimServer::start(SimServerOptions {
        tls: true,
        ..SimServerOptions::default()
    })
    .await
    .expect("second TLS simulator");
    let wrong_ca = other
        .kubeconfig_yaml()
        .replace(other.endpoint(), sim.endpoint());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wrong-ca");
    std::fs::write(&path, wrong_ca).unwrap();
    let clients = connect_with(&from_file(&path), None)
        .await
        .expect("config is valid");
    let health = readyz(&clients.probe).await;
    assert!(!health.healthy);
    let problem = health.problem.unwrap_or_default();
    assert!(problem.to_lowercase().contains("certificate"), "{problem}");
}

#[tokio::test]
async fn an_unknown_context_lists_the_ones_there_are() {
    let sim = sim().await;
    let err = connect_with(&from_file(sim.kubeconfig_path()), Some("prod"))
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::UnknownContext { .. }));
    let text = err.to_string();
    assert!(
        text.contains("\"prod\"") && text.contains("it has: selfhost-sim"),
        "{text}"
    );
}

#[tokio::test]
async fn unreadable_and_malformed_kubeconfigs_say_which_file_and_what_to_do() {
    let err = connect_with(&from_file("/no/such/kubeconfig"), None)
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("/no/such/kubeconfig (from --kubeconfig)"),
        "{text}"
    );
    assert!(
        text.contains("pass --kubeconfig PATH or set KUBECONFIG"),
        "{text}"
    );

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken");
    std::fs::write(&path, "clusters: [unclosed\n").unwrap();
    let err = connect_with(&from_file(&path), None).await.unwrap_err();
    assert!(matches!(err, ClientError::Parse { .. }), "{err}");
    assert!(err.to_string().contains("broken"), "{err}");

    let empty = dir.path().join("empty");
    std::fs::write(&empty, "apiVersion: v1\nkind: Config\n").unwrap();
    let err = connect_with(&from_file(&empty), None).await.unwrap_err();
    // Nothing to choose from: it says so rather than ask for a context it cannot have.
    assert!(matches!(err, ClientError::NoContexts { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("defines no contexts: it is empty or not a kubeconfig"),
        "{err}"
    );
}

#[tokio::test]
async fn kubeconfig_files_from_the_environment_are_merged_in_order() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra");
    std::fs::write(
        &extra,
        "apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\ncontexts:\n- name: elsewhere\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:1'}\nusers:\n- name: u\n  user: {}\n",
    )
    .unwrap();
    // The first file to set current-context wins: the simulator's.
    let source = KubeconfigSource::Env(vec![sim.kubeconfig_path().to_path_buf(), extra.clone()]);
    let clients = connect_with(&source, None).await.expect("connects");
    assert_eq!(clients.context, "selfhost-sim");
    // Contexts of later files are still there to choose.
    let clients = connect_with(&source, Some("elsewhere"))
        .await
        .expect("connects");
    assert_eq!(clients.server, "http://127.0.0.1:1/");
}

#[tokio::test]
async fn a_dead_server_is_reported_at_once_by_the_probe() {
    let sim = sim().await;
    let clients = connect_with(&from_file(sim.kubeconfig_path()), None)
        .await
        .expect("connects");
    sim.crash().await;
    let started = std::time::Instant::now();
    let health = readyz(&clients.probe).await;
    assert!(!health.healthy);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "the probe client does not retry"
    );
    let problem = health.problem.unwrap_or_default();
    assert!(
        problem.to_lowercase().contains("connect") || problem.contains("refused"),
        "{problem}"
    );
}
