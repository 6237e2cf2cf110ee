//! kube-apiserver identity Leases: one per host once its apiserver serves, renewed, taken over
//! by the next process on that host, absent before v1.26 or with the feature off, and
//! collected once expired.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ListParams, PostParams};
use selfhost_sim::SimCluster;
use selfhost_sim::cluster::{
    ApiserverIdentity, HOSTNAME_LABEL, IDENTITY_LABEL, IDENTITY_LEASE_NAMESPACE,
    identity_lease_name,
};
use serde_json::json;
use tokio::time::Instant;

use super::*;
use crate::common::object;

const SELECTOR: &str = "apiserver.kubernetes.io/identity=kube-apiserver";

/// The identity Leases (`None` while the API does not answer).
async fn try_identity_leases(cluster: &SimCluster) -> Option<Vec<Lease>> {
    let api: Api<Lease> = Api::namespaced(cluster.client(), IDENTITY_LEASE_NAMESPACE);
    let listed = api.list(&ListParams::default().labels(SELECTOR)).await;
    listed.ok().map(|l| l.items)
}

async fn identity_leases(cluster: &SimCluster) -> Vec<Lease> {
    try_identity_leases(cluster).await.expect("leases list")
}

/// Waits until the identity Leases satisfy `check`.
async fn wait_for_leases(
    cluster: &SimCluster,
    what: &str,
    check: impl Fn(&[Lease]) -> bool,
) -> Vec<Lease> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let leases = try_identity_leases(cluster).await;
        if let Some(leases) = leases.as_ref().filter(|l| check(l)) {
            return leases.clone();
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {leases:#?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn holder_of(lease: &Lease) -> String {
    lease_holder(lease).unwrap_or_default()
}

fn renewed(lease: &Lease) -> Option<Timestamp> {
    Some(lease.spec.as_ref()?.renew_time.as_ref()?.0)
}

#[tokio::test]
async fn every_serving_apiserver_publishes_its_hosts_identity_lease_and_renews_it() {
    let t = timings();
    let cluster = start(SimCluster::builder().control_plane_nodes(2).timings(t)).await;
    let leases = wait_for_leases(&cluster, "two identity Leases", |l| l.len() == 2).await;
    for lease in &leases {
        let name = lease.metadata.name.clone().unwrap();
        let labels = lease.metadata.labels.clone().unwrap();
        let host = labels.get(HOSTNAME_LABEL).expect("the hostname label");
        assert_eq!(name, identity_lease_name(host));
        assert_eq!(
            labels.get(IDENTITY_LABEL).map(String::as_str),
            Some("kube-apiserver")
        );
        let holder = holder_of(lease);
        let uuid = holder
            .strip_prefix(&format!("{name}_"))
            .expect("<lease name>_<uuid>");
        assert_eq!(uuid.len(), 36, "{holder}");
        assert_eq!(
            lease.spec.as_ref().unwrap().lease_duration_seconds,
            Some(36)
        );
    }
    let first: Vec<_> = leases.iter().map(renewed).collect();
    let again = wait_for_leases(&cluster, "renewals", |now| {
        now.len() == 2
            && now
                .iter()
                .zip(&first)
                .all(|(l, before)| renewed(l) > *before)
    })
    .await;
    for (lease, before) in again.iter().zip(&leases) {
        assert_eq!(holder_of(lease), holder_of(before), "the same processes");
    }
    cluster.shutdown().await;
}

#[tokio::test]
async fn a_new_apiserver_process_takes_its_hosts_lease_over() {
    let cluster = start(SimCluster::builder().timings(timings())).await;
    let leases = wait_for_leases(&cluster, "the identity Lease", |l| l.len() == 1).await;
    let before = leases[0].clone();
    let apiserver = Manifest::remove(&cluster, "cp-1", "kube-apiserver");
    assert!(cluster.recorder().wait_for_api(false, DEADLINE).await);
    apiserver.restore();
    let after = wait_for_leases(&cluster, "a new holder", |l| {
        l.len() == 1 && holder_of(&l[0]) != holder_of(&before)
    })
    .await;
    assert_eq!(
        after[0].metadata.name, before.metadata.name,
        "the host's Lease"
    );
    assert_eq!(
        after[0].metadata.uid, before.metadata.uid,
        "taken over, not recreated"
    );
    let name = before.metadata.name.clone().unwrap();
    assert!(holder_of(&after[0]).starts_with(&format!("{name}_")));
    assert!(renewed(&after[0]) > renewed(&before));
    cluster.shutdown().await;
}

#[tokio::test]
async fn no_identity_lease_before_v1_26_or_with_the_feature_off() {
    let t = timings();
    let cases = [
        ("v1.25.4", ApiserverIdentity::ByVersion),
        ("v1.33.2", ApiserverIdentity::Never),
    ];
    for (version, identity) in cases {
        let cluster = start(
            SimCluster::builder()
                .version(version)
                .control_plane_releases(25..=33, 4)
                .timings(t)
                .apiserver_identity(identity),
        )
        .await;
        // Several renew intervals: a Lease would have been created at the first.
        tokio::time::sleep(t.apiserver_identity.renew_interval * 5).await;
        assert_eq!(
            identity_leases(&cluster).await,
            [],
            "{version} {identity:?}"
        );
        cluster.shutdown().await;
    }
    let older = start(
        SimCluster::builder()
            .version("v1.25.4")
            .control_plane_releases(25..=33, 4)
            .timings(t)
            .apiserver_identity(ApiserverIdentity::Always),
    )
    .await;
    wait_for_leases(&older, "the gate on in v1.25", |l| l.len() == 1).await;
    older.shutdown().await;
}

#[tokio::test]
async fn expired_identity_leases_are_collected_and_live_ones_kept() {
    let mut t = timings();
    t.apiserver_identity.gc_period = Duration::from_millis(50);
    let cluster = start(SimCluster::builder().timings(t)).await;
    let live = wait_for_leases(&cluster, "the live Lease", |l| l.len() == 1).await;
    let gone_host = identity_lease_name("cp-9");
    let stale: Lease = object(json!({
        "metadata": {
            "name": gone_host,
            "labels": { IDENTITY_LABEL: "kube-apiserver", HOSTNAME_LABEL: "cp-9" },
        },
        "spec": {
            "holderIdentity": format!("{gone_host}_00000000-0000-0000-0000-000000000000"),
            "leaseDurationSeconds": 3600,
            "renewTime": MicroTime(Timestamp::now() - Duration::from_secs(7_200)),
        },
    }));
    let api: Api<Lease> = Api::namespaced(cluster.client(), IDENTITY_LEASE_NAMESPACE);
    api.create(&PostParams::default(), &stale).await.unwrap();
    let left = wait_for_leases(&cluster, "the expired Lease collected", |l| {
        l.iter()
            .all(|l| l.metadata.name.as_deref() != Some(gone_host.as_str()))
    })
    .await;
    assert_eq!(left.len(), 1);
    assert_eq!(
        left[0].metadata.uid, live[0].metadata.uid,
        "the live one stays"
    );
    cluster.shutdown().await;
}

/// A test bed whose machines all have the hostname `bed`, no node's name: every process names
/// itself after it (holder identities, identity Leases), while the nodes keep their own names.
#[tokio::test]
async fn processes_name_themselves_after_their_machines_shared_hostname() {
    let t = timings();
    let cluster = start(
        SimCluster::builder()
            .control_plane_nodes(2)
            .timings(t)
            .process_hostname("bed"),
    )
    .await;
    for role in ROLES {
        let leader = wait_for_holder(&cluster, role).await;
        let identity = leader.identity.clone().expect("an identity");
        assert!(identity.starts_with("bed_"), "{identity}");
        let lease = super::leader_lease(&cluster, role)
            .await
            .expect("the Lease exists");
        assert_eq!(lease_holder(&lease), Some(identity));
    }
    let identities: Vec<String> = cluster
        .processes()
        .nodes
        .values()
        .flat_map(|n| &n.containers)
        .filter_map(|c| c.process.and(c.identity.clone()))
        .collect();
    assert!(
        identities.len() >= 6,
        "three components on two nodes: {identities:?}"
    );
    let unique: std::collections::BTreeSet<&String> = identities.iter().collect();
    assert_eq!(unique.len(), identities.len(), "one identity per process");
    assert!(
        identities.iter().all(|i| i.starts_with("bed_")),
        "{identities:?}"
    );
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(cluster.client());
    for node in nodes.list(&ListParams::default()).await.unwrap() {
        let name = node.metadata.name.clone().unwrap();
        let label = node.metadata.labels.clone().unwrap_or_default();
        assert_eq!(
            label.get(HOSTNAME_LABEL),
            Some(&name),
            "the kubelet names its node"
        );
    }
    // Both apiservers see one hostname: they share its one Lease, and none is named after a
    // node.
    let bed = identity_lease_name("bed");
    let shared = |leases: &[Lease]| {
        let [lease] = leases else {
            return false;
        };
        let labels = lease.metadata.labels.clone().unwrap_or_default();
        lease.metadata.name.as_deref() == Some(bed.as_str())
            && labels.get(HOSTNAME_LABEL).map(String::as_str) == Some("bed")
            && holder_of(lease).starts_with(&format!("{bed}_"))
    };
    wait_for_leases(&cluster, "the one identity Lease of bed", shared).await;
    // Several renewals of both apiservers later, still that one.
    tokio::time::sleep(t.apiserver_identity.renew_interval * 3).await;
    assert!(shared(&identity_leases(&cluster).await));
    cluster.shutdown().await;
}
