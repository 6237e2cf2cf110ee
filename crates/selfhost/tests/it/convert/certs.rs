//! `--certs-in-secrets`: certificates and kubeconfigs into Secrets and back into files.

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use selfhost::Event;
use selfhost_core::Component;
use selfhost_core::conversion::decide::Direction;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_go_into_secrets_and_come_back_as_files() {
    use std::os::unix::fs::PermissionsExt;

    use k8s_openapi::api::core::v1::Secret;
    use selfhost_core::daemonset::{certificate_secrets, kubeconfig_secrets};

    let sim = static_cluster(1, true).await;
    let root = tempfile::tempdir().expect("scratch host");
    let mut written = Vec::new();
    for (dir, table) in [
        ("etc/kubernetes/pki", certificate_secrets()),
        ("etc/kubernetes", kubeconfig_secrets()),
    ] {
        for secret in table {
            for (key, file) in secret.files {
                let path = root.path().join(dir).join(&file);
                std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
                let content = format!("not a real {file}");
                std::fs::write(&path, &content).expect("write");
                written.push((secret.name.clone(), key, format!("/{dir}/{file}"), content));
            }
        }
    }
    let mut to_self_hosted = request(&sim, Direction::ToSelfHosted, "cp-1");
    to_self_hosted.certs_in_secrets = true;
    to_self_hosted.host_root = root.path().to_path_buf();
    let (report, _) = run(&sim, &to_self_hosted).await;
    assert_done(&report, "to-self-hosted with certificates in Secrets");

    let secrets: Api<Secret> = Api::namespaced(sim.client(), "kube-system");
    for (name, key, _, content) in &written {
        let secret = secrets.get(name).await.expect("uploaded");
        let data = secret.data.unwrap_or_default();
        assert_eq!(
            data.get(key).map(|b| b.0.clone()),
            Some(content.clone().into_bytes()),
            "{name}/{key}"
        );
    }
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let apiserver = daemonsets
        .get(&Component::ApiServer.daemonset_name())
        .await
        .expect("DaemonSet");
    let volumes = apiserver
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.volumes)
        .unwrap_or_default();
    let certs = volumes
        .iter()
        .find(|v| v.name == "k8s-certs")
        .expect("volume");
    assert!(
        certs.projected.is_some() && certs.host_path.is_none(),
        "{certs:?}"
    );

    // The node loses its files; converting back writes them from the Secrets.
    std::fs::remove_dir_all(root.path().join("etc")).expect("wipe");
    let mut to_static = request(&sim, Direction::ToStatic, "cp-1");
    to_static.host_root = root.path().to_path_buf();
    let (report, events) = run(&sim, &to_static).await;
    assert_done(&report, "to-static writing files from Secrets");
    assert!(events.iter().any(
        |e| matches!(&e.event, Event::Action { detail, .. } if detail.contains("from Secrets"))
    ));
    let needed = [
        "/etc/kubernetes/pki/apiserver.key",
        "/etc/kubernetes/pki/apiserver-etcd-client.key",
        "/etc/kubernetes/pki/etcd/ca.crt",
        "/etc/kubernetes/pki/ca.crt",
        "/etc/kubernetes/scheduler.conf",
        "/etc/kubernetes/controller-manager.conf",
    ];
    for path in needed {
        let (_, _, _, content) = written.iter().find(|w| w.2 == path).expect("known file");
        let on_disk = root.path().join(path.trim_start_matches('/'));
        assert_eq!(
            std::fs::read_to_string(&on_disk).expect(path),
            *content,
            "{path}"
        );
        let mode = std::fs::metadata(&on_disk)
            .expect("meta")
            .permissions()
            .mode()
            & 0o777;
        let private = path.ends_with(".key") || path.ends_with(".conf");
        assert_eq!(mode, if private { 0o600 } else { 0o644 }, "{path}");
    }
    let manifest = std::fs::read_to_string(
        sim.manifests_dir("cp-1")
            .expect("dir")
            .join("kube-apiserver.yaml"),
    )
    .expect("manifest");
    assert!(manifest.contains("path: /etc/kubernetes/pki"), "{manifest}");
    assert!(!manifest.contains("projected"), "{manifest}");
}
