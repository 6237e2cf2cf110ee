//! `--config FILE`, else the cluster's kubeadm-config: what runs on the node is converted as
//! it is, and the plan names the configuration it was checked against and every place where
//! the two disagree.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::{Value, json};

use super::{convert, static_cluster};

/// The plan event of a run's JSON events.
fn plan(events: &[Value]) -> Value {
    events
        .iter()
        .find(|e| e["event"] == "plan")
        .map(|e| e["plan"].clone())
        .unwrap_or_default()
}

/// Every disagreement of the plan, as `component: line`.
fn disagreements(plan: &Value) -> Vec<String> {
    plan["components"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| {
            let component = c["component"].as_str().unwrap_or_default().to_string();
            c["config_disagreements"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(move |line| format!("{component}: {line}"))
                .collect::<Vec<_>>()
        })
        .collect()
}

const DISAGREEING: &str = "\
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.33.1
networking:
  serviceSubnet: 10.97.0.0/16
apiServer:
  extraArgs:
  - name: audit-log-maxage
    value: \"7\"
";

const SUBNET: &str = r#"kube-apiserver: --service-cluster-ip-range: the node runs "10.96.0.0/12", the configuration renders "10.97.0.0/16""#;
const AUDIT: &str =
    "kube-apiserver: --audit-log-maxage=7 is in the configuration but does not run on the node";

/// The cluster's kubeadm-config: named as the source; it agrees with what kubeadm wrote;
/// edited to disagree, the plan lists where; without it, the plan says nothing was checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_kubeadm_config_is_checked_when_no_file_is_given() {
    let sim = static_cluster(true).await;
    let (events, code) = convert(&sim, "to-self-hosted", &["--dry-run"], None).await;
    assert_eq!(code, Some(0), "{events:?}");
    let first = plan(&events);
    assert_eq!(
        first["config_source"]["kind"], "cluster-config-map",
        "{first}"
    );
    assert_eq!(
        disagreements(&first),
        Vec::<String>::new(),
        "kubeadm's own manifests agree with kubeadm's configuration"
    );

    let maps: Api<ConfigMap> = Api::namespaced(sim.client(), "kube-system");
    let patch = json!({ "data": { "ClusterConfiguration": DISAGREEING } });
    maps.patch(
        "kubeadm-config",
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .expect("edit kubeadm-config");
    let (events, code) = convert(&sim, "to-self-hosted", &["--dry-run"], None).await;
    assert_eq!(code, Some(0), "a disagreement is no refusal: {events:?}");
    let edited = disagreements(&plan(&events));
    for line in [SUBNET, AUDIT] {
        assert!(edited.iter().any(|l| l == line), "{line} in {edited:#?}");
    }

    maps.delete("kubeadm-config", &DeleteParams::default())
        .await
        .expect("delete kubeadm-config");
    let (events, code) = convert(&sim, "to-self-hosted", &["--dry-run"], None).await;
    assert_eq!(code, Some(0), "{events:?}");
    let none = plan(&events);
    assert_eq!(none["config_source"]["kind"], "none", "{none}");
    assert_eq!(disagreements(&none), Vec::<String>::new());
}

/// `--config FILE` wins over the cluster's configuration; where it disagrees with the
/// manifest on disk, the plan (text and JSON) says so, and the conversion runs what the
/// manifest runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_that_disagrees_is_reported_and_the_manifest_on_disk_wins() {
    let sim = static_cluster(true).await;
    let scratch = tempfile::tempdir().expect("scratch");
    let file = scratch.path().join("kubeadm.yaml");
    std::fs::write(&file, DISAGREEING).expect("write");
    let shown = file.to_str().expect("UTF-8 path");

    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let text = crate::selfhost()
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["convert", "to-self-hosted", "--node", "cp-1", "--dry-run"])
        .args(["--config", shown, "--manifests-dir"])
        .arg(&dir)
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert_eq!(text.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "Checked against the kubeadm configuration file {shown}."
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("what runs is converted as it is"),
        "{stderr}"
    );
    assert!(stderr.contains(&format!("  {SUBNET}")), "{stderr}");

    let (events, code) = convert(&sim, "to-self-hosted", &["--yes", "--config", shown], None).await;
    assert_eq!(code, Some(0), "{:?}", events.last());
    let plan = plan(&events);
    assert_eq!(plan["config_source"]["kind"], "config-file", "{plan}");
    assert_eq!(plan["config_source"]["path"], shown, "{plan}");
    let found = disagreements(&plan);
    for line in [SUBNET, AUDIT] {
        assert!(found.iter().any(|l| l == line), "{line} in {found:#?}");
    }
    let daemonsets: Api<DaemonSet> = Api::namespaced(sim.client(), "kube-system");
    let apiserver = daemonsets
        .get("self-hosted-kube-apiserver")
        .await
        .expect("created");
    let command = apiserver
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.command)
        .unwrap_or_default();
    assert!(
        command
            .iter()
            .any(|a| a == "--service-cluster-ip-range=10.96.0.0/12"),
        "the manifest's value runs: {command:?}"
    );
    assert!(
        !command.iter().any(|a| a.starts_with("--audit-log-maxage")),
        "nothing the manifest lacks was added: {command:?}"
    );
}

/// Without `--node`, the node an InitConfiguration in the file registers is the one converted
/// (before this host's name, which is no node of the simulated cluster).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_name_comes_from_the_config_file_when_not_given() {
    let sim = static_cluster(true).await;
    let scratch = tempfile::tempdir().expect("scratch");
    let file = scratch.path().join("kubeadm.yaml");
    std::fs::write(
        &file,
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\nnodeRegistration:\n  \
         name: cp-1\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n",
    )
    .expect("write");
    let dir = sim.manifests_dir("cp-1").expect("dir").to_path_buf();
    let run = |config: Option<&std::path::Path>| {
        let mut command = crate::selfhost();
        command
            .arg("--kubeconfig")
            .arg(sim.kubeconfig_path())
            .args(["convert", "to-self-hosted", "--dry-run", "-o", "json"])
            .arg("--manifests-dir")
            .arg(&dir);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        command.output().expect("runs")
    };
    let out = run(Some(&file));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(plan(&events)["node"], "cp-1", "{events:?}");

    let out = run(None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("the cluster has no node named"), "{stderr}");
}
