//! `selfhost status`: each component's DaemonSet, what runs on which node, and whether an
//! upgrade is in progress (a backup DaemonSet exists) and to which version.

use selfhost_core::Component;
use selfhost_core::backup::BackupOrigin;
use selfhost_core::observation::Observation;
use serde::Serialize;

use crate::args::{GlobalArgs, OutputFormat, StatusArgs};
use crate::exit::{CliError, Outcome};
use crate::ui;

/// One component's status, as `-o json|yaml` prints it.
#[derive(Debug, Serialize)]
struct ComponentStatus {
    component: Component,
    daemonset: Option<String>,
    desired: i32,
    ready: i32,
    updated: i32,
    /// Image tag → the nodes running it.
    versions: Vec<(String, Vec<String>)>,
    backup: Option<String>,
    upgrading_to: Option<String>,
    /// What the backup runs, for the text table: a record-only backup has no pods.
    #[serde(skip)]
    backup_runs: Option<&'static str>,
}

fn tag(image: &str) -> String {
    image
        .rsplit_once(':')
        .map_or_else(|| image.to_string(), |(_, t)| t.to_string())
}

fn status_of(obs: &Observation) -> ComponentStatus {
    let mut versions: Vec<(String, Vec<String>)> = Vec::new();
    for pod in obs.all_pods() {
        let version = pod
            .containers
            .first()
            .map(|c| tag(&c.image))
            .unwrap_or_default();
        let node = pod.node.clone().unwrap_or_else(|| "(unscheduled)".into());
        match versions.iter_mut().find(|(v, _)| *v == version) {
            Some((_, nodes)) if !nodes.contains(&node) => nodes.push(node),
            Some(_) => {}
            None => versions.push((version, vec![node])),
        }
    }
    versions.iter_mut().for_each(|(_, nodes)| nodes.sort());
    versions.sort();
    let upgrading_to = obs
        .backup
        .as_ref()
        .and_then(|b| b.record.as_ref().ok())
        .map(|r| match &r.origin {
            BackupOrigin::Selfhost { target } => target.to_string(),
            BackupOrigin::Kubeadm => "unknown (a backup left by kubeadm)".to_string(),
        });
    ComponentStatus {
        component: obs.component,
        daemonset: obs.real.as_ref().map(|d| d.name.clone()),
        desired: obs.real.as_ref().map_or(0, |d| d.status.desired),
        ready: obs.real.as_ref().map_or(0, |d| d.status.ready),
        updated: obs.real.as_ref().map_or(0, |d| d.status.updated),
        versions,
        backup: obs.backup.as_ref().map(|b| b.daemonset.name.clone()),
        upgrading_to,
        backup_runs: obs
            .backup
            .as_ref()
            .is_some_and(selfhost_core::pivot::runs_as_record_only)
            .then_some(
                "backup DaemonSet: record only, no pods (on several nodes the other nodes serve \
             while one is replaced)",
            ),
    }
}

/// Shows the control plane's state.
pub async fn run(global: &GlobalArgs, _args: &StatusArgs) -> Result<Outcome, CliError> {
    let (clients, mut observer) = super::cluster::connect(
        global,
        super::cluster::Needs {
            command: "selfhost status",
            permissions: Vec::new(),
            role: selfhost::access::VIEWER,
        },
    )
    .await?;
    let mut statuses = Vec::new();
    for component in Component::ALL {
        statuses.push(status_of(&observer.observe(component).await));
    }
    let api = observer.api_health(std::time::Duration::ZERO).await;
    let text = match global.output {
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = statuses
                .iter()
                .map(|s| {
                    let versions = s
                        .versions
                        .iter()
                        .map(|(v, nodes)| format!("{v} ({})", nodes.join(", ")))
                        .collect::<Vec<_>>()
                        .join("; ");
                    vec![
                        s.component.to_string(),
                        s.daemonset.clone().unwrap_or_else(|| "(missing)".into()),
                        s.desired.to_string(),
                        s.ready.to_string(),
                        s.updated.to_string(),
                        if versions.is_empty() {
                            "-".into()
                        } else {
                            versions
                        },
                        match (&s.upgrading_to, s.backup_runs) {
                            (None, _) => "-".into(),
                            (Some(t), None) => format!("in progress to {t}"),
                            (Some(t), Some(backup)) => format!("in progress to {t}; {backup}"),
                        },
                    ]
                })
                .collect();
            let mut text = format!(
                "API server {} ({}): {}\n\n",
                clients.server,
                api.git_version.as_deref().unwrap_or("version unknown"),
                if api.readyz_ok { "ready" } else { "NOT ready" }
            );
            text.push_str(&ui::table(
                &[
                    "COMPONENT",
                    "DAEMONSET",
                    "DESIRED",
                    "READY",
                    "UP-TO-DATE",
                    "VERSIONS (NODES)",
                    "UPGRADE",
                ],
                &rows,
            ));
            text
        }
        format => ui::structured(
            &serde_json::json!({ "server": clients.server, "api": api, "components": statuses }),
            format,
        )?,
    };
    ui::print(&text)?;
    Ok(Outcome::Done)
}
