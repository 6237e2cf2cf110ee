//! The node-local API front in the model, on tokio's paused clock: where connections to the
//! node's API address land, which backend the front passes each to, holding, and draining.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::frontend::ApiFrontEnd;
use super::sockets::{ApiProcess, FrontProcess};
use super::{ApiFrontState, CrossTalk, HandoverTimings, Handovers, PortBalancing};
use crate::cluster::node_input::NodeInput;
use crate::cluster::process_table::ApiDecision;
use crate::controllers::kubelet::{FrontCommand, PodRef, ProcessId};
use crate::server::{ConnectionRouter, PassedOn, Route};

const NODE: &str = "cp-1";
const NODE_IP: &str = "10.0.0.11";
const INTERVAL: Duration = Duration::from_millis(200);
const HOLD: Duration = Duration::from_secs(2);

/// A model of one control-plane node, coupled, its kubelet's inputs kept to see what a front
/// tells it, its checks running until the test ends.
struct Bed {
    model: Arc<ApiFrontEnd>,
    kubelet: mpsc::UnboundedReceiver<NodeInput>,
    _decisions: watch::Sender<ApiDecision>,
    stop: CancellationToken,
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn bed() -> Bed {
    let handovers = Handovers {
        balancing: PortBalancing::RoundRobin,
        cross_talk: CrossTalk::NEVER,
        ..Handovers::measured()
    };
    let ip: IpAddr = NODE_IP.parse().unwrap();
    let model = ApiFrontEnd::new(
        handovers,
        HandoverTimings::realistic(),
        vec![(NODE.to_string(), ip)],
    );
    let (decisions, receiver) = watch::channel(ApiDecision {
        coupled: true,
        ..ApiDecision::default()
    });
    model.attach(|| {}, receiver);
    let (tx, kubelet) = mpsc::unbounded_channel();
    model.attach_kubelets(HashMap::from([(NODE.to_string(), tx)]));
    let stop = CancellationToken::new();
    tokio::spawn(model.clone().run(stop.clone()));
    Bed {
        model,
        kubelet,
        _decisions: decisions,
        stop,
    }
}

fn pod(name: &str) -> PodRef {
    PodRef {
        namespace: "kube-system".into(),
        name: name.into(),
        uid: format!("uid-{name}"),
    }
}

/// A kube-apiserver bound to `address` (`None`: every address) since `since`, accepting at
/// once, ready `ready_after` later (`None`: never).
fn apiserver(
    id: u64,
    address: Option<&str>,
    since: Instant,
    ready_after: Option<u64>,
) -> ApiProcess {
    ApiProcess {
        id: ProcessId(id),
        pod: pod(&format!("apiserver-{id}")),
        image: None,
        listening: since,
        accepts: Some(since),
        ready: ready_after.map(|ms| since + Duration::from_millis(ms)),
        stopping: false,
        holds_port: true,
        bind_rank: usize::try_from(id).unwrap(),
        address: address.map(|a| a.parse().unwrap()),
        port: 6443,
    }
}

fn front(id: u64) -> FrontProcess {
    let at = |a: &str| -> SocketAddr { a.parse().unwrap() };
    FrontProcess {
        id: ProcessId(id),
        pod: pod("selfhost-front-cp-1"),
        command: FrontCommand {
            listen: at(&format!("{NODE_IP}:6443")),
            backends: vec![at("127.0.0.1:6443"), at("127.0.0.2:6443")],
            check_interval: Some(INTERVAL),
            hold: Some(HOLD),
            drain: Some(Duration::from_secs(25)),
        },
        stopping: false,
        holds_port: true,
        bind_rank: usize::try_from(id).unwrap(),
        address: Some(NODE_IP.parse().unwrap()),
    }
}

fn stopping(mut front: FrontProcess) -> FrontProcess {
    front.stopping = true;
    front.holds_port = false;
    front
}

/// A new connection to the node's API address, passed on by the front (`None`: closed
/// unserved).
async fn through_front(model: &ApiFrontEnd) -> Option<PassedOn> {
    match model.route() {
        Route::Relay(relay) => relay.pass_on().await,
        other => panic!("the front does not take the connection: {other:?}"),
    }
}

/// The process a connection reached.
fn label(passed: &PassedOn) -> &str {
    passed.process.label()
}

fn the_front(model: &ApiFrontEnd) -> ApiFrontState {
    model.fronts().into_iter().next().expect("a front")
}

/// Lets the front's checks due by now run.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test(start_paused = true)]
async fn the_front_passes_connections_only_to_healthy_backends_fewest_open_first() {
    let bed = bed();
    let t0 = Instant::now();
    let ready = apiserver(1, Some("127.0.0.1"), t0, Some(0));
    let joining = apiserver(2, Some("127.0.0.2"), t0, Some(1_000));
    bed.model
        .publish_views(NODE, vec![ready, joining], vec![front(3)]);
    settle().await;

    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(through_front(&bed.model).await.expect("passed on"));
    }
    assert!(
        open.iter().all(|c| label(c) == "cp-1/apiserver-1#1"),
        "the joining backend failed its check"
    );
    // Its first check after it is ready.
    tokio::time::sleep_until(t0 + Duration::from_millis(1_000) + INTERVAL).await;
    settle().await;
    for _ in 0..4 {
        open.push(through_front(&bed.model).await.expect("passed on"));
    }
    assert!(
        open[4..].iter().all(|c| label(c) == "cp-1/apiserver-2#2"),
        "the one with fewer open connections takes the new ones"
    );
    let state = the_front(&bed.model);
    let opened: Vec<u64> = state.backends.iter().map(|b| b.open).collect();
    assert_eq!(opened, [4, 4]);
    assert_eq!((state.passed, state.held, state.refused), (8, 0, 0));
    drop(open);
    assert!(the_front(&bed.model).backends.iter().all(|b| b.open == 0));
}

#[tokio::test(start_paused = true)]
async fn a_backend_told_to_stop_gets_no_new_connection_from_the_next_check_on() {
    let bed = bed();
    let t0 = Instant::now();
    let leaving = apiserver(1, Some("127.0.0.1"), t0, Some(0));
    let staying = apiserver(2, Some("127.0.0.2"), t0, Some(0));
    bed.model
        .publish_views(NODE, vec![leaving.clone(), staying.clone()], vec![front(3)]);
    settle().await;
    let kept = through_front(&bed.model).await.expect("passed on");
    assert_eq!(label(&kept), "cp-1/apiserver-1#1");

    // SIGTERM: its /readyz fails at once, it keeps serving (its shutdown delay).
    let told = ApiProcess {
        stopping: true,
        ..leaving
    };
    bed.model
        .publish_views(NODE, vec![told, staying], vec![front(3)]);
    tokio::time::sleep(INTERVAL).await;
    settle().await;
    for _ in 0..4 {
        let passed = through_front(&bed.model).await.expect("passed on");
        assert_eq!(label(&passed), "cp-1/apiserver-2#2");
    }
    assert!(
        !kept.cut.is_cancelled() && !kept.process.has_exited(),
        "its open connection goes on"
    );
    let state = the_front(&bed.model);
    assert_eq!(
        (state.backends[0].healthy, state.backends[0].open),
        (false, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn with_no_healthy_backend_a_connection_is_held_then_closed_unserved() {
    let bed = bed();
    let t0 = Instant::now();
    let joining = apiserver(1, Some("127.0.0.1"), t0, Some(3_000));
    bed.model.publish_views(NODE, vec![joining], vec![front(2)]);
    settle().await;

    let held = tokio::spawn({
        let model = bed.model.clone();
        async move {
            through_front(&model)
                .await
                .map(|p| p.process.label().to_string())
        }
    });
    tokio::time::sleep(HOLD - Duration::from_millis(100)).await;
    assert!(!held.is_finished(), "held for the hold");
    assert_eq!(the_front(&bed.model).held, 1);
    assert_eq!(held.await.unwrap(), None, "then closed unserved");
    let state = the_front(&bed.model);
    assert_eq!((state.held, state.refused, state.passed), (1, 1, 0));

    // Held past the moment a backend turns healthy: passed on at that check.
    let arrived = Instant::now();
    let passed = through_front(&bed.model)
        .await
        .expect("passed on once one is healthy");
    assert_eq!(label(&passed), "cp-1/apiserver-1#1");
    let waited = Instant::now() - arrived;
    assert!(
        waited < HOLD && Instant::now() >= t0 + Duration::from_millis(3_000),
        "passed at the first check after it was ready, {waited:?} later"
    );
    let state = the_front(&bed.model);
    assert_eq!((state.held, state.refused, state.passed), (2, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_refused_connect_takes_the_backend_out_and_tries_the_next() {
    let bed = bed();
    let t0 = Instant::now();
    let one = apiserver(1, Some("127.0.0.1"), t0, Some(0));
    let two = apiserver(2, Some("127.0.0.2"), t0, Some(0));
    bed.model
        .publish_views(NODE, vec![one, two.clone()], vec![front(3)]);
    settle().await;
    // The first backend exits between two checks: nothing listens at its address.
    bed.model.publish_views(NODE, vec![two], vec![front(3)]);
    let passed = through_front(&bed.model).await.expect("passed on");
    assert_eq!(label(&passed), "cp-1/apiserver-2#2");
    assert!(!the_front(&bed.model).backends[0].healthy);
}

#[tokio::test(start_paused = true)]
async fn a_stopped_front_stops_accepting_lets_its_connections_end_then_exits() {
    let mut bed = bed();
    let t0 = Instant::now();
    let backend = apiserver(1, Some("127.0.0.1"), t0, Some(0));
    bed.model
        .publish_views(NODE, vec![backend.clone()], vec![front(2)]);
    settle().await;
    let open = through_front(&bed.model).await.expect("passed on");

    bed.model
        .publish_views(NODE, vec![backend.clone()], vec![stopping(front(2))]);
    assert!(
        matches!(bed.model.route(), Route::Refuse),
        "nothing else listens on the node's address"
    );
    let state = the_front(&bed.model);
    assert!(!state.accepting && state.stopping && !state.exited);
    assert!(!open.cut.is_cancelled(), "its connection goes on");
    assert!(bed.kubelet.try_recv().is_err(), "not drained yet");
    drop(open);
    match bed.kubelet.try_recv() {
        Ok(NodeInput::ExitProcess { process, code, .. }) => {
            assert_eq!((process, code), (ProcessId(2), 0), "drained: it exits");
        }
        other => panic!("the kubelet was not told: {other:?}"),
    }

    // Another front, ended by the kubelet at its drain's end with a connection open.
    bed.model
        .publish_views(NODE, vec![backend.clone()], vec![front(3)]);
    settle().await;
    let open = through_front(&bed.model).await.expect("passed on");
    bed.model
        .publish_views(NODE, vec![backend.clone()], vec![stopping(front(3))]);
    bed.model.publish_views(NODE, vec![backend], vec![]);
    assert!(open.cut.is_cancelled(), "cut at its exit");
    drop(open);
    let gone = bed
        .model
        .fronts()
        .into_iter()
        .find(|f| f.process == ProcessId(3))
        .expect("still listed");
    assert!(gone.exited);
    assert_eq!((gone.passed, gone.cut), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn the_nodes_address_reaches_its_front_else_the_wildcard_else_nothing() {
    let bed = bed();
    let t0 = Instant::now();
    // A kube-apiserver on every address: the front's backend address reaches it too.
    let everywhere = apiserver(1, None, t0, Some(0));
    bed.model
        .publish_views(NODE, vec![everywhere.clone()], vec![front(2)]);
    settle().await;
    let passed = through_front(&bed.model).await.expect("passed on");
    assert_eq!(label(&passed), "cp-1/apiserver-1#1");

    bed.model
        .publish_views(NODE, vec![everywhere], vec![stopping(front(2))]);
    match bed.model.route() {
        Route::Process(p) => assert_eq!(p.label(), "cp-1/apiserver-1#1"),
        other => panic!("the wildcard's socket takes it: {other:?}"),
    }
    bed.model
        .publish_views(NODE, vec![], vec![stopping(front(2))]);
    assert!(matches!(bed.model.route(), Route::Refuse));
}
