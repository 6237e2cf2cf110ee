//! How a front comes by its listening socket, over real sockets: it checks its backends
//! before it listens (and listens anyway once its patience is spent); with no front to take
//! over from (no socket file, a stale one, a front that dies before it gives its socket) it
//! listens afresh; and connections the kernel queued on the old front's socket are served by
//! the new one even when the old one dies, which two fronts each listening afresh cannot do.

use std::net::SocketAddr;
use std::time::Duration;

use selfhost::{Front, FrontEvent, FrontFreshBecause, FrontListening, FrontOptions, FrontStopped};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::front::{A_VERSION, B_VERSION, connect, healthy, tls_sim, trust};
use crate::front_upgrade::{PATIENCE, free_address, options, socket_path, start, taken_over_from};

#[tokio::test]
async fn with_no_front_to_take_over_from_a_front_listens_afresh() {
    let a = tls_sim(A_VERSION).await;
    let trust = trust(&[&a]);

    // No socket file (its directory made).
    let path = socket_path(trust.dir.path());
    let front = start(options(free_address(), &a, &trust, &path))
        .await
        .unwrap();
    assert_eq!(
        front.start.listening,
        FrontListening::Fresh {
            why: FrontFreshBecause::NoSocketFile
        }
    );
    let mut conn = connect(front.addr, &trust.client).await.unwrap();
    assert_eq!(conn.version().await.as_deref(), Ok(A_VERSION));
    drop(conn);
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
    assert_eq!(
        mode & 0o777,
        0o600,
        "whoever can connect can take the socket: the owner only"
    );
    front.stop().await;

    // A stale file, its front gone: replaced, and served for the next front.
    let stale = trust.dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let front = start(options(free_address(), &a, &trust, &stale))
        .await
        .unwrap();
    assert_eq!(
        front.start.listening,
        FrontListening::Fresh {
            why: FrontFreshBecause::StaleSocketFile
        }
    );
    let next = start(options(front.addr, &a, &trust, &stale))
        .await
        .unwrap();
    assert_eq!(next.start.listening, taken_over_from(&stale));
    front.stop().await;
    next.stop().await;

    // A front that dies before it gives its socket.
    let dying = trust.dir.path().join("dying.sock");
    let listener = tokio::net::UnixListener::bind(&dying).unwrap();
    let dies = tokio::spawn(async move {
        let (mut conversation, _) = listener.accept().await.unwrap();
        let mut asked = [0u8; 64];
        let _ = tokio::io::AsyncReadExt::read(&mut conversation, &mut asked).await;
    });
    let front = start(options(free_address(), &a, &trust, &dying))
        .await
        .unwrap();
    dies.await.unwrap();
    assert!(
        matches!(
            &front.start.listening,
            FrontListening::Fresh {
                why: FrontFreshBecause::NoAnswer { detail }
            } if detail.contains("closed")
        ),
        "{:?}",
        front.start.listening
    );
    let mut conn = connect(front.addr, &trust.client).await.unwrap();
    assert_eq!(conn.version().await.as_deref(), Ok(A_VERSION));
    drop(conn);
    front.stop().await;
}
#[tokio::test]
async fn a_starting_front_listens_once_a_backend_is_healthy_or_its_patience_is_spent() {
    let a = tls_sim(A_VERSION).await;
    let trust = trust(&[&a]);
    let path = socket_path(trust.dir.path());
    a.set_health_check_failing("shutdown", true);
    let listen = free_address();
    let mut patient = options(listen, &a, &trust, &path);
    patient.start_patience = PATIENCE;
    let starting = tokio::spawn(start(patient));
    // While no backend is healthy, nothing listens.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!starting.is_finished());
    assert!(
        TcpStream::connect(listen).await.is_err(),
        "not listening yet"
    );
    a.set_health_check_failing("shutdown", false);
    let front = tokio::time::timeout(PATIENCE, starting)
        .await
        .expect("it listens once the backend is healthy")
        .unwrap()
        .unwrap();
    assert_eq!(front.start.found.ready, vec![a.address()]);
    assert!(front.start.found.waited >= Duration::from_millis(300));
    front
        .wait_for("serving at once", |events| healthy(events, &a))
        .await;
    let mut conn = connect(listen, &trust.client).await.unwrap();
    assert_eq!(conn.version().await.as_deref(), Ok(A_VERSION));
    drop(conn);
    front.stop().await;

    // None healthy within the patience: it listens anyway, holds a connection, then closes it.
    a.set_health_check_failing("shutdown", true);
    let mut impatient = options(free_address(), &a, &trust, &path);
    impatient.start_patience = Duration::from_millis(300);
    let began = Instant::now();
    let front = start(impatient).await.unwrap();
    assert!(began.elapsed() >= Duration::from_millis(300));
    assert!(front.start.found.ready.is_empty());
    let not_ready = &front.start.found.not_ready;
    assert_eq!(not_ready.len(), 1);
    assert!(not_ready[0].1.contains("HTTP"), "{not_ready:?}");
    let held = connect(front.addr, &trust.client).await;
    let answer = match held {
        Ok(mut conn) => conn.version().await,
        Err(e) => Err(e),
    };
    assert!(answer.is_err(), "held, then closed: {answer:?}");
    front
        .wait_for("said once", |events| events.contains(&FrontEvent::Closing))
        .await;
    front.stop().await;
}
/// A front on a thread and runtime of its own, which the test can stall and then kill as a
/// process dies: every socket it holds closed at once.
struct Doomed {
    addr: SocketAddr,
    stall: Option<tokio::sync::oneshot::Sender<()>>,
    stalled: std::sync::mpsc::Receiver<()>,
    die: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Doomed {
    fn start(options: FrontOptions) -> Doomed {
        let (bound, addr) = std::sync::mpsc::channel();
        let (stall, stall_asked) = tokio::sync::oneshot::channel::<()>();
        let (stalled_tx, stalled) = std::sync::mpsc::channel();
        let (die, death) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let front = Front::bind(options).await.unwrap();
                bound.send(front.local_addr().unwrap()).unwrap();
                // Pinned out here, it outlives the select: its sockets stay open while it
                // stalls.
                let run = front.run(CancellationToken::new(), |_: &FrontEvent| {});
                tokio::pin!(run);
                tokio::select! {
                    biased;
                    _ = stall_asked => {
                        // The thread blocks: nothing of this front runs, nothing is accepted.
                        stalled_tx.send(()).unwrap();
                        let _ = death.recv();
                    }
                    _ = &mut run => {}
                }
            });
            // Its tasks and sockets go with the runtime.
            drop(runtime);
        });
        Doomed {
            addr: addr.recv().unwrap(),
            stall: Some(stall),
            stalled,
            die,
            thread,
        }
    }

    fn stall(&mut self) {
        self.stall.take().unwrap().send(()).unwrap();
        self.stalled.recv_timeout(PATIENCE).unwrap();
    }

    fn kill(self) {
        self.die.send(()).unwrap();
        self.thread.join().unwrap();
    }
}

/// Connections the kernel completed and queued on `addr` while no front accepts, and then
/// `GET /version` on each once one does.
async fn queue_connections(
    addr: SocketAddr,
    client: &tokio_rustls::TlsConnector,
    n: usize,
) -> Vec<tokio::task::JoinHandle<Result<String, String>>> {
    let mut waiting = Vec::new();
    for _ in 0..n {
        let tcp = TcpStream::connect(addr)
            .await
            .expect("queued by the kernel");
        let client = client.clone();
        waiting.push(tokio::spawn(async move {
            crate::front::over(tcp, &client).await?.version().await
        }));
    }
    waiting
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_queued_when_the_old_front_dies_after_giving_its_socket_are_served() {
    let (a, b) = (tls_sim(A_VERSION).await, tls_sim(B_VERSION).await);
    let trust = trust(&[&a, &b]);
    let path = socket_path(trust.dir.path());
    let mut old = Doomed::start(options(free_address(), &a, &trust, &path));
    let new = Front::bind(options(old.addr, &b, &trust, &path))
        .await
        .unwrap();
    assert_eq!(new.start().listening, taken_over_from(&path));

    // The new front holds the socket and does not accept yet; the old one stalls, then dies
    // before it hears that the socket was taken, with connections waiting in the queue.
    old.stall();
    let waiting = queue_connections(old.addr, &trust.client, 20).await;
    old.kill();
    let cancel = CancellationToken::new();
    let running = tokio::spawn(new.run(cancel.clone(), |_: &FrontEvent| {}));
    for connection in waiting {
        let answer = tokio::time::timeout(PATIENCE, connection)
            .await
            .expect("answered")
            .unwrap();
        assert_eq!(answer.as_deref(), Ok(B_VERSION), "served by the new front");
    }
    cancel.cancel();
    assert_eq!(
        running.await.unwrap(),
        FrontStopped {
            cut: 0,
            handed_over: false
        }
    );
}

/// The oracle of the test above: the same story with two fronts that each bind afresh (with
/// `SO_REUSEPORT`, as without a hand-over socket) loses the connections the kernel queued on
/// the old front's socket, unless the `tcp_migrate_req` sysctl moves them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_hand_over_connections_queued_on_the_old_fronts_socket_are_lost() {
    let (a, b) = (tls_sim(A_VERSION).await, tls_sim(B_VERSION).await);
    let trust = trust(&[&a, &b]);
    let path = socket_path(trust.dir.path());
    let mut alone = options(free_address(), &a, &trust, &path);
    alone.handover = None;
    let mut old = Doomed::start(alone.clone());
    alone.listen = old.addr;
    alone.backends = vec![b.address()];
    let new = Front::bind(alone).await.unwrap();
    old.stall();
    let waiting = queue_connections(old.addr, &trust.client, 20).await;
    old.kill();
    let cancel = CancellationToken::new();
    let running = tokio::spawn(new.run(cancel.clone(), |_: &FrontEvent| {}));
    let mut lost = 0;
    for connection in waiting {
        let answer = tokio::time::timeout(PATIENCE, connection)
            .await
            .expect("answered or refused")
            .unwrap();
        if answer.is_err() {
            lost += 1;
        }
    }
    cancel.cancel();
    running.await.unwrap();
    let migrated = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_migrate_req")
        .is_ok_and(|v| v.trim() != "0");
    eprintln!("without the hand-over: {lost} of 20 queued connections lost");
    // The kernel spreads the 20 over both sockets by their ports: all 20 on the new one is a
    // chance of one in a million.
    assert!(
        migrated || lost > 0,
        "the kernel kept every queued connection"
    );
}

#[tokio::test]
async fn a_front_finding_no_backend_ready_does_not_replace_a_serving_one() {
    let (a, b) = (tls_sim(A_VERSION).await, tls_sim(B_VERSION).await);
    let trust_a = trust(&[&a]);
    let path = socket_path(trust_a.dir.path());
    let old = start(options(free_address(), &a, &trust_a, &path))
        .await
        .unwrap();
    // A new front that cannot reach its backend: it trusts only b's CA.
    let trust_b = trust(&[&b]);
    let mut wrong = options(old.addr, &a, &trust_b, &path);
    wrong.start_patience = Duration::from_millis(200);
    let starting = tokio::spawn(start(wrong));
    // Well past its patience, the old front still serves and has given nothing away.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(!starting.is_finished(), "it waits while a front serves");
    assert!(!old.said().contains(&FrontEvent::HandedOver));
    let mut conn = connect(old.addr, &trust_a.client).await.unwrap();
    assert_eq!(conn.version().await.as_deref(), Ok(A_VERSION));
    drop(conn);

    // Once the old front is stopped (its hand-over socket closed), it listens afresh.
    let addr = old.addr;
    old.stop().await;
    let new = tokio::time::timeout(PATIENCE, starting)
        .await
        .expect("it listens once no front serves")
        .unwrap()
        .unwrap();
    assert_eq!(
        new.start.listening,
        FrontListening::Fresh {
            why: FrontFreshBecause::StaleSocketFile
        }
    );
    assert!(new.start.found.ready.is_empty());
    assert!(
        new.start.found.not_ready[0].1.contains("TLS"),
        "{:?}",
        new.start.found
    );
    assert_eq!(new.addr, addr);
    new.stop().await;
}
