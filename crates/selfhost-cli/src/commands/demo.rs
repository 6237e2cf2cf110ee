//! `selfhost demo`: the tool at work on a built-in simulated self-hosted cluster. Two probers
//! read the API every 10 ms and write every 50 ms — one on keep-alive connections, as
//! controllers use the API, one opening a new connection per request, as kubectl and scripts
//! do — while `selfhost apply` upgrades the control plane over HTTP, exactly as it would a
//! real cluster; then a summary of what the upgrade cost to each kind of client. `--compare-naive` does the same upgrade on an identical cluster the way a
//! user without selfhost would, side by side.

mod figures;
mod naive;
mod power_cycle;

use std::path::Path;
use std::time::Duration;

use anyhow::anyhow;
use clap::Parser;
use selfhost::KubeVersion;
use selfhost::report::{Availability, AvailabilitySource, ClientConnections, UpgradeReport};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{
    Connections, Handovers, PROBER_USER_AGENT, ProbeReport, Prober, ProberOptions, SimCluster,
    SimTimings,
};
use tokio::time::Instant;

use self::figures::Figures;
use super::trace::{self, RunTrace};
use crate::args::{Cli, Command, DemoArgs, DemoScenario, GlobalArgs};
use crate::exit::{CliError, Outcome};
use crate::ui;

/// The minor releases whose control-plane images the demo's simulated registry holds.
const SIM_MINORS: std::ops::RangeInclusive<u32> = 29..=37;
/// The highest patch release of each minor the registry holds.
const SIM_MAX_PATCH: u32 = 9;

/// The kinds of client the demo probes with: availability differs between them.
const CLIENT_KINDS: [Connections; 2] = [Connections::KeepAlive, Connections::NewPerRequest];

/// A prober's rates and target: it reads an API object, as clients do, rather than
/// `/readyz`, which a draining apiserver fails on purpose while it still serves. Each kind
/// of client writes its own ConfigMap.
fn prober_options(connections: Connections) -> ProberOptions {
    ProberOptions {
        read_interval: Duration::from_millis(10),
        write_interval: Duration::from_millis(50),
        read_path: "/api/v1/namespaces/kube-system".into(),
        config_map: format!("selfhost-prober-{}", client_kind(connections).slug()),
        connections,
        ..ProberOptions::default()
    }
}

/// The report's name for the simulator's kind of client.
fn client_kind(connections: Connections) -> ClientConnections {
    match connections {
        Connections::KeepAlive => ClientConnections::KeepAlive,
        Connections::NewPerRequest => ClientConnections::NewPerRequest,
    }
}

/// How much faster than real ones the simulated pods live. Faster still would shorten the
/// simulated Leases below what a busy machine's scheduling delays leave intact.
pub(super) fn speedup(args: &DemoArgs) -> u32 {
    if args.fast { 10 } else { 5 }
}

/// The per-component deadline given to `selfhost apply` (its `--timeout`): a component takes
/// seconds here, so a stuck one is rolled back long before the default five minutes.
fn component_deadline(args: &DemoArgs) -> &'static str {
    if args.fast { "30s" } else { "60s" }
}

/// When the demo calls the naive upgrade stuck: after far longer without any progress than
/// a pod takes to start, or after far longer in all than the upgrade takes when the API
/// survives.
fn naive_patience(args: &DemoArgs) -> naive::Patience {
    let scale = if args.fast { 1 } else { 2 };
    naive::Patience {
        stall: Duration::from_secs(8 * scale),
        limit: Duration::from_secs(90 * scale),
    }
}

fn parse_version(text: &str, flag: &str) -> Result<KubeVersion, CliError> {
    let version = KubeVersion::parse(text)
        .map_err(|e| CliError::bad_input(anyhow!("invalid {flag} {text:?}: {e}")))?;
    if version.major() != 1
        || !SIM_MINORS.contains(&u32::try_from(version.minor()).unwrap_or(u32::MAX))
        || version.patch() > u64::from(SIM_MAX_PATCH)
        || version.pre_release().is_some()
    {
        return Err(CliError::bad_input(anyhow!(
            "{flag} {version}: the simulated registry holds releases v1.{}.0 to v1.{}.{SIM_MAX_PATCH}",
            SIM_MINORS.start(),
            SIM_MINORS.end()
        )));
    }
    Ok(version)
}

/// `--from` and `--to` (default: the next minor's first release).
fn versions(args: &DemoArgs) -> Result<(KubeVersion, KubeVersion), CliError> {
    let from = parse_version(&args.from, "--from")?;
    let to = match &args.to {
        Some(text) => parse_version(text, "--to")?,
        None => parse_version(
            &format!("v{}.{}.0", from.major(), from.minor() + 1),
            "--to (the next minor after --from)",
        )?,
    };
    Ok((from, to))
}

async fn start_cluster(args: &DemoArgs, from: &KubeVersion) -> Result<SimCluster, CliError> {
    let builder = SimCluster::builder()
        .control_plane_nodes(args.control_plane_nodes)
        .version(&from.to_string())
        .mode(BootstrapMode::SelfHosted)
        // As selfhost's own manifests run them.
        .port_sharing(true)
        .timings(SimTimings::scaled(speedup(args)))
        // What real processes do at a hand-over, as `selfhost sim` models by default.
        .handovers((!args.idealised).then(Handovers::measured))
        .control_plane_releases(SIM_MINORS, SIM_MAX_PATCH);
    // What `convert to-self-hosted` builds: a checkpointer and an API front on every
    // control-plane node.
    let builder = super::with_checkpointer(builder, speedup(args))?;
    let builder = if args.no_front {
        builder
    } else {
        super::with_front(builder, speedup(args))?
    };
    builder
        .start()
        .await
        .map_err(|e| CliError::from(anyhow!(e).context("starting the simulated cluster")))
}

/// The command line `selfhost apply` gets for the simulated cluster: parsed as a user's
/// would be, so that every flag keeps its default.
fn apply_command(
    global: &GlobalArgs,
    kubeconfig: &Path,
    to: &KubeVersion,
    deadline: &str,
) -> Result<(GlobalArgs, crate::args::ApplyArgs), CliError> {
    let mut argv: Vec<String> = vec!["selfhost".into(), "--kubeconfig".into()];
    argv.push(kubeconfig.display().to_string());
    argv.extend((0..global.verbose).map(|_| "-v".to_string()));
    argv.extend([
        "apply".into(),
        to.to_string(),
        "--yes".into(),
        "--timeout".into(),
    ]);
    argv.push(deadline.into());
    let cli = Cli::try_parse_from(argv)
        .map_err(|e| CliError::from(anyhow!("building the apply command: {e}")))?;
    match cli.command {
        Command::Apply(apply) => Ok((cli.global, apply)),
        _ => Err(CliError::from(anyhow!(
            "building the apply command: not an apply"
        ))),
    }
}

/// How long a new cluster may take to answer the probers before the demo gives up on it.
const FIRST_ANSWER: Duration = Duration::from_secs(30);

/// Starts a prober of each kind of client and waits until each has had an answer, so that
/// what they measure is the upgrade rather than the cluster settling after its start.
pub(super) async fn serving_probers(
    cluster: &SimCluster,
) -> Result<Vec<(Connections, Prober)>, CliError> {
    let mut probers = Vec::new();
    for connections in CLIENT_KINDS {
        let prober = cluster
            .prober(prober_options(connections))
            .await
            .map_err(|e| CliError::from(anyhow!(e).context("starting the prober")))?;
        probers.push((connections, prober));
    }
    let deadline = Instant::now() + FIRST_ANSWER;
    loop {
        let answered = probers.iter().all(|(_, prober)| {
            let report = prober.report();
            report.reads.samples.iter().any(|s| s.ok) && report.writes.samples.iter().any(|s| s.ok)
        });
        if answered {
            return Ok(probers);
        }
        if Instant::now() > deadline {
            return Err(CliError::from(anyhow!(
                "the simulated cluster did not answer within {FIRST_ANSWER:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Stops the probers; what each kind of client saw from `from` on.
pub(super) async fn stop_probers(
    probers: Vec<(Connections, Prober)>,
    from: Instant,
) -> Vec<(ClientConnections, ProbeReport)> {
    let mut reports = Vec::new();
    for (connections, prober) in probers {
        reports.push((client_kind(connections), since(prober.stop().await, from)));
    }
    reports
}

/// The samples of a probe series sent at or after `from`.
fn since(mut report: ProbeReport, from: Instant) -> ProbeReport {
    for series in [&mut report.reads, &mut report.writes] {
        series.since = from;
        series.samples.retain(|s| s.started >= from);
    }
    report
}

/// Every request the API has served, and those of clients other than the upgrading one: the
/// prober's, and the node agents' (each node's checkpointer reads its node every interval).
fn counters(cluster: &SimCluster) -> (u64, u64) {
    let metrics = cluster.metrics();
    let others = metrics.requests_from(PROBER_USER_AGENT)
        + metrics.requests_from(selfhost::CHECKPOINTER_USER_AGENT);
    (metrics.total(), others)
}

/// Requests since `before` that were neither the prober's nor the node agents'.
fn requests_since(cluster: &SimCluster, before: (u64, u64)) -> u64 {
    let (total, prober) = counters(cluster);
    total.saturating_sub(before.0) - prober.saturating_sub(before.1).min(total - before.0)
}

/// The selfhost upgrade on `cluster`, with the prober running.
async fn selfhost_run(
    global: &GlobalArgs,
    args: &DemoArgs,
    cluster: &SimCluster,
    to: &KubeVersion,
) -> Result<(Figures, RunTrace), CliError> {
    let (apply_global, apply_args) = apply_command(
        global,
        cluster.kubeconfig_path(),
        to,
        component_deadline(args),
    )?;
    let probers = serving_probers(cluster).await?;
    let before = counters(cluster);
    let from = Instant::now();
    let mut trace = RunTrace::new(args.report.is_some(), false);
    let result = super::apply::run_traced(&apply_global, &apply_args, &mut trace).await;
    let seconds = from.elapsed().as_secs_f64();
    let probes = stop_probers(probers, from).await;
    let requests = requests_since(cluster, before);
    let end = Instant::now();
    let recorder = cluster.recorder();
    let outcome = match &result {
        Ok(Outcome::Done) => format!("done in {seconds:.1} s"),
        Ok(other) => format!("ended with exit code {}", other.code()),
        Err(e) => format!("failed after {seconds:.1} s: {e}"),
    };
    let figures = Figures {
        label: "selfhost apply",
        upgraded: matches!(result, Ok(Outcome::Done)),
        outcome,
        probes,
        from,
        outages: recorder.down_intervals(from, end),
        down_at_end: recorder.down_for_good_since(from).is_some(),
        requests,
    };
    Ok((figures, trace))
}

/// The naive upgrade on a fresh identical cluster, with its own prober.
async fn naive_run(
    args: &DemoArgs,
    from_version: &KubeVersion,
    to: &KubeVersion,
) -> Result<Figures, CliError> {
    ui::say(format!(
        "\nselfhost demo: the same upgrade on an identical cluster, as a user without selfhost \
         would do it (given up after {} s without progress):",
        naive_patience(args).stall.as_secs()
    ));
    let cluster = start_cluster(args, from_version).await?;
    let client = cluster
        .client_with(|c| {
            // kubectl does not retry on its own, and gives up on a server that does not answer.
            c.default_retry = false;
            c.connect_timeout = Some(Duration::from_secs(1));
            c.read_timeout = Some(Duration::from_secs(2));
        })
        .await
        .map_err(|e| CliError::from(anyhow!(e).context("connecting to the simulated cluster")))?;
    let probers = serving_probers(&cluster).await?;
    let before = counters(&cluster);
    let from = Instant::now();
    let run = naive::upgrade(client, &to.to_string(), naive_patience(args)).await;
    let probes = stop_probers(probers, from).await;
    let requests = requests_since(&cluster, before);
    let end = Instant::now();
    let recorder = cluster.recorder();
    let outages = recorder.down_intervals(from, end);
    let down_at_end = recorder.down_for_good_since(from).is_some();
    cluster.shutdown().await;
    let outcome = match &run.stuck {
        None => format!("done in {:.1} s", run.elapsed),
        Some((component, _)) if down_at_end => format!(
            "stuck on {component}: the API never came back; stopped after {:.1} s",
            run.elapsed
        ),
        Some((component, error)) => {
            format!(
                "stuck on {component}; stopped after {:.1} s ({error})",
                run.elapsed
            )
        }
    };
    Ok(Figures {
        label: "naive set image",
        upgraded: run.stuck.is_none(),
        outcome,
        probes,
        from,
        outages,
        down_at_end,
        requests,
    })
}

/// Runs the demo.
pub async fn run(global: &GlobalArgs, args: &DemoArgs) -> Result<Outcome, CliError> {
    let (from, to) = versions(args)?;
    let nodes = args.control_plane_nodes;
    if nodes == 0 {
        return Err(CliError::bad_input(anyhow!(
            "--control-plane-nodes must be at least 1: a cluster needs somewhere to run its API server"
        )));
    }
    if args.scenario == DemoScenario::PowerCycle {
        let cluster = start_cluster(args, &from).await?;
        return power_cycle::run(global, args, cluster).await;
    }
    let started = Instant::now();
    let setting = format!(
        "{nodes} control-plane node(s), self-hosted with port sharing{}, {} hand-overs, pods \
         {}x faster than real ones",
        if args.no_front {
            ""
        } else {
            " behind an API front on each node"
        },
        if args.idealised {
            "idealised"
        } else {
            "measured (real-process)"
        },
        speedup(args)
    );
    ui::say(format!(
        "selfhost demo: starting a simulated cluster at {from} ({setting})..."
    ));
    let cluster = start_cluster(args, &from).await?;
    ui::say(format!(
        "selfhost demo: upgrading to {to} with `selfhost apply` while two probers read the API \
         every 10 ms and write every 50 ms, one on keep-alive connections, one on a new \
         connection per request:\n"
    ));
    let (selfhost, mut trace) = selfhost_run(global, args, &cluster, &to).await?;
    let recorded = match trace.recording.take() {
        Some(recording) => Some((recording.started(), recording.stop().await)),
        None => None,
    };
    cluster.shutdown().await;
    let naive = if args.compare_naive {
        Some(naive_run(args, &from, &to).await?)
    } else {
        None
    };

    let (success, verdict) = figures::verdict(&selfhost, nodes, naive.as_ref());
    let mut runs = vec![&selfhost];
    runs.extend(naive.as_ref());
    let comparison = figures::comparison(&runs);
    let steps = trace::engine_tables(&trace, selfhost.from.elapsed().as_secs_f64())
        .into_iter()
        .find(|t| t.title == "Time per step")
        .unwrap_or_default();
    let mut text = format!("\nselfhost demo: {from} -> {to} on {setting}.\n\n");
    text.push_str(&ui::table(
        &comparison
            .headers
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &comparison.rows,
    ));
    text.push_str("\nTime per step of selfhost apply:\n");
    text.push_str(&ui::table(
        &steps.headers.iter().map(String::as_str).collect::<Vec<_>>(),
        &steps.rows,
    ));
    let reasons = figures::failure_reasons(&runs);
    if !reasons.is_empty() {
        text.push_str("\nWhy probes failed:\n");
        text.push_str(&reasons);
    }
    let replays = figures::replay_reasons(&runs);
    if !replays.is_empty() {
        text.push_str(
            "\nProbes sent twice by the client's transport (as Go's HTTP/1.1 transport does, \
             under client-go: a reused keep-alive connection closed before any answer; counted \
             as succeeded when the second send was):\n",
        );
        text.push_str(&replays);
    }
    if args.report.is_some() {
        text.push_str(
            "\n(selfhost's API requests include the report's own watch of the control-plane pods.)\n",
        );
    }
    text.push_str(&format!(
        "\nverdict: {} {verdict}\n(demo wall time {:.1} s)\n",
        if success { "PASS" } else { "FAIL" },
        started.elapsed().as_secs_f64()
    ));
    ui::print(&text)?;

    if let (Some(path), Some((zero, recorded))) = (&args.report, recorded) {
        let outages: Vec<(f64, f64)> = selfhost
            .outages
            .iter()
            .map(|(a, b)| {
                (
                    a.saturating_duration_since(zero).as_secs_f64(),
                    b.saturating_duration_since(zero).as_secs_f64(),
                )
            })
            .collect();
        let availability = selfhost
            .probes
            .iter()
            .map(|(connections, probes)| Availability {
                source: AvailabilitySource::Prober {
                    read_every_ms: 10,
                    write_every_ms: 50,
                    connections: *connections,
                },
                attempts: u64::try_from(probes.reads.attempts() + probes.writes.attempts())
                    .unwrap_or(u64::MAX),
                failures: figures::failures_since(probes, zero),
                outages: outages.clone(),
            })
            .collect();
        let mut tables = vec![comparison];
        tables.extend(trace::engine_tables(&trace, recorded.duration));
        let report = UpgradeReport {
            title: format!("selfhost demo: {from} to {to}"),
            subtitle: format!(
                "A simulated cluster: {setting}. Recorded from {} for {:.1} s.",
                recorded.started.strftime("%Y-%m-%d %H:%M:%S UTC"),
                recorded.duration
            ),
            verdict: verdict.clone(),
            success,
            duration: recorded.duration,
            markers: selfhost::report::markers(&trace.events, trace.engine_offset),
            tables,
            lanes: recorded.lanes,
            availability,
            notes: vec![
                "Times are seconds since selfhost connected to the simulated cluster.".into(),
                "API fully down (red band): no apiserver served at all, as the simulator's \
                 self-hosting model decided; failed probes are ticks (reads in the upper half, \
                 writes in the lower)."
                    .into(),
            ],
        };
        match trace::write_report(path, &report) {
            Ok(()) => ui::say(format!("report written to {}", path.display())),
            Err(e) => {
                return Err(CliError::from(e));
            }
        }
    }
    if success {
        Ok(Outcome::Done)
    } else {
        Err(CliError::from(anyhow!(verdict)))
    }
}
