//! `selfhost status`: each component's DaemonSet, what runs on which node, and whether an
//! upgrade is in progress (a backup DaemonSet exists) and to which version.

use selfhost::Command;

use crate::args::{GlobalArgs, OutputFormat, StatusArgs};
use crate::exit::{CliError, Outcome};
use crate::ui;

/// What the UPGRADE column says of a record-only backup.
const RECORD_ONLY: &str = "backup DaemonSet: record only, no pods (on several nodes the other nodes serve while one is \
     replaced)";

/// Shows the control plane's state.
pub async fn run(global: &GlobalArgs, _args: &StatusArgs) -> Result<Outcome, CliError> {
    let mut cluster = super::cluster::connect(global, Command::Status).await?;
    let status = cluster.status().await;
    let text = match global.output {
        OutputFormat::Text => {
            let rows: Vec<Vec<String>> = status
                .components
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
                        match (&s.upgrading_to, s.backup_is_record_only) {
                            (None, _) => "-".into(),
                            (Some(t), false) => format!("in progress to {t}"),
                            (Some(t), true) => format!("in progress to {t}; {RECORD_ONLY}"),
                        },
                    ]
                })
                .collect();
            let mut text = format!(
                "API server {} ({}): {}\n\n",
                status.server,
                status
                    .api
                    .git_version
                    .as_deref()
                    .unwrap_or("version unknown"),
                if status.api.readyz_ok {
                    "ready"
                } else {
                    "NOT ready"
                }
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
            if !status.checkpointers.is_empty() {
                let rows: Vec<Vec<String>> = status
                    .checkpointers
                    .iter()
                    .map(|c| {
                        let mut row = vec![c.node.clone(), c.state.to_string()];
                        if let Some(front) = status.fronts.iter().find(|f| f.node == c.node) {
                            let backends: Vec<String> =
                                front.backends.iter().map(ToString::to_string).collect();
                            row.extend([front.state.to_string(), backends.join(", ")]);
                        }
                        row
                    })
                    .collect();
                let headers: &[&str] = if status.fronts.is_empty() {
                    &["NODE", "CHECKPOINTER"]
                } else {
                    &["NODE", "CHECKPOINTER", "API FRONT", "BACKENDS"]
                };
                text.push('\n');
                text.push_str(&ui::table(headers, &rows));
            }
            text
        }
        format => ui::structured(&status, format)?,
    };
    ui::print(&text)?;
    Ok(Outcome::Done)
}
