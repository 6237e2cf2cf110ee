//! A self-hosted control plane behind node-local API fronts: the kube-apiserver DaemonSet's
//! pods listen on 127.0.0.1, a backup on 127.0.0.2, and a front on the node's address passes
//! each new connection to whichever of them passed its last check.

use std::time::Duration;

use kube::api::{DeleteParams, PostParams};
use selfhost_sim::bootstrap::{FRONT_ANNOTATION, FrontLayout, NodeSpec};
use selfhost_sim::cluster::NodeManifest;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use tokio::task::JoinSet;

use super::http::fresh;
use super::*;

/// The front's image: no program, so the kubelet models the front.
const FRONT_IMAGE: &str = "example.com/selfhost-front:v1";
/// An API path every request may read.
const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
/// How long a raw request may take.
const TIMEOUT: Duration = Duration::from_secs(2);

/// The front's static pod on `node`, on the tests' clock (its flags ten times shorter than
/// its defaults).
fn front_manifest(node: &NodeSpec) -> String {
    let args: Vec<String> = format!(
        "front --listen {}:6443 --backend 127.0.0.1:6443 --backend 127.0.0.2:6443 \
         --ca-file /etc/kubernetes/pki/ca.crt --check-server-name kubernetes \
         --check-interval 20ms --hold 200ms --drain-timeout 2500ms",
        node.ip
    )
    .split_whitespace()
    .map(str::to_string)
    .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "selfhost-front",
            "namespace": "kube-system",
            "labels": { "app.kubernetes.io/name": "selfhost-front" },
        },
        "spec": {
            "hostNetwork": true,
            "terminationGracePeriodSeconds": 30,
            "containers": [{
                "name": "front",
                "image": FRONT_IMAGE,
                "command": ["selfhost"],
                "args": args,
            }],
        },
    })
    .to_string()
}

/// A self-hosted cluster of `nodes` nodes behind fronts.
fn behind_fronts(nodes: usize) -> SimClusterBuilder {
    cluster(nodes, true, model())
        .api_front(FrontLayout::default())
        .image(FRONT_IMAGE, ImageBehaviour::default())
        .control_plane_static_pod(
            "selfhost-front.yaml",
            NodeManifest::for_node(front_manifest),
        )
}

/// The kube-apiserver DaemonSet's backup, its pods on the backup's address.
async fn create_backup_on_its_address(cluster: &SimCluster) {
    let api = daemonsets(cluster);
    let real = api.get("self-hosted-kube-apiserver").await.unwrap();
    let mut backup = serde_json::to_value(backup_of(&real, "kube-apiserver")).unwrap();
    let container = &mut backup["spec"]["template"]["spec"]["containers"][0];
    for word in container["command"].as_array_mut().unwrap() {
        if word == "--bind-address=127.0.0.1" {
            *word = json!("--bind-address=127.0.0.2");
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        container[probe]["httpGet"]["host"] = json!("127.0.0.2");
    }
    let backup = serde_json::from_value(backup).unwrap();
    api.create(&PostParams::default(), &backup)
        .await
        .expect("the backup is created");
}

#[tokio::test]
async fn behind_its_front_a_kube_apiserver_hands_over_to_its_backup_without_a_failed_request() {
    let cluster = start(behind_fronts(1)).await;
    let model = cluster.handover().unwrap();
    let ds = daemonsets(&cluster)
        .get("self-hosted-kube-apiserver")
        .await
        .unwrap();
    assert_eq!(
        ds.metadata.annotations.unwrap()[FRONT_ANNOTATION],
        "127.0.0.1,127.0.0.2"
    );
    let real = real_process(&cluster, "cp-1").expect("the DaemonSet's apiserver");
    assert_eq!(real.address, Some("127.0.0.1".parse().unwrap()));
    let fronts = model.fronts();
    assert_eq!(fronts.len(), 1);
    assert_eq!(fronts[0].listen, "10.0.0.11:6443".parse().unwrap());
    let healthy: Vec<bool> = fronts[0].backends.iter().map(|b| b.healthy).collect();
    assert_eq!(
        healthy,
        [true, false],
        "nothing listens on the backup's address yet"
    );

    create_backup_on_its_address(&cluster).await;
    until("the backup's socket", || {
        backup_process(&cluster).is_some_and(|p| p.holds_port)
    })
    .await;
    let backup = backup_process(&cluster).unwrap();
    let serves = backup.times.serves_at.expect("it will serve");
    // Its probes reach its own address: it is not Ready before it serves.
    if Instant::now() + Duration::from_millis(100) < serves {
        let pod = system_pods(&cluster).get(&backup.pod).await.unwrap();
        assert!(!selfhost_sim::controllers::objects::is_pod_ready(&pod));
    }
    until("the front's check of the backup passes", || {
        model.fronts()[0].backends[1].healthy
    })
    .await;

    let addr = cluster.server().address();
    let mut requests = JoinSet::new();
    let pods = system_pods(&cluster);
    pods.delete(&real.pod, &DeleteParams::default())
        .await
        .unwrap();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let replaced = real_process(&cluster, "cp-1").is_some_and(|p| p.uid != real.uid && p.ready)
            && processes(&cluster).iter().all(|p| p.uid != real.uid);
        if replaced {
            break;
        }
        assert!(Instant::now() < deadline, "the real pod was never replaced");
        requests.spawn(fresh(addr, CONFIGMAPS, TIMEOUT));
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    let answers = requests.join_all().await;
    let failed: Vec<_> = answers.iter().filter(|a| !a.ok()).collect();
    assert!(
        failed.is_empty(),
        "{} of {} failed: {failed:?}",
        failed.len(),
        answers.len()
    );
    let front = &model.fronts()[0];
    assert!(front.passed as usize >= answers.len(), "{front:?}");
    assert_eq!((front.refused, front.cut), (0, 0), "{front:?}");
    cluster.shutdown().await;
}

#[tokio::test]
async fn the_load_balancer_checks_each_node_through_its_front() {
    let cluster = start(behind_fronts(3)).await;
    let model = cluster.handover().unwrap();
    until("every node healthy", || model.healthy_nodes().len() == 3).await;
    assert_eq!(model.fronts().len(), 3);
    // cp-2's front loses its only ready backend: the balancer takes cp-2 out.
    let old = real_process(&cluster, "cp-2").unwrap();
    system_pods(&cluster)
        .delete(&old.pod, &DeleteParams::default())
        .await
        .unwrap();
    until("cp-2 out of the rotation", || {
        !model.healthy_nodes().contains(&"cp-2".to_string())
    })
    .await;
    until("cp-2 back once its new apiserver is ready", || {
        model.healthy_nodes().len() == 3
    })
    .await;
    let client = cluster.client();
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
    assert!(namespaces.list(&Default::default()).await.is_ok());
    cluster.shutdown().await;
}
