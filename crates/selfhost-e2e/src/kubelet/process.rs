//! Container processes: started in a process group of their own with output appended to the
//! container's log, signalled the way a runtime does (SIGTERM to the main process, SIGKILL to
//! the whole group), and recognised again after a kubelet restart by pid and start time.

use std::fs::OpenOptions;
use std::path::Path;
use std::process::{ExitStatus, Stdio};

use rustix::process::{Pid, Signal};

use super::command::Launch;
use super::error::KubeletError;

/// What identifies a process beyond its pid: its start time in clock ticks since boot
/// (field 22 of `/proc/<pid>/stat`), which a reused pid does not share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcStat {
    /// The state letter (`R`, `S`, `Z`, …).
    pub state: char,
    /// The process group.
    pub pgrp: i32,
    /// The start time in clock ticks since boot.
    pub start_ticks: u64,
}

/// Parses `/proc/<pid>/stat`. The command name may hold spaces and parentheses, so the
/// fields are counted from the last `)`.
pub(crate) fn parse_stat(stat: &str) -> Option<ProcStat> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // fields[0] is field 3 (state); field N is fields[N - 3].
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// The process `pid` as `/proc` shows it now.
pub(crate) fn proc_stat(pid: u32) -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Whether the process `pid` that started at `start_ticks` still runs (a zombie does not).
pub(crate) fn is_alive(pid: u32, start_ticks: u64) -> bool {
    proc_stat(pid).is_some_and(|s| s.start_ticks == start_ticks && s.state != 'Z' && s.state != 'X')
}

/// The exit code a runtime reports: the code, or 128 + the signal that ended it.
pub(crate) fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(crate::kubelet::container::UNKNOWN_EXIT_CODE)
}

/// A started container process.
#[derive(Debug)]
pub(crate) struct Spawned {
    pub child: tokio::process::Child,
    pub pid: u32,
    pub start_ticks: u64,
}

/// Starts `launch` in a new process group, stdin from /dev/null, stdout and stderr appended to
/// `log`. The child is not killed when its handle is dropped: containers outlive the kubelet.
pub(crate) fn spawn(launch: &Launch, log: &Path) -> Result<Spawned, KubeletError> {
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir).map_err(|e| KubeletError::io("create", dir, e))?;
    }
    std::fs::create_dir_all(&launch.cwd).map_err(|e| KubeletError::io("create", &launch.cwd, e))?;
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| KubeletError::io("open", log, e))?;
    let err = out
        .try_clone()
        .map_err(|e| KubeletError::io("open", log, e))?;
    let program = launch.program.display().to_string();
    let child = tokio::process::Command::new(&launch.program)
        .args(&launch.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&launch.cwd)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .kill_on_drop(false)
        .spawn()
        .map_err(|source| KubeletError::Spawn {
            program: program.clone(),
            source,
        })?;
    let pid = child.id().ok_or_else(|| KubeletError::Spawn {
        program,
        source: std::io::Error::other("the process exited before it could be recorded"),
    })?;
    // The start time is fixed at fork, so reading it after exec changes nothing.
    let start_ticks = proc_stat(pid).map_or(0, |s| s.start_ticks);
    Ok(Spawned {
        child,
        pid,
        start_ticks,
    })
}

fn pid(raw: u32) -> Option<Pid> {
    Pid::from_raw(i32::try_from(raw).ok()?)
}

/// SIGTERM to the container's main process (a runtime signals the container's init only).
pub(crate) fn terminate(raw: u32) -> std::io::Result<()> {
    match pid(raw) {
        Some(p) => rustix::process::kill_process(p, Signal::TERM).map_err(std::io::Error::from),
        None => Ok(()),
    }
}

/// SIGKILL to the whole process group `raw` (the container's main pid), so that children go
/// too. A group that is gone already is not an error.
pub(crate) fn kill_group(raw: u32) -> std::io::Result<()> {
    match pid(raw) {
        Some(p) => match rustix::process::kill_process_group(p, Signal::KILL) {
            Ok(()) | Err(rustix::io::Errno::SRCH) => Ok(()),
            Err(e) => Err(e.into()),
        },
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_odd_command_names() {
        let line = |comm: &str| {
            format!(
                "4242 ({comm}) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 \
                 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
            )
        };
        let cases = ["sleep", "a b", "x) S 9 9 9 (y", ""];
        for comm in cases {
            assert_eq!(
                parse_stat(&line(comm)),
                Some(ProcStat {
                    state: 'S',
                    pgrp: 4242,
                    start_ticks: 987_654
                }),
                "{comm:?}"
            );
        }
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("1 (x) S 1"), None);
    }

    #[test]
    fn exit_codes_are_the_code_or_128_plus_the_signal() {
        use std::os::unix::process::ExitStatusExt;
        let cases = [(0, 0), (3 << 8, 3), (9, 137), (15, 143)];
        for (raw, expected) in cases {
            assert_eq!(exit_code(ExitStatus::from_raw(raw)), expected, "{raw}");
        }
    }

    #[test]
    fn this_process_is_alive_and_identified_by_its_start_time() {
        let me = std::process::id();
        let stat = proc_stat(me).unwrap();
        assert!(is_alive(me, stat.start_ticks));
        assert!(!is_alive(me, stat.start_ticks + 1));
    }
}
