//! The runtime's memory: one JSON record per container (its latest instance) under
//! `<root>/run/selfhost-e2e-kubelet/containers/`. A restarted kubelet adopts the processes
//! recorded there instead of starting them twice; a test harness reads them to kill every
//! process of a node ([`kill_node_processes`], a "reboot").

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::clock::from_millis;
use super::config::Layout;
use super::container::{Adopted, Exit};
use super::error::KubeletError;
use super::process;

/// How a recorded instance ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedExit {
    /// Its exit code.
    pub exit_code: i32,
    /// `Completed`, `Error`, …
    pub reason: String,
    /// When it ended (Unix milliseconds).
    pub finished_at_ms: i64,
}

/// The latest instance of one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecord {
    /// The pod's uid on the node (a static pod's config hash).
    pub pod_uid: String,
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod_name: String,
    /// The container's name.
    pub container: String,
    /// One of the pod's init containers.
    pub init: bool,
    /// The pod is a static pod (from a manifest), not an API pod.
    #[serde(default)]
    pub static_pod: bool,
    /// The main process, also its process group.
    pub pid: u32,
    /// The process's start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub process_start_ticks: u64,
    /// When it started (Unix milliseconds).
    pub started_at_ms: i64,
    /// The instance's restart count.
    pub restart_count: i32,
    /// Its container ID.
    pub container_id: String,
    /// Its image ID.
    pub image_id: String,
    /// How it ended, once it has.
    pub exit: Option<RecordedExit>,
}

impl ContainerRecord {
    /// Whether its process still runs (same pid, same start time, not a zombie).
    pub fn is_running(&self) -> bool {
        self.exit.is_none() && process::is_alive(self.pid, self.process_start_ticks)
    }

    /// The record as a container to adopt.
    pub(crate) fn adopted(&self) -> Adopted {
        Adopted {
            id: 0,
            pid: self.pid,
            container_id: self.container_id.clone(),
            image_id: Some(self.image_id.clone()).filter(|i| !i.is_empty()),
            started_at: from_millis(self.started_at_ms),
            restart_count: self.restart_count,
            exit: self.exit.as_ref().map(|e| Exit {
                exit_code: e.exit_code,
                reason: e.reason.clone(),
                message: None,
                started_at: Some(from_millis(self.started_at_ms)),
                finished_at: from_millis(e.finished_at_ms),
                container_id: Some(self.container_id.clone()),
            }),
            alive: self.is_running(),
        }
    }
}

/// The record directory of one node.
#[derive(Debug, Clone)]
pub(crate) struct RecordStore {
    dir: PathBuf,
}

fn file_name(pod_uid: &str, container: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    format!("{}_{}.json", clean(pod_uid), clean(container))
}

impl RecordStore {
    pub(crate) fn new(layout: &Layout) -> Self {
        RecordStore {
            dir: layout.records_dir(),
        }
    }

    /// Writes `record` (atomically: readers never see half a record).
    pub(crate) fn save(&self, record: &ContainerRecord) -> Result<(), KubeletError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| KubeletError::io("create", &self.dir, e))?;
        let path = self.dir.join(file_name(&record.pod_uid, &record.container));
        let temporary = path.with_extension("json.tmp");
        let body = serde_json::to_vec_pretty(record).map_err(|source| KubeletError::Record {
            path: path.clone(),
            source,
        })?;
        std::fs::write(&temporary, body).map_err(|e| KubeletError::io("write", &temporary, e))?;
        std::fs::rename(&temporary, &path).map_err(|e| KubeletError::io("rename", &path, e))
    }

    /// Every record.
    pub(crate) fn load_all(&self) -> Result<Vec<ContainerRecord>, KubeletError> {
        load_dir(&self.dir)
    }

    /// Forgets every container of a pod.
    pub(crate) fn remove_pod(&self, pod_uid: &str) -> Result<(), KubeletError> {
        for record in self.load_all()?.iter().filter(|r| r.pod_uid == pod_uid) {
            let path = self.dir.join(file_name(&record.pod_uid, &record.container));
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(KubeletError::io("remove", path, e)),
            }
        }
        Ok(())
    }
}

fn load_dir(dir: &Path) -> Result<Vec<ContainerRecord>, KubeletError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(KubeletError::io("read", dir, e)),
    };
    let mut records = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let body = match std::fs::read(&path) {
            Ok(body) => body,
            // Removed since the directory was listed.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(KubeletError::io("read", path, e)),
        };
        let record = serde_json::from_slice(&body)
            .map_err(|source| KubeletError::Record { path, source })?;
        records.push(record);
    }
    records.sort_by(|a: &ContainerRecord, b| {
        (&a.pod_uid, &a.container).cmp(&(&b.pod_uid, &b.container))
    });
    Ok(records)
}

/// The containers the kubelet of the node rooted at `root` recorded.
///
/// # Errors
/// The record directory or a record cannot be read.
pub fn recorded_containers(root: &Path) -> Result<Vec<ContainerRecord>, KubeletError> {
    load_dir(&Layout::new(root).records_dir())
}

/// Kills every recorded process of the node rooted at `root` (SIGKILL to each process group)
/// and clears `<root>/run`, as a reboot would. A pid now used by another process (its start
/// time differs) is left alone. Returns how many process groups were signalled.
///
/// # Errors
/// A record cannot be read, a process cannot be signalled, or `<root>/run` cannot be removed.
pub fn kill_node_processes(root: &Path) -> Result<usize, KubeletError> {
    let layout = Layout::new(root);
    let mut killed = 0;
    for record in recorded_containers(root)? {
        if record.exit.is_some() {
            continue;
        }
        let reused = process::proc_stat(record.pid)
            .is_some_and(|s| s.start_ticks != record.process_start_ticks);
        if reused {
            continue;
        }
        process::kill_group(record.pid).map_err(|e| {
            KubeletError::io(
                "kill the process group of",
                format!("pid {}", record.pid),
                e,
            )
        })?;
        killed += 1;
    }
    let run = layout.run_dir();
    match std::fs::remove_dir_all(&run) {
        Ok(()) => Ok(killed),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(killed),
        Err(e) => Err(KubeletError::io("remove", run, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(uid: &str, container: &str, pid: u32, ticks: u64) -> ContainerRecord {
        ContainerRecord {
            pod_uid: uid.into(),
            namespace: "kube-system".into(),
            pod_name: "p".into(),
            container: container.into(),
            init: false,
            static_pod: false,
            pid,
            process_start_ticks: ticks,
            started_at_ms: 1_700_000_000_000,
            restart_count: 1,
            container_id: format!("process://n1/{pid}"),
            image_id: String::new(),
            exit: None,
        }
    }

    #[test]
    fn records_are_saved_listed_and_removed_by_pod() {
        let root = tempfile::tempdir().unwrap();
        let store = RecordStore::new(&Layout::new(root.path()));
        assert_eq!(store.load_all().unwrap(), []);
        store.save(&record("u1", "a", 1, 1)).unwrap();
        store.save(&record("u1", "b", 2, 2)).unwrap();
        store.save(&record("u2", "a", 3, 3)).unwrap();
        let mut updated = record("u1", "a", 4, 4);
        updated.exit = Some(RecordedExit {
            exit_code: 0,
            reason: "Completed".into(),
            finished_at_ms: 1_700_000_001_000,
        });
        store.save(&updated).unwrap();
        let all = recorded_containers(root.path()).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[0], updated);
        store.remove_pod("u1").unwrap();
        let left: Vec<String> = store
            .load_all()
            .unwrap()
            .into_iter()
            .map(|r| r.pod_uid)
            .collect();
        assert_eq!(left, ["u2"]);
    }

    #[tokio::test]
    async fn a_reboot_kills_recorded_process_groups_and_clears_run() {
        let root = tempfile::tempdir().unwrap();
        let layout = Layout::new(root.path());
        let store = RecordStore::new(&layout);
        let launch = crate::kubelet::command::Launch {
            program: "/bin/sh".into(),
            // A child in the same group must die too.
            args: vec!["-c".into(), "sleep 600 & wait".into()],
            env: vec![],
            cwd: root.path().to_path_buf(),
        };
        let mut spawned = process::spawn(&launch, &root.path().join("log/0.log")).unwrap();
        let mut alive = record("u1", "sh", spawned.pid, spawned.start_ticks);
        assert!(alive.is_running());
        store.save(&alive).unwrap();
        // A record whose pid now belongs to someone else is left alone.
        store
            .save(&record("u2", "other", std::process::id(), 1))
            .unwrap();
        assert_eq!(kill_node_processes(root.path()).unwrap(), 1);
        let status = spawned.child.wait().await.unwrap();
        assert_eq!(process::exit_code(status), 137);
        assert!(!layout.run_dir().exists());
        alive.exit = None;
        assert!(!alive.is_running());
        assert_eq!(recorded_containers(root.path()).unwrap(), []);
    }
}
