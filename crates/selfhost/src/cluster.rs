//! The front door for a self-hosted cluster: connect once for a command (reachability,
//! credentials and every permission the command needs checked before anything is done), then
//! status, plan, prepull and apply on what was observed.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::ListParams;
use selfhost_core::Component;
use selfhost_core::chain::{Hop, HopSource, chainable, check_given, hops, minors_between};
use selfhost_core::checkpoint::CHECKPOINTER_LABEL;
use selfhost_core::component::NAMESPACE;
use selfhost_core::daemonset::CONTROL_PLANE_NODE_LABEL;
use selfhost_core::front::FRONT_LABEL;
use selfhost_core::prepull::PrepullOutcome;
use selfhost_core::skew::{SUPPORTED_VERSIONS, SkewFlags, SkewInput};
use selfhost_core::version::KubeVersion;
use tokio_util::sync::CancellationToken;

use crate::access;
use crate::client::{ClientArgs, Clients, RequestCount};
use crate::connect::{self, ConnectError};
use crate::error::Error;
use crate::etcd_client::EtcdAccess;
use crate::etcd_snapshot::EtcdSnapshot;
use crate::events::Events;
use crate::observer::Observer;
use crate::permission::{Permission, UPGRADER, VIEWER};
use crate::plan::{HOP_CHECKS, HopPlan, Plan, PlanRequest, make_plan, plan_observed};
use crate::prepull::{PrepullOptions, PrepullProgress, images_to_prepull, prepull, record};
use crate::retry::RetryPolicy;
use crate::status::{ControlPlaneStatus, api_fronts, checkpointers, component_status};
use crate::target::Targets;
use crate::upgrade::{ApplyOptions, RunReport, apply};
use selfhost_core::preflight::{ClusterObservation, PreflightReport};

/// How long the first list of the control-plane objects may take.
const FIRST_LIST: Duration = Duration::from_secs(30);
/// How long a dead server is probed again before it is reported: a connection reset (a load
/// balancer, an apiserver restarting) must not end the command.
const REACH_PATIENCE: Duration = Duration::from_millis(800);

/// The command a connection is for: it decides the permissions checked up front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `status`.
    Status,
    /// `plan`.
    Plan {
        /// No `--config`: the cluster's kubeadm configuration is read.
        config_from_cluster: bool,
        /// `--prepull`: temporary DaemonSets are written.
        prepull: bool,
    },
    /// `apply`.
    Apply {
        /// No `--config`: the cluster's kubeadm configuration is read.
        config_from_cluster: bool,
        /// `--prepull`: temporary DaemonSets are written.
        prepull: bool,
    },
}

impl Command {
    /// The command as a user types it, for messages.
    fn name(self) -> &'static str {
        match self {
            Command::Status => "selfhost status",
            Command::Plan { .. } => "selfhost plan",
            Command::Apply { .. } => "selfhost apply",
        }
    }

    /// The service account of deploy/rbac.yaml that has every permission the command needs.
    fn role(self) -> &'static str {
        match self {
            Command::Status | Command::Plan { prepull: false, .. } => VIEWER,
            Command::Plan { prepull: true, .. } | Command::Apply { .. } => UPGRADER,
        }
    }

    /// Every permission the command needs, observing the control plane included.
    fn permissions(self) -> Vec<Permission> {
        let mut needs = access::observe();
        let (config_from_cluster, prepull) = match self {
            Command::Status => return needs,
            Command::Plan {
                config_from_cluster,
                prepull,
            } => (config_from_cluster, prepull),
            Command::Apply {
                config_from_cluster,
                prepull,
            } => {
                needs.extend(access::upgrade());
                (config_from_cluster, prepull)
            }
        };
        if config_from_cluster {
            needs.extend(access::cluster_config());
        }
        if prepull {
            needs.extend(access::prepull());
        }
        needs
    }
}

/// A connected, watched self-hosted cluster.
pub struct Cluster {
    clients: Clients,
    observer: Observer,
}

/// The hops to a target ([`Cluster::chain`]), and the observation they were worked out from,
/// which the first hop's plan reuses: the cluster's every node is listed once per plan.
#[derive(Debug, Clone)]
pub struct Chain {
    /// In order; one unless the target is two or more minors ahead.
    pub hops: Vec<Hop>,
    observed: ClusterObservation,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("server", &self.clients.server)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Connects as kubectl would, checks that the API answers and that the credentials have
    /// every permission `command` needs, and starts watching the control plane.
    ///
    /// # Errors
    /// A kubeconfig that cannot be used, a server that cannot be worked with, missing
    /// permissions (each named), or watches that do not list in time. Nothing was changed.
    pub async fn connect(args: &ClientArgs, command: Command) -> Result<Cluster, Error> {
        let clients = crate::client::connect(args).await?;
        connect::reach(&clients, REACH_PATIENCE).await?;
        connect::first_request(
            &clients,
            command.name(),
            command.role(),
            &command.permissions(),
        )
        .await?;
        let observer = Observer::start(&clients);
        observer
            .ready(FIRST_LIST)
            .await
            .map_err(ConnectError::TooSlow)?;
        Ok(Cluster { clients, observer })
    }

    /// The clients, for recording a run beside the engine.
    pub fn clients(&self) -> &Clients {
        &self.clients
    }

    /// The API server address the kubeconfig names.
    pub fn server(&self) -> &str {
        &self.clients.server
    }

    /// The HTTP requests sent so far.
    pub fn requests(&self) -> &RequestCount {
        &self.clients.requests
    }

    /// Each component's DaemonSet, pods and upgrade in progress, and the API's health.
    pub async fn status(&mut self) -> ControlPlaneStatus {
        let mut components = Vec::new();
        let mut apiserver = None;
        for component in Component::ALL {
            let obs = self.observer.observe(component).await;
            components.push(component_status(&obs));
            if component == Component::ApiServer {
                apiserver = Some(obs);
            }
        }
        let agents = self.node_agents().await;
        ControlPlaneStatus {
            server: self.clients.server.clone(),
            api: self.observer.api_health(Duration::ZERO).await,
            components,
            checkpointers: agents
                .as_ref()
                .map(|(nodes, pods)| checkpointers(nodes, pods))
                .unwrap_or_default(),
            fronts: match (&agents, &apiserver) {
                (Some((nodes, pods)), Some(obs)) => api_fronts(nodes, pods, obs),
                _ => Vec::new(),
            },
        }
    }

    /// The control-plane nodes' names and the mirror pods of the node agents (checkpointers
    /// and API fronts); `None` when the nodes or pods cannot be listed (status shows what it
    /// can).
    async fn node_agents(&self) -> Option<(Vec<String>, Vec<Pod>)> {
        let nodes: Api<Node> = Api::all(self.clients.api.clone());
        let control_planes = ListParams::default().labels(CONTROL_PLANE_NODE_LABEL);
        let pods: Api<Pod> = Api::namespaced(self.clients.api.clone(), NAMESPACE);
        let labelled = ListParams::default().labels(&format!(
            "{} in ({}, {})",
            CHECKPOINTER_LABEL.0, CHECKPOINTER_LABEL.1, FRONT_LABEL.1
        ));
        let (Ok(nodes), Ok(pods)) = (
            nodes.list(&control_planes).await,
            pods.list(&labelled).await,
        ) else {
            return None;
        };
        let names: Vec<String> = nodes
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        Some((names, pods.items))
    }

    /// The plan for `request`, and the target templates `apply` is to act on; its preflight
    /// ends with whether every control-plane node runs the checkpointer.
    ///
    /// # Errors
    /// The cluster could not be read, or the target not rendered.
    pub async fn plan(&mut self, request: &PlanRequest) -> Result<(Plan, Targets), Error> {
        let (plan, targets, _) = self.plan_observing(request, None).await?;
        Ok((plan, targets))
    }

    /// [`Cluster::plan`] from `observed` when given (else observed afresh), and the
    /// observation it was made from.
    async fn plan_observing(
        &mut self,
        request: &PlanRequest,
        observed: Option<ClusterObservation>,
    ) -> Result<(Plan, Targets, ClusterObservation), Error> {
        let policy = RetryPolicy::default();
        let (mut plan, targets, observed) = match observed {
            Some(observed) => plan_observed(observed, &self.clients.api, request, &policy).await?,
            None => make_plan(&mut self.observer, &self.clients.api, request, &policy).await?,
        };
        let agents = self.node_agents().await;
        let (nodes, pods) = agents.unwrap_or_default();
        // A warning at most: it never changes whether the plan proceeds.
        plan.preflight
            .checks
            .push(selfhost_core::preflight::checkpointers_check(
                &checkpointers(&nodes, &pods),
            ));
        let apiserver = self.observer.observe(Component::ApiServer).await;
        let behind = apiserver.real.as_ref().is_some_and(|ds| {
            selfhost_core::front::FrontLayout::of_annotations(&ds.annotations)
                .is_ok_and(|l| l.is_some())
        });
        if let Some(check) = selfhost_core::preflight::api_fronts_check(
            behind,
            &api_fronts(&nodes, &pods, &apiserver),
        ) {
            plan.preflight.checks.push(check);
            plan.proceeds = plan.proceeds && plan.preflight.allows();
        }
        Ok((plan, targets, observed))
    }

    /// The plan of `chain`: the first hop's in full (as [`Cluster::plan`], from the
    /// observation the chain was worked out from), each later hop judged by the checks its
    /// version decides ([`crate::plan::HOP_CHECKS`]) as if the hops before it had run.
    /// `proceeds` says whether every hop may start.
    ///
    /// # Errors
    /// As [`Cluster::plan`].
    pub async fn plan_chain(
        &mut self,
        request: &PlanRequest,
        chain: &Chain,
    ) -> Result<(Plan, Targets), Error> {
        let Some((first, later)) = chain.hops.split_first() else {
            return self.plan(request).await;
        };
        let mut first_request = request.clone();
        first_request.version = first.to.clone();
        let (mut plan, targets, observed) = self
            .plan_observing(&first_request, Some(chain.observed.clone()))
            .await?;
        let mut hops = vec![HopPlan {
            hop: first.clone(),
            checks: plan.preflight.checks.clone(),
            proceeds: plan.proceeds,
        }];
        for hop in later {
            let mut hop_request = request.clone();
            hop_request.version = hop.to.clone();
            hop_request.assume_from = Some(hop.from.clone());
            let (hop_plan, _, _) = plan_observed(
                observed.clone(),
                &self.clients.api,
                &hop_request,
                &RetryPolicy::default(),
            )
            .await?;
            let decided = PreflightReport {
                checks: hop_plan
                    .preflight
                    .checks
                    .into_iter()
                    .filter(|c| HOP_CHECKS.contains(&c.id))
                    .collect(),
            };
            hops.push(HopPlan {
                hop: hop.clone(),
                proceeds: decided.allows(),
                checks: decided.checks,
            });
        }
        if hops.len() > 1 {
            plan.proceeds = hops.iter().all(|h| h.proceeds);
            plan.chain = hops;
        }
        Ok((plan, targets))
    }

    /// Has every control-plane node pull the target images (temporary DaemonSets, removed
    /// again in every case) and records the `images-pullable` check in `plan`, whose
    /// `proceeds` then says whether `apply` may go on.
    ///
    /// # Errors
    /// The prepull could not be carried out; [`Error::kind`] says whether its DaemonSets
    /// were removed.
    pub async fn prepull(
        &self,
        plan: &mut Plan,
        targets: &Targets,
        options: &PrepullOptions,
        cancel: &CancellationToken,
        progress: &mut (dyn FnMut(PrepullProgress) + Send),
    ) -> Result<(), Error> {
        let images = images_to_prepull(plan, targets);
        progress(PrepullProgress::Starting {
            images: images.iter().map(|i| i.image.clone()).collect(),
        });
        let outcome: PrepullOutcome = prepull(
            &self.clients.api,
            targets,
            &images,
            options,
            cancel,
            progress,
        )
        .await?;
        record(plan, &outcome);
        Ok(())
    }

    /// The hops from what the control plane runs (its oldest kube-apiserver) to `target`: one
    /// unless `target` is two or more minors ahead, then one per minor, through the `via`
    /// versions given or else the newest patch the release index at `releases` names.
    ///
    /// # Errors
    /// A `via` version off the way (bad input), or a minor whose newest patch the index does
    /// not tell.
    pub async fn chain(
        &mut self,
        target: &KubeVersion,
        via: &[KubeVersion],
        releases: &str,
        flags: SkewFlags,
    ) -> Result<Chain, Error> {
        let cluster = self
            .observer
            .cluster(&RetryPolicy::default())
            .await
            .map_err(crate::plan::PlanError::from)?;
        let current = cluster
            .apiserver_versions
            .iter()
            .map(|a| a.version.clone())
            .min_by(|a, b| a.minor_version().cmp(&b.minor_version()))
            .unwrap_or_else(|| target.clone());
        check_given(&current, target, via)?;
        let skew = selfhost_core::skew::check(&SkewInput {
            control_plane: cluster.apiserver_versions.clone(),
            target: target.clone(),
            kubelets: cluster.kubelets.clone(),
            supported: SUPPORTED_VERSIONS,
            flags,
        });
        if !chainable(&skew.findings) {
            return Ok(Chain {
                hops: hops(&current, target, Vec::new()),
                observed: cluster,
            });
        }
        let mut between = Vec::new();
        for minor in minors_between(current.minor_version(), target.minor_version()) {
            match via.iter().find(|v| v.minor_version() == minor) {
                Some(given) => between.push((given.clone(), HopSource::Given)),
                None => {
                    let newest = crate::releases::newest_patch(releases, minor).await?;
                    let from = format!(
                        "{}/stable-{}.{}.txt",
                        releases.trim_end_matches('/'),
                        minor.major(),
                        minor.minor()
                    );
                    between.push((newest, HopSource::Newest { from }));
                }
            }
        }
        Ok(Chain {
            hops: hops(&current, target, between),
            observed: cluster,
        })
    }

    /// Takes a snapshot of etcd into `dir` (`--etcd-snapshot`), before the first change.
    ///
    /// # Errors
    /// Bad etcd flags, or no endpoint gave a whole, verified snapshot; nothing was changed.
    pub async fn snapshot_etcd(
        &self,
        access: &EtcdAccess,
        dir: &std::path::Path,
    ) -> Result<EtcdSnapshot, Error> {
        Ok(crate::etcd_snapshot::take(access, dir).await?)
    }

    /// Upgrades every component to `targets`, one after the other.
    ///
    /// # Errors
    /// The run stopped after it began, without an outcome of the pivot's own.
    pub async fn apply(
        &mut self,
        targets: &Targets,
        options: &ApplyOptions,
        events: &Events,
        cancel: &CancellationToken,
    ) -> Result<RunReport, Error> {
        Ok(apply(
            &mut self.observer,
            &self.clients.api,
            targets,
            options,
            events,
            cancel,
        )
        .await?)
    }
}
