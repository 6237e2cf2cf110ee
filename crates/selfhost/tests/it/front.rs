//! The node-local API front over real sockets, before two simulated kube-apiservers serving
//! TLS with their own CAs (the front's CA file holds both): connections pass through, a
//! backend that fails `/readyz` or stops gets no new ones while its open ones keep going, and
//! with none healthy a connection is held, then closed, and that is said once.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use selfhost::{Front, FrontError, FrontEvent, FrontOptions, FrontStopped};
use selfhost_sim::{SimServer, SimServerOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub(crate) const A_VERSION: &str = "v1.33.1";
pub(crate) const B_VERSION: &str = "v1.34.0";

pub(crate) async fn tls_sim(version: &str) -> SimServer {
    SimServer::start(SimServerOptions {
        tls: true,
        git_version: version.into(),
        ..SimServerOptions::default()
    })
    .await
    .expect("simulator starts")
}

/// The CAs of some simulated backends: in a file for fronts, and trusted by a TLS client.
pub(crate) struct Trust {
    pub(crate) ca_file: std::path::PathBuf,
    pub(crate) client: tokio_rustls::TlsConnector,
    pub(crate) dir: tempfile::TempDir,
}

pub(crate) fn trust(sims: &[&SimServer]) -> Trust {
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.crt");
    let bundle: String = sims.iter().map(|s| s.ca_pem().unwrap()).collect();
    std::fs::write(&ca_file, &bundle).unwrap();
    let ca: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(bundle.as_bytes())
        .collect::<Result<_, _>>()
        .unwrap();
    let config =
        selfhost::front_tls_trusting(&ca, std::path::Path::new("the backends' CAs")).unwrap();
    Trust {
        ca_file,
        client: tokio_rustls::TlsConnector::from(Arc::new(config)),
        dir,
    }
}

/// A new TLS connection to `addr`, verified as kubectl would (127.0.0.1).
pub(crate) async fn connect(
    addr: SocketAddr,
    client: &tokio_rustls::TlsConnector,
) -> Result<Conn, String> {
    let tcp = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    over(tcp, client).await
}

/// TLS over `tcp`, verified as kubectl would (127.0.0.1).
pub(crate) async fn over(
    tcp: TcpStream,
    client: &tokio_rustls::TlsConnector,
) -> Result<Conn, String> {
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let tls = client
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    Ok(Conn { tls })
}

/// Two backends, the front before them, and what the front said.
struct Bed {
    a: SimServer,
    b: SimServer,
    front: SocketAddr,
    events: Arc<Mutex<Vec<FrontEvent>>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<FrontStopped>,
    client: tokio_rustls::TlsConnector,
    _dir: tempfile::TempDir,
}

async fn bed(hold: Duration) -> Bed {
    let (a, b) = (tls_sim(A_VERSION).await, tls_sim(B_VERSION).await);
    let trust = trust(&[&a, &b]);
    let mut options = FrontOptions::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![a.address(), b.address()],
    );
    options.ca_file = trust.ca_file;
    options.check_interval = Duration::from_millis(50);
    options.hold = hold;
    options.drain = Duration::from_secs(5);
    let front = Front::bind(options).await.expect("the front starts");
    let addr = front.local_addr().unwrap();
    let events = Arc::new(Mutex::new(Vec::new()));
    let heard = events.clone();
    let cancel = CancellationToken::new();
    let task = tokio::spawn(front.run(cancel.clone(), move |e: &FrontEvent| {
        heard.lock().unwrap().push(e.clone());
    }));
    let bed = Bed {
        a,
        b,
        front: addr,
        events,
        cancel,
        task,
        client: trust.client,
        _dir: trust.dir,
    };
    bed.wait_for("both backends healthy", |events| {
        healthy(events, &bed.a) && healthy(events, &bed.b)
    })
    .await;
    bed
}

pub(crate) fn healthy(events: &[FrontEvent], sim: &SimServer) -> bool {
    let name = sim.address().to_string();
    events.iter().rev().find_map(|e| match e {
        FrontEvent::Healthy { backend } if *backend == name => Some(true),
        FrontEvent::Unhealthy { backend, .. } if *backend == name => Some(false),
        _ => None,
    }) == Some(true)
}

impl Bed {
    fn events(&self) -> Vec<FrontEvent> {
        self.events.lock().unwrap().clone()
    }

    async fn wait_for(&self, what: &str, done: impl Fn(&[FrontEvent]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&self.events()) {
            assert!(
                Instant::now() < deadline,
                "{what}: not within 10 s; the front said {:?}",
                self.events()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A new TLS connection through the front, verified as kubectl would (127.0.0.1).
    async fn connect(&self) -> Result<Conn, String> {
        connect(self.front, &self.client).await
    }

    /// `GET /version` on a new connection: the backend's gitVersion.
    async fn version_once(&self) -> Result<String, String> {
        self.connect().await?.version().await
    }

    async fn stop(self) -> FrontStopped {
        self.cancel.cancel();
        self.task.await.unwrap()
    }
}

pub(crate) struct Conn {
    tls: tokio_rustls::client::TlsStream<TcpStream>,
}

impl Conn {
    /// `GET /version` on this (kept-alive) connection: the backend's gitVersion.
    pub(crate) async fn version(&mut self) -> Result<String, String> {
        self.tls
            .write_all(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .map_err(|e| format!("send: {e}"))?;
        let mut got = Vec::new();
        let mut chunk = [0u8; 4096];
        let (head_end, length) = loop {
            let n = self
                .tls
                .read(&mut chunk)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err(format!("closed after {:?}", String::from_utf8_lossy(&got)));
            }
            got.extend_from_slice(&chunk[..n]);
            if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..at]).to_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .ok_or_else(|| format!("no content-length in {head}"))?;
                if !head.starts_with("http/1.1 200") {
                    return Err(format!("answered {head}"));
                }
                break (at + 4, length);
            }
        };
        while got.len() < head_end + length {
            let n = self
                .tls
                .read(&mut chunk)
                .await
                .map_err(|e| format!("read body: {e}"))?;
            if n == 0 {
                return Err("closed in the body".into());
            }
            got.extend_from_slice(&chunk[..n]);
        }
        let body: serde_json::Value =
            serde_json::from_slice(&got[head_end..head_end + length]).map_err(|e| e.to_string())?;
        Ok(body["gitVersion"].as_str().unwrap_or_default().to_string())
    }
}

/// A probe loop through the front, one new connection per request, until `stop`: the
/// versions answered and the failures, and a count of the requests made so far.
fn probe_loop(
    bed: &Arc<Bed>,
    stop: CancellationToken,
) -> (
    tokio::task::JoinHandle<Vec<Result<String, String>>>,
    Arc<std::sync::atomic::AtomicUsize>,
) {
    let bed = bed.clone();
    let made = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = made.clone();
    let task = tokio::spawn(async move {
        let mut results = Vec::new();
        while !stop.is_cancelled() {
            results.push(bed.version_once().await);
            count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        results
    });
    (task, made)
}

/// Waits until the probe loop has made `n` requests in all.
async fn wait_made(made: &std::sync::atomic::AtomicUsize, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while made.load(std::sync::atomic::Ordering::Relaxed) < n {
        assert!(
            Instant::now() < deadline,
            "the probe loop made fewer than {n} requests"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn connections_pass_through_with_tls_untouched_to_both_backends() {
    let bed = bed(Duration::from_secs(2)).await;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..10 {
        seen.insert(
            bed.version_once()
                .await
                .expect("a request through the front"),
        );
    }
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        vec![A_VERSION.to_string(), B_VERSION.to_string()],
        "new connections are spread over both"
    );
    assert_eq!(
        bed.stop().await,
        FrontStopped {
            cut: 0,
            handed_over: false
        }
    );
}

#[tokio::test]
async fn a_backend_failing_readyz_gets_no_new_connections_and_keeps_its_open_ones() {
    let bed = Arc::new(bed(Duration::from_secs(2)).await);
    // A kept-alive connection that reached a.
    let mut kept = loop {
        let mut conn = bed.connect().await.unwrap();
        if conn.version().await.unwrap() == A_VERSION {
            break conn;
        }
    };
    let stop = CancellationToken::new();
    let (probes, made) = probe_loop(&bed, stop.clone());

    // a starts its shutdown delay: /readyz fails while it still serves.
    bed.a.set_health_check_failing("shutdown", true);
    let a = bed.a.address().to_string();
    bed.wait_for("a unhealthy", |events| !healthy(events, &bed.a))
        .await;
    let after = bed.events().len();
    let mut since = Vec::new();
    for _ in 0..30 {
        since.push(bed.version_once().await);
    }
    assert!(
        since.iter().all(|r| r.as_deref() == Ok(B_VERSION)),
        "new connections go to b only: {since:?}"
    );
    assert_eq!(
        kept.version().await.as_deref(),
        Ok(A_VERSION),
        "the connection opened before keeps working"
    );

    // Then a stops altogether; b serves every new connection.
    bed.a.crash().await;
    for _ in 0..10 {
        assert_eq!(bed.version_once().await.as_deref(), Ok(B_VERSION));
    }
    // The probe loop runs on through a's crash.
    wait_made(&made, made.load(std::sync::atomic::Ordering::Relaxed) + 10).await;
    stop.cancel();
    let results = probes.await.unwrap();
    let failures: Vec<_> = results.iter().filter(|r| r.is_err()).collect();
    assert!(results.len() > 10, "the probe loop ran: {}", results.len());
    assert!(failures.is_empty(), "failed probes: {failures:?}");
    let unhealthy: Vec<_> = bed
        .events()
        .into_iter()
        .filter(|e| matches!(e, FrontEvent::Unhealthy { backend, .. } if *backend == a))
        .collect();
    assert_eq!(unhealthy.len(), 1, "said once: {unhealthy:?}");
    assert!(
        bed.events()[after..]
            .iter()
            .all(|e| !matches!(e, FrontEvent::Unavailable | FrontEvent::Closing)),
        "b stayed: {:?}",
        bed.events()
    );
    drop(kept);
    let bed = Arc::into_inner(bed).unwrap();
    assert_eq!(
        bed.stop().await,
        FrontStopped {
            cut: 0,
            handed_over: false
        }
    );
}

#[tokio::test]
async fn a_backend_that_stops_without_warning_costs_no_new_connection() {
    let bed = Arc::new(bed(Duration::from_secs(2)).await);
    let stop = CancellationToken::new();
    // Both backends are judged healthy first, then b goes: the next connection to it is
    // refused and passed to a at once, before a check sees b gone.
    bed.wait_for("both backends healthy", |events| {
        healthy(events, &bed.a) && healthy(events, &bed.b)
    })
    .await;
    let (probes, _) = probe_loop(&bed, stop.clone());
    bed.b.crash().await;
    for _ in 0..20 {
        assert_eq!(bed.version_once().await.as_deref(), Ok(A_VERSION));
    }
    stop.cancel();
    let results = probes.await.unwrap();
    let failures: Vec<_> = results.iter().filter(|r| r.is_err()).collect();
    assert!(failures.is_empty(), "failed probes: {failures:?}");
    bed.wait_for("b judged gone", |events| !healthy(events, &bed.b))
        .await;
}

#[tokio::test]
async fn with_no_healthy_backend_a_connection_is_held_then_closed_and_that_is_said_once() {
    let hold = Duration::from_millis(400);
    let bed = bed(hold).await;
    bed.a.set_health_check_failing("shutdown", true);
    bed.b.hold_down(true).await.unwrap();
    bed.wait_for("none healthy", |events| {
        events.last() == Some(&FrontEvent::Unavailable)
    })
    .await;

    for _ in 0..3 {
        let started = Instant::now();
        let result = bed.version_once().await;
        assert!(result.is_err(), "closed unserved: {result:?}");
        assert!(
            started.elapsed() >= hold,
            "held for {:?} before it was closed",
            started.elapsed()
        );
    }
    let closing = bed
        .events()
        .iter()
        .filter(|e| **e == FrontEvent::Closing)
        .count();
    assert_eq!(closing, 1, "said once: {:?}", bed.events());

    // A connection held while a backend comes back is served.
    let held = tokio::spawn({
        let (front, client) = (bed.front, bed.client.clone());
        async move {
            let tcp = TcpStream::connect(front).await.unwrap();
            let name = ServerName::try_from("127.0.0.1").unwrap();
            let tls = client.connect(name, tcp).await.map_err(|e| e.to_string())?;
            Conn { tls }.version().await
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    bed.a.set_health_check_failing("shutdown", false);
    assert_eq!(held.await.unwrap().as_deref(), Ok(A_VERSION));
    bed.wait_for("available again", |events| {
        events.contains(&FrontEvent::Available { closed: 3 })
    })
    .await;
    bed.b.hold_down(false).await.unwrap();
    bed.stop().await;
}

#[tokio::test]
async fn stopping_lets_open_connections_finish() {
    let bed = bed(Duration::from_secs(2)).await;
    let mut open = bed.connect().await.unwrap();
    open.version().await.unwrap();
    bed.cancel.cancel();
    // No new connection is accepted once stopped.
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(bed.front).await.is_ok() {
        assert!(Instant::now() < deadline, "still accepting");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        open.version().await.is_ok(),
        "the open connection still works"
    );
    assert!(!bed.task.is_finished(), "it waits for the open connection");
    drop(open);
    let stopped = tokio::time::timeout(Duration::from_secs(5), bed.task)
        .await
        .expect("it ends once the connection closed")
        .unwrap();
    assert_eq!(
        stopped,
        FrontStopped {
            cut: 0,
            handed_over: false
        }
    );
}

#[tokio::test]
async fn bad_input_is_refused_at_start_with_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let backend: SocketAddr = "127.0.0.1:1".parse().unwrap();
    let with = |ca: &std::path::Path, backends: Vec<SocketAddr>| {
        let mut o = FrontOptions::new(listen, backends);
        o.ca_file = ca.to_path_buf();
        o
    };
    let missing = dir.path().join("missing.crt");
    let not_pem = dir.path().join("not-pem.crt");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let good = dir.path().join("ca.crt");
    let sim = tls_sim(A_VERSION).await;
    std::fs::write(&good, sim.ca_pem().unwrap()).unwrap();

    let err = Front::bind(with(&good, vec![])).await.unwrap_err();
    assert!(matches!(err, FrontError::NoBackend), "{err}");
    let err = Front::bind(with(&missing, vec![backend]))
        .await
        .unwrap_err();
    assert!(matches!(err, FrontError::CaUnreadable { .. }), "{err}");
    assert!(err.to_string().contains("missing.crt"), "{err}");
    let err = Front::bind(with(&not_pem, vec![backend]))
        .await
        .unwrap_err();
    assert!(matches!(err, FrontError::CaNotPem { .. }), "{err}");
    assert!(err.to_string().contains("BEGIN CERTIFICATE"), "{err}");
    // A hand-over socket whose directory cannot be made: a file is where it would be.
    let mut options = with(&good, vec![backend]);
    options.handover = Some(not_pem.join("run").join("handover.sock"));
    let err = Front::bind(options).await.unwrap_err();
    assert!(matches!(err, FrontError::HandoverDir { .. }), "{err}");
    assert!(err.to_string().contains("--handover-socket"), "{err}");
    let mut options = with(&good, vec![backend]);
    options.handover = Some(dir.path().join("h".repeat(110)));
    let err = Front::bind(options).await.unwrap_err();
    assert!(
        matches!(err, FrontError::HandoverPath { max: 102, .. }),
        "{err}"
    );
    let taken = tokio::net::TcpListener::bind(listen).await.unwrap();
    let mut options = with(&good, vec![backend]);
    options.listen = taken.local_addr().unwrap();
    // Its backend never answers: it listens (and fails to) once the patience is spent.
    options.start_patience = Duration::from_millis(100);
    let err = Front::bind(options).await.unwrap_err();
    assert!(
        err.to_string().contains("another process listens there"),
        "{err}"
    );
    let root = selfhost::Error::from(err);
    assert_eq!(root.kind(), selfhost::ErrorKind::BadInput);
}
