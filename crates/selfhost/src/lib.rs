//! The selfhost engine: connects to a cluster through kube-rs, observes it, and carries out
//! the steps the pure decisions of `selfhost-core` choose.
//!
//! This root is the front door; every module behind it is private:
//! - [`Cluster::connect`] for a self-hosted cluster, then [`Cluster::status`],
//!   [`Cluster::plan`], [`Cluster::prepull`] and [`Cluster::apply`];
//! - [`NodeConversion::connect`] for converting a node, then [`NodeConversion::plan`] and
//!   [`NodeConversion::run`];
//! - [`manifests`] and [`read_config_file`], which need no cluster;
//! - [`Front::bind`] and [`Front::run`]: the node-local API front, which needs no cluster
//!   either;
//! - one root [`Error`], whose [`Error::kind`] says what kind of failure it is;
//! - [`report`]: a run's events, measured disruption and recording, for reports.
//!
//! The lower-level pieces (the observer, the upgrade loop, the clients) are exported too, for
//! the engine's own tests and benchmarks and for tools that embed the engine.

mod access;
mod api_call;
mod api_usage;
mod api_write;
mod certificates;
mod checkpoint;
mod client;
mod cluster;
mod cluster_view;
mod config_file;
mod connect;
mod convert;
mod driver;
mod error;
mod etcd_client;
mod etcd_snapshot;
mod etcd_status;
mod events;
mod front;
mod health;
mod identity;
mod manifests;
mod measure;
mod mirror_pod;
mod node_conversion;
mod node_files;
mod observer;
mod outcome;
mod permission;
mod plan;
mod prepull;
mod reconnect;
mod recording;
mod recover;
mod releases;
mod retry;
mod status;
mod stopped;
mod target;
mod upgrade;

pub use api_call::{ApiCallError, FailureKind};
pub use checkpoint::grant::{GrantError, LeaseAccess};
pub use checkpoint::install::{
    CheckpointerInstall, CheckpointerOutcome,
    DEFAULT_START_PATIENCE as DEFAULT_CHECKPOINTER_PATIENCE,
    InstallError as CheckpointerInstallError,
};
pub use checkpoint::{CheckpointError, CheckpointOptions, CheckpointRound, NodeDisk};
pub use client::{ClientArgs, ClientError, Clients, KubeconfigSource, RequestCount, connect_with};
pub use cluster::{Chain, Cluster, Command};
pub use cluster_view::{ClusterView, ViewTimeout};
pub use config_file::{ConfigFile, ConfigFileError};
pub use connect::ConnectError;
pub use convert::conversion_view::ConversionView;
pub use convert::{
    ComponentFigures, ComponentPlan as ComponentConversionPlan, ConversionPlan, ConvertError,
    ConvertReport, ConvertRequest, DEFAULT_DEADLINE as DEFAULT_CONVERT_DEADLINE, FrontRequest,
    convert,
};
pub use error::{Error, ErrorKind};
pub use events::{EVENTS_SCHEMA, Event, Events, Stamped};
pub use front::install::{
    DEFAULT_START_PATIENCE as DEFAULT_FRONT_PATIENCE, FrontInstall, FrontInstallError, FrontOutcome,
};
pub use front::{
    DEFAULT_CA_FILE as DEFAULT_FRONT_CA_FILE,
    DEFAULT_CHECK_INTERVAL as DEFAULT_FRONT_CHECK_INTERVAL,
    DEFAULT_CHECK_TIMEOUT as DEFAULT_FRONT_CHECK_TIMEOUT, DEFAULT_DRAIN as DEFAULT_FRONT_DRAIN,
    DEFAULT_HANDOVER_SOCKET as DEFAULT_FRONT_HANDOVER_SOCKET, DEFAULT_HOLD as DEFAULT_FRONT_HOLD,
    DEFAULT_START_PATIENCE as DEFAULT_FRONT_START_PATIENCE, Found as FrontFound,
    FreshBecause as FrontFreshBecause, Front, FrontError, FrontEvent, FrontOptions, FrontStart,
    FrontStopped, Listening as FrontListening, trusting as front_tls_trusting,
};
pub use health::{Health, readyz, server_version};
pub use manifests::{ManifestEncoding, ManifestForm, ManifestsError, RenderedManifests};
pub use node_conversion::NodeConversion;
pub use node_files::FilesError;
pub use observer::Observer;
pub use outcome::ComponentOutcome;
pub use plan::{
    ComponentPlan, HOP_CHECKS, HopPlan, PLAN_SCHEMA, Plan, PlanError, PlanRequest, RunningPod,
    make_plan,
};
pub use prepull::{
    PrepullError, PrepullOptions, PrepullProgress, images_to_prepull, prepull,
    record as record_prepull, skip as skip_prepull,
};
pub use recover::{
    DEFAULT_RECOVER_TIMEOUT, EtcdAccess, RecoverError, RecoverReport, RecoverRequest,
    RecoveredComponent, RecoveredFile,
};
pub use retry::{RetryPolicy, with_retries};
pub use status::{ComponentStatus, ControlPlaneStatus};
pub use target::{TargetError, Targets, TemplateSource};
pub use upgrade::{ApplyOptions, RunOutcome, RunReport, apply};
pub use upgrade::{ExecuteError, ExecuteOptions};

pub use etcd_snapshot::{EtcdSnapshot, SnapshotError};
pub use releases::{DEFAULT_RELEASES_URL, ReleaseError};
pub use selfhost_core::certificates::CertificateContent;
pub use selfhost_core::chain::{ChainError, Hop, HopSource};
/// The domain's words from `selfhost-core` that the front door speaks in.
pub use selfhost_core::checkpoint::{
    CHECKPOINTER_MANIFEST, CHECKPOINTER_NAME, CheckpointPolicy, CheckpointStep, CheckpointTuning,
    CheckpointerPod, CheckpointerState, KUBELET_KUBECONFIG, NodeCheckpointer,
    grant::GRANT_NAME as CHECKPOINTER_GRANT,
};
pub use selfhost_core::component::NAMESPACE;
pub use selfhost_core::config::ClusterConfig;
pub use selfhost_core::conversion::decide::Direction;
pub use selfhost_core::disruption::{ApiImpact, ExpectedDisruption, HandOver};
pub use selfhost_core::front::{
    FRONT_ANNOTATION, FRONT_MANIFEST, FRONT_NAME, FrontLayout, FrontPod, FrontTuning,
    LayoutError as FrontLayoutError,
};
pub use selfhost_core::observation::ApiHealth;
pub use selfhost_core::pivot::{DEFAULT_DEADLINE as DEFAULT_UPGRADE_DEADLINE, PivotOptions};
pub use selfhost_core::preflight::{Check, DEFAULT_CERTIFICATE_WARNING, Verdict};
pub use selfhost_core::prepull::{DEFAULT_PREPULL_DEADLINE, PREPULL_LABEL, PrepullOutcome};
pub use selfhost_core::render::to_yaml;
pub use selfhost_core::rollout::AvailabilityBudget;
pub use selfhost_core::skew::{SUPPORTED_VERSIONS, SkewFlags};
pub use selfhost_core::{Component, KubeVersion};

/// Reads and parses a kubeadm configuration file. `version`, when given, is the version the
/// command renders: a file naming another one gets a notice.
///
/// # Errors
/// The file cannot be read or is not a kubeadm configuration ([`ErrorKind::BadInput`]).
pub fn read_config_file(
    path: &std::path::Path,
    version: Option<&KubeVersion>,
) -> Result<ConfigFile, Error> {
    Ok(config_file::read(path, version)?)
}

/// The control-plane manifests of `version` for `config` (kubeadm's defaults when `None`),
/// read from `config_path` (named in the fix of a refusal).
///
/// # Errors
/// A component carries a flag or feature gate `version` refuses ([`ErrorKind::Refused`]), or
/// the objects cannot be built or serialised ([`ErrorKind::BadInput`]).
pub fn manifests(
    config: Option<&ClusterConfig>,
    config_path: Option<&std::path::Path>,
    version: &KubeVersion,
    form: ManifestForm,
    encoding: ManifestEncoding,
) -> Result<RenderedManifests, Error> {
    let path = config_path.map(|p| p.display().to_string());
    Ok(manifests::render_manifests(
        config,
        path.as_deref(),
        version,
        form,
        encoding,
    )?)
}

/// Where the image with the `selfhost` binary is published, tagged with this release: what the
/// node agents' static pods (the checkpointer, the API front) run by default.
pub const DEFAULT_IMAGE: &str =
    concat!("ghcr.io/selfhost-dev/selfhost:v", env!("CARGO_PKG_VERSION"));

/// The `User-Agent` the checkpointer's requests carry, so that the API server's audit log and
/// metrics tell the node agent from the upgrading tool.
pub const CHECKPOINTER_USER_AGENT: &str = "selfhost-checkpoint";

/// Runs the checkpointer on its node until `cancel` (see `docs/design.md`, "Checkpoints"):
/// the API may be down from the start, so it needs a kubeconfig, not a connection.
///
/// # Errors
/// The kubeconfig cannot be used.
pub async fn checkpoint(
    args: &ClientArgs,
    options: &CheckpointOptions,
    cancel: &tokio_util::sync::CancellationToken,
    report: &mut (dyn FnMut(&CheckpointRound) + Send),
) -> Result<(), Error> {
    let clients = client::connect_as(args, Some(CHECKPOINTER_USER_AGENT)).await?;
    checkpoint::run(&clients, options, cancel, report).await;
    Ok(())
}

/// The checkpointer's static pod manifest, as `convert to-self-hosted` writes it.
///
/// # Errors
/// The pod cannot be serialised ([`ErrorKind::BadInput`]).
pub fn checkpointer_manifest(pod: &CheckpointerPod) -> Result<String, Error> {
    selfhost_core::render::to_yaml(&pod.render())
        .map_err(|e| manifests::ManifestsError::from(e).into())
}

/// Installs the checkpointer on a node converted without it (see `docs/design.md`,
/// "Checkpoints"): grants its node read access to the Leases of kube-system, writes its static
/// pod into the node's manifests directory and waits until the kubelet runs it. With
/// `dry_run`, says what it would do and changes nothing.
///
/// # Errors
/// The kubeconfig cannot be used, its credentials lack a permission the install needs (each
/// named, [`ErrorKind::Refused`], before any change), the manifests directory is not there,
/// the grant fails or the manifest cannot be written.
pub async fn install_checkpointer(
    args: &ClientArgs,
    request: &CheckpointerInstall,
    dry_run: bool,
) -> Result<CheckpointerOutcome, Error> {
    if !request.manifests_dir.is_dir() {
        return Err(FilesError::NoManifestsDir {
            path: request.manifests_dir.clone(),
        }
        .into());
    }
    let clients = client::connect(args).await?;
    connect::check_access(
        &clients,
        "selfhost checkpoint install",
        permission::UPGRADER,
        &access::checkpoint_install(),
    )
    .await?;
    Ok(checkpoint::install::install(&clients.api, request, dry_run).await?)
}

/// Removes the checkpointer from `node` (see `docs/design.md`, "Checkpoints"): its static pod
/// in `manifests_dir`, its checkpoints under the host root `host_root`, then its node's access
/// to the Leases of kube-system. Refuses while a checkpoint's copy is active, which the node's
/// control plane may be running on. With `dry_run`, says what it would do and changes nothing.
///
/// # Errors
/// The kubeconfig cannot be used, its credentials lack a permission the removal needs, the
/// manifests directory is not there or holds an active copy (all before any change), a file
/// cannot be removed or the revocation fails.
pub async fn remove_checkpointer(
    args: &ClientArgs,
    node: &str,
    manifests_dir: &std::path::Path,
    host_root: &std::path::Path,
    dry_run: bool,
) -> Result<CheckpointerOutcome, Error> {
    if !manifests_dir.is_dir() {
        return Err(FilesError::NoManifestsDir {
            path: manifests_dir.to_path_buf(),
        }
        .into());
    }
    let disk = NodeDisk {
        checkpoint_dir: checkpoint::install::checkpoint_dir(host_root),
        manifests_dir: manifests_dir.to_path_buf(),
    };
    if disk.has_active_copies() {
        return Err(CheckpointerInstallError::ActiveCopies {
            manifests_dir: manifests_dir.to_path_buf(),
        }
        .into());
    }
    let clients = client::connect(args).await?;
    connect::check_access(
        &clients,
        "selfhost checkpoint remove",
        permission::UPGRADER,
        &access::checkpointer_revoke(),
    )
    .await?;
    Ok(checkpoint::install::remove(&clients.api, node, manifests_dir, host_root, dry_run).await?)
}

/// Brings back a self-hosted control plane that is gone with no checkpoint, on the node it runs
/// on (see `docs/design.md`, "Recovery"): reads the self-hosted DaemonSets and what their
/// templates mount from etcd, writes them as the checkpointer's active copies with their files,
/// and waits until the API at the kubeconfig's address serves. `say` hears each step.
///
/// # Errors
/// A refusal before anything is written ([`ErrorKind::Refused`], or [`ErrorKind::BadInput`]
/// for a flag or file), or a failure after ([`ErrorKind::NotRestored`]).
pub async fn recover(
    args: &ClientArgs,
    request: &RecoverRequest,
    say: &mut (dyn FnMut(String) + Send),
) -> Result<RecoverReport, Error> {
    let clients = client::connect(args).await?;
    Ok(recover::run(&clients, request, say).await?)
}

/// A run as reports show it: the engine's events, what it measured, and a recording of the
/// cluster taken beside it.
pub mod report {
    pub use crate::measure::{ComponentDisruption, LeaderChange, MeasuredDisruption};
    pub use crate::recording::{Recorded, Recording, markers};
    pub use selfhost_core::report::*;
}

/// Installs the API front on a self-hosted node that has none (see `docs/design.md`,
/// "Node-local API front"): writes its static pod and waits until the kubelet runs it (one
/// that does not run is taken away again); once every control-plane node runs one, marks the
/// kube-apiserver DaemonSet to listen behind them, which the next `apply` carries out. With
/// `dry_run`, says what it would do and changes nothing.
///
/// # Errors
/// The kubeconfig cannot be used, its credentials lack a permission the install needs, the
/// manifests directory is not there ([`ErrorKind::BadInput`]); the cluster is not self-hosted
/// or its kube-apiserver listens on the node's own address ([`ErrorKind::Refused`]); a file
/// or an API call fails.
pub async fn install_front(
    args: &ClientArgs,
    request: &FrontInstall,
    dry_run: bool,
) -> Result<FrontOutcome, Error> {
    if !request.manifests_dir.is_dir() {
        return Err(FrontInstallError::Files(FilesError::NoManifestsDir {
            path: request.manifests_dir.clone(),
        })
        .into());
    }
    let clients = client::connect(args).await?;
    connect::check_access(
        &clients,
        "selfhost front install",
        permission::UPGRADER,
        &access::front_install(),
    )
    .await?;
    Ok(front::install::install(&clients.api, request, dry_run).await?)
}

/// Removes the API front from `node`, whose kube-apiserver must not listen behind it (`convert
/// to-static` takes a front out from before a kube-apiserver). With `dry_run`, says what it
/// would do and changes nothing.
///
/// # Errors
/// The kubeconfig cannot be used, its credentials lack a permission, the manifests directory
/// is not there, the kube-apiserver listens behind the fronts ([`ErrorKind::Refused`]), or
/// the file cannot be removed.
pub async fn remove_front(
    args: &ClientArgs,
    node: &str,
    manifests_dir: &std::path::Path,
    dry_run: bool,
) -> Result<FrontOutcome, Error> {
    if !manifests_dir.is_dir() {
        return Err(FrontInstallError::Files(FilesError::NoManifestsDir {
            path: manifests_dir.to_path_buf(),
        })
        .into());
    }
    let clients = client::connect(args).await?;
    connect::check_access(
        &clients,
        "selfhost front remove",
        permission::UPGRADER,
        &access::front_remove(),
    )
    .await?;
    Ok(front::install::remove(&clients.api, node, manifests_dir, dry_run).await?)
}

/// A node's API front's static pod, as `convert to-self-hosted` writes it.
///
/// # Errors
/// The pod cannot be serialised ([`ErrorKind::BadInput`]).
pub fn front_manifest(pod: &FrontPod) -> Result<String, Error> {
    selfhost_core::render::to_yaml(&pod.render())
        .map_err(|e| manifests::ManifestsError::from(e).into())
}
