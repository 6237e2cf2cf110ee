//! `selfhost demo --scenario power-cycle`: every node of the simulated self-hosted cluster
//! loses power and gets it back. Each control-plane node runs the checkpointer as
//! `convert to-self-hosted` installs it, a static pod whose process is this binary's
//! `selfhost checkpoint`: it dies with the power cut and starts again with the node. Two
//! probers show what clients saw; the summary gives the time from power-on until the API
//! served again and until the checkpoints' static copies were retired for the DaemonSet pods.

use std::time::Duration;

use anyhow::anyhow;
use selfhost::{CHECKPOINTER_NAME, NodeDisk};
use selfhost_sim::cluster::SimCluster;
use tokio::time::Instant;

use crate::args::{DemoArgs, GlobalArgs};
use crate::exit::{CliError, Outcome};
use crate::ui;

/// How long the nodes stay off, in real time.
const OFF: Duration = Duration::from_secs(10);
/// How long the demo waits, in real time, for a step before it gives up.
const PATIENCE: Duration = Duration::from_secs(300);

/// Runs the scenario on `cluster`.
pub async fn run(
    _global: &GlobalArgs,
    args: &DemoArgs,
    cluster: SimCluster,
) -> Result<Outcome, CliError> {
    let speed = super::speedup(args);
    let on_clock = |real: Duration| real / speed;
    let control_planes = cluster.control_plane_names();
    ui::say(format!(
        "selfhost demo: a power cut of every node of a {}-node self-hosted control plane, with \
         the checkpointer on each (pods {speed}x faster than real ones)",
        control_planes.len()
    ));
    let mut disks = Vec::new();
    for node in &control_planes {
        let root = cluster
            .node_root(node)
            .ok_or_else(|| anyhow!("{node} has no directory"))?;
        disks.push(NodeDisk::of_kubeadm_node(&root));
    }
    wait(
        on_clock(PATIENCE),
        "every control-plane pod kept",
        async || disks.iter().all(|d| d.keeps_every_component()),
    )
    .await?;
    ui::say("selfhost demo: every node keeps a checkpoint of its control-plane pods");
    let probers = super::serving_probers(&cluster).await?;
    ui::say(format!(
        "selfhost demo: power cut: every node off for {} s",
        OFF.as_secs()
    ));
    let client = cluster.client();
    let down = async || !answers(&client).await;
    let cut = cluster.power_cycle(on_clock(OFF));
    let (_, went_down) = tokio::join!(cut, wait(on_clock(OFF), "the API going down", down));
    went_down?;
    let power_on = Instant::now();
    ui::say("selfhost demo: power back: every node boots");
    let real = |d: Duration| (d * speed).as_secs_f64();
    let client = cluster.client();
    let serving = wait(on_clock(PATIENCE), "the API serving again", async || {
        answers(&client).await
    })
    .await
    .map(|()| real(power_on.elapsed()));
    let retired = if serving.is_ok() {
        wait(
            on_clock(PATIENCE),
            "the static copies retired",
            async || disks.iter().all(|d| !d.has_active_copies()),
        )
        .await
        .map(|()| real(power_on.elapsed()))
    } else {
        Err(CliError::from(anyhow!("the API never served again")))
    };
    let reports = super::stop_probers(probers, power_on).await;
    for node in &control_planes {
        for line in checkpointer_said(&cluster, node) {
            ui::say(format!("  checkpointer on {line}"));
        }
    }
    cluster.shutdown().await;

    let mut text = String::from(
        "\nselfhost demo: power cut of every node, times in real seconds from power-on:\n",
    );
    text.push_str(&format!(
        "  API serving again:        {}\n  static copies retired:    {}\n",
        shown(&serving),
        shown(&retired)
    ));
    for (kind, report) in &reports {
        text.push_str(&format!(
            "  clients on {}: {} of {} reads and {} of {} writes failed from power-on\n",
            kind.describe(),
            report.reads.failures(),
            report.reads.samples.len(),
            report.writes.failures(),
            report.writes.samples.len(),
        ));
    }
    let success = serving.is_ok() && retired.is_ok();
    text.push_str(&format!(
        "\nverdict: {}\n",
        if success {
            "PASS: the control plane came back on its checkpoints and handed back to its DaemonSet pods"
        } else {
            "FAIL: the control plane did not come back"
        }
    ));
    ui::print(&text)?;
    if success {
        Ok(Outcome::Done)
    } else {
        Err(CliError::from(anyhow!(
            "the simulated control plane did not come back from the power cut"
        )))
    }
}

fn shown(result: &Result<f64, CliError>) -> String {
    match result {
        Ok(seconds) => format!("{seconds:.1} s"),
        Err(e) => format!("never ({e})"),
    }
}

/// Whether the API answers a client, as a client sees it: a request over a real connection.
async fn answers(client: &kube::Client) -> bool {
    let asked = tokio::time::timeout(Duration::from_secs(1), client.apiserver_version()).await;
    matches!(asked, Ok(Ok(_)))
}

/// Waits until `check` holds, for at most `patience`.
async fn wait(
    patience: Duration,
    what: &str,
    mut check: impl AsyncFnMut() -> bool,
) -> Result<(), CliError> {
    let deadline = Instant::now() + patience;
    while !check().await {
        if Instant::now() > deadline {
            return Err(CliError::from(anyhow!("no {what} within {patience:?}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// What the checkpointer on `node` said that changed its files, from its logs under the
/// node's directory, every run of it since the node first booted.
fn checkpointer_said(cluster: &SimCluster, node: &str) -> Vec<String> {
    let Some(logs) = cluster
        .node_root(node)
        .map(|r| r.join("var/log/containers"))
    else {
        return Vec::new();
    };
    let mut files: Vec<_> = std::fs::read_dir(&logs)
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with(CHECKPOINTER_NAME))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|text| {
            text.lines()
                .filter(|l| CHANGES.iter().any(|c| l.contains(c)))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The agent's words for the steps that change its files.
const CHANGES: [&str; 4] = [
    "keep a checkpoint",
    "activate the checkpoint",
    "retire the static copy",
    "FAILED",
];
