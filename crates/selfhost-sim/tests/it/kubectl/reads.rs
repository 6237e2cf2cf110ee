//! What a user reads: tables, YAML, selectors, raw health, version, discovery, errors.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use selfhost_sim::{SimServer, SimServerOptions};
use serde_json::{Value, json};

use crate::common::pod;

use super::{Kubectl, cluster, row, seed, tables};

#[tokio::test]
async fn get_prints_a_table_per_kind_across_all_namespaces() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "get ns,nodes,pods,ds -A") else {
        return;
    };
    let out = kubectl.ok(&["get", "ns,nodes,pods,ds", "-A"]).await;

    let namespace = row(&out, "namespace/kube-system");
    assert_eq!(namespace["STATUS"], "Active");
    let node = row(&out, "node/cp-1");
    assert_eq!(
        (
            node["STATUS"].as_str(),
            node["ROLES"].as_str(),
            node["VERSION"].as_str()
        ),
        ("Ready", "control-plane", "v1.32.4")
    );
    let pod = row(&out, "pod/kube-apiserver-cp-1");
    assert_eq!(
        (
            pod["NAMESPACE"].as_str(),
            pod["READY"].as_str(),
            pod["STATUS"].as_str(),
            pod["RESTARTS"].as_str()
        ),
        ("kube-system", "1/1", "Running", "0")
    );
    let ds = row(&out, "daemonset.apps/self-hosted-kube-apiserver");
    assert_eq!(
        ds["NODE SELECTOR"],
        "node-role.kubernetes.io/control-plane="
    );
    assert!(!ds.contains_key("IMAGES"), "wide columns only with -o wide");

    let wide = kubectl
        .ok(&["get", "ds", "-n", "kube-system", "-o", "wide"])
        .await;
    let ds = row(&wide, "self-hosted-kube-apiserver");
    assert_eq!(ds["IMAGES"], "registry.k8s.io/kube-apiserver:v1.32.4");
    assert_eq!(ds["SELECTOR"], "k8s-app=self-hosted-kube-apiserver");
    let pods = kubectl
        .ok(&["get", "pods", "-n", "kube-system", "-o", "wide"])
        .await;
    assert_eq!(row(&pods, "kube-scheduler-cp-1")["NODE"], "cp-1");
    assert_eq!(row(&pods, "kube-scheduler-cp-1")["IP"], "10.0.0.11");
}

#[tokio::test]
async fn get_o_yaml_shows_the_stored_object() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "get -o yaml") else {
        return;
    };
    let out = kubectl
        .ok(&[
            "get",
            "ds",
            "self-hosted-kube-apiserver",
            "-n",
            "kube-system",
            "-o",
            "yaml",
        ])
        .await;
    let printed: DaemonSet =
        serde_saphyr::from_str(&out).expect("kubectl printed a DaemonSet in YAML");
    let mut stored = Api::<DaemonSet>::namespaced(sim.client(), "kube-system")
        .get("self-hosted-kube-apiserver")
        .await
        .expect("read through kube-rs");
    assert!(
        stored.metadata.managed_fields.is_some(),
        "the server tracks field managers"
    );
    // kubectl hides managedFields unless --show-managed-fields.
    stored.metadata.managed_fields = None;
    assert_eq!(printed, stored);
    // The apiserver's defaults are part of what users see.
    assert!(out.contains("revisionHistoryLimit: 10"), "{out}");
    assert!(out.contains("terminationMessagePolicy: File"), "{out}");
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "get -l") else {
        return;
    };
    let cases: &[(&[&str], &str)] = &[
        (
            &["-l", "component=kube-apiserver"],
            "pod/kube-apiserver-cp-1\n",
        ),
        (
            &["-l", "tier==control-plane,component!=kube-apiserver"],
            "pod/kube-scheduler-cp-1\n",
        ),
        (
            &["-l", "component in (kube-apiserver, kube-scheduler)"],
            "pod/kube-apiserver-cp-1\npod/kube-scheduler-cp-1\n",
        ),
        (
            &["-l", "component notin (kube-apiserver),tier"],
            "pod/kube-scheduler-cp-1\n",
        ),
        (&["-l", "!component"], ""),
        (
            &[
                "--field-selector",
                "spec.nodeName=cp-1,status.phase=Running",
            ],
            "pod/kube-apiserver-cp-1\npod/kube-scheduler-cp-1\n",
        ),
        (
            &["--field-selector", "metadata.name!=kube-apiserver-cp-1"],
            "pod/kube-scheduler-cp-1\n",
        ),
    ];
    for (selector, expected) in cases {
        let mut args = vec!["get", "pods", "-n", "kube-system", "-o", "name"];
        args.extend_from_slice(selector);
        assert_eq!(kubectl.ok(&args).await, *expected, "{selector:?}");
    }

    let bad = kubectl
        .run(&["get", "pods", "-n", "kube-system", "-l", "a@b=c"])
        .await;
    assert!(!bad.success);
    assert!(
        bad.stderr.contains("unable to parse requirement"),
        "{}",
        bad.stderr
    );
    let unsupported = kubectl
        .run(&[
            "get",
            "ds",
            "-n",
            "kube-system",
            "--field-selector",
            "spec.nodeName=cp-1",
        ])
        .await;
    assert!(!unsupported.success);
    assert!(
        unsupported
            .stderr
            .contains("field label not supported: spec.nodeName"),
        "{}",
        unsupported.stderr
    );
}

#[tokio::test]
async fn raw_readyz_verbose_lists_each_check() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "get --raw /readyz?verbose") else {
        return;
    };
    let out = kubectl.ok(&["get", "--raw", "/readyz?verbose"]).await;
    assert!(out.contains("[+]ping ok"), "{out}");
    assert!(out.contains("readyz check passed"), "{out}");
}

#[tokio::test]
async fn version_reports_the_simulated_control_plane() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "version") else {
        return;
    };
    sim.set_version("v1.33.2");
    let out = kubectl.ok(&["version", "-o", "json"]).await;
    let version: Value = serde_json::from_str(&out).expect("kubectl version -o json");
    assert_eq!(version["serverVersion"]["gitVersion"], "v1.33.2");
    assert_eq!(version["serverVersion"]["minor"], "33");
}

#[tokio::test]
async fn api_resources_lists_every_served_kind() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "api-resources") else {
        return;
    };
    let out = kubectl.ok(&["api-resources"]).await;
    let rows: Vec<_> = tables(&out).into_iter().flatten().collect();
    for rt in selfhost_sim::resources::ALL {
        let found = rows
            .iter()
            .find(|r| r.get("NAME").map(String::as_str) == Some(rt.plural))
            .unwrap_or_else(|| panic!("{} missing from:\n{out}", rt.plural));
        assert_eq!(found["APIVERSION"], rt.api_version());
        assert_eq!(found["KIND"], rt.kind);
        assert_eq!(found["NAMESPACED"], rt.namespaced.to_string());
        if let Some(short) = rt.short_names.first() {
            assert_eq!(found["SHORTNAMES"], *short, "{}", rt.plural);
        }
    }
}

#[tokio::test]
async fn missing_objects_are_reported_in_the_apiservers_words() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "get missing") else {
        return;
    };
    let out = kubectl
        .run(&["get", "ds", "kube-proxy", "-n", "kube-system"])
        .await;
    assert!(!out.success);
    assert_eq!(
        out.stderr.trim(),
        r#"Error from server (NotFound): daemonsets.apps "kube-proxy" not found"#
    );
}

#[tokio::test]
async fn kubectl_verifies_the_tls_simulator_and_sends_its_token() {
    let sim = SimServer::start(SimServerOptions {
        tls: true,
        ..SimServerOptions::default()
    })
    .await
    .expect("the TLS simulator starts");
    seed(&sim).await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "TLS get") else {
        return;
    };
    assert!(sim.endpoint().starts_with("https://"), "{}", sim.endpoint());
    let out = kubectl.ok(&["get", "nodes"]).await;
    assert_eq!(row(&out, "cp-1")["STATUS"], "Ready");
}

#[tokio::test]
async fn get_in_chunks_shows_every_pod_once() {
    let sim = cluster().await;
    let Some(kubectl) = Kubectl::for_sim(&sim, "get pods -A --chunk-size=2") else {
        return;
    };
    let pods: Api<Pod> = Api::namespaced(sim.client(), "default");
    for name in ["web-1", "web-2", "web-3"] {
        pods.create(&PostParams::default(), &pod(name, json!({}), None))
            .await
            .expect("create a pod");
    }
    let out = kubectl
        .run(&["get", "pods", "-A", "--chunk-size=2", "-v=6"])
        .await;
    assert!(out.success, "{}", out.stderr);
    let pages = out.stderr.matches("limit=2").count();
    assert_eq!(pages, 3, "three pages of two: {}", out.stderr);
    assert_eq!(out.stderr.matches("continue=").count(), 2, "{}", out.stderr);
    let names: Vec<String> = tables(&out.stdout)
        .into_iter()
        .flatten()
        .map(|row| row["NAME"].clone())
        .collect();
    assert_eq!(
        names,
        [
            "web-1",
            "web-2",
            "web-3",
            "kube-apiserver-cp-1",
            "kube-scheduler-cp-1"
        ],
        "{}",
        out.stdout
    );
    assert_eq!(
        out.stdout
            .lines()
            .filter(|l| l.starts_with("NAMESPACE"))
            .count(),
        1,
        "one header across the pages: {}",
        out.stdout
    );
}
