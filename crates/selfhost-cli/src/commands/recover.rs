//! `selfhost recover`: brings back a self-hosted control plane that is gone with no
//! checkpoint, on this node, from what etcd holds. Progress goes to stderr; what was written
//! (paths, images, flags; never a Secret's content) to stdout.

use std::path::Path;

use selfhost::{EtcdAccess, RecoverReport, RecoverRequest};
use serde::Serialize;

use crate::args::{DEFAULT_MANIFESTS_DIR, GlobalArgs, OutputFormat, RecoverArgs};
use crate::exit::{CliError, Outcome};

/// One component as `-o json|yaml` shows it.
#[derive(Serialize)]
struct ComponentOut<'a> {
    component: &'a str,
    manifest: String,
    image: &'a str,
    revision: &'a str,
    command: &'a [String],
    files: Vec<FileOut<'a>>,
}

/// One file as `-o json|yaml` shows it.
#[derive(Serialize)]
struct FileOut<'a> {
    path: String,
    mode: String,
    from: &'a str,
    kept: bool,
}

/// The result as `-o json|yaml` shows it.
#[derive(Serialize)]
struct ReportOut<'a> {
    dry_run: bool,
    etcd: &'a str,
    api_server: &'a str,
    components: Vec<ComponentOut<'a>>,
    skipped_fields: &'a [String],
    served_after_seconds: Option<f64>,
    next: String,
}

/// The command that installs the checkpointer on the node recover ran on: the same node, the
/// same files (manifests directory and host root) and the same cluster, so that it can be run
/// as printed from where recover ran.
fn next_step(global: &GlobalArgs, args: &RecoverArgs) -> String {
    let mut command = format!("selfhost checkpoint install --node {}", args.node);
    if args.manifests_dir != Path::new(DEFAULT_MANIFESTS_DIR) {
        command.push_str(&format!(
            " --manifests-dir {}",
            args.manifests_dir.display()
        ));
    }
    if args.host_root != Path::new("/") {
        command.push_str(&format!(" --host-root {}", args.host_root.display()));
    }
    if let Some(kubeconfig) = &global.kubeconfig {
        command.push_str(&format!(" --kubeconfig {}", kubeconfig.display()));
    }
    if let Some(context) = &global.context {
        command.push_str(&format!(" --context {context}"));
    }
    command
}

fn text(report: &RecoverReport, next: &str) -> String {
    let mut out = String::new();
    if report.dry_run {
        out.push_str("Dry run: nothing was written. recover would write:\n\n");
    }
    for c in &report.components {
        out.push_str(&format!(
            "{}: {}\n  image    {} ({})\n  command  {}\n",
            c.component,
            c.manifest.display(),
            c.image,
            c.revision,
            c.command.join(" ")
        ));
        for f in &c.files {
            let kept = if f.kept { ", already there: kept" } else { "" };
            out.push_str(&format!(
                "  file     {} ({:04o}, from {}{kept})\n",
                f.path.display(),
                f.mode,
                f.from
            ));
        }
    }
    if !report.skipped_fields.is_empty() {
        out.push_str(&format!(
            "\nFields newer than this selfhost were skipped: {}\n",
            report.skipped_fields.join(", ")
        ));
    }
    match report.served_after {
        Some(after) => out.push_str(&format!(
            "\nThe API at {} serves again, {:.1} s after the static pods were written.\n",
            report.server,
            after.as_secs_f64()
        )),
        None => out.push_str(&format!(
            "\nThen it would wait until the API at {} serves.\n",
            report.server
        )),
    }
    out.push_str(&format!(
        "Next: {next}\n  (the checkpointer retires these copies once the DaemonSet pods serve, and \
         keeps the control plane through the next power cut)\n"
    ));
    out
}

/// Runs `selfhost recover`.
pub async fn run(global: &GlobalArgs, args: &RecoverArgs) -> Result<Outcome, CliError> {
    // Every file flag names a path as the node sees it; this run reaches it beneath the host
    // root, as convert does. What the written static pods name stays the node's own path.
    let on_host = |path: &Path| super::checkpoint::on_host(&args.host_root, path);
    let next = next_step(global, args);
    let request = RecoverRequest {
        node: args.node.clone(),
        etcd: EtcdAccess {
            endpoints: args.etcd_endpoints.clone(),
            ca: on_host(&args.etcd_cacert),
            cert: on_host(&args.etcd_cert),
            key: on_host(&args.etcd_key),
        },
        etcd_prefix: args.etcd_prefix.clone(),
        manifests_dir: on_host(&args.manifests_dir),
        host_root: args.host_root.clone(),
        next_step: next.clone(),
        timeout: args.timeout,
        dry_run: args.dry_run,
    };
    let mut say = |line: String| crate::ui::say(line);
    let report =
        selfhost::recover(&super::cluster::client_args(global), &request, &mut say).await?;
    if global.output == OutputFormat::Text {
        crate::ui::print(&text(&report, &next))?;
        return Ok(Outcome::Done);
    }
    let out = ReportOut {
        dry_run: report.dry_run,
        etcd: &report.etcd,
        api_server: &report.server,
        components: report
            .components
            .iter()
            .map(|c| ComponentOut {
                component: c.component.name(),
                manifest: c.manifest.display().to_string(),
                image: &c.image,
                revision: &c.revision,
                command: &c.command,
                files: c
                    .files
                    .iter()
                    .map(|f| FileOut {
                        path: f.path.display().to_string(),
                        mode: format!("{:04o}", f.mode),
                        from: &f.from,
                        kept: f.kept,
                    })
                    .collect(),
            })
            .collect(),
        skipped_fields: &report.skipped_fields,
        served_after_seconds: report.served_after.map(|d| d.as_secs_f64()),
        next,
    };
    crate::ui::print(&crate::ui::structured(&out, global.output)?)?;
    Ok(Outcome::Done)
}
