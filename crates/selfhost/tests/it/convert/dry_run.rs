//! `dry_run` with certificates in Secrets, both ways: the Secrets are uploaded as server-side
//! dry runs (none is created), and going back the files missing on the node are read from the
//! Secrets and named, not written.

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use selfhost::Event;
use selfhost_core::conversion::decide::Direction;
use selfhost_core::daemonset::{certificate_secrets, kubeconfig_secrets};

use super::*;

/// Every file under `root`, with its content.
fn files_under(root: &std::path::Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let content = std::fs::read(&path).unwrap_or_default();
                out.insert(path, content);
            }
        }
    }
    out
}

fn assert_dry_run(report: &ConvertReport, what: &str) {
    assert_eq!(report.components.len(), 3, "{what}: {report:#?}");
    for (component, outcome) in &report.components {
        assert!(
            matches!(outcome, ComponentOutcome::DryRun { writes, .. } if *writes > 0),
            "{what}: {component}: {outcome:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_runs_with_certificates_in_secrets_create_and_write_nothing() {
    let sim = static_cluster(1, true).await;
    let root = tempfile::tempdir().expect("scratch host");
    for (dir, table) in [
        ("etc/kubernetes/pki", certificate_secrets()),
        ("etc/kubernetes", kubeconfig_secrets()),
    ] {
        for secret in table {
            for (_, file) in secret.files {
                let path = root.path().join(dir).join(&file);
                std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
                std::fs::write(&path, format!("not a real {file}")).expect("write");
            }
        }
    }
    let secrets: Api<Secret> = Api::namespaced(sim.client(), "kube-system");
    let uploaded = |names: Vec<String>| {
        let secrets = secrets.clone();
        async move {
            let mut found = Vec::new();
            for name in names {
                if secrets.get_opt(&name).await.expect("get").is_some() {
                    found.push(name);
                }
            }
            found
        }
    };
    let names: Vec<String> = certificate_secrets()
        .into_iter()
        .chain(kubeconfig_secrets())
        .map(|s| s.name)
        .collect();
    let node_dir = sim
        .manifests_dir("cp-1")
        .expect("dir")
        .parent()
        .expect("parent")
        .to_path_buf();

    let mut to_self_hosted = request(&sim, Direction::ToSelfHosted, "cp-1");
    to_self_hosted.certs_in_secrets = true;
    to_self_hosted.host_root = root.path().to_path_buf();
    to_self_hosted.dry_run = true;
    let before = (files_under(root.path()), files_under(&node_dir));
    let (report, events) = run(&sim, &to_self_hosted).await;
    assert_dry_run(&report, "to-self-hosted");
    assert!(
        events
            .iter()
            .all(|e| !matches!(&e.event, Event::Action { dry_run: false, .. })),
        "every action was a dry run"
    );
    assert_eq!(uploaded(names.clone()).await, Vec::<String>::new());
    assert_eq!(
        (files_under(root.path()), files_under(&node_dir)),
        before,
        "no file changed"
    );

    // Converted for real; then the node loses its files, and the way back is a dry run.
    to_self_hosted.dry_run = false;
    let (report, _) = run(&sim, &to_self_hosted).await;
    assert_done(&report, "to-self-hosted with certificates in Secrets");
    std::fs::remove_dir_all(root.path().join("etc")).expect("wipe");
    let mut to_static = request(&sim, Direction::ToStatic, "cp-1");
    to_static.host_root = root.path().to_path_buf();
    to_static.dry_run = true;
    let before = (files_under(root.path()), files_under(&node_dir));
    let (report, events) = run(&sim, &to_static).await;
    assert_dry_run(&report, "to-static");
    let named = events.iter().any(|e| {
        matches!(&e.event, Event::Action { detail, dry_run: true, .. }
            if detail.starts_with("would write (dry run: not written)")
                && detail.contains("from Secrets, /etc/kubernetes/pki/"))
    });
    assert!(named, "the files it would write from Secrets are named");
    assert_eq!(
        (files_under(root.path()), files_under(&node_dir)),
        before,
        "no file written"
    );
    assert_eq!(
        uploaded(names.clone()).await.len(),
        names.len(),
        "the Secrets stay"
    );
}
