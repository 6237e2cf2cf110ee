//! `selfhost sim`: a simulated self-hosted (or kubeadm static-pod) cluster in the foreground,
//! for trying selfhost and kubectl without a real cluster. Ctrl-C stops it.

use std::io::Write;

use anyhow::{Context, anyhow};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{Handovers, SimCluster, SimTimings};

use crate::args::{GlobalArgs, SimArgs};
use crate::exit::{CliError, Outcome};

/// Starts the cluster, prints how to use it, and runs until interrupted.
pub async fn run(global: &GlobalArgs, args: &SimArgs) -> Result<Outcome, CliError> {
    let mode: BootstrapMode = args
        .mode
        .parse()
        .map_err(|e: String| CliError::bad_input(anyhow!(e)))?;
    let version = selfhost::KubeVersion::parse(&args.version).map_err(CliError::bad_input)?;
    if args.control_plane_nodes == 0 {
        return Err(CliError::bad_input(anyhow!(
            "--control-plane-nodes must be at least 1: a cluster needs somewhere to run its API server"
        )));
    }
    let kubeconfig = args
        .write_kubeconfig
        .clone()
        .or_else(|| global.kubeconfig.clone())
        .unwrap_or_else(|| std::env::temp_dir().join("selfhost-sim.kubeconfig"));
    // Self-hosted clusters as selfhost converts them permit port sharing; kubeadm's static
    // pods do not.
    let port_sharing = !args.no_port_sharing && mode == BootstrapMode::SelfHosted;
    let timings = if args.fast {
        SimTimings::fast()
    } else {
        SimTimings::realistic()
    };
    let cluster = SimCluster::builder()
        .control_plane_nodes(args.control_plane_nodes)
        .workers(args.workers)
        .version(&version.to_string())
        .mode(mode)
        .port_sharing(port_sharing)
        .timings(timings)
        .tls(args.tls)
        // What real control-plane processes do at a hand-over (listen-before-serve windows,
        // lingering Terminating apiservers, lying probes, a load balancer before several
        // nodes), unless the user asks for the idealised model.
        .handovers((!args.idealised).then(Handovers::measured))
        .port(args.port)
        .kubeconfig_path(&kubeconfig)
        .start()
        .await
        .map_err(|e| CliError::from(anyhow!(e).context("starting the simulated cluster")))?;

    let text = format!(
        "Simulated cluster ready: {} control-plane node(s), {} worker(s), Kubernetes {version}, {} control plane{}.\n\
         API server: {}\n\n\
         export KUBECONFIG={}\n\n\
         Try:\n  kubectl get nodes\n  kubectl -n kube-system get ds,pods -o wide\n  selfhost status\n  selfhost plan {}\n\n\
         Press Ctrl-C to stop.\n",
        args.control_plane_nodes,
        args.workers,
        match mode {
            BootstrapMode::Static => "static-pod",
            BootstrapMode::SelfHosted => "self-hosted",
        },
        if port_sharing {
            " with port sharing"
        } else {
            ""
        },
        cluster.endpoint(),
        kubeconfig.display(),
        next_minor(&version),
    );
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .context("writing to stdout")?;
    stdout.flush().context("writing to stdout")?;
    drop(stdout);

    super::signals::StopSignals::listen().next().await;
    cluster.shutdown().await;
    Ok(Outcome::Done)
}

fn next_minor(version: &selfhost::KubeVersion) -> String {
    format!("v{}.{}.0", version.major(), version.minor() + 1)
}
