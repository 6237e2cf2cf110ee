//! A concurrent actor: what a GitOps controller or an admin's `kubectl annotate` does to the
//! control-plane DaemonSets while the upgrade runs — it annotates their metadata, never their
//! pod template. Each write moves the resourceVersion, so the tool's conditional updates meet
//! 409 Conflict. Expected outcome: the upgrade ends as it would have without the writer, and
//! the writer's annotation survives (the tool re-reads and never writes back a stale copy).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::api::{Patch, PatchParams};
use selfhost_core::Component;
use selfhost_sim::SimCluster;
use serde_json::json;
use tokio::task::JoinHandle;

/// The annotation the writer owns.
pub const ANNOTATION: &str = "campaign.example.com/touched";

/// What the writer achieved.
#[derive(Debug, Default, Clone)]
pub struct WriterLog {
    pub writes: u64,
    pub failed: u64,
    /// Per DaemonSet, the last value the API acknowledged.
    pub last_acknowledged: BTreeMap<String, u64>,
}

/// The running writer.
pub struct Writer {
    log: Arc<Mutex<WriterLog>>,
    task: JoinHandle<()>,
}

impl Writer {
    pub async fn start(sim: &SimCluster, every: Duration) -> Writer {
        let client = sim
            .client_with(|c| {
                c.default_retry = false;
                c.read_timeout = Some(Duration::from_secs(1));
                c.connect_timeout = Some(Duration::from_secs(1));
            })
            .await
            .expect("a writer client");
        let log = Arc::new(Mutex::new(WriterLog::default()));
        let task = {
            let log = log.clone();
            tokio::spawn(async move {
                let daemonsets: Api<DaemonSet> = Api::namespaced(client, "kube-system");
                let params = PatchParams::default();
                for n in 1u64.. {
                    for component in Component::ALL {
                        let name = component.daemonset_name();
                        let patch =
                            json!({"metadata": {"annotations": {ANNOTATION: n.to_string()}}});
                        let ok = daemonsets
                            .patch(&name, &params, &Patch::Merge(&patch))
                            .await
                            .is_ok();
                        let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
                        if ok {
                            l.writes += 1;
                            l.last_acknowledged.insert(name, n);
                        } else {
                            l.failed += 1;
                        }
                    }
                    tokio::time::sleep(every).await;
                }
            })
        };
        Writer { log, task }
    }

    pub async fn stop(self) -> WriterLog {
        self.task.abort();
        let _ = self.task.await;
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
