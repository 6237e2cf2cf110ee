//! The front's own upgrade over real sockets: a new front takes the listening socket of the
//! front serving the hand-over socket, and the old one stops accepting, lets its connections
//! finish and idles until stopped; probers through the fronts, one opening a connection per
//! request and one keeping its connection, lose no request.
//!
//! To tell the fronts apart, the old one passes connections to backend a only and the new one
//! to backend b only: an answer's version says which front served it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use selfhost::{
    Front, FrontError, FrontEvent, FrontFreshBecause, FrontListening, FrontOptions, FrontStart,
    FrontStopped,
};
use selfhost_sim::SimServer;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::front::{A_VERSION, B_VERSION, Trust, connect, tls_sim, trust};

/// How long a test waits for what must happen.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);
/// The probers' pace.
const PROBE_EVERY: Duration = Duration::from_millis(20);

/// A front running in this process, and what it said.
pub(crate) struct Running {
    pub(crate) addr: SocketAddr,
    pub(crate) start: FrontStart,
    events: Arc<Mutex<Vec<FrontEvent>>>,
    pub(crate) cancel: CancellationToken,
    pub(crate) task: tokio::task::JoinHandle<FrontStopped>,
}

pub(crate) fn options(
    listen: SocketAddr,
    backend: &SimServer,
    trust: &Trust,
    handover: &Path,
) -> FrontOptions {
    let mut options = FrontOptions::new(listen, vec![backend.address()]);
    options.ca_file = trust.ca_file.clone();
    options.check_interval = Duration::from_millis(50);
    options.hold = Duration::from_millis(300);
    options.drain = Duration::from_secs(30);
    options.handover = Some(handover.to_path_buf());
    options
}

/// Binds a front and runs it.
pub(crate) async fn start(options: FrontOptions) -> Result<Running, FrontError> {
    let front = Front::bind(options).await?;
    let addr = front.local_addr().unwrap();
    let start = front.start().clone();
    let events = Arc::new(Mutex::new(Vec::new()));
    let heard = events.clone();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(front.run(cancel.clone(), move |e: &FrontEvent| {
        heard.lock().unwrap().push(e.clone());
    }));
    Ok(Running {
        addr,
        start,
        events,
        cancel,
        task,
    })
}

impl Running {
    pub(crate) fn said(&self) -> Vec<FrontEvent> {
        self.events.lock().unwrap().clone()
    }

    pub(crate) async fn wait_for(&self, what: &str, done: impl Fn(&[FrontEvent]) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done(&self.said()) {
            assert!(
                Instant::now() < deadline,
                "{what}: not within {PATIENCE:?}; the front said {:?}",
                self.said()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub(crate) async fn stop(self) -> FrontStopped {
        self.cancel.cancel();
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("the front ends once stopped")
            .unwrap()
    }
}

pub(crate) fn handed_over(events: &[FrontEvent]) -> bool {
    events.contains(&FrontEvent::HandedOver)
}

pub(crate) fn taken_over_from(path: &Path) -> FrontListening {
    FrontListening::TakenOver {
        path: path.to_path_buf(),
    }
}

/// One request of a prober: when it began, and the version answered or what failed.
#[derive(Debug, Clone)]
struct Probe {
    began: Instant,
    answer: Result<String, String>,
}

/// A client through a front, a request every [`PROBE_EVERY`].
struct Prober {
    log: Arc<Mutex<Vec<Probe>>>,
    stop: CancellationToken,
    /// For a keep-alive prober: close the connection and open another.
    rotate: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Prober {
    /// `keep_alive`: one connection, kept across requests (a new one only after a failure or
    /// when rotated); else a new connection (TCP and TLS) per request.
    fn start(addr: SocketAddr, client: tokio_rustls::TlsConnector, keep_alive: bool) -> Prober {
        let log = Arc::new(Mutex::new(Vec::new()));
        let (stop, rotate) = (CancellationToken::new(), CancellationToken::new());
        let task = tokio::spawn({
            let (log, stop, rotate) = (log.clone(), stop.clone(), rotate.clone());
            async move {
                let mut kept = None;
                let mut rotated = false;
                while !stop.is_cancelled() {
                    if rotate.is_cancelled() && !rotated {
                        rotated = true;
                        kept = None;
                    }
                    let began = Instant::now();
                    let mut conn = match kept.take() {
                        Some(conn) => Ok(conn),
                        None => connect(addr, &client).await,
                    };
                    let answer = match &mut conn {
                        Ok(conn) => conn.version().await,
                        Err(e) => Err(e.clone()),
                    };
                    if keep_alive && answer.is_ok() {
                        kept = conn.ok();
                    }
                    log.lock().unwrap().push(Probe { began, answer });
                    tokio::time::sleep(PROBE_EVERY).await;
                }
            }
        });
        Prober {
            log,
            stop,
            rotate,
            task,
        }
    }

    fn probes(&self) -> Vec<Probe> {
        self.log.lock().unwrap().clone()
    }

    /// Waits until `n` requests begun after `since` were answered `version`.
    async fn wait_answered(&self, n: usize, version: &str, since: Instant) {
        let deadline = Instant::now() + PATIENCE;
        let count = |probes: &[Probe]| {
            probes
                .iter()
                .filter(|p| p.began >= since && p.answer.as_deref() == Ok(version))
                .count()
        };
        while count(&self.probes()) < n {
            assert!(
                Instant::now() < deadline,
                "not {n} answers from {version} within {PATIENCE:?}: {:?}",
                self.probes().last()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn stop(self) -> Vec<Probe> {
        self.stop.cancel();
        self.task.await.unwrap();
        Arc::into_inner(self.log).unwrap().into_inner().unwrap()
    }
}

fn failures(probes: &[Probe]) -> Vec<&Probe> {
    probes.iter().filter(|p| p.answer.is_err()).collect()
}

/// An address of this machine no one listens on (as far as anyone can tell).
pub(crate) fn free_address() -> SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    probe.local_addr().unwrap()
}

pub(crate) fn socket_path(dir: &Path) -> PathBuf {
    dir.join("run").join("selfhost-front").join("handover.sock")
}
#[tokio::test]
async fn the_fronts_own_upgrade_loses_no_request_of_either_kind() {
    let (a, b) = (tls_sim(A_VERSION).await, tls_sim(B_VERSION).await);
    let trust = trust(&[&a, &b]);
    let path = socket_path(trust.dir.path());
    let old = start(options("127.0.0.1:0".parse().unwrap(), &a, &trust, &path))
        .await
        .unwrap();
    assert_eq!(
        old.start.listening,
        FrontListening::Fresh {
            why: FrontFreshBecause::NoSocketFile
        }
    );
    assert_eq!(old.start.found.ready, vec![a.address()], "checked first");
    let per_request = Prober::start(old.addr, trust.client.clone(), false);
    let keep_alive = Prober::start(old.addr, trust.client.clone(), true);
    let began = Instant::now();
    per_request.wait_answered(5, A_VERSION, began).await;
    keep_alive.wait_answered(5, A_VERSION, began).await;

    // The new front, on the same address and hand-over socket.
    let new = start(options(old.addr, &b, &trust, &path)).await.unwrap();
    assert_eq!(new.start.listening, taken_over_from(&path));
    assert_eq!(new.start.found.ready, vec![b.address()]);
    old.wait_for("the old front hands over", handed_over).await;
    let handed = Instant::now();
    per_request.wait_answered(10, B_VERSION, handed).await;
    // The old front's connection keeps working: it is never cut by the hand-over.
    keep_alive.wait_answered(10, A_VERSION, handed).await;

    // The old front is stopped: it accepted nothing since, and drains what it has.
    old.cancel.cancel();
    let stopped = Instant::now();
    per_request.wait_answered(10, B_VERSION, stopped).await;
    keep_alive.wait_answered(10, A_VERSION, stopped).await;
    // The keep-alive client opens its next connection: the new front's.
    keep_alive.rotate.cancel();
    let rotated = Instant::now();
    keep_alive.wait_answered(10, B_VERSION, rotated).await;
    let old_stopped = tokio::time::timeout(PATIENCE, old.task)
        .await
        .expect("the old front ends once its last connection closed")
        .unwrap();
    assert_eq!(
        old_stopped,
        FrontStopped {
            cut: 0,
            handed_over: true
        }
    );

    let per_request = per_request.stop().await;
    let keep_alive = keep_alive.stop().await;
    assert!(
        failures(&per_request).is_empty(),
        "{:?}",
        failures(&per_request)
    );
    assert!(
        failures(&keep_alive).is_empty(),
        "{:?}",
        failures(&keep_alive)
    );
    let after: Vec<_> = per_request.iter().filter(|p| p.began >= handed).collect();
    assert!(
        after.iter().all(|p| p.answer.as_deref() == Ok(B_VERSION)),
        "every new connection after the hand-over is the new front's: {after:?}"
    );
    let kept: Vec<_> = keep_alive.iter().filter(|p| p.began < rotated).collect();
    assert!(
        kept.iter().all(|p| p.answer.as_deref() == Ok(A_VERSION)),
        "one connection, the old front's, until it was closed: {kept:?}"
    );
    eprintln!(
        "own upgrade: {} requests on new connections, {} on a kept one, 0 failed",
        per_request.len(),
        keep_alive.len()
    );
    assert_eq!(
        new.stop().await,
        FrontStopped {
            cut: 0,
            handed_over: false
        }
    );
}

#[tokio::test]
async fn a_front_that_handed_over_idles_until_stopped_and_the_next_takes_over_from_the_new_one() {
    let (a, b) = (tls_sim(A_VERSION).await, tls_sim(B_VERSION).await);
    let trust = trust(&[&a, &b]);
    let path = socket_path(trust.dir.path());
    let old = start(options("127.0.0.1:0".parse().unwrap(), &a, &trust, &path))
        .await
        .unwrap();
    let new = start(options(old.addr, &b, &trust, &path)).await.unwrap();
    old.wait_for("drained and idle", |events| {
        events.ends_with(&[FrontEvent::HandedOver, FrontEvent::Drained { cut: 0 }])
    })
    .await;
    let mut conn = connect(new.addr, &trust.client).await.unwrap();
    assert_eq!(conn.version().await.as_deref(), Ok(B_VERSION));
    // It does not exit by itself: a static pod's front that exits is started again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!old.task.is_finished(), "idle until stopped");
    let asked = Instant::now();
    let addr = old.addr;
    assert_eq!(
        old.stop().await,
        FrontStopped {
            cut: 0,
            handed_over: true
        }
    );
    assert!(asked.elapsed() < Duration::from_secs(1), "it ends at once");
    assert_eq!(conn.version().await.as_deref(), Ok(B_VERSION));

    // The new front serves the hand-over socket in turn.
    let next = start(options(addr, &a, &trust, &path)).await.unwrap();
    assert_eq!(next.start.listening, taken_over_from(&path));
    new.wait_for("the new front hands over", handed_over).await;
    let mut fresh = connect(next.addr, &trust.client).await.unwrap();
    assert_eq!(fresh.version().await.as_deref(), Ok(A_VERSION));
    assert_eq!(
        conn.version().await.as_deref(),
        Ok(B_VERSION),
        "the new front's connection goes on"
    );
    drop((conn, fresh));
    new.stop().await;
    next.stop().await;
}

#[tokio::test]
async fn two_fronts_starting_at_once_take_the_socket_in_turn_and_lose_nothing() {
    let (a, b) = (tls_sim(A_VERSION).await, tls_sim(B_VERSION).await);
    let trust = trust(&[&a, &b]);
    let path = socket_path(trust.dir.path());
    let old = start(options("127.0.0.1:0".parse().unwrap(), &a, &trust, &path))
        .await
        .unwrap();
    let probes = Prober::start(old.addr, trust.client.clone(), false);
    probes.wait_answered(5, A_VERSION, Instant::now()).await;

    // Each in a task of its own, as two processes would be.
    let first = tokio::spawn(start(options(old.addr, &b, &trust, &path)));
    let second = tokio::spawn(start(options(old.addr, &b, &trust, &path)));
    let (first, second) = (
        first.await.unwrap().unwrap(),
        second.await.unwrap().unwrap(),
    );
    assert_eq!(first.start.listening, taken_over_from(&path));
    assert_eq!(second.start.listening, taken_over_from(&path));
    old.wait_for("the old front hands over", handed_over).await;
    let deadline = Instant::now() + PATIENCE;
    while !(handed_over(&first.said()) || handed_over(&second.said())) {
        assert!(Instant::now() < deadline, "one took over from the other");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        !(handed_over(&first.said()) && handed_over(&second.said())),
        "one of them holds the socket"
    );
    let settled = Instant::now();
    probes.wait_answered(10, B_VERSION, settled).await;
    old.stop().await;
    let probes = probes.stop().await;
    assert!(failures(&probes).is_empty(), "{:?}", failures(&probes));
    first.stop().await;
    second.stop().await;
}
#[tokio::test]
async fn a_front_is_not_taken_over_for_another_address() {
    let a = tls_sim(A_VERSION).await;
    let trust = trust(&[&a]);
    let path = socket_path(trust.dir.path());
    let old = start(options(free_address(), &a, &trust, &path))
        .await
        .unwrap();
    let elsewhere = free_address();
    let error = start(options(elsewhere, &a, &trust, &path))
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(error, FrontError::HandoverElsewhere { theirs, ours, .. }
            if theirs == old.addr && ours == elsewhere),
        "{error}"
    );
    assert!(error.to_string().contains("--listen"), "{error}");
    assert!(!handed_over(&old.said()));
    let mut conn = connect(old.addr, &trust.client).await.unwrap();
    assert_eq!(conn.version().await.as_deref(), Ok(A_VERSION));
    drop(conn);
    // The old front's hand-over socket is still its own: a front for its address takes over.
    let new = start(options(old.addr, &a, &trust, &path)).await.unwrap();
    assert_eq!(new.start.listening, taken_over_from(&path));
    old.stop().await;
    new.stop().await;
}
