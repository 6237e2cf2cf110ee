//! Before any change: the node's files, the node, every manifest and template, and what the
//! first decision of each component would be. Bad input and refusals are found here, so that
//! a refused run has changed nothing.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, PodTemplateSpec};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use selfhost_core::Component;
use selfhost_core::command_line::main_container;
use selfhost_core::conversion::decide::{
    ConvertStep, Direction, Mode, awaits_only_the_cluster, next_step,
};
use selfhost_core::conversion::{permits_port_sharing, secret_files, self_hosted_daemonset};
use selfhost_core::daemonset::DaemonSetOptions;
use selfhost_core::preflight::{Check, Verdict, certificate_checks, flags_and_gates};
use selfhost_core::version::image_version;
use serde::Serialize;

use super::config::{ConfigSource, disagreements, resolve};
use super::conversion_view::ConversionView;
use super::to_self_hosted::certificate_uploads;
use super::{ConvertError, ConvertRequest};
use crate::api_call::FailureKind;
use crate::node_files::NodeFiles;
use crate::retry::with_retries;

/// The longest a plan waits for a node that is where the run leads to settle (a leader
/// elected, a new process judged serving by its identity Lease, a mirror pod gone): longer
/// than a kube-apiserver's identity Lease renewal (10 s) and a standby's wait for an expired
/// leader Lease (15 s, retried every 2 s), at real timings.
const SETTLE: Duration = Duration::from_secs(30);
/// How often a settling plan decides again without news from the watches.
const SETTLE_RECHECK: Duration = Duration::from_millis(200);

/// What a run will do with one component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ComponentPlan {
    /// The component.
    pub component: Component,
    /// `convert`, `skip` (already where the direction leads) or `refuse`.
    pub action: String,
    /// What the first decision says, in words.
    pub detail: String,
    /// Whether the static pod permits port sharing (to self-hosted: then the DaemonSet pod
    /// starts beside it and the API stays up on this node; otherwise there is a gap).
    pub port_sharing: bool,
    /// Where the kubeadm configuration and what runs disagree (see [`super::config`]); what
    /// runs is converted as it is.
    pub config_disagreements: Vec<String>,
}

/// What a run will do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConversionPlan {
    /// Which way.
    pub direction: Direction,
    /// The node.
    pub node: String,
    /// Where manifests moved aside go.
    pub backup_dir: String,
    /// The kubeadm configuration what runs was checked against.
    pub config_source: ConfigSource,
    /// One entry per component, in order.
    pub components: Vec<ComponentPlan>,
    /// The `certificates` check of what runs on the node (etcd's static pod included): an
    /// expired certificate refuses, since a converted component would not come back.
    pub certificates: Vec<Check>,
}

impl ConversionPlan {
    /// The refusals, in words; empty when the run may proceed.
    pub fn refusals(&self) -> Vec<String> {
        self.components
            .iter()
            .filter(|c| c.action == "refuse")
            .map(|c| format!("{}: {}", c.component, c.detail))
            .chain(
                self.certificates
                    .iter()
                    .filter(|c| c.verdict == Verdict::Fail)
                    .map(|c| {
                        format!(
                            "certificates: {} (fix: {})",
                            c.message,
                            c.fix.as_deref().unwrap_or_default()
                        )
                    }),
            )
            .collect()
    }

    /// Whether there is anything to do.
    pub fn has_work(&self) -> bool {
        self.components.iter().any(|c| c.action == "convert")
    }
}

/// Checks the request against the node and the cluster and says what a run would do.
pub async fn plan(
    view: &mut ConversionView,
    client: &kube::Client,
    request: &ConvertRequest,
) -> Result<ConversionPlan, ConvertError> {
    let files = NodeFiles::open(&request.manifests_dir)?;
    let nodes: Api<Node> = Api::all(client.clone());
    match with_retries(
        &format!("get node {}", request.node),
        &request.retry,
        || nodes.get(&request.node),
    )
    .await
    {
        Ok(_) => {}
        Err(e) if e.kind == FailureKind::NotFound => {
            return Err(ConvertError::UnknownNode(request.node.clone()));
        }
        Err(e) => return Err(e.into()),
    }
    let (config, config_source) =
        resolve(client, request.config_file.as_ref(), &request.retry).await?;
    let options = DaemonSetOptions {
        certs_in_secrets: request.certs_in_secrets,
    };
    let far = Timestamp::now() + Duration::from_secs(3600);
    let mut components = Vec::new();
    let mut running_specs: Vec<(&'static str, PodSpec)> = Vec::new();
    for component in Component::ALL {
        let manifest = files.manifest(component)?;
        let backup = files.backup(component)?;
        // What runs on the node: the static manifest, or the DaemonSet's template.
        let running = match request.direction {
            Direction::ToSelfHosted => {
                if let Some(pod) = &manifest {
                    let ds = self_hosted_daemonset(component, pod, &options)?;
                    if request.certs_in_secrets {
                        certificate_uploads(&ds, &request.host_root)?;
                    }
                }
                manifest.clone().or_else(|| backup.clone())
            }
            Direction::ToStatic => match view.daemonset(component) {
                Some(ds) => Some(super::to_static::static_manifest(component, &ds, &files)?),
                None => manifest.clone(),
            },
        };
        if let Some(spec) = running.as_ref().and_then(|p| p.spec.clone()) {
            running_specs.push((component.name(), spec));
        }
        let config_disagreements = match (&config, &running) {
            (Some(config), Some(running)) => disagreements(component, running, config),
            _ => Vec::new(),
        };
        let first = settled_first_step(view, request, &files, component, far).await?;
        let front_refusal = match component {
            Component::ApiServer => {
                let live = view.daemonset(component);
                super::front::refusal(
                    request,
                    live.as_deref(),
                    view.node_ip(&request.node),
                    &files,
                )?
            }
            _ => None,
        };
        let front_refusal = front_refusal.or_else(|| {
            let origin = match request.direction {
                Direction::ToSelfHosted => format!(
                    "the static pod manifest {}",
                    files.manifest_path(component).display()
                ),
                Direction::ToStatic => {
                    format!("the DaemonSet kube-system/{}", component.daemonset_name())
                }
            };
            flags_refusal(component, running.as_ref(), &origin)
        });
        let (action, detail) = match (&first, front_refusal) {
            (ConvertStep::Done { .. }, _) => ("skip", first.to_string()),
            (_, Some(why)) => ("refuse", why),
            (ConvertStep::Refuse { .. }, None) => ("refuse", first.to_string()),
            (_, None) => ("convert", first.to_string()),
        };
        let port_sharing = manifest
            .as_ref()
            .or(backup.as_ref())
            .and_then(|p| p.spec.as_ref())
            .is_some_and(permits_port_sharing);
        components.push(ComponentPlan {
            component,
            action: action.to_string(),
            detail,
            port_sharing,
            config_disagreements,
        });
    }
    if let Some(spec) = files.etcd()?.and_then(|p| p.spec) {
        running_specs.push(("etcd", spec));
    }
    let sources = crate::certificates::Sources {
        client,
        host_root: Some(&request.host_root),
        policy: &request.retry,
    };
    let observed = crate::certificates::read(
        sources,
        running_specs.iter().map(|(name, spec)| (*name, spec)),
    )
    .await;
    Ok(ConversionPlan {
        direction: request.direction,
        node: request.node.clone(),
        backup_dir: files.backup_dir.display().to_string(),
        config_source,
        components,
        certificates: certificate_checks(&observed, request.certificate_warning),
    })
}

/// Why `component` cannot be converted when what runs carries a flag or feature gate its own
/// release refuses: the converted pod would never start (see [`flags_and_gates`]).
fn flags_refusal(component: Component, running: Option<&Pod>, origin: &str) -> Option<String> {
    let spec = running?.spec.clone()?;
    let image = main_container(&spec, component.name())?.image.as_deref()?;
    let version = image_version(image)?.minor_version();
    let template = PodTemplateSpec {
        metadata: None,
        spec: Some(spec),
    };
    let refused: Vec<String> = flags_and_gates(component, &template, version, origin)
        .into_iter()
        .filter(|c| c.verdict == Verdict::Fail)
        .map(|c| format!("{} (fix: {})", c.message, c.fix.unwrap_or_default()))
        .collect();
    (!refused.is_empty()).then(|| refused.join("; "))
}

/// The first decision for `component`. A node already where the run leads may still be
/// settling (a leader being elected, the last pod being judged serving): that wait needs no
/// step of ours, so it is waited for here (at most [`SETTLE`], and never past the request's
/// deadline) and a completed conversion's re-run says it has nothing to do.
async fn settled_first_step(
    view: &mut ConversionView,
    request: &ConvertRequest,
    files: &NodeFiles,
    component: Component,
    far: Timestamp,
) -> Result<ConvertStep, ConvertError> {
    let until = tokio::time::Instant::now() + SETTLE.min(request.deadline);
    loop {
        let obs = view.observe(component, request, files, far)?;
        let first = next_step(request.direction, &Mode::Forward, &obs);
        let settling = matches!(first, ConvertStep::Wait { .. })
            && awaits_only_the_cluster(request.direction, &obs);
        let now = tokio::time::Instant::now();
        if !settling || now >= until {
            return Ok(first);
        }
        view.next_change((now + SETTLE_RECHECK).min(until)).await;
    }
}

/// The Secrets `convert to-static` will read: those the live DaemonSets mount files from that
/// are missing on this node (it writes them from the Secrets). Asked about before the run, so
/// that a run without the permission refuses instead of failing half-way.
pub fn secrets_to_read(view: &ConversionView, request: &ConvertRequest) -> Vec<String> {
    if request.direction != Direction::ToStatic {
        return Vec::new();
    }
    let mut names: Vec<String> = Component::ALL
        .into_iter()
        .filter_map(|component| view.daemonset(component))
        .filter_map(|ds| ds.spec.clone()?.template.spec)
        .flat_map(|spec| secret_files(&spec))
        .filter(|file| {
            !request
                .host_root
                .join(file.path.trim_start_matches('/'))
                .exists()
        })
        .map(|file| file.secret)
        .collect();
    names.sort();
    names.dedup();
    names
}
