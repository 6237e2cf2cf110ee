//! `selfhost sim`: a simulated self-hosted (or kubeadm static-pod) cluster in the foreground,
//! for trying selfhost and kubectl without a real cluster. Ctrl-C stops it; while it runs,
//! signals reboot its machines (see [`MachineSignals`]).

use std::io::Write;

use anyhow::{Context, anyhow};
use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::cluster::{Handovers, SimCluster, SimTimings};

use crate::args::{GlobalArgs, SimArgs};
use crate::exit::{CliError, Outcome};

/// How much faster than real `--fast` runs pods: [`SimTimings::fast`]'s factor.
const FAST_SPEED: u32 = 1_000;

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
    let builder = SimCluster::builder()
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
        .kubeconfig_path(&kubeconfig);
    // What `convert to-self-hosted` builds: a checkpointer on every control-plane node.
    let checkpointer = mode == BootstrapMode::SelfHosted && !args.no_checkpointer;
    let speed = if args.fast { FAST_SPEED } else { 1 };
    let builder = if checkpointer {
        super::with_checkpointer(builder, speed)?
    } else {
        builder
    };
    // And a node-local API front on every control-plane node.
    let front = mode == BootstrapMode::SelfHosted && !args.no_front;
    let builder = if front {
        super::with_front(builder, speed)?
    } else {
        builder
    };
    let cluster = builder
        .start()
        .await
        .map_err(|e| CliError::from(anyhow!(e).context("starting the simulated cluster")))?;

    let text = format!(
        "Simulated cluster ready: {} control-plane node(s), {} worker(s), Kubernetes {version}, {} control plane{}{checkpointers}{fronts}.\n\
         API server: {}\n\
         etcd (the store; it answers while every node is down): {etcd}\n  \
         --etcd-endpoints {etcd} --etcd-cacert {ca} --etcd-cert {cert} --etcd-key {key}\n  \
         cp-1's manifests directory: {manifests}\n\n\
         export KUBECONFIG={}\n\n\
         Try:\n  kubectl get nodes\n  kubectl -n kube-system get ds,pods -o wide\n  selfhost status\n  selfhost plan {}\n\n\
         Machines, while it runs (pid {pid}):\n  kill -USR1 {pid}   power-cycle every node (off for {off} s, the store kept)\n  kill -USR2 {pid}   reboot the next control-plane node in turn (cp-1 first)\n  kill -HUP {pid}    restart every node's kubelet\n\n\
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
        pid = std::process::id(),
        etcd = cluster.etcd().endpoint(),
        ca = cluster.etcd().client_files().ca.display(),
        cert = cluster.etcd().client_files().cert.display(),
        key = cluster.etcd().client_files().key.display(),
        manifests = cluster
            .manifests_dir("cp-1")
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        off = MACHINE_OFF.as_secs(),
        checkpointers = if checkpointer {
            ", a checkpointer on every control-plane node"
        } else {
            ""
        },
        fronts = if front {
            ", an API front on every control-plane node"
        } else {
            ""
        },
    );
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .context("writing to stdout")?;
    stdout.flush().context("writing to stdout")?;
    drop(stdout);

    let mut stops = super::signals::StopSignals::listen();
    let mut machines = MachineSignals::listen();
    let control_planes = cluster.control_plane_names();
    let mut next_reboot = 0;
    loop {
        let signal = tokio::select! {
            _ = stops.next() => break,
            signal = machines.next() => signal,
        };
        match signal {
            MachineSignal::PowerCycle => {
                crate::ui::say(format!(
                    "selfhost sim: power cut: every node off for {} s",
                    MACHINE_OFF.as_secs()
                ));
                cluster.power_cycle(MACHINE_OFF).await;
                crate::ui::say("selfhost sim: power back: every node boots");
            }
            MachineSignal::RebootNext => {
                let node = &control_planes[next_reboot % control_planes.len()];
                next_reboot += 1;
                crate::ui::say(format!("selfhost sim: rebooting {node}"));
                cluster
                    .reboot(node, MACHINE_OFF)
                    .await
                    .map_err(|e| anyhow!(e).context("rebooting"))?;
                crate::ui::say(format!("selfhost sim: {node} boots"));
            }
            MachineSignal::RestartKubelets => {
                for node in cluster.nodes().iter().map(|n| n.name.clone()) {
                    cluster
                        .restart_kubelet(&node)
                        .map_err(|e| anyhow!(e).context("restarting a kubelet"))?;
                }
                crate::ui::say("selfhost sim: every kubelet restarted");
            }
        }
    }
    cluster.shutdown().await;
    Ok(Outcome::Done)
}

/// How long a machine stays off when a signal reboots it or cuts the power.
const MACHINE_OFF: std::time::Duration = std::time::Duration::from_secs(2);

/// What a signal asks of the simulated machines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MachineSignal {
    /// SIGUSR1: a power cut of every node, then power back.
    PowerCycle,
    /// SIGUSR2: a reboot of the next control-plane node, in turn.
    RebootNext,
    /// SIGHUP: every kubelet restarts.
    RestartKubelets,
}

/// Listens for the signals that reboot the simulated machines.
struct MachineSignals {
    #[cfg(unix)]
    streams: Option<[tokio::signal::unix::Signal; 3]>,
}

impl MachineSignals {
    fn listen() -> MachineSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let streams = (|| {
                Ok::<_, std::io::Error>([
                    signal(SignalKind::user_defined1())?,
                    signal(SignalKind::user_defined2())?,
                    signal(SignalKind::hangup())?,
                ])
            })()
            .ok();
            MachineSignals { streams }
        }
        #[cfg(not(unix))]
        {
            MachineSignals {}
        }
    }

    /// The next signal; never, where signals cannot be listened to.
    async fn next(&mut self) -> MachineSignal {
        #[cfg(unix)]
        if let Some([usr1, usr2, hup]) = &mut self.streams {
            return tokio::select! {
                _ = usr1.recv() => MachineSignal::PowerCycle,
                _ = usr2.recv() => MachineSignal::RebootNext,
                _ = hup.recv() => MachineSignal::RestartKubelets,
            };
        }
        std::future::pending().await
    }
}

fn next_minor(version: &selfhost::KubeVersion) -> String {
    format!("v{}.{}.0", version.major(), version.minor() + 1)
}
