//! `selfhost convert to-self-hosted` and `selfhost convert to-static`: converts the control
//! plane of the node this runs on, with a plan first, confirmation, progress on stderr (or JSON
//! events on stdout with `-o json`) and the exit codes of docs/design.md. Ctrl-C stops at the
//! next safe point; running the same command again continues.

use std::path::Path;

use anyhow::anyhow;
use selfhost::{
    CHECKPOINTER_GRANT, Component, ComponentOutcome, ConversionPlan, ConvertRequest,
    DEFAULT_CONVERT_DEADLINE, Direction, FrontRequest, NodeConversion,
};

use crate::args::{ConvertArgs, ConvertDirection, GlobalArgs, NodeArgs, OutputFormat};
use crate::exit::{CliError, Outcome};
use crate::ui;

use super::running::{Running, Show};

fn this_host() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

fn direction_name(direction: Direction) -> &'static str {
    match direction {
        Direction::ToSelfHosted => "to-self-hosted",
        Direction::ToStatic => "to-static",
    }
}

/// The manifests directory as the node sees it (without the host root).
fn node_view(request: &ConvertRequest) -> std::path::PathBuf {
    match request.manifests_dir.strip_prefix(&request.host_root) {
        Ok(inside) if request.host_root != Path::new("/") => Path::new("/").join(inside),
        _ => request.manifests_dir.clone(),
    }
}

/// The command that continues this run, for messages.
fn resume_command(request: &ConvertRequest) -> String {
    let mut command = format!(
        "selfhost convert {} --node {} --manifests-dir {}",
        direction_name(request.direction),
        request.node,
        node_view(request).display()
    );
    if request.host_root != Path::new("/") {
        command.push_str(&format!(" --host-root {}", request.host_root.display()));
    }
    if request.certs_in_secrets {
        command.push_str(" --certs-in-secrets");
    }
    if let Some((path, _)) = &request.config_file {
        command.push_str(&format!(" --config {}", path.display()));
    }
    command.push_str(" --yes");
    command
}

/// An error before the first change: its kind decides the exit code, and the message says
/// that nothing was changed.
fn nothing_changed(error: selfhost::Error) -> CliError {
    let CliError { outcome, error } = CliError::from(error);
    CliError {
        outcome,
        error: error.context("nothing was changed"),
    }
}

fn request_from(
    direction: Direction,
    args: &NodeArgs,
    certs: bool,
) -> Result<ConvertRequest, CliError> {
    let config_file = match &args.config {
        Some(path) => Some((path.clone(), super::config_file::read_config(path, None)?)),
        None => None,
    };
    // --node, else the node the configuration file registers, else this host's name.
    let registered = config_file.as_ref().and_then(|(_, c)| c.node_name.clone());
    let node = match (args.node.clone(), registered) {
        (Some(node), _) | (None, Some(node)) => node,
        (None, None) => this_host().ok_or_else(|| {
            CliError::bad_input(anyhow!("cannot tell this host's name; pass --node NAME"))
        })?,
    };
    let deadline = args.timeout.unwrap_or(DEFAULT_CONVERT_DEADLINE);
    let manifests_dir = super::checkpoint::on_host(&args.host_root, &args.manifests_dir);
    let mut request = ConvertRequest::new(direction, &node, manifests_dir);
    request.host_root.clone_from(&args.host_root);
    request.certs_in_secrets = certs;
    request.config_file = config_file;
    request.dry_run = args.dry_run;
    request.deadline = deadline;
    request.certificate_warning = super::plan::days(args.certificate_warning_days);
    Ok(request)
}

/// The plan in words; `checkpointer`: whether the checkpointer is installed first (to
/// self-hosted) or removed at the end (to static pods).
fn render_plan(plan: &ConversionPlan, checkpointer: bool, front: Option<&FrontRequest>) -> String {
    let rows: Vec<Vec<String>> = plan
        .components
        .iter()
        .map(|c| {
            let sharing = match (plan.direction, c.port_sharing) {
                (Direction::ToStatic, _) => "-".to_string(),
                (Direction::ToSelfHosted, true) => "yes: no gap".to_string(),
                (Direction::ToSelfHosted, false) => "NO: one restart".to_string(),
            };
            vec![
                c.component.to_string(),
                c.action.to_uppercase(),
                sharing,
                c.detail.clone(),
            ]
        })
        .collect();
    let mut text = format!(
        "Convert node {} {}\n\n{}",
        plan.node,
        direction_name(plan.direction),
        ui::table(
            &["COMPONENT", "ACTION", "PORT SHARING", "FIRST STEP"],
            &rows
        )
    );
    if plan.components.iter().any(|c| {
        plan.direction == Direction::ToSelfHosted && c.action == "convert" && !c.port_sharing
    }) {
        text.push_str(
            "\nA static pod without --permit-port-sharing holds its port alone. The DaemonSet pod \
             is created first (its image pulled), then the static manifest is rewritten with \
             --permit-port-sharing=true (the original kept in the backup directory) and the \
             kubelet restarts the static pod: it costs one restart of each such component, and \
             on a single node the API is down for that one pod start (measured and printed). \
             The DaemonSet pod then serves beside it before it stops.\n",
        );
    }
    if !plan.certificates.is_empty() {
        text.push_str("\nCertificates:\n");
        text.push_str(&super::plan::check_lines(&plan.certificates));
    }
    if checkpointer {
        let node = &plan.node;
        text.push_str(&match plan.direction {
            Direction::ToSelfHosted => format!(
                "\nThe checkpointer is installed first: node {node} is granted read access to \
                 the Leases of kube-system (Role and RoleBinding \
                 kube-system/{CHECKPOINTER_GRANT}), then its static pod is written.\n"
            ),
            Direction::ToStatic => format!(
                "\nOnce every component is static, the checkpointer is removed with its \
                 checkpoints, and node {node}'s access to kube-system Leases is revoked.\n"
            ),
        });
    }
    let apiserver_converts = plan
        .components
        .iter()
        .any(|c| c.component == Component::ApiServer && c.action == "convert");
    match (plan.direction, front) {
        (Direction::ToSelfHosted, Some(front)) if apiserver_converts => {
            text.push_str(&format!(
                "\nThe kube-apiserver DaemonSet listens on {} behind the node's API front, \
                 which is written before the static kube-apiserver leaves: it takes the node's \
                 API address and passes each new connection to a kube-apiserver whose /readyz \
                 passes (a pivot's backup listens on {}).\n",
                front.layout.backend, front.layout.backup
            ));
        }
        (Direction::ToStatic, _) if apiserver_converts => text.push_str(
            "\nThe node's API front, if there is one, is removed once the static \
             kube-apiserver serves.\n",
        ),
        _ => {}
    }
    text.push_str(&format!("\nChecked against {}.\n", plan.config_source));
    let disagreeing: Vec<_> = plan
        .components
        .iter()
        .filter(|c| !c.config_disagreements.is_empty())
        .collect();
    if !disagreeing.is_empty() {
        text.push_str(
            "What runs on the node disagrees with it; what runs is converted as it is (the \
             next `selfhost apply` renders from the configuration and would change these):\n",
        );
        for c in disagreeing {
            for line in &c.config_disagreements {
                text.push_str(&format!("  {}: {line}\n", c.component));
            }
        }
    }
    text.push_str(&format!(
        "\nStatic manifests moved aside are kept in {}\n",
        plan.backup_dir
    ));
    text
}

fn result_line(json: bool, outcome: &str, message: &str, backup_dir: &str) -> Result<(), CliError> {
    if json {
        ui::json_line(&serde_json::json!({
            "event": "result", "outcome": outcome, "message": message, "backup_dir": backup_dir,
        }))?;
    }
    Ok(())
}

/// Runs `selfhost convert ...`.
pub async fn run(global: &GlobalArgs, args: &ConvertArgs) -> Result<Outcome, CliError> {
    let (direction, node_args, certs) = match &args.direction {
        ConvertDirection::ToSelfHosted(a) => (Direction::ToSelfHosted, &a.node, a.certs_in_secrets),
        ConvertDirection::ToStatic(a) => (Direction::ToStatic, a, false),
    };
    let mut request = request_from(direction, node_args, certs)?;
    if let ConvertDirection::ToSelfHosted(a) = &args.direction
        && !a.no_checkpointer
    {
        let mut install = super::checkpoint::install_request(
            &request.node,
            &node_args.manifests_dir,
            &node_args.host_root,
            &a.checkpointer,
        );
        // The checkpointer's start is one more pod start a component's hand-over waits for.
        install.patience = request.deadline;
        request.checkpointer = Some(install);
    }
    if let ConvertDirection::ToSelfHosted(a) = &args.direction
        && !a.no_front
    {
        request.front = Some(FrontRequest {
            image: a.front.front_image.clone(),
            layout: a.front.front_addresses,
            tuning: None,
        });
    }
    let json = global.output == OutputFormat::Json;
    let mut node = NodeConversion::connect(&super::cluster::client_args(global), request)
        .await
        .map_err(nothing_changed)?;
    let plan = node.plan().await.map_err(nothing_changed)?;
    let request = node.request().clone();
    if json {
        ui::json_line(&serde_json::json!({"event": "plan", "plan": plan}))?;
    } else {
        let checkpointer = match direction {
            Direction::ToSelfHosted => request.checkpointer.is_some(),
            Direction::ToStatic => request.checkpointer_pending(),
        };
        ui::say(render_plan(&plan, checkpointer, request.front.as_ref()));
    }
    let refusals = plan.refusals();
    if !refusals.is_empty() {
        let message = format!("refused: {}; nothing was changed", refusals.join("; "));
        result_line(json, "refused", &message, &plan.backup_dir)?;
        return Err(CliError {
            outcome: Outcome::Refused,
            error: anyhow!(message),
        });
    }
    if !plan.has_work() && !request.checkpointer_pending() {
        let message = format!(
            "node {} is already converted {}; nothing to do",
            plan.node,
            direction_name(direction)
        );
        result_line(json, "done", &message, &plan.backup_dir)?;
        if !json {
            ui::say(message);
        }
        return Ok(Outcome::Done);
    }
    if !node_args.yes
        && !request.dry_run
        && !ui::confirm(&format!(
            "Convert node {} {}?",
            plan.node,
            direction_name(plan.direction)
        ))?
    {
        return Err(CliError::bad_input(anyhow!(
            "not confirmed; nothing was changed"
        )));
    }

    let running = Running::start();
    let printer = running.printer(Show {
        json,
        verb: "converting",
        dry_run: request.dry_run,
        verbose: global.verbose > 0,
    });
    let result = node.run(&printer.events, &running.cancel).await;
    printer.finish().await;
    running.end();
    let resume = resume_command(&request);
    let report = result.map_err(|e| CliError {
        outcome: Outcome::NotRestored,
        error: anyhow::Error::from(e).context(format!(
            "the conversion stopped; re-run `{resume}` to continue"
        )),
    })?;
    let backup_dir = report.backup_dir.display().to_string();
    let checkpointer = report.checkpointer.as_ref().map(ToString::to_string);
    let (outcome, name, message) = match report.first_problem() {
        // Only the checkpointer, installed before anything else, fails without a component.
        None if !report.succeeded() => (
            Outcome::Refused,
            "refused",
            format!(
                "nothing was changed on node {}: {}. A self-hosted node without the \
                 checkpointer does not come back from a power cut; make its image available to \
                 the kubelet (--checkpointer-image) and run again, or convert without it: \
                 --no-checkpointer",
                request.node,
                checkpointer.clone().unwrap_or_default(),
            ),
        ),
        None if request.dry_run => (
            Outcome::Done,
            "done",
            format!(
                "dry run of node {} {}: every API write was accepted by the API server's dry \
                 run and every wait and file move described; nothing was changed",
                request.node,
                direction_name(direction)
            ),
        ),
        None => (
            Outcome::Done,
            "done",
            format!(
                "node {} converted {}; the original static manifests are kept in {backup_dir}",
                request.node,
                direction_name(direction)
            ),
        ),
        Some((component, problem)) => match problem {
            ComponentOutcome::Refused { .. } => (
                Outcome::Refused,
                "refused",
                format!("{component}: {}", problem.message()),
            ),
            ComponentOutcome::RolledBack { .. } => (
                Outcome::RolledBack,
                "rolled-back",
                format!(
                    "{component} failed and node {} was put back: {}",
                    request.node,
                    problem.message()
                ),
            ),
            ComponentOutcome::Failed { .. } => (
                Outcome::NotRestored,
                "not-restored",
                format!(
                    "{component} failed and was NOT restored: {}. Continue with: {resume}",
                    problem.message()
                ),
            ),
            ComponentOutcome::Interrupted { .. }
            | ComponentOutcome::Done { .. }
            | ComponentOutcome::DryRun { .. } => (
                Outcome::NotRestored,
                "interrupted",
                format!("stopped during {component} at a safe point. Continue with: {resume}"),
            ),
        },
    };
    let message = match (&checkpointer, report.succeeded()) {
        (Some(checkpointer), true) => format!("{message}; {checkpointer}"),
        _ => message,
    };
    // The run's own figures (apiserver gap, leaderless gap) go with the result.
    let message = match report.figures_summary() {
        Some(figures) => format!("{message}. {figures}"),
        None => message,
    };
    if json {
        ui::json_line(&serde_json::json!({
            "event": "result", "outcome": name, "message": message, "backup_dir": backup_dir,
            "components": report.figures(), "checkpointer": report.checkpointer,
        }))?;
    }
    super::conclude(outcome, message, json)
}
