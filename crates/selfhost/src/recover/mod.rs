//! `selfhost recover`: brings back a self-hosted control plane that is gone with no checkpoint
//! to start from, on the node it runs on. It reads the self-hosted DaemonSets and the Secrets
//! and ConfigMaps their templates mount straight from etcd, writes their static form as the
//! checkpointer's active copies (so that the checkpointer, once installed, retires them when
//! the DaemonSet pods serve again) with the files they need, and waits until the API serves.
//!
//! Nothing is written until everything is read and every refusal is ruled out: a kubeadm
//! manifest or an active copy of a component on the node, an API server that answers, an
//! object that is missing, encrypted or unreadable.

mod etcd;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::jiff::Timestamp;
use selfhost_core::Component;
use selfhost_core::component::NAMESPACE;
use selfhost_core::etcd::{DecodeError, StoredKind, decode_object, object_key};
use selfhost_core::recover::{self as plan, ComponentRecovery, ObjectRef, Referenced};
use tokio::time::Instant;

pub use crate::etcd_client::EtcdAccess;
use crate::etcd_client::EtcdAccessError;

use crate::checkpoint::NodeDisk;
use crate::client::Clients;
use crate::node_files::{FilesError, write_secret_file};

/// The default of `--timeout`: how long the API may take to serve once the files are written.
pub const DEFAULT_RECOVER_TIMEOUT: Duration = Duration::from_secs(300);

/// What `selfhost recover` is asked to do.
#[derive(Debug, Clone)]
pub struct RecoverRequest {
    /// The node it runs on.
    pub node: String,
    /// How to reach etcd.
    pub etcd: EtcdAccess,
    /// The API server's `--etcd-prefix`.
    pub etcd_prefix: String,
    /// The kubelet's static pod directory as this run reaches it (beneath the host root when
    /// selfhost runs outside the node's filesystem).
    pub manifests_dir: PathBuf,
    /// Where the node's root filesystem is: files from Secrets and ConfigMaps are written
    /// beneath it, while the static pods name them as the node sees them.
    pub host_root: PathBuf,
    /// The command that installs the checkpointer on this node, as the operator runs it next
    /// (named when an API server answers already, so that it can be run as printed).
    pub next_step: String,
    /// How long the API may take to serve once the files are written.
    pub timeout: Duration,
    /// Show what would be written; write nothing.
    pub dry_run: bool,
}

/// One file written, or to be written (never its content).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredFile {
    /// Where, beneath the host root.
    pub path: PathBuf,
    /// Its permissions.
    pub mode: u32,
    /// The object and key it comes from.
    pub from: String,
    /// Whether it was already there (it is left as it is).
    pub kept: bool,
}

/// What was written, or would be, for one component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveredComponent {
    /// The component.
    pub component: Component,
    /// The active copy in the manifests directory.
    pub manifest: PathBuf,
    /// The image it runs.
    pub image: String,
    /// The revision it is marked with.
    pub revision: String,
    /// Its command line.
    pub command: Vec<String>,
    /// The files it needs.
    pub files: Vec<RecoveredFile>,
}

/// What a recovery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoverReport {
    /// The etcd endpoint that answered.
    pub etcd: String,
    /// The API server's URL, from the kubeconfig.
    pub server: String,
    /// Every component, in start order.
    pub components: Vec<RecoveredComponent>,
    /// Fields of stored objects newer than this selfhost, skipped in decoding.
    pub skipped_fields: Vec<String>,
    /// How long after the files were written the API served (`None` in a dry run).
    pub served_after: Option<Duration>,
    /// Nothing was written.
    pub dry_run: bool,
}

/// Why a recovery refused, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum RecoverError {
    /// The manifests directory is not there.
    #[error(transparent)]
    Files(#[from] FilesError),
    /// A certificate, key or endpoint flag cannot be used.
    #[error(transparent)]
    Access(#[from] EtcdAccessError),
    /// No endpoint answered.
    #[error(
        "cannot read etcd at {endpoints}: {reasons}. Check that etcd runs on this node (its \
         static pod, or `crictl ps --name etcd`), that --etcd-endpoints names it, and that \
         --etcd-cacert, --etcd-cert and --etcd-key are the files the API server uses"
    )]
    Unreachable {
        /// The endpoints tried.
        endpoints: String,
        /// Why each failed.
        reasons: String,
    },
    /// A read failed after the endpoint answered.
    #[error("etcd at {endpoint}: {reason}")]
    Request {
        /// The endpoint.
        endpoint: String,
        /// What failed.
        reason: String,
    },
    /// A self-hosted DaemonSet is not in etcd.
    #[error(
        "{key} is not in etcd: this cluster has no {component} DaemonSet to recover from (is \
         --etcd-prefix the API server's, and was the control plane self-hosted?)"
    )]
    NoDaemonSet {
        /// The component.
        component: Component,
        /// The key read.
        key: String,
    },
    /// A value is encrypted at rest.
    #[error(
        "{key} is encrypted at rest (provider {provider}): recover cannot read encrypted \
         Secrets, since the key is the API server's. Write the files the control plane needs \
         by hand (see `selfhost convert to-static`), or restore the static pod manifests from \
         {}/../selfhost-backup/, and start the API server that can decrypt them",
        manifests.display()
    )]
    Encrypted {
        /// The key.
        key: String,
        /// The provider named in the value.
        provider: String,
        /// The manifests directory.
        manifests: PathBuf,
    },
    /// A value cannot be decoded.
    #[error("{key} cannot be read: {source}")]
    Unreadable {
        /// The key.
        key: String,
        /// Why.
        source: DecodeError,
    },
    /// A component cannot be made a static pod from what was read.
    #[error(transparent)]
    Plan(#[from] plan::RecoverError),
    /// The node runs the component already, or will.
    #[error(
        "{} is on this node already: {what}. recover writes static pods only for a control \
         plane that is gone; remove or move that file first if it is stale",
        path.display()
    )]
    OnNode {
        /// The file.
        path: PathBuf,
        /// What it is.
        what: &'static str,
    },
    /// An API server answers.
    #[error(
        "an API server answers at {server}: the control plane is not gone, and nothing was \
         written. To keep it through the next power cut, run `{next_step}`"
    )]
    ApiServes {
        /// Its URL.
        server: String,
        /// The command that installs the checkpointer on this node.
        next_step: String,
    },
    /// A file could not be written after others were.
    #[error("{source}; written so far: {written}")]
    Write {
        /// What failed.
        source: FilesError,
        /// What was written before.
        written: String,
    },
    /// The API did not serve in time.
    #[error(
        "the static pods are written, but the API at {server} did not serve within {waited:?} \
         (last: {last}). They stay in {}; look at the kubelet's log (`journalctl -u kubelet`) \
         and the containers (`crictl ps -a`)",
        manifests.display()
    )]
    NotServing {
        /// The API's URL.
        server: String,
        /// How long it waited.
        waited: Duration,
        /// What the last probe said.
        last: String,
        /// The manifests directory.
        manifests: PathBuf,
    },
}

impl RecoverError {
    /// Whether the input is wrong (a flag, a file), rather than the node or cluster unfit.
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            RecoverError::Access(_) | RecoverError::Files(FilesError::NoManifestsDir { .. })
        )
    }

    /// Whether files were written before it stopped.
    pub fn changed_the_node(&self) -> bool {
        matches!(
            self,
            RecoverError::Write { .. } | RecoverError::NotServing { .. }
        )
    }
}

fn disk(request: &RecoverRequest) -> NodeDisk {
    NodeDisk {
        // Not used to write active copies; the checkpointer's own default beside them.
        checkpoint_dir: request
            .manifests_dir
            .parent()
            .map_or_else(|| PathBuf::from("/"), Path::to_path_buf)
            .join("selfhost-checkpoints"),
        manifests_dir: request.manifests_dir.clone(),
    }
}

/// Refuses when the node runs, or will run, a component already.
fn check_node(request: &RecoverRequest) -> Result<(), RecoverError> {
    if !request.manifests_dir.is_dir() {
        return Err(FilesError::NoManifestsDir {
            path: request.manifests_dir.clone(),
        }
        .into());
    }
    let disk = disk(request);
    for component in Component::ALL {
        let kubeadm = request.manifests_dir.join(component.manifest_file_name());
        if kubeadm.exists() {
            return Err(RecoverError::OnNode {
                path: kubeadm,
                what: "kubeadm's static pod manifest of the component",
            });
        }
        let active = disk.active_path(component);
        if active.exists() {
            return Err(RecoverError::OnNode {
                path: active,
                what: "an active copy of the checkpointer (or of an earlier recover)",
            });
        }
    }
    Ok(())
}

/// Whether anything answers HTTP at the API's address, ready or not.
async fn api_answers(clients: &Clients) -> bool {
    let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    matches!(
        clients.probe.request_text(request).await,
        Ok(_) | Err(kube::Error::Api(_))
    )
}

async fn read<T>(
    etcd: &etcd::Etcd,
    request: &RecoverRequest,
    kind: StoredKind,
    name: &str,
    skipped: &mut Vec<String>,
) -> Result<Option<T>, RecoverError>
where
    T: serde::de::DeserializeOwned + k8s_openapi::Resource,
{
    let key = object_key(&request.etcd_prefix, kind, NAMESPACE, name);
    let Some(value) = etcd.get(&key).await? else {
        return Ok(None);
    };
    match decode_object::<T>(&value) {
        Ok(decoded) => {
            skipped.extend(decoded.skipped.0);
            Ok(Some(decoded.object))
        }
        Err(DecodeError::Encrypted { provider }) => Err(RecoverError::Encrypted {
            key,
            provider,
            manifests: request.manifests_dir.clone(),
        }),
        Err(source) => Err(RecoverError::Unreadable { key, source }),
    }
}

/// Reads every component's DaemonSet and the objects its template needs, and makes the plan.
async fn plan_all(
    etcd: &etcd::Etcd,
    request: &RecoverRequest,
    skipped: &mut Vec<String>,
) -> Result<Vec<ComponentRecovery>, RecoverError> {
    let mut daemonsets = BTreeMap::new();
    let mut wanted = std::collections::BTreeSet::<ObjectRef>::new();
    for component in Component::ALL {
        let name = component.daemonset_name();
        let daemonset: DaemonSet = read(etcd, request, StoredKind::DaemonSet, &name, skipped)
            .await?
            .ok_or_else(|| RecoverError::NoDaemonSet {
                component,
                key: object_key(
                    &request.etcd_prefix,
                    StoredKind::DaemonSet,
                    NAMESPACE,
                    &name,
                ),
            })?;
        if let Some(spec) = daemonset
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
        {
            wanted.extend(plan::objects_to_read(spec));
        }
        daemonsets.insert(component, daemonset);
    }
    let mut referenced = Referenced::default();
    for object in wanted {
        match object.kind {
            StoredKind::Secret => {
                if let Some(s) =
                    read::<Secret>(etcd, request, object.kind, &object.name, skipped).await?
                {
                    referenced.secrets.insert(object.name, s);
                }
            }
            StoredKind::ConfigMap => {
                if let Some(c) =
                    read::<ConfigMap>(etcd, request, object.kind, &object.name, skipped).await?
                {
                    referenced.config_maps.insert(object.name, c);
                }
            }
            StoredKind::DaemonSet => {}
        }
    }
    Component::ALL
        .into_iter()
        .filter_map(|c| daemonsets.get(&c).map(|ds| (c, ds)))
        .map(|(c, ds)| plan::recover_component(c, ds, &referenced).map_err(RecoverError::from))
        .collect()
}

fn describe(
    recovery: &ComponentRecovery,
    request: &RecoverRequest,
    disk: &NodeDisk,
) -> RecoveredComponent {
    let command = recovery
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| {
            c.command
                .iter()
                .flatten()
                .chain(c.args.iter().flatten())
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    RecoveredComponent {
        component: recovery.component,
        manifest: disk.active_path(recovery.component),
        image: recovery.image.clone(),
        revision: recovery.revision.clone(),
        command,
        files: recovery
            .files
            .iter()
            .map(|f| {
                let path = request.host_root.join(f.path.trim_start_matches('/'));
                RecoveredFile {
                    kept: path.exists(),
                    path,
                    mode: f.mode,
                    from: f.from.clone(),
                }
            })
            .collect(),
    }
}

/// Writes every file, then every active copy (the kube-apiserver's first).
fn write_all(
    recoveries: &[ComponentRecovery],
    request: &RecoverRequest,
    disk: &NodeDisk,
) -> Result<(), RecoverError> {
    let mut written: Vec<String> = Vec::new();
    let failed = |source: FilesError, written: &[String]| RecoverError::Write {
        source,
        written: if written.is_empty() {
            "nothing".into()
        } else {
            written.join(", ")
        },
    };
    for recovery in recoveries {
        for file in &recovery.files {
            match write_secret_file(&request.host_root, &file.path, &file.content.0, file.mode) {
                Ok(true) => written.push(file.path.clone()),
                Ok(false) => {}
                Err(e) => return Err(failed(e, &written)),
            }
        }
    }
    let now = Timestamp::now();
    for recovery in recoveries {
        match disk.write_active(recovery.component, &recovery.pod, &recovery.revision, now) {
            Ok(path) => written.push(path.display().to_string()),
            Err(e) => return Err(failed(e, &written)),
        }
    }
    Ok(())
}

/// Runs a recovery (see the module documentation); `say` hears each step.
pub(crate) async fn run(
    clients: &Clients,
    request: &RecoverRequest,
    say: &mut (dyn FnMut(String) + Send),
) -> Result<RecoverReport, RecoverError> {
    check_node(request)?;
    if api_answers(clients).await {
        return Err(RecoverError::ApiServes {
            server: clients.server.clone(),
            next_step: request.next_step.clone(),
        });
    }
    let etcd = etcd::Etcd::connect(&request.etcd, &request.etcd_prefix).await?;
    say(format!(
        "read the control plane from etcd at {}",
        etcd.endpoint
    ));
    let mut skipped = Vec::new();
    let recoveries = plan_all(&etcd, request, &mut skipped).await?;
    let disk = disk(request);
    let components: Vec<RecoveredComponent> = recoveries
        .iter()
        .map(|r| describe(r, request, &disk))
        .collect();
    let mut report = RecoverReport {
        etcd: etcd.endpoint.clone(),
        server: clients.server.clone(),
        components,
        skipped_fields: skipped,
        served_after: None,
        dry_run: request.dry_run,
    };
    if request.dry_run {
        return Ok(report);
    }
    write_all(&recoveries, request, &disk)?;
    say(format!(
        "wrote the static pods to {}; waiting for the API at {} to serve",
        request.manifests_dir.display(),
        clients.server
    ));
    let written = Instant::now();
    let deadline = written + request.timeout;
    loop {
        let health = crate::health::readyz(&clients.probe).await;
        if health.healthy {
            report.served_after = Some(written.elapsed());
            return Ok(report);
        }
        if Instant::now() >= deadline {
            return Err(RecoverError::NotServing {
                server: clients.server.clone(),
                waited: request.timeout,
                last: health.problem.unwrap_or_else(|| "not ready".into()),
                manifests: request.manifests_dir.clone(),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
