//! Raw HTTP/1.1 over TCP: one request per new connection, or several on one kept-alive
//! connection, to see exactly what a connection gets and when it is closed.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// What a request got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An answer with this status.
    Status(u16),
    /// The connection was reset or closed without an answer.
    Closed,
    /// No answer in time.
    TimedOut,
}

/// One request's outcome and timing.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    /// When it was sent.
    pub sent: Instant,
    /// When it ended.
    pub done: Instant,
    /// What it got.
    pub outcome: Outcome,
}

impl Answer {
    /// Whether it got a 200.
    pub fn ok(&self) -> bool {
        self.outcome == Outcome::Status(200)
    }
}

fn request(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: sim\r\nAccept: application/json\r\n\r\n")
}

/// Reads one response; `None` when the connection ended first.
async fn read_response(reader: &mut BufReader<TcpStream>) -> Option<u16> {
    let mut line = String::new();
    if reader.read_line(&mut line).await.ok()? == 0 {
        return None;
    }
    let status: u16 = line.split_whitespace().nth(1)?.parse().ok()?;
    let mut length = 0usize;
    let mut chunked = false;
    loop {
        line.clear();
        if reader.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        let lower = header.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().ok()?;
        }
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        }
    }
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line).await.ok()?;
            let size = usize::from_str_radix(line.trim(), 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).await.ok()?;
            if size == 0 {
                break;
            }
        }
    } else {
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await.ok()?;
    }
    Some(status)
}

/// `GET path` on a new connection.
pub async fn fresh(addr: SocketAddr, path: &str, timeout: Duration) -> Answer {
    let sent = Instant::now();
    let attempt = async {
        let stream = TcpStream::connect(addr).await.ok()?;
        let mut reader = BufReader::new(stream);
        reader
            .get_mut()
            .write_all(request(path).as_bytes())
            .await
            .ok()?;
        read_response(&mut reader).await
    };
    let outcome = match tokio::time::timeout(timeout, attempt).await {
        Ok(Some(code)) => Outcome::Status(code),
        Ok(None) => Outcome::Closed,
        Err(_) => Outcome::TimedOut,
    };
    Answer {
        sent,
        done: Instant::now(),
        outcome,
    }
}

/// One kept-alive connection.
pub struct KeepAlive {
    reader: BufReader<TcpStream>,
}

impl KeepAlive {
    /// Opens a connection (the router decides its process now).
    pub async fn open(addr: SocketAddr) -> KeepAlive {
        let stream = TcpStream::connect(addr).await.expect("connects");
        KeepAlive {
            reader: BufReader::new(stream),
        }
    }

    /// `GET path` on this connection.
    pub async fn get(&mut self, path: &str, timeout: Duration) -> Outcome {
        let attempt = async {
            self.reader
                .get_mut()
                .write_all(request(path).as_bytes())
                .await
                .ok()?;
            read_response(&mut self.reader).await
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Some(code)) => Outcome::Status(code),
            Ok(None) => Outcome::Closed,
            Err(_) => Outcome::TimedOut,
        }
    }

    /// Whether the server closes this (idle) connection within `timeout`.
    pub async fn closed_within(&mut self, timeout: Duration) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(timeout, self.reader.read(&mut byte)).await,
            Ok(Ok(0) | Err(_))
        )
    }
}

/// A watch on its own connection: its events arrive as chunks.
pub struct Watch {
    reader: BufReader<TcpStream>,
}

impl Watch {
    /// Starts watching `path` (with `?watch=true`); `None` unless the server answers 200.
    pub async fn open(addr: SocketAddr, path: &str) -> Option<Watch> {
        let stream = TcpStream::connect(addr).await.ok()?;
        let mut reader = BufReader::new(stream);
        reader
            .get_mut()
            .write_all(request(path).as_bytes())
            .await
            .ok()?;
        let mut line = String::new();
        reader.read_line(&mut line).await.ok()?;
        if line.split_whitespace().nth(1) != Some("200") {
            return None;
        }
        loop {
            line.clear();
            if reader.read_line(&mut line).await.ok()? == 0 {
                return None;
            }
            if line.trim_end().is_empty() {
                return Some(Watch { reader });
            }
        }
    }

    /// The next event's text within `timeout`; `Err(())` when the stream ended.
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<String>, ()> {
        let read = async {
            let mut line = String::new();
            if self.reader.read_line(&mut line).await.map_err(|_| ())? == 0 {
                return Err(());
            }
            let size = usize::from_str_radix(line.trim(), 16).map_err(|_| ())?;
            if size == 0 {
                return Err(());
            }
            let mut chunk = vec![0; size + 2];
            self.reader.read_exact(&mut chunk).await.map_err(|_| ())?;
            Ok(String::from_utf8_lossy(&chunk).into_owned())
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(Ok(text)) => Ok(Some(text)),
            Ok(Err(())) => Err(()),
            Err(_) => Ok(None),
        }
    }
}
