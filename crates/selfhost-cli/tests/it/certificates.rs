//! The `certificates` preflight check on a simulated node with kubeadm's certificates on its
//! disk: `convert` reads them from the node and refuses an expired one with nothing changed;
//! once they are kept in Secrets, `plan` reads them through the API, lists them with their
//! dates, warns of one that expires soon, and `plan` and `apply` refuse an expired one.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, SystemTime};

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{Patch, PatchParams};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::node_pki::NodePki;
use selfhost_sim::{SimCluster, SimTimings};

const DAY: Duration = Duration::from_secs(24 * 3600);

async fn static_cluster() -> SimCluster {
    let sim = SimCluster::builder()
        .control_plane_nodes(1)
        .version("v1.33.1")
        .mode(BootstrapMode::Static)
        .port_sharing(true)
        .timings(SimTimings::scaled(100))
        .image(selfhost::DEFAULT_IMAGE, ImageBehaviour::default())
        .start()
        .await
        .expect("cluster starts");
    crate::settled(sim).await
}

async fn selfhost(sim: &SimCluster, args: &[&str]) -> Output {
    crate::run_selfhost(sim.kubeconfig_path(), args, Duration::from_secs(120)).await
}

fn text(out: &Output) -> String {
    crate::printed(out)
}

/// `convert to-self-hosted` on cp-1, its files under the node's own root.
fn convert_args<'a>(root: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "convert",
        "to-self-hosted",
        "--node",
        "cp-1",
        "--host-root",
        root,
        "--manifests-dir",
        "/etc/kubernetes/manifests",
        "--no-checkpointer",
        "--yes",
    ];
    args.extend_from_slice(extra);
    args
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("a directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

async fn daemonsets(sim: &SimCluster) -> Vec<String> {
    Api::<DaemonSet>::namespaced(sim.client(), "kube-system")
        .list(&Default::default())
        .await
        .expect("list")
        .items
        .into_iter()
        .filter_map(|d| d.metadata.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn convert_refuses_an_expired_certificate_on_the_node_and_changes_nothing() {
    let sim = static_cluster().await;
    let root = sim.node_root("cp-1").expect("cp-1's root");
    NodePki::new()
        .ending("pki/apiserver-etcd-client.crt", SystemTime::now() - 2 * DAY)
        .write(&root)
        .expect("the certificates are written");
    let manifests = root.join("etc/kubernetes/manifests");
    let before = (listing(&manifests), daemonsets(&sim).await);

    let shown = root.to_str().expect("UTF-8 path");
    let out = selfhost(&sim, &convert_args(shown, &[])).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains(
            "FAIL  certificates: /etc/kubernetes/pki/apiserver-etcd-client.crt \
             (/etc/kubernetes/pki/apiserver-etcd-client.crt on the node), read by kube-apiserver \
             --etcd-certfile: CN=kube-apiserver-etcd-client expired"
        ) && said.contains("`kubeadm certs renew apiserver-etcd-client`")
            && said.contains("nothing was changed"),
        "{said}"
    );
    assert!(!said.contains("PRIVATE KEY"), "no key material: {said}");
    assert_eq!(
        (listing(&manifests), daemonsets(&sim).await),
        before,
        "a refused conversion changes nothing"
    );
}

/// A PEM certificate of a throwaway CA that ended yesterday.
fn expired_certificate() -> Vec<u8> {
    let dir = tempfile::tempdir().expect("a directory");
    NodePki::new()
        .ending("pki/apiserver.crt", SystemTime::now() - DAY)
        .write(dir.path())
        .expect("written");
    std::fs::read(dir.path().join("etc/kubernetes/pki/apiserver.crt")).expect("read")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_lists_the_certificates_kept_in_secrets_warns_early_and_refuses_an_expired_one() {
    let sim = static_cluster().await;
    let root = sim.node_root("cp-1").expect("cp-1's root");
    NodePki::new()
        .ending(
            "pki/apiserver.crt",
            SystemTime::now() + 10 * DAY + Duration::from_secs(3600),
        )
        .write(&root)
        .expect("the certificates are written");
    let shown = root.to_str().expect("UTF-8 path");
    let out = selfhost(&sim, &convert_args(shown, &["--certs-in-secrets"])).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("WARN  certificates: /etc/kubernetes/pki/apiserver.crt"),
        "convert warns too: {}",
        text(&out)
    );

    // The certificates are now read from their Secrets, with their dates.
    let out = selfhost(&sim, &["plan", "v1.34.0"]).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "a warning does not refuse: {}",
        text(&out)
    );
    let said = text(&out);
    assert!(
        said.contains(
            "WARN  certificates: /etc/kubernetes/pki/apiserver.crt (Secret kube-system/apiserver \
             key tls.crt), read by kube-apiserver --tls-cert-file: CN=kube-apiserver expires"
        ) && said.contains("in 10 days (warning within 30 days"),
        "{said}"
    );
    assert!(
        said.contains("Certificates the target templates read:")
            && said.contains("Secret kube-system/etcd-ca key tls.crt")
            && said.contains("Secret kube-system/scheduler.conf key scheduler.conf")
            && said.contains("CN=system:kube-scheduler"),
        "{said}"
    );
    assert!(!said.contains("PRIVATE KEY"), "no key material: {said}");

    let out = selfhost(
        &sim,
        &[
            "plan",
            "v1.34.0",
            "--certificate-warning-days",
            "5",
            "-o",
            "json",
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let checks: Vec<&serde_json::Value> = plan["preflight"]["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["id"] == "certificates")
        .collect();
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!(checks[0]["verdict"], "pass", "{checks:?}");
    let readings = plan["certificates"]["readings"].as_array().expect("listed");
    let apiserver = readings
        .iter()
        .find(|r| r["file"]["path"] == "/etc/kubernetes/pki/apiserver.crt")
        .expect("the serving certificate is listed");
    assert!(
        apiserver["content"]["certificates"][0]["not_after"]
            .as_str()
            .is_some_and(|t| t.starts_with("20")),
        "{apiserver}"
    );

    // An expired certificate put in its Secret refuses plan and apply.
    let secrets: Api<Secret> = Api::namespaced(sim.client(), "kube-system");
    let patch = serde_json::json!({"data": {"tls.crt": ByteString(expired_certificate())}});
    secrets
        .patch("apiserver", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patched");
    let out = selfhost(&sim, &["plan", "v1.34.0"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains(
            "FAIL  certificates: /etc/kubernetes/pki/apiserver.crt (Secret \
             kube-system/apiserver key tls.crt)"
        ) && text(&out)
            .contains("then store the new file in Secret kube-system/apiserver (key tls.crt)"),
        "{}",
        text(&out)
    );
    let templates = |sim: &SimCluster| {
        let api: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
        async move {
            api.get("self-hosted-kube-apiserver")
                .await
                .expect("the DaemonSet")
                .spec
        }
    };
    let before = templates(&sim).await;
    let out = selfhost(&sim, &["apply", "v1.34.0", "--yes"]).await;
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert_eq!(
        templates(&sim).await,
        before,
        "a refused apply changes nothing"
    );
}
