//! The front's own upgrade under probers: successive new fronts take over the one serving,
//! while clients make requests at a pace, some on a new connection (TCP and TLS) per
//! request, some on kept-alive connections; failed requests of each kind. Two ways: the
//! hand-over of the listening socket, and two fronts each binding afresh with `SO_REUSEPORT`
//! and the old one stopped (what a front without a hand-over socket does).
//!
//! Keep-alive clients keep each connection for [`KEPT_FOR`] requests, less than the old
//! front's drain: a connection older than the drain is cut at its end whichever way.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rustls::pki_types::ServerName;
use selfhost::{Front, FrontEvent, FrontOptions, FrontStopped};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;

pub const KEPT_FOR: u64 = 25;
const DRAIN: Duration = Duration::from_secs(2);
/// Between two upgrades.
const PACE: Duration = Duration::from_millis(500);

/// Requests made and failed, of one kind.
#[derive(Default)]
pub struct Counts {
    made: AtomicU64,
    failed: AtomicU64,
}

impl Counts {
    pub fn made(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }

    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// One way of upgrading: requests and failures on new connections, and on kept ones.
pub struct Figures {
    pub fresh: Arc<Counts>,
    pub kept: Arc<Counts>,
}

async fn connect(tls: &TlsConnector, addr: SocketAddr) -> Result<TlsStream<TcpStream>, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    tls.connect(name, tcp).await.map_err(|e| e.to_string())
}

/// `GET /version`; a 200 with its whole body, or what went wrong.
async fn version(conn: &mut TlsStream<TcpStream>) -> Result<(), String> {
    conn.write_all(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = conn.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed".into());
        }
        got.extend_from_slice(&chunk[..n]);
        let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&got[..at]).to_lowercase();
        if !head.starts_with("http/1.1 200") {
            return Err(head);
        }
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .ok_or("no content-length")?;
        if got.len() >= at + 4 + length {
            return Ok(());
        }
    }
}

fn client(
    tls: TlsConnector,
    addr: SocketAddr,
    kept: bool,
    every: Duration,
    counts: Arc<Counts>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut conn = None;
        let mut used = 0;
        while !stop.is_cancelled() {
            if !kept || used == KEPT_FOR {
                conn = None;
                used = 0;
            }
            let answer = async {
                if conn.is_none() {
                    conn = Some(connect(&tls, addr).await?);
                }
                match conn.as_mut() {
                    Some(c) => version(c).await,
                    None => Err("no connection".to_string()),
                }
            }
            .await;
            used += 1;
            counts.made.fetch_add(1, Ordering::Relaxed);
            if answer.is_err() {
                counts.failed.fetch_add(1, Ordering::Relaxed);
                conn = None;
            }
            tokio::time::sleep(every).await;
        }
    })
}

struct Running {
    cancel: CancellationToken,
    handed_over: Arc<tokio::sync::Notify>,
    task: JoinHandle<FrontStopped>,
}

async fn start(mut options: FrontOptions) -> (Running, SocketAddr) {
    options.drain = DRAIN;
    options.check_interval = Duration::from_millis(50);
    let front = Front::bind(options).await.expect("a front starts");
    let addr = front.local_addr().unwrap();
    let cancel = CancellationToken::new();
    let handed_over = Arc::new(tokio::sync::Notify::new());
    let told = handed_over.clone();
    let task = tokio::spawn(front.run(cancel.clone(), move |e: &FrontEvent| {
        if *e == FrontEvent::HandedOver {
            told.notify_one();
        }
    }));
    (
        Running {
            cancel,
            handed_over,
            task,
        },
        addr,
    )
}

/// How hard the clients push, and how many upgrades.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    pub upgrades: usize,
    /// Clients of each kind.
    pub clients: usize,
    /// The pause after each request of a client.
    pub every: Duration,
}

/// The upgrades under the load; with the hand-over socket in `dir`, or each front binding
/// afresh.
pub async fn run(
    tls: &TlsConnector,
    backend: SocketAddr,
    ca_file: &Path,
    dir: &Path,
    handover: bool,
    load: Load,
) -> Figures {
    let path = dir.join(if handover {
        "handover.sock"
    } else {
        "unused.sock"
    });
    let options = |listen: SocketAddr| {
        let mut o = FrontOptions::new(listen, vec![backend]);
        o.ca_file = ca_file.to_path_buf();
        o.handover = handover.then(|| path.clone());
        o
    };
    let (mut serving, addr) = start(options("127.0.0.1:0".parse().unwrap())).await;
    let (fresh, kept) = (Arc::new(Counts::default()), Arc::new(Counts::default()));
    let stop = CancellationToken::new();
    let mut tasks = Vec::new();
    for _ in 0..load.clients {
        for (kept, counts) in [(false, &fresh), (true, &kept)] {
            tasks.push(client(
                tls.clone(),
                addr,
                kept,
                load.every,
                counts.clone(),
                stop.clone(),
            ));
        }
    }
    tokio::time::sleep(PACE).await;
    let mut stopping = Vec::new();
    for _ in 0..load.upgrades {
        let (next, _) = start(options(addr)).await;
        if handover {
            serving.handed_over.notified().await;
        }
        serving.cancel.cancel();
        stopping.push(serving.task);
        serving = next;
        tokio::time::sleep(PACE).await;
    }
    stop.cancel();
    for task in tasks {
        task.await.unwrap();
    }
    for task in stopping {
        task.await.unwrap();
    }
    serving.cancel.cancel();
    serving.task.await.unwrap();
    Figures { fresh, kept }
}
