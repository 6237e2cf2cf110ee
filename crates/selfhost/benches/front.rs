//! Front benchmark: what the node-local API front (`selfhost::Front`) costs against direct
//! connections to the same backend, a simulated kube-apiserver serving TLS. The front passes
//! bytes through, so the client negotiates TLS with the backend either way.
//!
//! - **Added latency**: sequential `GET /version`, on one kept-alive connection and with a new
//!   connection (TCP and TLS handshake) per request, direct and through the front; p50 and p99
//!   of each and the difference. Direct and front requests alternate in blocks, after a warm-up.
//! - **Throughput**: concurrent clients, each on its own kept-alive connection, sending a fixed
//!   number of requests; requests per second direct and through the front (best of two rounds).
//! - **Memory**: `VmRSS` of a separate `selfhost front` process (the real binary) idle, and
//!   right after the same concurrent load through it, with its peak (`VmHWM`). Without the
//!   binary, the growth of this process's RSS across the load through the in-process front is
//!   given instead, and said so.
//!
//! - **Own upgrade**: successive new fronts take over the serving one while clients make
//!   requests (paced, then not), on a new connection per request or on kept-alive ones; failed
//!   requests of each kind, with the hand-over of the listening socket and with two fronts
//!   each binding afresh on `SO_REUSEPORT` (see `front/upgrade.rs`).
//!
//! The latency and throughput figures use the front in this process; the client, the front and
//! the backend share the machine's cores.
//!
//! Not a test. Run: `cargo build --release -p selfhost-cli && cargo bench -p selfhost --bench front`
//! Options after `--`: `--requests N` (2000), `--clients N` (64), `--per-client N` (200),
//! `--upgrades N` (10), `--upgrade-clients N` (8 of each kind), `--upgrade-only`.
//! The binary is looked for next to the benchmark's own target directory, or at `$SELFHOST_BIN`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)] // a benchmark, not library code

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use selfhost::{Front, FrontOptions};
use selfhost_sim::{SimServer, SimServerOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

#[path = "front/upgrade.rs"]
mod upgrade;

/// The requirements: added latency at p50, and the front's resident memory.
const TARGET_P50_ADDED_US: f64 = 100.0;
const TARGET_RSS_MIB: f64 = 20.0;
/// Requests each way before switching between direct and the front.
const BLOCK: usize = 100;

struct Options {
    requests: usize,
    clients: usize,
    per_client: usize,
    upgrades: usize,
    upgrade_clients: usize,
    upgrade_only: bool,
}

fn options() -> Options {
    let mut o = Options {
        requests: 2_000,
        clients: 64,
        per_client: 200,
        upgrades: 10,
        upgrade_clients: 8,
        upgrade_only: false,
    };
    let args: Vec<String> = std::env::args().collect();
    o.upgrade_only = args.iter().any(|a| a == "--upgrade-only");
    for pair in args.windows(2) {
        let value = || pair[1].parse().expect("a number");
        match pair[0].as_str() {
            "--requests" => o.requests = value(),
            "--clients" => o.clients = value(),
            "--per-client" => o.per_client = value(),
            "--upgrades" => o.upgrades = value(),
            "--upgrade-clients" => o.upgrade_clients = value(),
            _ => {}
        }
    }
    o
}

/// A TLS client trusting the backend's CA, verifying 127.0.0.1 as kubectl would.
#[derive(Clone)]
struct Client {
    tls: TlsConnector,
}

impl Client {
    fn new(ca_pem: &str) -> Client {
        let ca: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(ca_pem.as_bytes())
            .collect::<Result<_, _>>()
            .expect("the backend's CA is PEM");
        let config = selfhost::front_tls_trusting(&ca, std::path::Path::new("the backend's CA"))
            .expect("a usable CA");
        Client {
            tls: TlsConnector::from(Arc::new(config)),
        }
    }

    async fn connect(&self, addr: SocketAddr) -> std::io::Result<Conn> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let tls = self.tls.connect(name, tcp).await?;
        Ok(Conn {
            tls,
            buf: Vec::with_capacity(4096),
        })
    }
}

struct Conn {
    tls: tokio_rustls::client::TlsStream<TcpStream>,
    buf: Vec<u8>,
}

impl Conn {
    /// `GET /version` on this connection, kept alive; the answer must be a 200.
    async fn version(&mut self) {
        self.tls
            .write_all(b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .expect("sends");
        self.buf.clear();
        let mut chunk = [0u8; 4096];
        let (head_end, length) = loop {
            let n = self.tls.read(&mut chunk).await.expect("reads");
            assert!(n > 0, "closed before the answer");
            self.buf.extend_from_slice(&chunk[..n]);
            if let Some(at) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..at]).to_lowercase();
                assert!(head.starts_with("http/1.1 200"), "answered {head}");
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .expect("a content-length");
                break (at + 4, length);
            }
        };
        while self.buf.len() < head_end + length {
            let n = self.tls.read(&mut chunk).await.expect("reads the body");
            assert!(n > 0, "closed in the body");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// Waits until a request through `addr` is answered (the front takes connections only once
/// the backend's `/readyz` has passed).
async fn wait_ready(client: &Client, addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let attempt = tokio::time::timeout(Duration::from_secs(2), async {
            let mut conn = client.connect(addr).await.ok()?;
            tokio::spawn(async move {
                conn.version().await;
            })
            .await
            .ok()
        })
        .await;
        if matches!(attempt, Ok(Some(()))) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{addr} did not answer within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// p50 and p99 of each side, in µs.
struct Latency {
    direct: (f64, f64),
    front: (f64, f64),
}

impl Latency {
    fn from(mut direct: Vec<Duration>, mut front: Vec<Duration>) -> Latency {
        direct.sort();
        front.sort();
        let pair = |s: &[Duration]| (micros(percentile(s, 50.0)), micros(percentile(s, 99.0)));
        Latency {
            direct: pair(&direct),
            front: pair(&front),
        }
    }

    fn added(&self) -> (f64, f64) {
        (self.front.0 - self.direct.0, self.front.1 - self.direct.1)
    }
}

/// `total` sequential requests each way, alternating between direct and front in blocks of
/// `block`; `one(addr)` times one request.
async fn alternate<F, Fut>(
    direct: SocketAddr,
    front: SocketAddr,
    total: usize,
    block: usize,
    mut one: F,
) -> Latency
where
    F: FnMut(SocketAddr) -> Fut,
    Fut: Future<Output = Duration>,
{
    let (mut d, mut f) = (Vec::with_capacity(total), Vec::with_capacity(total));
    while d.len() < total {
        let n = block.min(total - d.len());
        for _ in 0..n {
            d.push(one(direct).await);
        }
        for _ in 0..n {
            f.push(one(front).await);
        }
    }
    Latency::from(d, f)
}

/// Sequential requests on one kept-alive connection each way.
async fn keep_alive_latency(
    client: &Client,
    direct: SocketAddr,
    front: SocketAddr,
    requests: usize,
) -> Latency {
    let mut conns = [
        client.connect(direct).await.unwrap(),
        client.connect(front).await.unwrap(),
    ];
    for conn in &mut conns {
        for _ in 0..200 {
            conn.version().await;
        }
    }
    let [mut d_conn, mut f_conn] = conns;
    let (mut d, mut f) = (Vec::with_capacity(requests), Vec::with_capacity(requests));
    while d.len() < requests {
        let n = BLOCK.min(requests - d.len());
        for (conn, times) in [(&mut d_conn, &mut d), (&mut f_conn, &mut f)] {
            for _ in 0..n {
                let started = Instant::now();
                conn.version().await;
                times.push(started.elapsed());
            }
        }
    }
    Latency::from(d, f)
}

/// Sequential requests, each on a new connection (TCP, TLS handshake, request).
async fn new_connection_latency(
    client: &Client,
    direct: SocketAddr,
    front: SocketAddr,
    requests: usize,
) -> Latency {
    for addr in [direct, front] {
        for _ in 0..100 {
            client.connect(addr).await.unwrap().version().await;
        }
    }
    alternate(direct, front, requests, BLOCK, |addr| async move {
        let started = Instant::now();
        client.connect(addr).await.unwrap().version().await;
        started.elapsed()
    })
    .await
}

/// `clients` concurrent clients, each on its own kept-alive connection, `per_client`
/// requests each: requests per second, from the first connection to the last answer.
async fn throughput(client: &Client, addr: SocketAddr, clients: usize, per_client: usize) -> f64 {
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut conn = client.connect(addr).await.unwrap();
                for _ in 0..per_client {
                    conn.version().await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (clients * per_client) as f64 / started.elapsed().as_secs_f64()
}

/// The `selfhost` binary built with this benchmark's profile (`target/<profile>/selfhost`,
/// next to `target/<profile>/deps/<this bench>`) or `$SELFHOST_BIN`; `None` if not built.
fn binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SELFHOST_BIN") {
        return Some(path.into());
    }
    let exe = std::env::current_exe().ok()?;
    let path = exe.parent()?.parent()?.join("selfhost");
    path.exists().then_some(path)
}

/// A field of /proc/<pid>/status in KiB (`VmRSS`, `VmHWM`).
fn status_kib(pid: &str, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("reads status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a size in kB")
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// What the memory figures are of.
struct Memory {
    of: &'static str,
    idle_kib: u64,
    after_kib: u64,
    peak_kib: Option<u64>,
}

/// A `selfhost front` process before `backend`, on a free port; killed when dropped.
struct FrontProcess {
    child: Child,
    addr: SocketAddr,
}

impl FrontProcess {
    fn spawn(binary: &Path, backend: SocketAddr, ca_file: &Path) -> FrontProcess {
        // A free port: bind port 0, read it, let it go (the front needs a fixed one).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new(binary)
            .arg("front")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--backend")
            .arg(backend.to_string())
            .arg("--ca-file")
            .arg(ca_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawns selfhost front");
        FrontProcess { child, addr }
    }
}

impl Drop for FrontProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pass(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

fn main() {
    let o = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let self_rss_before_kib = status_kib("self", "VmRSS:");
    runtime.block_on(async {
        let sim = SimServer::start(SimServerOptions {
            tls: true,
            git_version: "v1.33.1".into(),
            ..SimServerOptions::default()
        })
        .await
        .expect("simulator starts");
        let ca_pem = sim.ca_pem().expect("a TLS simulator has a CA").to_string();
        let dir = tempfile::tempdir().unwrap();
        let ca_file = dir.path().join("ca.crt");
        std::fs::write(&ca_file, &ca_pem).unwrap();
        let client = Client::new(&ca_pem);
        let direct = sim.address();
        if o.upgrade_only {
            own_upgrade(&client, direct, &ca_file, dir.path(), &o).await;
            sim.shutdown().await;
            return;
        }

        // Memory of a separate front process first, while this process is still small.
        let binary = binary();
        let process_memory = binary.as_deref().map(|binary| {
            let process = FrontProcess::spawn(binary, direct, &ca_file);
            (process, binary.display().to_string())
        });
        let mut memory = None;
        if let Some((process, _)) = &process_memory {
            wait_ready(&client, process.addr).await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let pid = process.child.id().to_string();
            let idle_kib = status_kib(&pid, "VmRSS:");
            throughput(&client, process.addr, o.clients, o.per_client).await;
            memory = Some(Memory {
                of: "`selfhost front` process",
                idle_kib,
                after_kib: status_kib(&pid, "VmRSS:"),
                peak_kib: Some(status_kib(&pid, "VmHWM:")),
            });
        }
        drop(process_memory);

        let mut options = FrontOptions::new("127.0.0.1:0".parse().unwrap(), vec![direct]);
        options.ca_file = ca_file.clone();
        let front = Front::bind(options).await.expect("the front starts");
        let through = front.local_addr().unwrap();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(front.run(cancel.clone(), |_| {}));
        wait_ready(&client, through).await;

        println!(
            "Node-local API front: one simulated TLS kube-apiserver ({direct}), the front at {through}"
        );
        println!(
            "{} sequential GET /version each way, alternating in blocks; {} clients x {} requests for throughput",
            o.requests, o.clients, o.per_client
        );
        let keep = keep_alive_latency(&client, direct, through, o.requests).await;
        let fresh = new_connection_latency(&client, direct, through, o.requests).await;

        let mut best = (0.0f64, 0.0f64);
        // Warm-up: the runtime's threads, the backend's connections.
        throughput(&client, direct, o.clients, o.per_client / 4).await;
        throughput(&client, through, o.clients, o.per_client / 4).await;
        for _ in 0..2 {
            best.0 = best.0.max(throughput(&client, direct, o.clients, o.per_client).await);
            best.1 = best.1.max(throughput(&client, through, o.clients, o.per_client).await);
        }
        if memory.is_none() {
            memory = Some(Memory {
                of: "this process, from before the simulator and the front (no binary)",
                idle_kib: self_rss_before_kib,
                after_kib: status_kib("self", "VmRSS:"),
                peak_kib: None,
            });
        }
        cancel.cancel();
        task.await.unwrap();

        println!();
        println!("| Latency (µs)                | direct p50 | front p50 | added p50 | direct p99 | front p99 | added p99 |");
        println!("|-----------------------------|-----------:|----------:|----------:|-----------:|----------:|----------:|");
        for (what, l) in [
            ("keep-alive connection", &keep),
            ("new connection per request", &fresh),
        ] {
            let (a50, a99) = l.added();
            println!(
                "| {what:<27} | {:>10.0} | {:>9.0} | {:>+9.0} | {:>10.0} | {:>9.0} | {:>+9.0} |",
                l.direct.0, l.front.0, a50, l.direct.1, l.front.1, a99
            );
        }
        println!();
        println!(
            "Throughput, {} concurrent keep-alive clients (best of 2): direct {:.0} req/s, \
             through the front {:.0} req/s, ratio {:.2}",
            o.clients,
            best.0,
            best.1,
            best.1 / best.0
        );
        let memory = memory.expect("measured one way or the other");
        println!();
        println!(
            "Memory of the {}: idle {:.1} MiB, after the load {:.1} MiB{}",
            memory.of,
            mib(memory.idle_kib),
            mib(memory.after_kib),
            memory
                .peak_kib
                .map(|k| format!(", peak {:.1} MiB", mib(k)))
                .unwrap_or_default()
        );

        let rss = mib(memory.peak_kib.unwrap_or(memory.after_kib));
        let rss_label = if memory.peak_kib.is_some() {
            "front process peak RSS"
        } else {
            "RSS growth of this process"
        };
        let rss_value = if memory.peak_kib.is_some() {
            rss
        } else {
            mib(memory.after_kib.saturating_sub(memory.idle_kib))
        };
        println!();
        println!("| Requirement                       | Target    | Measured   | Verdict |");
        println!("|-----------------------------------|-----------|------------|---------|");
        for (what, l) in [("keep-alive", &keep), ("new connection", &fresh)] {
            let added = l.added().0;
            println!(
                "| {:<33} | < {TARGET_P50_ADDED_US:.0} µs  | {added:>7.0} µs | {}    |",
                format!("added p50, {what}"),
                pass(added < TARGET_P50_ADDED_US)
            );
        }
        println!(
            "| {rss_label:<33} | < {TARGET_RSS_MIB:.0} MiB  | {rss_value:>6.1} MiB | {}    |",
            pass(rss_value < TARGET_RSS_MIB)
        );
        own_upgrade(&client, direct, &ca_file, dir.path(), &o).await;
        sim.shutdown().await;
    });
}

/// The own-upgrade figures, printed.
async fn own_upgrade(
    client: &Client,
    backend: SocketAddr,
    ca_file: &Path,
    dir: &Path,
    o: &Options,
) {
    println!();
    println!(
        "Own upgrade under probers: {} upgrades; clients opening a connection per request and \
         keep-alive clients (a connection each {} requests), {} of each kind pausing 20 ms \
         after each request, then {} of each pausing none",
        o.upgrades,
        upgrade::KEPT_FOR,
        o.upgrade_clients,
        4 * o.upgrade_clients
    );
    println!();
    println!(
        "| Upgrade                                    | clients | new conn: requests | failed | keep-alive: requests | failed |"
    );
    println!(
        "|--------------------------------------------|--------:|-------------------:|-------:|---------------------:|-------:|"
    );
    for (clients, every) in [
        (o.upgrade_clients, Duration::from_millis(20)),
        (4 * o.upgrade_clients, Duration::ZERO),
    ] {
        let load = upgrade::Load {
            upgrades: o.upgrades,
            clients,
            every,
        };
        for (what, handover) in [
            ("hand-over of the listening socket", true),
            ("both bind afresh (SO_REUSEPORT), old stops", false),
        ] {
            let f = upgrade::run(&client.tls, backend, ca_file, dir, handover, load).await;
            println!(
                "| {what:<42} | {:>7} | {:>18} | {:>6} | {:>20} | {:>6} |",
                2 * clients,
                f.fresh.made(),
                f.fresh.failed(),
                f.kept.made(),
                f.kept.failed()
            );
        }
    }
}
