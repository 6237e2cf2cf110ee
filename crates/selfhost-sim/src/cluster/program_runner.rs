//! Real programs in simulated containers: a container whose image holds a program
//! ([`ImageBehaviour::program`](crate::controllers::kubelet::ImageBehaviour::program)) runs
//! that executable for as long as its modelled process runs.
//!
//! The model stays the authority: the program starts when the kubelet model starts the
//! process, gets SIGTERM when the model signals it, and is killed when the model's process is
//! gone (the end of its grace period, a reboot, a power cut). The other way round, a program
//! that exits by itself ends the modelled process with its exit code, so the kubelet model
//! restarts it as it restarts a crashed container.
//!
//! There are no mount namespaces: as a kubelet without them would, the runner maps every
//! argument that is a path under one of the container's hostPath mounts to the host directory
//! under the node's own directory (`<node-root>/<hostPath>/…`), creating the `DirectoryOrCreate`
//! ones first. The first word of the command
//! line is the image's binary and is replaced by the program. What the program prints goes to
//! `<node-root>/var/log/containers/<pod>_<container>.log`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use rustix::process::{Pid, Signal};
use tokio::sync::{mpsc, oneshot};

use super::node_input::NodeInput;
use crate::controllers::kubelet::{ContainerView, HostMount, ImageRef, ProcessId, Registry};

/// The exit code a killed program is reported with when it has none.
const KILLED: i32 = 137;

/// One node's running programs.
#[derive(Debug)]
pub(crate) struct ProgramRunner {
    /// The node's own directory: its host paths live beneath it.
    node_root: PathBuf,
    /// Where a program's exit is reported.
    inputs: mpsc::UnboundedSender<NodeInput>,
    running: BTreeMap<ProcessId, Running>,
}

#[derive(Debug)]
struct Running {
    pid: Option<Pid>,
    terminated: bool,
    /// Dropping it kills the program.
    _kill: oneshot::Sender<()>,
}

impl ProgramRunner {
    /// A runner for the node whose directory is `node_root`.
    pub(crate) fn new(node_root: PathBuf, inputs: mpsc::UnboundedSender<NodeInput>) -> Self {
        ProgramRunner {
            node_root,
            inputs,
            running: BTreeMap::new(),
        }
    }

    /// Brings the programs in line with the node's containers as the kubelet model runs them.
    pub(crate) fn sync(&mut self, registry: &Registry, containers: &[ContainerView]) {
        let mut live = BTreeSet::new();
        for view in containers {
            let Some(id) = view.process else { continue };
            let Some(program) = program_of(registry, view) else {
                continue;
            };
            live.insert(id);
            if !self.running.contains_key(&id) {
                match self.start(id, &program, view) {
                    Ok(running) => {
                        self.running.insert(id, running);
                    }
                    Err(e) => {
                        // The process cannot exist: the model ends it as a failed start.
                        let _ = self.inputs.send(NodeInput::ExitProcess {
                            process: id,
                            code: 128,
                            message: format!("cannot start {}: {e}", program.display()),
                        });
                        continue;
                    }
                }
            }
            if view.stopping
                && let Some(running) = self.running.get_mut(&id)
                && !running.terminated
            {
                running.terminated = true;
                if let Some(pid) = running.pid {
                    let _ = rustix::process::kill_process(pid, Signal::TERM);
                }
            }
        }
        // Dropping a program's handle kills it.
        self.running.retain(|id, _| live.contains(id));
    }

    fn start(
        &self,
        id: ProcessId,
        program: &Path,
        view: &ContainerView,
    ) -> std::io::Result<Running> {
        // As the kubelet does before it starts a container.
        for mount in view.host_mounts.iter().filter(|m| m.create) {
            std::fs::create_dir_all(self.node_root.join(mount.host_path.trim_start_matches('/')))?;
        }
        let log_dir = self.node_root.join("var/log/containers");
        std::fs::create_dir_all(&log_dir)?;
        let log_path = log_dir.join(format!("{}_{}.log", view.pod.name, view.container));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        let args = arguments(
            program,
            &view.command_line,
            &view.host_mounts,
            &self.node_root,
        );
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()?;
        let pid = child
            .id()
            .and_then(|pid| i32::try_from(pid).ok())
            .and_then(Pid::from_raw);
        let (kill, killed) = oneshot::channel::<()>();
        let inputs = self.inputs.clone();
        tokio::spawn(async move {
            tokio::select! {
                status = child.wait() => {
                    let (code, message) = match status {
                        Ok(status) => (
                            status.code().unwrap_or(KILLED),
                            format!("the program exited: {status}"),
                        ),
                        Err(e) => (KILLED, format!("the program is lost: {e}")),
                    };
                    let _ = inputs.send(NodeInput::ExitProcess { process: id, code, message });
                }
                _ = killed => {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                }
            }
        });
        Ok(Running {
            pid,
            terminated: false,
            _kill: kill,
        })
    }
}

/// The program of the image `view` runs, if its image holds one.
fn program_of(registry: &Registry, view: &ContainerView) -> Option<PathBuf> {
    let image = ImageRef::parse(view.image.as_deref()?).ok()?;
    registry.lookup(&image)?.program.clone()
}

/// The program's arguments: the command line without its first word when that names the
/// image's binary, every path under a hostPath mount mapped beneath `node_root`.
fn arguments(
    program: &Path,
    command_line: &[String],
    mounts: &[HostMount],
    node_root: &Path,
) -> Vec<String> {
    let binary = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let names_binary = command_line.first().is_some_and(|first| {
        Path::new(first)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            == binary
    });
    command_line
        .iter()
        .skip(usize::from(names_binary))
        .map(|arg| match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => {
                format!("{flag}={}", on_host(value, mounts, node_root))
            }
            _ => on_host(arg, mounts, node_root),
        })
        .collect()
}

/// `path` as the node's host sees it under `node_root`, when it lies under a mount (the
/// longest that holds it); anything else unchanged.
fn on_host(path: &str, mounts: &[HostMount], node_root: &Path) -> String {
    if !path.starts_with('/') {
        return path.to_string();
    }
    let within = |mount: &&HostMount| {
        let dir = mount.mount_path.trim_end_matches('/');
        path == dir || path.starts_with(&format!("{dir}/")) || dir.is_empty()
    };
    let Some(mount) = mounts
        .iter()
        .filter(within)
        .max_by_key(|m| m.mount_path.trim_end_matches('/').len())
    else {
        return path.to_string();
    };
    let rest = path[mount.mount_path.trim_end_matches('/').len()..].trim_start_matches('/');
    let host = node_root.join(mount.host_path.trim_start_matches('/'));
    let mapped = if rest.is_empty() {
        host
    } else {
        host.join(rest)
    };
    mapped.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mount(mount_path: &str, host_path: &str) -> HostMount {
        HostMount {
            mount_path: mount_path.into(),
            host_path: host_path.into(),
            create: false,
        }
    }

    fn words(line: &[&str]) -> Vec<String> {
        line.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn paths_under_host_mounts_are_mapped_beneath_the_node_and_the_binary_is_the_program() {
        let mounts = [
            mount("/etc/kubernetes", "/etc/kubernetes"),
            mount("/host", "/"),
            mount("/var/lib/kubelet/pki", "/srv/pki"),
        ];
        let root = Path::new("/tmp/node-1");
        let args = arguments(
            Path::new("/build/selfhost"),
            &words(&[
                "selfhost",
                "checkpoint",
                "--kubeconfig",
                "/etc/kubernetes/kubelet.conf",
                "--manifests-dir=/etc/kubernetes/manifests",
                "--host-root",
                "/host",
                "--cert",
                "/var/lib/kubelet/pki/client.pem",
                "--elsewhere",
                "/opt/not-mounted",
                "--node",
                "cp-1",
            ]),
            &mounts,
            root,
        );
        assert_eq!(
            args,
            words(&[
                "checkpoint",
                "--kubeconfig",
                "/tmp/node-1/etc/kubernetes/kubelet.conf",
                "--manifests-dir=/tmp/node-1/etc/kubernetes/manifests",
                "--host-root",
                "/tmp/node-1/",
                "--cert",
                "/tmp/node-1/srv/pki/client.pem",
                "--elsewhere",
                "/opt/not-mounted",
                "--node",
                "cp-1",
            ])
        );
    }

    #[test]
    fn a_command_line_of_arguments_only_is_kept_whole() {
        let args = arguments(
            Path::new("/build/selfhost"),
            &words(&["checkpoint", "--node", "cp-1"]),
            &[],
            Path::new("/tmp/n"),
        );
        assert_eq!(args, words(&["checkpoint", "--node", "cp-1"]));
    }
}
