//! The hand-over of the listening socket between two fronts of one node, over the Unix socket
//! the serving front listens on (as HAProxy's seamless reload does). The serving front passes
//! its listening socket as an `SCM_RIGHTS` descriptor: both processes then hold the same
//! kernel socket, so when the old one closes its copy the socket, and every connection waiting
//! in its accept queue, stays with the new one. Closing a listener of its own would reset the
//! connections in its queue instead (with `SO_REUSEPORT`, unless the `tcp_migrate_req` sysctl
//! is set, which a front cannot rely on).
//!
//! The lines are `selfhost_core::front::handover`'s; here are the sockets.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use selfhost_core::front::handover::{MAX_LINE, Message, Refusal, answer};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use super::error::FrontError;

/// How long either side waits for the other's line: a live front answers at once.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// After a failed accept on the hand-over socket, the pause before accepting again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Why a front listens afresh rather than on a socket taken over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FreshBecause {
    /// It was given no hand-over socket.
    NoHandoverSocket,
    /// No file at the hand-over socket's path: no front ran there since the node booted.
    NoSocketFile,
    /// The file is there and nothing listens on it: the front that made it is gone. The file
    /// is replaced.
    StaleSocketFile,
    /// A front answered, but gave no socket (it stopped meanwhile, or spoke another protocol).
    NoAnswer {
        /// What went wrong.
        detail: String,
    },
}

impl std::fmt::Display for FreshBecause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FreshBecause::NoHandoverSocket => write!(f, "no hand-over socket"),
            FreshBecause::NoSocketFile => write!(f, "no front to take over from"),
            FreshBecause::StaleSocketFile => {
                write!(f, "the front that served the hand-over socket is gone")
            }
            FreshBecause::NoAnswer { detail } => {
                write!(
                    f,
                    "the front at the hand-over socket gave no socket: {detail}"
                )
            }
        }
    }
}

/// What asking at the hand-over socket gave.
#[derive(Debug)]
pub enum Asked {
    /// The serving front's listening socket, and the conversation to say [`confirm`] on once
    /// this front accepts on it.
    Given {
        /// The socket.
        listener: TcpListener,
        /// The open conversation.
        conversation: UnixStream,
    },
    /// No socket: listen afresh.
    Fresh(FreshBecause),
}

/// Whether a front serves at `path` (one told to stop has closed it).
pub async fn serving(path: &Path) -> bool {
    UnixStream::connect(path).await.is_ok()
}

/// Asks the front serving `path` for its socket listening on `listen`.
///
/// # Errors
/// The front there listens on another address: this front names the wrong one.
pub async fn ask(path: &Path, listen: SocketAddr) -> Result<Asked, FrontError> {
    use std::io::ErrorKind;
    let mut stream = match UnixStream::connect(path).await {
        Ok(stream) => stream,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Ok(Asked::Fresh(FreshBecause::NoSocketFile));
        }
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            return Ok(Asked::Fresh(FreshBecause::StaleSocketFile));
        }
        Err(e) => {
            return Ok(Asked::Fresh(FreshBecause::NoAnswer {
                detail: format!("cannot connect: {e}"),
            }));
        }
    };
    let no_answer = |detail: String| Ok(Asked::Fresh(FreshBecause::NoAnswer { detail }));
    match tokio::time::timeout(TIMEOUT, take(&mut stream, listen)).await {
        Err(_) => no_answer(format!("no answer within {} s", TIMEOUT.as_secs())),
        Ok(Err(detail)) => no_answer(detail),
        Ok(Ok(Reply::Given(listener))) => Ok(Asked::Given {
            listener,
            conversation: stream,
        }),
        Ok(Ok(Reply::Elsewhere(theirs))) => Err(FrontError::HandoverElsewhere {
            path: path.to_path_buf(),
            theirs,
            ours: listen,
        }),
    }
}

/// What the serving front answered.
enum Reply {
    Given(TcpListener),
    Elsewhere(SocketAddr),
}

/// Asks for the socket and receives it.
async fn take(stream: &mut UnixStream, listen: SocketAddr) -> Result<Reply, String> {
    stream
        .write_all(Message::Take { listen }.to_line().as_bytes())
        .await
        .map_err(|e| format!("cannot ask: {e}"))?;
    let (line, descriptors) = receive_line(stream).await?;
    match Message::parse(&line).map_err(|e| e.to_string())? {
        Message::Give { .. } => {
            let descriptor = descriptors
                .into_iter()
                .next()
                .ok_or("it answered without a socket")?;
            let listener = listening_socket(descriptor)?;
            let given = listener
                .local_addr()
                .map_err(|e| format!("the socket given has no address: {e}"))?;
            if given != listen {
                return Ok(Reply::Elsewhere(given));
            }
            Ok(Reply::Given(listener))
        }
        Message::Refuse(Refusal::Elsewhere { listen: theirs }) => Ok(Reply::Elsewhere(theirs)),
        other => Err(format!("it answered {other:?}")),
    }
}

/// The listening TCP socket a received descriptor is.
fn listening_socket(descriptor: OwnedFd) -> Result<TcpListener, String> {
    let listening = rustix::net::sockopt::socket_acceptconn(&descriptor)
        .map_err(|e| format!("the descriptor given is not a socket: {e}"))?;
    let stream = rustix::net::sockopt::socket_type(&descriptor)
        .is_ok_and(|t| t == rustix::net::SocketType::STREAM);
    if !listening || !stream {
        return Err("the descriptor given is not a listening TCP socket".into());
    }
    let listener = std::net::TcpListener::from(descriptor);
    // The flag belongs to the socket both processes share; the old front's runtime set it
    // already, and tokio needs it.
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot use the socket given: {e}"))?;
    TcpListener::from_std(listener).map_err(|e| format!("cannot use the socket given: {e}"))
}

/// Tells the front that gave its socket that this one accepts on it: it stops accepting. When
/// it is gone meanwhile, nothing is lost: the socket is this front's alone.
pub async fn confirm(mut conversation: UnixStream) {
    let said = tokio::time::timeout(
        TIMEOUT,
        conversation.write_all(Message::Taken.to_line().as_bytes()),
    )
    .await;
    if !matches!(said, Ok(Ok(()))) {
        tracing::debug!("the front that gave its socket hears no more: it is gone");
    }
}

/// Serves `server` until `stop`, giving `socket` (listening on `listen`) to the first front
/// that asks for it and says it took it. Returns whether that happened; the serving front
/// then stops accepting.
pub async fn serve(
    server: UnixListener,
    socket: Arc<TcpListener>,
    listen: SocketAddr,
    stop: CancellationToken,
) -> bool {
    loop {
        let mut conversation = tokio::select! {
            () = stop.cancelled() => return false,
            accepted = server.accept() => match accepted {
                Ok((conversation, _)) => conversation,
                Err(error) => {
                    tracing::debug!(%error, "accept on the hand-over socket failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        if !same_user(&conversation) {
            tracing::warn!("refused a hand-over to a process of another user");
            continue;
        }
        // One conversation at a time: a socket is given once. A starting front that dies or
        // never confirms leaves this one accepting as before.
        let taken = tokio::select! {
            () = stop.cancelled() => return false,
            taken = tokio::time::timeout(TIMEOUT, give(&mut conversation, &socket, listen)) => taken,
        };
        match taken {
            Ok(Ok(true)) => return true,
            Ok(Ok(false)) => {}
            Ok(Err(detail)) => tracing::debug!(%detail, "a hand-over ended without a taker"),
            Err(_) => tracing::debug!("a hand-over ended without a taker: no answer in time"),
        }
    }
}

/// Whether the process at the other end runs as this one's user: only a front like this one
/// may take the node's API socket.
fn same_user(conversation: &UnixStream) -> bool {
    let ours = rustix::process::geteuid().as_raw();
    conversation
        .peer_cred()
        .is_ok_and(|peer| peer.uid() == ours)
}

/// Answers one starting front: whether it took the socket.
async fn give(
    conversation: &mut UnixStream,
    socket: &TcpListener,
    listen: SocketAddr,
) -> Result<bool, String> {
    let (line, _) = receive_line(conversation).await?;
    let asked = Message::parse(&line).map_err(|e| e.to_string())?;
    let reply = answer(listen, &asked).ok_or_else(|| format!("it said {asked:?}"))?;
    if !matches!(reply, Message::Give { .. }) {
        conversation
            .write_all(reply.to_line().as_bytes())
            .await
            .map_err(|e| format!("cannot answer: {e}"))?;
        return Ok(false);
    }
    send_with(conversation, &reply.to_line(), socket.as_fd()).await?;
    let (line, _) = receive_line(conversation).await?;
    Ok(Message::parse(&line).map_err(|e| e.to_string())? == Message::Taken)
}

/// Sends `line` with `descriptor` riding on its first byte.
async fn send_with(
    conversation: &mut UnixStream,
    line: &str,
    descriptor: BorrowedFd<'_>,
) -> Result<(), String> {
    let bytes = line.as_bytes();
    let stream = &*conversation;
    let sent = stream
        .async_io(Interest::WRITABLE, || {
            let descriptors = [descriptor];
            let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
            let mut control = SendAncillaryBuffer::new(&mut space);
            if !control.push(SendAncillaryMessage::ScmRights(&descriptors)) {
                return Err(std::io::Error::other("no room for the descriptor"));
            }
            Ok(rustix::net::sendmsg(
                stream,
                &[IoSlice::new(bytes)],
                &mut control,
                SendFlags::NOSIGNAL,
            )?)
        })
        .await
        .map_err(|e| format!("cannot give the socket: {e}"))?;
    // The descriptor went with the first byte; the rest of the line is plain.
    if let Some(rest) = bytes.get(sent..).filter(|r| !r.is_empty()) {
        conversation
            .write_all(rest)
            .await
            .map_err(|e| format!("cannot give the socket: {e}"))?;
    }
    Ok(())
}

/// Reads one line, and the descriptors that came with it (closed on exec).
async fn receive_line(stream: &UnixStream) -> Result<(String, Vec<OwnedFd>), String> {
    let mut got = Vec::new();
    let mut descriptors = Vec::new();
    // The other side sends one line and waits: nothing follows it to be read by mistake.
    while !got.contains(&b'\n') {
        if got.len() >= MAX_LINE {
            return Err(format!("a line longer than {MAX_LINE} bytes"));
        }
        let mut chunk = [0u8; MAX_LINE];
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let (read, came) = stream
            .async_io(Interest::READABLE, || {
                let mut control = RecvAncillaryBuffer::new(&mut space);
                let message = rustix::net::recvmsg(
                    stream,
                    &mut [IoSliceMut::new(&mut chunk)],
                    &mut control,
                    RecvFlags::CMSG_CLOEXEC,
                )?;
                let came: Vec<OwnedFd> = control
                    .drain()
                    .filter_map(|m| match m {
                        RecvAncillaryMessage::ScmRights(fds) => Some(fds),
                        _ => None,
                    })
                    .flatten()
                    .collect();
                Ok((message.bytes, came))
            })
            .await
            .map_err(|e| format!("cannot read: {e}"))?;
        descriptors.extend(came);
        if read == 0 {
            return Err("it closed the conversation".into());
        }
        got.extend_from_slice(chunk.get(..read).unwrap_or(&chunk));
    }
    let line = String::from_utf8_lossy(&got).into_owned();
    Ok((line, descriptors))
}
