//! Processes, kept apart from pod objects: a process starts after its container is created,
//! holds its ports from the moment it listens, and exits later than its pod's deletion asked
//! (a Terminating pod's process still holds its ports).
//!
//! This is where later models hook in: a process knows when it started, when it opened its
//! ports and its identity (`<hostname>_<uuid>`, as leader election and apiserver identity
//! Leases name it).
//!
//! A process is a server — it runs until it is told to stop or its image makes it exit —
//! unless its command line is a one-shot invocation ([`one_shot_exit`]): then it prints and
//! exits by itself, promptly, as `kube-apiserver --version` does.

use std::fmt;

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::jiff::Timestamp;

use super::ports::{PortClaim, binary_name};

/// A process id, unique within one kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcessId(pub u64);

impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Why and how a process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// When it exited.
    pub at: Timestamp,
    /// Its exit code (137 when killed).
    pub code: i32,
    /// The last words the container status shows as `message` (a bind error, say).
    pub message: Option<String>,
}

/// Where a process is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcessState {
    /// Running normally.
    Running,
    /// SIGTERM was sent at `signalled_at`; SIGKILL follows at `kill_at`.
    Stopping {
        /// When SIGTERM was sent.
        signalled_at: Timestamp,
        /// The end of the grace period.
        kill_at: Timestamp,
    },
    /// Gone.
    Exited(Exit),
}

/// One process of one container instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Its id.
    pub id: ProcessId,
    /// The pod it belongs to.
    pub pod_uid: String,
    /// The container it runs.
    pub container: String,
    /// The binary (`kube-apiserver`), when known.
    pub binary: Option<String>,
    /// `<hostname>_<uuid>`: unique per process, as leader election names holders; the
    /// hostname is the machine's ([`super::KubeletConfig::hostname`]).
    pub identity: String,
    /// When it started.
    pub started_at: Timestamp,
    /// The ports it binds.
    pub claim: PortClaim,
    /// When it opened its ports (`None`: not yet, or it has none).
    pub listening_since: Option<Timestamp>,
    /// When it starts accepting the connections queued on its sockets (`None`: as soon as it
    /// listens). Models of connections read it; the kubelet does not.
    pub accepts_at: Option<Timestamp>,
    /// When its own readiness check first passes (`None`: never): its image's ready delay, or
    /// the kubelet's. What a probe answered by this process sees.
    pub ready_at: Option<Timestamp>,
    /// How long it keeps its sockets open after SIGTERM when it closes them on SIGTERM (its
    /// `--shutdown-delay-duration`).
    pub shutdown_delay: std::time::Duration,
    /// When it closes (or closed) its listening sockets while still running, after SIGTERM.
    pub listener_closes_at: Option<Timestamp>,
    /// A node-local API front's drain: on SIGTERM it closes its listening socket at once and
    /// exits once its open connections have ended, at the latest after this long (`None`:
    /// not a front).
    pub drain: Option<std::time::Duration>,
    /// When it will exit on its own, with which code and message (a crash, a failed bind,
    /// the end of a graceful stop).
    pub planned_exit: Option<Exit>,
    /// Its state.
    pub state: ProcessState,
}

impl Process {
    /// Whether it still runs (possibly stopping).
    pub fn is_alive(&self) -> bool {
        !matches!(self.state, ProcessState::Exited(_))
    }

    /// How it ended, once it has.
    pub fn exit(&self) -> Option<&Exit> {
        match &self.state {
            ProcessState::Exited(exit) => Some(exit),
            _ => None,
        }
    }

    /// Plans an exit, keeping an earlier one.
    pub(super) fn plan_exit(&mut self, exit: Exit) {
        if self
            .planned_exit
            .as_ref()
            .is_none_or(|planned| exit.at < planned.at)
        {
            self.planned_exit = Some(exit);
        }
    }
}

/// The exit code of a one-shot invocation, or `None` for a process that serves until stopped.
///
/// The rule (`docs/simulator.md`, "Processes"): a container whose command line (`command` then
/// `args`) holds the word `--version` (or `--version=<how>`, as the Kubernetes binaries accept
/// `--version=raw`), `--help` or `-h` prints and exits 0; one whose binary (the base name of
/// `command[0]`) is `true` exits 0, `false` exits 1. Anything else runs until it is stopped.
/// An image whose behaviour plans an exit (`ImageBehaviour::crash_after`) overrides the rule:
/// that is how a test says "this image's binary does not run here".
pub(crate) fn one_shot_exit(container: &Container) -> Option<i32> {
    match binary_name(container).as_deref() {
        Some("true") if container.command.is_some() => return Some(0),
        Some("false") if container.command.is_some() => return Some(1),
        _ => {}
    }
    let informational = |word: &String| {
        matches!(word.as_str(), "--version" | "--help" | "-h") || word.starts_with("--version=")
    };
    container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .any(informational)
        .then_some(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn informational_invocations_exit_and_servers_do_not() {
        let container = |command: &[&str], args: &[&str]| Container {
            name: "c".into(),
            image: Some("registry.k8s.io/kube-apiserver:v1.34.0".into()),
            command: (!command.is_empty()).then(|| command.iter().map(|s| s.to_string()).collect()),
            args: (!args.is_empty()).then(|| args.iter().map(|s| s.to_string()).collect()),
            ..Container::default()
        };
        let cases: [(&[&str], &[&str], Option<i32>); 11] = [
            (&["kube-apiserver", "--version"], &[], Some(0)),
            (
                &["/usr/local/bin/kube-scheduler"],
                &["--version=raw"],
                Some(0),
            ),
            (&[], &["--version"], Some(0)),
            (&["kube-controller-manager", "--help"], &[], Some(0)),
            (&["kube-controller-manager", "-h"], &[], Some(0)),
            (&["/bin/true"], &[], Some(0)),
            (&["false"], &[], Some(1)),
            (&["kube-apiserver", "--secure-port=6443"], &[], None),
            (&["kube-apiserver", "--versioned-api=x"], &[], None),
            (&[], &[], None),
            (&["sleep"], &["3600"], None),
        ];
        for (command, args, exit) in cases {
            assert_eq!(
                one_shot_exit(&container(command, args)),
                exit,
                "{command:?} {args:?}"
            );
        }
        let mut image_named_true = container(&[], &[]);
        image_named_true.image = Some("example.com/true:1".into());
        assert_eq!(
            one_shot_exit(&image_named_true),
            None,
            "an image's name is not a command"
        );
    }
}
