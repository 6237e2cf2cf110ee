//! Child processes of the bed (etcd, HAProxy, the process kubelets): started with their
//! output in a log file, stopped on request or when the bed goes.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::BedError;

/// A running child process and where its output goes.
#[derive(Debug)]
pub struct Daemon {
    name: String,
    child: Child,
    log: PathBuf,
}

impl Daemon {
    /// Starts `program` with `args`, stdout and stderr appended to `log`.
    ///
    /// # Errors
    /// The log cannot be opened or the program cannot be started.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<Daemon, BedError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|source| BedError::io(log, source))?;
        let err = file
            .try_clone()
            .map_err(|source| BedError::io(log, source))?;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| BedError::Spawn {
                program: program.display().to_string(),
                source,
            })?;
        Ok(Daemon {
            name: name.to_string(),
            child,
            log: log.to_path_buf(),
        })
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Fails when the process has exited (with the end of its log, to say why).
    ///
    /// # Errors
    /// The process is no longer running.
    pub fn check_running(&mut self) -> Result<(), BedError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(BedError::Exited {
                name: self.name.clone(),
                status: status.to_string(),
                log_tail: tail(&self.log, 20),
            }),
            Err(source) => Err(BedError::io(&self.log, source)),
        }
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }
}

/// The last `lines` lines of a log file (empty when unreadable).
pub fn tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
