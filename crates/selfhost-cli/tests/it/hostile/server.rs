//! A tiny hostile HTTP server: it answers `/readyz` and `/version` as a kube-apiserver would
//! (unless told otherwise), and every other request — the lists and watches the tool makes —
//! with the junk a broken proxy, a wrong address or an overloaded server produces.
//!
//! HTTP/1.1 by hand on a `TcpListener`, one response per connection (`Connection: close`), so
//! that what goes on the wire is exactly what the case says.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server does with the requests a case is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Junk {
    /// `200 application/json` whose body is not JSON.
    MalformedJson,
    /// A `Content-Length` of 4096, a valid beginning, then the connection closes.
    Truncated,
    /// Well-formed JSON of the wrong kind (a ConfigMap where a list was asked for).
    WrongKind,
    /// A JSON list padded to 48 MiB that turns into garbage at its very end.
    Enormous,
    /// An endless body: bytes keep coming and the JSON never ends.
    Endless,
    /// Accepts, reads the request, and never answers.
    Silent,
    /// A web page, for every path including the health endpoints.
    WebPage,
    /// 401 Unauthorized for every path including the health endpoints.
    Unauthorized,
    /// 403 Forbidden for the API, health endpoints open (as RBAC leaves them).
    Forbidden,
    /// 500 for the API, health endpoints fine.
    ServerError,
    /// `/readyz` never answers.
    SilentHealth,
}

/// A running hostile server; it stops when the runtime that runs it stops.
pub struct HostileServer {
    /// Where it listens.
    pub addr: SocketAddr,
}

impl HostileServer {
    /// Starts serving on a free port of 127.0.0.1 on the current runtime.
    pub async fn start(junk: Junk) -> HostileServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, junk));
            }
        });
        HostileServer { addr }
    }

    /// A kubeconfig for it (plain HTTP, no credentials).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hostile\n  cluster:\n    server: http://{}\n\
             users:\n- name: hostile\n  user: {{}}\ncontexts:\n- name: hostile\n  context:\n    cluster: hostile\n    user: hostile\n\
             current-context: hostile\n",
            self.addr
        )
    }
}

const READYZ: &str = "[+]ping ok\n[+]etcd ok\nreadyz check passed\n";
const VERSION: &str = r#"{"major":"1","minor":"33","gitVersion":"v1.33.1","gitCommit":"0","gitTreeState":"clean","buildDate":"2025-05-15T00:00:00Z","goVersion":"go1.24","compiler":"gc","platform":"linux/amd64"}"#;

fn status(code: u16, reason: &str) -> String {
    format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"{reason}","reason":"{reason}","code":{code}}}"#
    )
}

async fn respond(stream: &mut TcpStream, code: u16, content_type: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {code} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body).await;
    let _ = stream.shutdown().await;
}

/// Reads the request head and returns its path (with query); `None` if the client went away.
async fn read_path(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 || head.len() > 64 * 1024 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    text.lines()
        .next()?
        .split_whitespace()
        .nth(1)
        .map(str::to_string)
}

/// Holds the connection open without answering, until the client gives up.
async fn stay_silent(stream: &mut TcpStream) {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(600), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return,
        }
    }
}

async fn serve(mut stream: TcpStream, junk: Junk) {
    let Some(path) = read_path(&mut stream).await else {
        return;
    };
    let health = path.starts_with("/readyz") || path.starts_with("/livez");
    let version = path.starts_with("/version");
    match junk {
        Junk::WebPage => {
            return respond(
                &mut stream,
                200,
                "text/html",
                b"<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>",
            )
            .await;
        }
        Junk::Unauthorized => {
            return respond(
                &mut stream,
                401,
                "application/json",
                status(401, "Unauthorized").as_bytes(),
            )
            .await;
        }
        Junk::SilentHealth if health => return stay_silent(&mut stream).await,
        _ if health => return respond(&mut stream, 200, "text/plain", READYZ.as_bytes()).await,
        _ if version => {
            return respond(&mut stream, 200, "application/json", VERSION.as_bytes()).await;
        }
        _ => {}
    }
    match junk {
        Junk::MalformedJson | Junk::SilentHealth => {
            respond(
                &mut stream,
                200,
                "application/json",
                br#"{"kind":"DaemonSetList","items":[{"metadata":{"name":"#,
            )
            .await
        }
        Junk::Truncated => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n";
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream
                .write_all(br#"{"kind":"DaemonSetList","apiVersion":"apps/v1","metadata":{"resourceVersion":"1"},"items":["#)
                .await;
            let _ = stream.shutdown().await;
        }
        Junk::WrongKind => {
            respond(
                &mut stream,
                200,
                "application/json",
                br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"surprise","namespace":"kube-system"},"data":{"hello":"world"}}"#,
            )
            .await
        }
        Junk::Enormous => {
            let mut body = br#"{"kind":"DaemonSetList","apiVersion":"apps/v1","metadata":{"resourceVersion":"1"},"items":[],"padding":""#.to_vec();
            body.resize(48 * 1024 * 1024, b'x');
            body.extend_from_slice(b"\" ]]] not json at the end");
            respond(&mut stream, 200, "application/json", &body).await
        }
        Junk::Endless => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let chunk = vec![b' '; 64 * 1024];
            let framed = [format!("{:x}\r\n", chunk.len()).into_bytes(), chunk, b"\r\n".to_vec()].concat();
            let _ = stream
                .write_all(b"1\r\n[\r\n")
                .await;
            // Until the client hangs up (or ten minutes, should it never).
            let until = tokio::time::Instant::now() + Duration::from_secs(600);
            while tokio::time::Instant::now() < until {
                if stream.write_all(&framed).await.is_err() {
                    return;
                }
            }
        }
        Junk::Silent => stay_silent(&mut stream).await,
        Junk::Forbidden => {
            respond(
                &mut stream,
                403,
                "application/json",
                status(403, "Forbidden").as_bytes(),
            )
            .await
        }
        Junk::ServerError => {
            respond(
                &mut stream,
                500,
                "application/json",
                status(500, "InternalError").as_bytes(),
            )
            .await
        }
        Junk::WebPage | Junk::Unauthorized => {}
    }
}
