//! How a front comes to hold its listening socket: taken over from the front serving the
//! hand-over socket, else bound afresh; and the hand-over socket it serves to the next front.
//!
//! Fronts starting at once take turns: each holds an exclusive lock on a file beside the
//! hand-over socket from the moment it asks until its own hand-over socket is in place, so the
//! second one asks the first. Its own socket is bound beside the path first and renamed over it
//! (one atomic step) only once it holds a listening socket; until this front says it took the
//! socket (when it starts accepting), the serving front keeps accepting, so a front that fails
//! or dies on its way costs nothing.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::net::{TcpListener, TcpSocket, UnixListener, UnixStream};
use tokio::time::Instant;

use super::error::FrontError;
use super::handover::{self, Asked, FreshBecause};

/// The accept queue's length, as `TcpListener::bind`'s.
const BACKLOG: u32 = 1024;
/// How long a front waits for another starting one to finish: a start takes at most one
/// conversation, and a few file operations.
const LOCK_PATIENCE: Duration = Duration::from_secs(15);
/// How often the lock is tried meanwhile.
const LOCK_RETRY: Duration = Duration::from_millis(20);

/// How a front came to hold its listening socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listening {
    /// It took the listening socket of the front that served the hand-over socket: no
    /// connection waiting in its queue is lost.
    TakenOver {
        /// The hand-over socket.
        path: PathBuf,
    },
    /// It bound the address itself (with `SO_REUSEPORT`, beside a kube-apiserver started with
    /// `--permit-port-sharing` that may still listen there).
    Fresh {
        /// Why it took no socket over.
        why: FreshBecause,
    },
}

/// The sockets of a front about to run.
#[derive(Debug)]
pub struct Held {
    /// Where it accepts.
    pub listener: TcpListener,
    /// Where it gives `listener` to the next front.
    pub server: Option<UnixListener>,
    /// The conversation with the front it took `listener` from, to say it took it.
    pub conversation: Option<UnixStream>,
    /// How it came by `listener`.
    pub listening: Listening,
}

/// The longest path a Unix socket can be bound at (`sun_path` holds 108 bytes, its NUL
/// included).
const MAX_SOCKET_PATH: usize = 107;
/// What this front binds beside the hand-over socket before it renames it into place.
const NEXT: &str = "next";

/// Checks the hand-over socket's path and makes its directory.
pub fn prepare(path: &Path) -> Result<(), FrontError> {
    let max = MAX_SOCKET_PATH - NEXT.len() - 1;
    if path.as_os_str().is_empty() || path.as_os_str().len() > max {
        return Err(FrontError::HandoverPath {
            path: path.to_path_buf(),
            max,
        });
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|source| FrontError::HandoverDir {
        dir: dir.to_path_buf(),
        source,
    })
}

/// A listening socket on `listen`, and the hand-over socket at `handover` when given.
pub async fn acquire(listen: SocketAddr, handover: Option<&Path>) -> Result<Held, FrontError> {
    let Some(path) = handover else {
        return Ok(Held {
            listener: bind_fresh(listen)?,
            server: None,
            conversation: None,
            listening: Listening::Fresh {
                why: FreshBecause::NoHandoverSocket,
            },
        });
    };
    let lock = lock(path).await?;
    let next = beside(path, NEXT);
    let serving = |source| FrontError::HandoverSocket {
        path: path.to_path_buf(),
        source,
    };
    // Left by a front that died on its way: nobody else makes it without the lock.
    remove_if_there(&next).map_err(serving)?;
    let server = UnixListener::bind(&next).map_err(serving)?;
    // Whoever can connect can take the node's API socket: the owner only. (The serving front
    // also checks each peer's user.)
    std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o600)).map_err(serving)?;
    let held = async {
        let (listener, conversation, listening) = match handover::ask(path, listen).await? {
            Asked::Given {
                listener,
                conversation,
            } => (
                listener,
                Some(conversation),
                Listening::TakenOver {
                    path: path.to_path_buf(),
                },
            ),
            Asked::Fresh(why) => (bind_fresh(listen)?, None, Listening::Fresh { why }),
        };
        // Replaces the serving front's path (or a stale file) in one step: a front asking
        // later reaches this one.
        std::fs::rename(&next, path).map_err(serving)?;
        Ok(Held {
            listener,
            server: Some(server),
            conversation,
            listening,
        })
    }
    .await;
    if held.is_err() {
        let _ = std::fs::remove_file(&next);
    }
    drop(lock);
    held
}

/// Binds `listen` with `SO_REUSEPORT`.
fn bind_fresh(listen: SocketAddr) -> Result<TcpListener, FrontError> {
    let error = |e| FrontError::listen(listen, e);
    let socket = if listen.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(error)?;
    socket.set_reuseaddr(true).map_err(error)?;
    socket.set_reuseport(true).map_err(error)?;
    socket.bind(listen).map_err(error)?;
    socket.listen(BACKLOG).map_err(error)
}

/// The exclusive lock of the fronts starting with the hand-over socket `path`, held until
/// dropped (and by the kernel, until this process ends).
async fn lock(path: &Path) -> Result<std::fs::File, FrontError> {
    let lock_path = beside(path, "lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|source| FrontError::HandoverSocket {
            path: lock_path.clone(),
            source,
        })?;
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {}
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(FrontError::HandoverSocket {
                    path: lock_path,
                    source,
                });
            }
        }
        if started.elapsed() >= LOCK_PATIENCE {
            return Err(FrontError::HandoverBusy {
                path: path.to_path_buf(),
                waited: LOCK_PATIENCE,
            });
        }
        tokio::time::sleep(LOCK_RETRY).await;
    }
}

/// `path` with `.suffix` added to its file name.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(".");
    name.push(suffix);
    PathBuf::from(name)
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
