//! Why the API front cannot start.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Why the API front cannot start: every cause is in what it was given or where it runs;
/// nothing was listened on, and a front it was to take over from keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    /// No backend was given.
    #[error(
        "no backend to pass connections to: give at least one --backend ADDR:PORT, a \
         kube-apiserver of this node on its own loopback port (e.g. 127.0.0.1:6444)"
    )]
    NoBackend,
    /// A backend is the front's own address.
    #[error(
        "backend {backend} is the address the front listens on: give the kube-apiservers' own \
         ports with --backend, not --listen's"
    )]
    BackendIsListen {
        /// The backend.
        backend: SocketAddr,
    },
    /// The CA file cannot be read.
    #[error(
        "cannot read the cluster CA {path}: {source}; give the CA that signed the \
         kube-apiservers' serving certificates with --ca-file (kubeadm's is \
         /etc/kubernetes/pki/ca.crt)"
    )]
    CaUnreadable {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The CA file holds no usable PEM certificate.
    #[error(
        "the cluster CA {path} holds no PEM certificate ({detail}): --ca-file wants the PEM \
         file that starts with -----BEGIN CERTIFICATE----- (kubeadm's is \
         /etc/kubernetes/pki/ca.crt)"
    )]
    CaNotPem {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        detail: String,
    },
    /// The server name the checks verify is not a DNS name or IP address.
    #[error(
        "cannot check the backends' certificates for {name:?}: it is not a DNS name or IP \
         address (--check-server-name)"
    )]
    ServerName {
        /// The name given.
        name: String,
    },
    /// The TLS client of the checks cannot be built.
    #[error("cannot set up TLS for the health checks: {0}")]
    Tls(#[from] rustls::Error),
    /// The listen address cannot be listened on.
    #[error("cannot listen on {addr}: {source}{hint}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
        /// How to fix it, when known.
        hint: &'static str,
    },
    /// The hand-over socket's path is empty, or too long for a Unix socket.
    #[error(
        "cannot serve a hand-over socket at {path:?}: give --handover-socket a path of at most \
         {max} bytes (a Unix socket's limit, less what the front binds beside it)"
    )]
    HandoverPath {
        /// The path given.
        path: PathBuf,
        /// The longest path it takes.
        max: usize,
    },
    /// The hand-over socket's directory cannot be made.
    #[error(
        "cannot make {dir}, the directory of the hand-over socket: {source}; give \
         --handover-socket a path in a directory this process can make and write"
    )]
    HandoverDir {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The hand-over socket, or its lock beside it, cannot be made there.
    #[error(
        "cannot serve the hand-over socket at {path}: {source}; give --handover-socket a \
         path in a directory this process can write"
    )]
    HandoverSocket {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another front starting with the same hand-over socket holds its lock too long.
    #[error(
        "another front starting with the hand-over socket {path} held its lock for {} s: \
         stop it, or give this one another --handover-socket",
        waited.as_secs()
    )]
    HandoverBusy {
        /// The hand-over socket.
        path: PathBuf,
        /// How long this front waited.
        waited: Duration,
    },
    /// The front serving the hand-over socket listens on another address.
    #[error(
        "the front serving the hand-over socket {path} listens on {theirs}, not {ours}: give \
         this front --listen {theirs} to take over from it, or another --handover-socket"
    )]
    HandoverElsewhere {
        /// The hand-over socket.
        path: PathBuf,
        /// Where the serving front listens.
        theirs: SocketAddr,
        /// Where this front was to listen.
        ours: SocketAddr,
    },
}

impl FrontError {
    /// The error of listening on `addr`, with a hint for the usual causes.
    pub(crate) fn listen(addr: SocketAddr, source: std::io::Error) -> FrontError {
        let hint = match source.kind() {
            std::io::ErrorKind::AddrInUse => {
                " (another process listens there: stop it, or choose another --listen)"
            }
            std::io::ErrorKind::PermissionDenied => {
                " (a port below 1024 needs root or CAP_NET_BIND_SERVICE)"
            }
            std::io::ErrorKind::AddrNotAvailable => {
                " (no interface of this machine has that address: give one of its own, or 0.0.0.0)"
            }
            _ => "",
        };
        FrontError::Listen { addr, source, hint }
    }
}
