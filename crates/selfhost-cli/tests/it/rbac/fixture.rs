//! The fixtures of the RBAC tests: deploy/rbac.yaml as documents, ways of weakening it, an
//! RBAC-enforcing cluster with it loaded over the API, and running the binary as one of its
//! service accounts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use selfhost_sim::auth::UserInfo;
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::{SimCluster, SimTimings};
use serde_json::Value;

/// The manifest under test, as shipped.
const RBAC_YAML: &str = include_str!("../../../../../deploy/rbac.yaml");
pub const FROM: &str = "v1.33.1";
pub const TO: &str = "v1.34.0";

/// The documents of deploy/rbac.yaml.
pub fn manifest() -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(RBAC_YAML)
        .expect("deploy/rbac.yaml is YAML")
        .into_iter()
        .filter(Value::is_object)
        .collect()
}

fn find<'a>(docs: &'a mut [Value], kind: &str, name: &str) -> &'a mut Value {
    docs.iter_mut()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("deploy/rbac.yaml has a {kind} {name}"))
}

/// One way of weakening the manifest.
#[derive(Debug, Clone, Copy)]
pub enum Cut {
    /// Remove the rule with this index from a role.
    Rule(&'static str, &'static str, usize),
    /// Remove one name from the `resourceNames` of a role's rule.
    Name(&'static str, &'static str, usize, &'static str),
    /// Remove a whole document (a binding).
    Document(&'static str, &'static str),
}

pub fn cut(mut docs: Vec<Value>, cut: Cut) -> Vec<Value> {
    match cut {
        Cut::Rule(kind, name, index) => {
            let rules = find(&mut docs, kind, name)["rules"]
                .as_array_mut()
                .expect("rules");
            assert!(index < rules.len(), "{kind} {name} has a rule {index}");
            rules.remove(index);
        }
        Cut::Name(kind, name, index, object) => {
            let names = find(&mut docs, kind, name)["rules"][index]["resourceNames"]
                .as_array_mut()
                .expect("resourceNames");
            let before = names.len();
            names.retain(|n| n != object);
            assert_eq!(names.len(), before - 1, "{object} was in the rule");
        }
        Cut::Document(kind, name) => {
            find(&mut docs, kind, name);
            docs.retain(|d| !(d["kind"] == kind && d["metadata"]["name"] == name));
        }
    }
    docs
}

/// Creates the documents through the API as the cluster's administrator.
pub async fn load(sim: &SimCluster, docs: &[Value]) {
    let client = sim.client();
    for doc in docs {
        let api_version = doc["apiVersion"].as_str().expect("apiVersion");
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = doc["kind"].as_str().expect("kind");
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        let object: DynamicObject = serde_json::from_value(doc.clone()).expect("an object");
        let api: Api<DynamicObject> = match doc["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create {kind} {:?}: {e}", doc["metadata"]["name"]));
    }
}

/// A one-node kubeadm (static pods) cluster enforcing RBAC, settled: its apiserver has run
/// for two seconds (start times are whole seconds, and a conversion in the cluster's first
/// second could not tell the DaemonSet's apiserver from the static one).
pub async fn static_cluster() -> SimCluster {
    let sim = SimCluster::builder()
        .rbac(true)
        .control_plane_nodes(1)
        .version(FROM)
        .mode(BootstrapMode::Static)
        .port_sharing(true)
        .timings(SimTimings::scaled(100))
        // The node's API front's image: its pod starts, runs and is Ready.
        .image(selfhost::DEFAULT_IMAGE, ImageBehaviour::default())
        .start()
        .await
        .expect("cluster starts");
    crate::settled(sim).await
}

pub async fn cluster() -> SimCluster {
    SimCluster::builder()
        .rbac(true)
        .control_plane_nodes(1)
        .version(FROM)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::fast())
        // The pause image the prepull pods of a v1.34 target run.
        .image("registry.k8s.io/pause:3.10.1", ImageBehaviour::default())
        .start()
        .await
        .expect("cluster starts")
}

/// A cluster with `docs` loaded and a kubeconfig for the service account `account` of
/// deploy/rbac.yaml (the directory holding it lives as long as the returned guard).
pub async fn cluster_as(docs: &[Value], account: &str) -> (SimCluster, tempfile::TempDir, PathBuf) {
    let sim = cluster().await;
    load(&sim, docs).await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("kubeconfig");
    let yaml = sim
        .kubeconfig_for(UserInfo::service_account("kube-system", account))
        .expect("kubeconfig");
    std::fs::write(&path, yaml).expect("write kubeconfig");
    (sim, dir, path)
}

/// Runs the binary from a blocking thread, so the simulator keeps serving meanwhile.
pub async fn selfhost(kubeconfig: &Path, args: &[&str]) -> Output {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        crate::selfhost()
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(&args)
            .timeout(Duration::from_secs(120))
            .output()
    })
    .await
    .expect("joined")
    .expect("runs")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// What a refused run must leave alone: each DaemonSet's identity, generation and
/// annotations, each kube-system pod's identity and deletion state.
pub async fn snapshot(sim: &SimCluster) -> BTreeMap<String, String> {
    let client = sim.client();
    let lp = ListParams::default();
    let mut out = BTreeMap::new();
    for ds in Api::<DaemonSet>::namespaced(client.clone(), "kube-system")
        .list(&lp)
        .await
        .expect("list")
        .items
    {
        let m = &ds.metadata;
        out.insert(
            format!("ds/{}", m.name.clone().unwrap_or_default()),
            format!("{:?} {:?} {:?}", m.uid, m.generation, m.annotations),
        );
    }
    for pod in Api::<Pod>::namespaced(client, "kube-system")
        .list(&lp)
        .await
        .expect("list")
        .items
    {
        let m = &pod.metadata;
        out.insert(
            format!("pod/{}", m.name.clone().unwrap_or_default()),
            format!("{:?} {:?}", m.uid, m.deletion_timestamp),
        );
    }
    out
}

pub async fn images(sim: &SimCluster) -> Vec<String> {
    Api::<DaemonSet>::namespaced(sim.client(), "kube-system")
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .iter()
        .flat_map(|ds| ds.spec.iter().flat_map(|s| s.template.spec.iter()))
        .flat_map(|spec| spec.containers.iter().filter_map(|c| c.image.clone()))
        .collect()
}

/// Removes the bootstrap bindings that let every user read health, version and discovery
/// (a cluster may have had them removed); then only deploy/rbac.yaml grants the paths.
pub async fn without_public_paths(sim: &SimCluster) {
    for name in ["system:public-info-viewer", "system:discovery"] {
        remove_cluster_role_binding(sim, name).await;
    }
}

/// Deletes a ClusterRoleBinding (e.g. one of the bootstrap policy) as the administrator.
pub async fn remove_cluster_role_binding(sim: &SimCluster, name: &str) {
    let bindings: Api<DynamicObject> = Api::all_with(
        sim.client(),
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
        )),
    );
    bindings
        .delete(name, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("delete ClusterRoleBinding {name}: {e}"));
}
