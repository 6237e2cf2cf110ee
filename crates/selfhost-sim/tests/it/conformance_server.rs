//! Conformance, part 5: the server as a process — discovery, version and health, the
//! kubeconfig and TLS with a bearer token, crashes and restarts with clients reconnecting,
//! injected faults, and request counters.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, PostParams, WatchParams};
use kube::discovery::Discovery;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};
use selfhost_sim::store::WriteOptions;
use selfhost_sim::{FaultAction, RequestMatcher, SimServerOptions, Verb, resources};
use serde_json::json;

use crate::common::*;

/// A client that reports errors at once instead of retrying 429/503 (as a probe would).
async fn no_retry_client(sim: &selfhost_sim::SimServer) -> kube::Client {
    sim.client_with(|c| c.default_retry = false).await.unwrap()
}

fn raw_get(path: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path).body(Vec::new()).unwrap()
}

#[tokio::test]
async fn discovery_finds_every_served_kind() {
    let sim = sim().await;
    let discovery = Discovery::new(sim.client()).run().await.unwrap();
    for (group, kind) in [
        ("", "Pod"),
        ("", "Namespace"),
        ("apps", "DaemonSet"),
        ("apps", "ControllerRevision"),
        ("coordination.k8s.io", "Lease"),
    ] {
        let found = discovery
            .get(group)
            .and_then(|g| g.recommended_kind(kind))
            .unwrap_or_else(|| panic!("{group}/{kind} is discoverable"));
        assert_eq!(found.0.kind, kind);
    }
    let aggregated = Discovery::new(sim.client()).run_aggregated().await.unwrap();
    assert!(aggregated.has_group("apps"));
}

#[tokio::test]
async fn version_follows_what_the_control_plane_runs() {
    let sim = sim().await;
    let v = sim.client().apiserver_version().await.unwrap();
    assert_eq!(
        (v.major.as_str(), v.minor.as_str(), v.git_version.as_str()),
        ("1", "33", "v1.33.2")
    );
    sim.set_version("v1.34.1");
    assert_eq!(
        sim.client().apiserver_version().await.unwrap().git_version,
        "v1.34.1"
    );
}

#[tokio::test]
async fn health_endpoints_answer_like_the_apiserver() {
    let sim = sim().await;
    let client = no_retry_client(&sim).await;
    assert_eq!(client.request_text(raw_get("/livez")).await.unwrap(), "ok");
    let verbose = client
        .request_text(raw_get("/readyz?verbose"))
        .await
        .unwrap();
    assert!(
        verbose.contains("[+]etcd ok\n") && verbose.ends_with("readyz check passed\n"),
        "{verbose}"
    );
    sim.set_health_check_failing("etcd", true);
    let s = status(client.request_text(raw_get("/readyz")).await);
    assert_eq!(s.code, 500);
    assert!(
        s.message.contains("[-]etcd failed: reason withheld"),
        "{}",
        s.message
    );
    assert_eq!(
        client
            .request_text(raw_get("/healthz?exclude=etcd"))
            .await
            .unwrap(),
        "ok"
    );
}

#[tokio::test]
async fn the_kubeconfig_points_at_the_server() {
    let sim = sim().await;
    let text = std::fs::read_to_string(sim.kubeconfig_path()).unwrap();
    let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
    let cluster = kc.clusters[0].cluster.clone().unwrap();
    assert_eq!(cluster.server.as_deref(), Some(sim.endpoint()));
    assert!(sim.endpoint().starts_with("http://127.0.0.1:"));
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    Api::<ConfigMap>::namespaced(client, "default")
        .list(&ListParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn tls_mode_serves_with_its_own_ca_and_requires_the_token() {
    let sim = sim_with(SimServerOptions {
        tls: true,
        ..SimServerOptions::default()
    })
    .await;
    assert!(sim.endpoint().starts_with("https://127.0.0.1:"));
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    cms.create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();

    let anonymous = sim
        .client_with(|c| c.auth_info = kube::config::AuthInfo::default())
        .await
        .unwrap();
    let s = status(
        Api::<ConfigMap>::namespaced(anonymous.clone(), "default")
            .get("c")
            .await,
    );
    assert_eq!((s.code, s.reason.as_str()), (401, "Unauthorized"));
    assert_eq!(
        anonymous.request_text(raw_get("/readyz")).await.unwrap(),
        "ok",
        "health is public"
    );
    assert!(
        !format!("{sim:?}").contains(
            &kube::config::Kubeconfig::from_yaml(sim.kubeconfig_yaml())
                .unwrap()
                .auth_infos[0]
                .auth_info
                .as_ref()
                .and_then(|a| a.token.as_ref())
                .map(|t| format!("{t:?}"))
                .unwrap_or_default()
        ),
        "the token is not printed"
    );
}

#[tokio::test]
async fn a_crash_cuts_watches_and_a_watcher_resumes_after_the_restart() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    cms.create(&PostParams::default(), &configmap("before", "1"))
        .await
        .unwrap();
    let (reader, writer) = reflector::store::<ConfigMap>();
    let task = tokio::spawn(
        watcher(cms.clone(), watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .applied_objects()
            .for_each(|_| async {}),
    );
    within("the reflector ready", reader.wait_until_ready())
        .await
        .unwrap();
    let rv = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut raw = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    sim.crash().await;
    assert!(!sim.is_up());
    let ended = within("the raw watch cut", raw.try_next()).await;
    assert!(
        !matches!(ended, Ok(Some(_))),
        "no event after a crash: {ended:?}"
    );
    assert!(
        cms.get("before").await.is_err(),
        "nothing answers while down"
    );

    // The store outlives the apiserver, like etcd: another writer changes it meanwhile.
    let obj = json!({"metadata": {"name": "during"}, "data": {"key": "2"}});
    sim.store()
        .create(
            &resources::CONFIGMAPS,
            "default",
            obj,
            &WriteOptions::default(),
        )
        .unwrap();
    sim.restart().await.unwrap();
    eventually("the watcher to see the change made while down", || async {
        reader
            .get(&reflector::ObjectRef::new("during").within("default"))
            .map(|_| ())
    })
    .await;
    assert_eq!(reader.state().len(), 2);
    task.abort();
}

#[tokio::test]
async fn down_for_refuses_connections_then_serves_again_on_the_same_port() {
    let sim = sim().await;
    let client = no_retry_client(&sim).await;
    let addr = sim.address();
    sim.faults().down_for(Duration::from_millis(300));
    eventually("the server down", || async { (!sim.is_up()).then_some(()) }).await;
    let err = client.request_text(raw_get("/version")).await.unwrap_err();
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "a refused connection, not an answer: {err:?}"
    );
    eventually("the server back", || async {
        client.request_text(raw_get("/version")).await.ok()
    })
    .await;
    assert_eq!(sim.address(), addr);
}

#[tokio::test]
async fn injected_statuses_reach_clients_with_the_real_reasons() {
    let sim = sim().await;
    let client = no_retry_client(&sim).await;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let path = "/api/v1/namespaces/default/configmaps";
    let cases = [
        (500, "InternalError", None),
        (503, "ServiceUnavailable", Some(1)),
        (429, "TooManyRequests", Some(1)),
    ];
    for (code, reason, retry_after) in cases {
        sim.faults().fail_next(http::Method::GET, path, code);
        let s = status(cms.list(&ListParams::default()).await);
        assert_eq!((s.code, s.reason.as_str()), (code, reason));
        assert_eq!(
            s.details.map(|d| d.retry_after_seconds),
            retry_after.map(|r| r as u32),
            "{code}"
        );
        cms.list(&ListParams::default())
            .await
            .expect("the fault fired once");
    }
}

#[tokio::test]
async fn kube_rs_retries_an_injected_503_after_retry_after() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    sim.faults().inject(
        RequestMatcher::resource("configmaps").verb(Verb::List),
        FaultAction::Status {
            code: 503,
            retry_after: Some(1),
        },
        Some(2),
    );
    within("the retried list", cms.list(&ListParams::default()))
        .await
        .unwrap();
    assert_eq!(
        sim.metrics().requests("list", "configmaps"),
        3,
        "two refusals, then an answer"
    );
}

#[tokio::test]
async fn connection_resets_and_latency_are_injected_per_route() {
    let sim = sim().await;
    let client = no_retry_client(&sim).await;
    sim.faults().inject(
        RequestMatcher::path("/version"),
        FaultAction::ResetConnection,
        Some(1),
    );
    let err = client.request_text(raw_get("/version")).await.unwrap_err();
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "a reset, not an answer: {err:?}"
    );
    client.request_text(raw_get("/version")).await.unwrap();

    sim.faults().inject(
        RequestMatcher::path("/livez"),
        FaultAction::Delay(Duration::from_millis(200)),
        None,
    );
    let started = tokio::time::Instant::now();
    client.request_text(raw_get("/livez")).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(200));
}

#[tokio::test]
async fn a_forced_410_makes_a_watcher_relist_and_stay_correct() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    let (reader, writer) = reflector::store::<ConfigMap>();
    let task = tokio::spawn(
        watcher(cms.clone(), watcher::Config::default())
            .default_backoff()
            .reflect(writer)
            .applied_objects()
            .for_each(|_| async {}),
    );
    within("the reflector ready", reader.wait_until_ready())
        .await
        .unwrap();
    let lists_before = sim.metrics().requests("list", "configmaps");
    sim.faults().expire_next_watches(1);
    sim.faults().drop_watches();
    cms.create(&PostParams::default(), &configmap("after", "1"))
        .await
        .unwrap();
    eventually("a relist", || async {
        (sim.metrics().requests("list", "configmaps") > lists_before).then_some(())
    })
    .await;
    eventually("the reflector to hold the new object", || async {
        reader
            .state()
            .iter()
            .any(|c| c.name_any() == "after")
            .then_some(())
    })
    .await;
    task.abort();
}

#[tokio::test]
async fn requests_are_counted_by_verb_and_resource() {
    let sim = sim().await;
    let cms: Api<ConfigMap> = Api::namespaced(sim.client(), "default");
    cms.create(&PostParams::default(), &configmap("c", "1"))
        .await
        .unwrap();
    cms.get("c").await.unwrap();
    cms.get("c").await.unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    sim.client().request_text(raw_get("/readyz")).await.unwrap();
    let m = sim.metrics();
    assert_eq!(
        (
            m.requests("create", "configmaps"),
            m.requests("get", "configmaps"),
            m.requests("list", "configmaps")
        ),
        (1, 2, 1)
    );
    assert_eq!(m.requests("get", "/readyz"), 1);
    m.reset();
    assert_eq!(m.total(), 0);
}
