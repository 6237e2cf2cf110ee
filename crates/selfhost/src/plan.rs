//! `plan`: everything `apply` would check and change, decided from one observation of the
//! cluster, without changing anything. `apply` makes the same plan and refuses to start
//! unless it proceeds.

use std::collections::BTreeMap;
use std::path::PathBuf;

use selfhost_core::Component;
use selfhost_core::certificates::CertificatesObserved;
use selfhost_core::chain::Hop;
use selfhost_core::config::ClusterConfig;
use selfhost_core::disruption::{ClusterShape, ExpectedDisruption, expected_disruption};
use selfhost_core::observation::Observation;
use selfhost_core::preflight::{Check, CheckId, EtcdObservation};
use selfhost_core::preflight::{ClusterObservation, PreflightReport, PreflightTarget, preflight};
use selfhost_core::render::template_diff;
use selfhost_core::skew::{SUPPORTED_VERSIONS, SkewFlags};
use selfhost_core::version::KubeVersion;
use serde::Serialize;

use crate::api_call::ApiCallError;
use crate::etcd_client::{EtcdAccess, EtcdAccessError};
use crate::observer::Observer;
use crate::retry::RetryPolicy;
use crate::target::{TargetError, Targets, TemplateSource, cluster_config, targets};

/// Version of the plan's JSON/YAML schema; bumped on any incompatible change.
pub const PLAN_SCHEMA: &str = "selfhost.dev/plan/v1";

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// The target version.
    pub version: KubeVersion,
    /// `--config FILE`, already read.
    pub config_file: Option<(PathBuf, ClusterConfig)>,
    /// `--force`, `--allow-*-upgrades`.
    pub flags: SkewFlags,
    /// `--accept-downtime`.
    pub accept_downtime: bool,
    /// `--certificate-warning-days`, as a duration.
    pub certificate_warning: std::time::Duration,
    /// `--etcd-endpoints` and etcd's client certificate: each member is asked directly
    /// (`None`: etcd is seen through the kube-apiserver and its static pods only).
    pub etcd: Option<EtcdAccess>,
    /// A later hop of a chain: judge it as if every kube-apiserver ran this version already
    /// (`None`: as they run now).
    pub assume_from: Option<KubeVersion>,
}

/// One pod of a component as it runs now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunningPod {
    /// Its node.
    pub node: String,
    /// Its name.
    pub pod: String,
    /// Its image.
    pub image: String,
    /// Whether it is Ready.
    pub ready: bool,
    /// Whether it belongs to the backup DaemonSet.
    pub backup: bool,
}

/// The plan for one component.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentPlan {
    /// The component.
    pub component: Component,
    /// Its DaemonSet.
    pub daemonset: String,
    /// What runs now, per node.
    pub running: Vec<RunningPod>,
    /// The image the target template runs.
    pub target_image: Option<String>,
    /// Whether the template changes (false: already on the target).
    pub changes: bool,
    /// Unified diff of the pod template, live → target (credentials redacted).
    pub diff: String,
    /// What the hand-over will cost on this cluster.
    pub expected: ExpectedDisruption,
    /// The target of an upgrade already in progress (a backup of ours exists).
    pub in_progress_to: Option<String>,
}

/// Everything `apply` would do.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// [`PLAN_SCHEMA`].
    pub schema: &'static str,
    /// The target version.
    pub target_version: String,
    /// Where the target templates come from.
    pub template_source: TemplateSource,
    /// The same, in words.
    pub template_source_description: String,
    /// The preflight checks.
    pub preflight: PreflightReport,
    /// Whether `apply` would proceed.
    pub proceeds: bool,
    /// One entry per component, in upgrade order.
    pub components: Vec<ComponentPlan>,
    /// The certificates the target templates read, with their dates (no key material).
    pub certificates: CertificatesObserved,
    /// What was seen of etcd.
    pub etcd: EtcdObservation,
    /// A chained upgrade's hops in order, the first being this plan's (empty: one hop).
    pub chain: Vec<HopPlan>,
}

/// One hop of a chained upgrade as planned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HopPlan {
    /// The hop.
    pub hop: Hop,
    /// The checks its version decides (the first hop: every check); the others are made
    /// against the cluster again when the hop starts.
    pub checks: Vec<Check>,
    /// Whether they let it start.
    pub proceeds: bool,
}

/// The checks a later hop's version decides, and which a plan can judge before the hops
/// before it have run: the cluster's other checks are made again when the hop starts.
pub const HOP_CHECKS: &[CheckId] = &[
    CheckId::VersionSkew,
    CheckId::FlagsAndGates,
    CheckId::RemovedApis,
    CheckId::Etcd,
];

/// Why no plan could be made.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Reading the cluster failed.
    #[error(transparent)]
    Api(#[from] ApiCallError),
    /// The target could not be rendered.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// Rendering a diff failed.
    #[error("cannot render the template diff: {0}")]
    Render(String),
    /// The etcd flags cannot be used.
    #[error(transparent)]
    EtcdAccess(#[from] EtcdAccessError),
}

fn running(obs: &Observation) -> Vec<RunningPod> {
    let pod = |p: &selfhost_core::observation::PodObservation, backup: bool| RunningPod {
        node: p.node.clone().unwrap_or_default(),
        pod: p.name.clone(),
        image: p
            .containers
            .first()
            .map(|c| c.image.clone())
            .unwrap_or_default(),
        ready: p.ready,
        backup,
    };
    let mut out: Vec<RunningPod> = obs
        .real
        .iter()
        .flat_map(|ds| ds.pods.iter().map(|p| pod(p, false)))
        .collect();
    out.extend(
        obs.backup
            .iter()
            .flat_map(|b| b.daemonset.pods.iter().map(|p| pod(p, true))),
    );
    out.sort_by(|a, b| (&a.node, a.backup).cmp(&(&b.node, b.backup)));
    out
}

/// Observes the cluster and makes the plan. Returns the targets and the observation too, so
/// that `apply` acts on exactly what was planned.
pub async fn make_plan(
    observer: &mut Observer,
    client: &kube::Client,
    request: &PlanRequest,
    policy: &RetryPolicy,
) -> Result<(Plan, Targets, ClusterObservation), PlanError> {
    let cluster = observer.cluster(policy).await?;
    plan_observed(cluster, client, request, policy).await
}

/// The plan from an observation already made: a later hop of a chain is planned from its
/// first hop's, whose kubelets, certificates and etcd it shares (the certificate files are
/// the same whatever the image); what clients request is read for each hop's removals.
pub(crate) async fn plan_observed(
    mut cluster: ClusterObservation,
    client: &kube::Client,
    request: &PlanRequest,
    policy: &RetryPolicy,
) -> Result<(Plan, Targets, ClusterObservation), PlanError> {
    if let Some(from) = &request.assume_from {
        for apiserver in &mut cluster.apiserver_versions {
            apiserver.version = from.clone();
        }
    }
    let target = request.version.minor_version();
    let current = cluster.oldest_apiserver_minor(target);
    cluster.api_usage = Some(crate::api_usage::read(client, current, target).await);
    let live: BTreeMap<Component, _> = cluster
        .components
        .iter()
        .filter_map(|o| o.real.clone().map(|ds| (o.component, ds)))
        .collect();
    let from_cluster;
    let config = match &request.config_file {
        Some((path, config)) => Some((config, TemplateSource::ConfigFile { path: path.clone() })),
        None => {
            from_cluster = cluster_config(client, policy).await?;
            from_cluster
                .as_ref()
                .map(|c| (c, TemplateSource::ClusterConfigMap))
        }
    };
    let targets = match targets(&request.version, config, &live) {
        Ok(t) => t,
        // A missing DaemonSet is a preflight failure, reported below with its fix; render
        // nothing for it rather than failing the whole plan.
        Err(TargetError::NoLiveTemplate(_)) => Targets {
            version: request.version.clone(),
            source: TemplateSource::LiveTemplates,
            templates: live
                .iter()
                .map(|(c, ds)| {
                    let rendered =
                        selfhost_core::live_target::live_target(*c, &ds.template, &request.version);
                    (
                        *c,
                        selfhost_core::live_target::keep_front(*c, Some(ds), rendered),
                    )
                })
                .collect(),
        },
        Err(e) => return Err(e.into()),
    };
    let sources = crate::certificates::Sources {
        client,
        host_root: None,
        policy,
    };
    let certificates = match cluster.certificates.take() {
        Some(read) => read,
        None => crate::certificates::read_templates(sources, &targets.templates).await,
    };
    cluster.certificates = Some(certificates.clone());
    let etcd = match cluster.etcd.take() {
        Some(seen) => seen,
        None => {
            crate::etcd_status::observe(client, &targets.templates, request.etcd.as_ref(), policy)
                .await?
        }
    };
    cluster.etcd = Some(etcd.clone());
    let report = preflight(
        &cluster,
        &PreflightTarget {
            version: request.version.clone(),
            templates: targets.templates.clone(),
            templates_edited_in: match targets.source {
                TemplateSource::LiveTemplates => None,
                ref configured => Some(configured.to_string()),
            },
            flags: request.flags,
            accept_downtime: request.accept_downtime,
            supported: SUPPORTED_VERSIONS,
            certificate_warning: request.certificate_warning,
        },
    );
    let mut components = Vec::new();
    for obs in &cluster.components {
        let Some(target) = targets.templates.get(&obs.component) else {
            continue;
        };
        let diff = match &obs.real {
            Some(ds) => {
                template_diff(&ds.template, target).map_err(|e| PlanError::Render(e.to_string()))?
            }
            None => String::new(),
        };
        let in_progress_to = obs
            .backup
            .as_ref()
            .and_then(|b| b.record.as_ref().ok())
            .and_then(|r| match &r.origin {
                selfhost_core::backup::BackupOrigin::Selfhost { target } => {
                    Some(target.to_string())
                }
                selfhost_core::backup::BackupOrigin::Kubeadm => None,
            });
        components.push(ComponentPlan {
            component: obs.component,
            daemonset: obs.component.daemonset_name(),
            running: running(obs),
            target_image: target
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone()),
            changes: obs
                .real
                .as_ref()
                .is_none_or(|ds| !selfhost_core::pivot::template_applied(ds, target)),
            diff,
            expected: expected_disruption(obs.component, &ClusterShape::observe(obs, target)),
            in_progress_to,
        });
    }
    let plan = Plan {
        schema: PLAN_SCHEMA,
        target_version: request.version.to_string(),
        template_source_description: targets.source.to_string(),
        template_source: targets.source.clone(),
        proceeds: report.allows(),
        preflight: report,
        components,
        certificates,
        etcd,
        chain: Vec::new(),
    };
    Ok((plan, targets, cluster))
}
