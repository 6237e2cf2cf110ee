//! A control plane of real processes on one machine, set up as kubeadm leaves a cluster:
//! one etcd, and per node a process kubelet running kube-apiserver, kube-controller-manager
//! and kube-scheduler from static pod manifests in the node's own directory.
//!
//! Each node has its own loopback address (`127.0.<slot>.<n>`) as node IP and host-network
//! address, and its own root directory, which stands for its filesystem (a `hostPath` of
//! `/etc/kubernetes/pki` is `<root>/etc/kubernetes/pki`). With several nodes, HAProxy on its
//! own address and port 6443 balances over the nodes' kube-apiservers; clients (the admin
//! kubeconfig, the kubelets) use it. etcd serves TLS only, to clients with a certificate of its
//! own CA, as kubeadm's does; each node holds that CA and the kube-apiserver's etcd client
//! certificate at kubeadm's paths. Every process of the bed is stopped when it is dropped.

pub mod haproxy;
pub mod kubeconfig;
pub mod manifests;
pub mod process;
mod wait;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::BedError;
use crate::binaries::{Binaries, COMPONENT_BINARIES};
use crate::pki::{Authority, KeyedCertificate, ServiceAccountKeys};
use manifests::{
    APISERVER_PORT, ETCD_CA, ETCD_CLIENT_CERT, ETCD_CLIENT_KEY, KUBERNETES_DIR, NodeManifestInput,
    PKI_DIR,
};
use process::Daemon;

pub use wait::{ControlPlaneState, control_plane_state};

/// How to set a bed up.
#[derive(Debug, Clone)]
pub struct BedOptions {
    /// How many control-plane nodes.
    pub nodes: usize,
    /// The image tag the control plane starts on.
    pub tag: String,
    /// The built Kubernetes binaries.
    pub binaries: Binaries,
    /// The process kubelet's executable.
    pub kubelet: PathBuf,
    /// How long the control plane may take to come up.
    pub start_timeout: Duration,
}

/// One node of the bed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BedNode {
    /// Its name (`cp-<n>`).
    pub name: String,
    /// Its address (node IP, and every host-network pod's).
    pub address: Ipv4Addr,
    /// The directory that stands for its filesystem.
    pub root: PathBuf,
}

impl BedNode {
    /// The kubelet's static pod directory (what `--manifests-dir` is for selfhost).
    pub fn manifests_dir(&self) -> PathBuf {
        self.path(&format!("{KUBERNETES_DIR}/manifests"))
    }

    /// An absolute path on the node, as a path on this machine.
    pub fn path(&self, on_node: &str) -> PathBuf {
        self.root.join(on_node.trim_start_matches('/'))
    }

    /// The address and port its kube-apiserver serves on.
    pub fn apiserver(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(self.address), APISERVER_PORT)
    }
}

/// What can go wrong with a fault image (an image tag whose component misbehaves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFault {
    /// The binary exits with status 1 at once, having printed why.
    ExitsAtStart,
}

/// A running bed.
#[derive(Debug)]
pub struct TestBed {
    dir: PathBuf,
    /// Removes `dir` when dropped; taken out to keep the directory.
    removal: Option<tempfile::TempDir>,
    images: PathBuf,
    nodes: Vec<BedNode>,
    endpoint: SocketAddr,
    etcd_url: String,
    admin_kubeconfig: PathBuf,
    kubelet_kubeconfigs: Vec<PathBuf>,
    kubelet_program: PathBuf,
    /// The kubelets stay on the version the bed starts on, as nodes do through a control-plane
    /// upgrade.
    kubelet_version: String,
    etcd: Daemon,
    balancer: Option<Daemon>,
    kubelets: Vec<Option<Daemon>>,
}

/// Beds started by this process so far; each takes the next free slot.
static NEXT_SLOT: AtomicU8 = AtomicU8::new(1);

fn free_slot(nodes: usize) -> Result<u8, BedError> {
    loop {
        let slot = NEXT_SLOT.fetch_add(1, Ordering::SeqCst);
        if slot >= 250 {
            return Err(BedError::NoAddress(
                "every 127.0.<slot>.0/24 from 1 to 249 is taken".into(),
            ));
        }
        let taken = (1..=nodes as u8).chain([253, 254]).any(|host| {
            TcpListener::bind((Ipv4Addr::new(127, 0, slot, host), APISERVER_PORT)).is_err()
        });
        if !taken {
            return Ok(slot);
        }
    }
}

fn write(path: &Path, content: &str, mode: u32) -> Result<(), BedError> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| BedError::io(parent, e))?;
    }
    std::fs::write(path, content).map_err(|e| BedError::io(path, e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| BedError::io(path, e))
}

fn yaml(what: &str, value: &serde_json::Value) -> Result<String, BedError> {
    serde_saphyr::to_string(value).map_err(|e| BedError::Render {
        what: what.into(),
        reason: e.to_string(),
    })
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The cluster-wide credentials every node gets a copy of.
struct Credentials {
    ca: Authority,
    serving: KeyedCertificate,
    service_accounts: ServiceAccountKeys,
    admin: KeyedCertificate,
    controller_manager: KeyedCertificate,
    scheduler: KeyedCertificate,
    etcd_ca: Authority,
    etcd_client: KeyedCertificate,
}

impl TestBed {
    /// Sets the bed up and waits until its control plane serves: every node Ready, every
    /// component's mirror pod Ready, both controllers with a leader.
    ///
    /// # Errors
    /// A file or process could not be set up, or the control plane did not come up in time
    /// (the error says what was last seen; the logs are in the bed's directory, kept when
    /// `SELFHOST_E2E_KEEP` is set).
    pub async fn start(options: BedOptions) -> Result<TestBed, BedError> {
        let nodes_count = options.nodes.max(1);
        let slot = free_slot(nodes_count)?;
        let dir = tempfile::Builder::new()
            .prefix("selfhost-e2e-")
            .tempdir()
            .map_err(|e| BedError::io(Path::new("/tmp"), e))?;
        let base = dir.path().to_path_buf();
        let logs = base.join("logs");
        std::fs::create_dir_all(&logs).map_err(|e| BedError::io(&logs, e))?;

        let nodes: Vec<BedNode> = (1..=nodes_count)
            .map(|n| BedNode {
                name: format!("cp-{n}"),
                address: Ipv4Addr::new(127, 0, slot, n as u8),
                root: base.join(format!("nodes/cp-{n}")),
            })
            .collect();
        let endpoint = if nodes_count > 1 {
            SocketAddr::new(Ipv4Addr::new(127, 0, slot, 254).into(), APISERVER_PORT)
        } else {
            nodes[0].apiserver()
        };
        let etcd_address = Ipv4Addr::new(127, 0, slot, 253);

        let images = base.join("images");
        for tag in [crate::binaries::FROM_TAG, crate::binaries::TO_TAG] {
            let tag_dir = images.join(tag);
            std::fs::create_dir_all(&tag_dir).map_err(|e| BedError::io(&tag_dir, e))?;
            for bin in COMPONENT_BINARIES {
                let link = tag_dir.join(bin);
                std::os::unix::fs::symlink(options.binaries.binary(tag, bin), &link)
                    .map_err(|e| BedError::io(&link, e))?;
            }
        }

        let mut addresses: Vec<IpAddr> = nodes.iter().map(|n| IpAddr::V4(n.address)).collect();
        addresses.push(endpoint.ip());
        let ca = Authority::mint()?;
        let etcd_ca = Authority::mint_named("etcd-ca")?;
        let etcd_serving = etcd_ca.etcd_serving(&[IpAddr::V4(etcd_address)])?;
        let credentials = Credentials {
            etcd_client: etcd_ca.client("kube-apiserver-etcd-client", Some("system:masters"))?,
            etcd_ca,
            serving: ca.apiserver_serving(&addresses)?,
            service_accounts: ServiceAccountKeys::mint()?,
            admin: ca.client("kubernetes-admin", Some("system:masters"))?,
            controller_manager: ca.client("system:kube-controller-manager", None)?,
            scheduler: ca.client("system:kube-scheduler", None)?,
            ca,
        };
        let etcd_url = format!("https://{etcd_address}:2379");
        // etcd is no node of the bed: its own certificates are beside its data.
        let etcd_pki = base.join("etcd-pki");
        let etcd_file = |file: &str| etcd_pki.join(file).display().to_string();
        write(
            &etcd_pki.join("ca.crt"),
            &credentials.etcd_ca.keyed.cert_pem,
            0o644,
        )?;
        write(&etcd_pki.join("server.crt"), &etcd_serving.cert_pem, 0o644)?;
        write(&etcd_pki.join("server.key"), &etcd_serving.key_pem, 0o600)?;
        let mut kubelet_kubeconfigs = Vec::new();
        for node in &nodes {
            kubelet_kubeconfigs.push(Self::lay_out_node(
                node,
                &credentials,
                &options.tag,
                &etcd_url,
                endpoint,
            )?);
        }
        let admin_kubeconfig = base.join("admin.conf");
        let admin = kubeconfig::render(
            &format!("https://{endpoint}"),
            &credentials.ca.keyed.cert_pem,
            "kubernetes-admin",
            &credentials.admin,
        )
        .map_err(|e| BedError::Render {
            what: "the admin kubeconfig".into(),
            reason: e.to_string(),
        })?;
        write(&admin_kubeconfig, &admin, 0o600)?;

        let etcd = Daemon::spawn(
            "etcd",
            Path::new("etcd"),
            &[
                "--name".into(),
                "bed".into(),
                "--data-dir".into(),
                base.join("etcd").display().to_string(),
                "--listen-client-urls".into(),
                etcd_url.clone(),
                "--advertise-client-urls".into(),
                etcd_url.clone(),
                "--listen-peer-urls".into(),
                format!("http://{etcd_address}:2380"),
                "--initial-advertise-peer-urls".into(),
                format!("http://{etcd_address}:2380"),
                "--initial-cluster".into(),
                format!("bed=http://{etcd_address}:2380"),
                "--cert-file".into(),
                etcd_file("server.crt"),
                "--key-file".into(),
                etcd_file("server.key"),
                "--trusted-ca-file".into(),
                etcd_file("ca.crt"),
                "--client-cert-auth".into(),
            ],
            &logs.join("etcd.log"),
        )?;
        let balancer = if nodes_count > 1 {
            let backends: Vec<(String, SocketAddr)> = nodes
                .iter()
                .map(|n| (n.name.clone(), n.apiserver()))
                .collect();
            write(
                &base.join(HAPROXY_CONFIG),
                &haproxy::config(endpoint, &backends),
                0o644,
            )?;
            Some(spawn_balancer(&base)?)
        } else {
            None
        };
        let mut bed = TestBed {
            dir: base.clone(),
            removal: Some(dir),
            images,
            nodes,
            endpoint,
            etcd_url,
            admin_kubeconfig,
            kubelet_kubeconfigs,
            kubelet_program: options.kubelet.clone(),
            kubelet_version: options.tag.clone(),
            etcd,
            balancer,
            kubelets: Vec::new(),
        };
        for index in 0..bed.nodes.len() {
            let kubelet = bed.spawn_kubelet(index)?;
            bed.kubelets.push(Some(kubelet));
        }
        if let Err(e) = bed.wait_until_serving(options.start_timeout).await {
            // Kept, with every log, to say why.
            bed.shut_down().await;
            if let Some(dir) = bed.removal.take() {
                eprintln!(
                    "selfhost-e2e: the bed failed to start; kept in {}",
                    dir.keep().display()
                );
            }
            return Err(e);
        }
        Ok(bed)
    }

    /// Writes one node's certificates, kubeconfigs and static pod manifests; returns the path
    /// of its kubelet's kubeconfig.
    fn lay_out_node(
        node: &BedNode,
        credentials: &Credentials,
        tag: &str,
        etcd_url: &str,
        endpoint: SocketAddr,
    ) -> Result<PathBuf, BedError> {
        let pki = |file: &str| node.path(&format!("{PKI_DIR}/{file}"));
        write(&pki("ca.crt"), &credentials.ca.keyed.cert_pem, 0o644)?;
        write(&pki("ca.key"), &credentials.ca.keyed.key_pem, 0o600)?;
        write(&pki("apiserver.crt"), &credentials.serving.cert_pem, 0o644)?;
        write(&pki("apiserver.key"), &credentials.serving.key_pem, 0o600)?;
        write(
            &pki("sa.key"),
            &credentials.service_accounts.private_pem,
            0o600,
        )?;
        write(
            &pki("sa.pub"),
            &credentials.service_accounts.public_pem,
            0o644,
        )?;
        let etcd_ca = &credentials.etcd_ca.keyed;
        write(&node.path(ETCD_CA), &etcd_ca.cert_pem, 0o644)?;
        write(&pki("etcd/ca.key"), &etcd_ca.key_pem, 0o600)?;
        write(
            &node.path(ETCD_CLIENT_CERT),
            &credentials.etcd_client.cert_pem,
            0o644,
        )?;
        write(
            &node.path(ETCD_CLIENT_KEY),
            &credentials.etcd_client.key_pem,
            0o600,
        )?;
        let ssl = node.path("/etc/ssl/certs");
        std::fs::create_dir_all(&ssl).map_err(|e| BedError::io(&ssl, e))?;

        // The controllers talk to their own node's kube-apiserver, the kubelet to the
        // cluster's endpoint, as kubeadm sets them up.
        let local = format!("https://{}", node.apiserver());
        let cluster = format!("https://{endpoint}");
        let ca_pem = &credentials.ca.keyed.cert_pem;
        let kubelet_identity = credentials
            .ca
            .client(&format!("system:node:{}", node.name), Some("system:nodes"))?;
        let files = [
            (
                "admin.conf",
                &cluster,
                "kubernetes-admin",
                &credentials.admin,
            ),
            (
                "controller-manager.conf",
                &local,
                "system:kube-controller-manager",
                &credentials.controller_manager,
            ),
            (
                "scheduler.conf",
                &local,
                "system:kube-scheduler",
                &credentials.scheduler,
            ),
            (
                "kubelet.conf",
                &cluster,
                &format!("system:node:{}", node.name),
                &kubelet_identity,
            ),
        ];
        for (file, server, user, identity) in files {
            let text = kubeconfig::render(server, ca_pem, user, identity).map_err(|e| {
                BedError::Render {
                    what: file.into(),
                    reason: e.to_string(),
                }
            })?;
            write(
                &node.path(&format!("{KUBERNETES_DIR}/{file}")),
                &text,
                0o600,
            )?;
        }

        let input = NodeManifestInput {
            address: IpAddr::V4(node.address),
            tag: tag.to_string(),
            etcd_url: etcd_url.to_string(),
        };
        let dir = node.manifests_dir();
        for (file, pod) in manifests::control_plane(&input) {
            write(&dir.join(file), &yaml(file, &pod)?, 0o600)?;
        }
        Ok(node.path(&format!("{KUBERNETES_DIR}/kubelet.conf")))
    }

    fn spawn_kubelet(&self, index: usize) -> Result<Daemon, BedError> {
        let node = &self.nodes[index];
        let log = self.dir.join(format!("logs/kubelet-{}.log", node.name));
        let config = crate::kubelet::KubeletConfig {
            node_name: node.name.clone(),
            node_ip: node.address.to_string(),
            kubeconfig: self.kubelet_kubeconfigs[index].clone(),
            manifests_dir: node.manifests_dir(),
            root: node.root.clone(),
            images: self.images.clone(),
            kubelet_version: Some(self.kubelet_version.clone()),
            log_level: "info".into(),
        };
        let args: Vec<String> = config
            .to_args()
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        Daemon::spawn(
            &format!("the kubelet of {}", node.name),
            &self.kubelet_program,
            &args,
            &log,
        )
    }

    /// The nodes.
    pub fn nodes(&self) -> &[BedNode] {
        &self.nodes
    }

    /// Where clients reach the API (the balancer with several nodes).
    pub fn endpoint(&self) -> SocketAddr {
        self.endpoint
    }

    /// etcd's client URL (`https://<address>:2379`); a client needs the etcd CA and a client
    /// certificate of it, as every node holds at kubeadm's paths ([`manifests::ETCD_CA`],
    /// [`manifests::ETCD_CLIENT_CERT`], [`manifests::ETCD_CLIENT_KEY`]).
    pub fn etcd_url(&self) -> &str {
        &self.etcd_url
    }

    /// The bed's directory (logs under `logs/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cluster-admin kubeconfig (for selfhost and kubectl).
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// A client configuration from the admin kubeconfig.
    ///
    /// # Errors
    /// The kubeconfig cannot be read or used.
    pub async fn kube_config(&self) -> Result<kube::Config, BedError> {
        let kubeconfig = Kubeconfig::read_from(&self.admin_kubeconfig)
            .map_err(|e| BedError::kube("reading the admin kubeconfig", e.into()))?;
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| BedError::kube("loading the admin kubeconfig", e.into()))
    }

    /// A client with the admin's credentials.
    ///
    /// # Errors
    /// The kubeconfig cannot be read or used.
    pub async fn client(&self) -> Result<kube::Client, BedError> {
        kube::Client::try_from(self.kube_config().await?)
            .map_err(|e| BedError::kube("making a client", e))
    }

    /// Adds an image tag whose `component` misbehaves as `fault` says (the other components
    /// of that tag are the upgrade target's).
    ///
    /// # Errors
    /// The files cannot be written.
    pub fn add_fault_image(
        &self,
        tag: &str,
        component: &str,
        fault: ImageFault,
        binaries: &Binaries,
    ) -> Result<(), BedError> {
        let dir = self.images.join(tag);
        std::fs::create_dir_all(&dir).map_err(|e| BedError::io(&dir, e))?;
        for bin in COMPONENT_BINARIES {
            let path = dir.join(bin);
            if bin == component {
                let ImageFault::ExitsAtStart = fault;
                write(
                    &path,
                    &format!(
                        "#!/bin/sh\necho \"{bin} {tag}: this build exits at start (a fault image of the test bed)\" >&2\nexit 1\n"
                    ),
                    0o755,
                )?;
            } else {
                let target = binaries.binary(crate::binaries::TO_TAG, bin);
                std::os::unix::fs::symlink(&target, &path).map_err(|e| BedError::io(&path, e))?;
            }
        }
        Ok(())
    }

    /// Adds an image `…/<component>:<tag>` that runs `program` (the `selfhost` binary for its
    /// checkpointer, say).
    ///
    /// # Errors
    /// The link cannot be made.
    pub fn add_program_image(
        &self,
        tag: &str,
        component: &str,
        program: &Path,
    ) -> Result<(), BedError> {
        let dir = self.images.join(tag);
        std::fs::create_dir_all(&dir).map_err(|e| BedError::io(&dir, e))?;
        let path = dir.join(component);
        std::os::unix::fs::symlink(program, &path).map_err(|e| BedError::io(&path, e))
    }

    /// Cuts the power of every node and gives it back: every kubelet and every process it
    /// started ends at once, then every kubelet starts again, as after a boot. etcd and the
    /// balancer are not nodes of the control plane here and keep running (etcd's data is what
    /// a real power cut keeps on disk).
    ///
    /// # Errors
    /// A kubelet cannot be started again.
    pub async fn power_cycle(&mut self) -> Result<(), BedError> {
        for index in 0..self.nodes.len() {
            self.stop_kubelet(index).await;
        }
        self.kill_containers();
        for index in 0..self.nodes.len() {
            self.start_kubelet(index)?;
        }
        Ok(())
    }

    /// Stops the load balancer (SIGKILL): every client that reaches the API through it, the
    /// kubelets and the checkpointers included, finds it gone, while every node's processes
    /// go on running. Without a balancer (one node), nothing happens.
    pub async fn stop_balancer(&mut self) {
        if let Some(balancer) = &mut self.balancer {
            balancer.kill().await;
        }
    }

    /// Starts the load balancer again (after [`TestBed::stop_balancer`]).
    ///
    /// # Errors
    /// It cannot be started.
    pub fn start_balancer(&mut self) -> Result<(), BedError> {
        if self.balancer.is_some() {
            self.balancer = Some(spawn_balancer(&self.dir)?);
        }
        Ok(())
    }

    /// Fails when etcd, the balancer or a kubelet has exited.
    ///
    /// # Errors
    /// Which process exited, with the end of its log.
    pub fn check_processes(&mut self) -> Result<(), BedError> {
        self.etcd.check_running()?;
        if let Some(balancer) = &mut self.balancer {
            balancer.check_running()?;
        }
        for kubelet in self.kubelets.iter_mut().flatten() {
            kubelet.check_running()?;
        }
        Ok(())
    }

    /// Stops a node's kubelet (SIGKILL); its containers go on running, as a real kubelet's do.
    pub async fn stop_kubelet(&mut self, index: usize) {
        if let Some(Some(mut kubelet)) = self.kubelets.get_mut(index).map(Option::take) {
            kubelet.kill().await;
        }
    }

    /// Starts a node's kubelet again (after [`TestBed::stop_kubelet`]).
    ///
    /// # Errors
    /// It cannot be started.
    pub fn start_kubelet(&mut self, index: usize) -> Result<(), BedError> {
        let kubelet = self.spawn_kubelet(index)?;
        if let Some(slot) = self.kubelets.get_mut(index) {
            *slot = Some(kubelet);
        }
        Ok(())
    }

    /// Stops everything: the kubelets, every container process they started, the balancer and
    /// etcd. Kept on disk when `SELFHOST_E2E_KEEP` is set (the path is printed).
    pub async fn stop(mut self) {
        self.shut_down().await;
        if std::env::var_os("SELFHOST_E2E_KEEP").is_some()
            && let Some(dir) = self.removal.take()
        {
            eprintln!("selfhost-e2e: bed kept in {}", dir.keep().display());
        }
    }

    fn kill_containers(&self) {
        for node in &self.nodes {
            if let Err(e) = crate::kubelet::kill_node_processes(&node.root) {
                eprintln!(
                    "selfhost-e2e: stopping the containers of {}: {e}",
                    node.name
                );
            }
        }
    }

    async fn shut_down(&mut self) {
        for kubelet in self.kubelets.iter_mut().flatten() {
            kubelet.kill().await;
        }
        self.kill_containers();
        if let Some(balancer) = &mut self.balancer {
            balancer.kill().await;
        }
        self.etcd.kill().await;
    }
}

impl Drop for TestBed {
    fn drop(&mut self) {
        // The daemons are killed by their own drop; the containers are the kubelets'
        // children in their own process groups and would outlive the bed.
        self.kill_containers();
    }
}

/// HAProxy's configuration, in the bed's directory.
const HAPROXY_CONFIG: &str = "haproxy.cfg";

/// Starts HAProxy on the configuration in the bed's directory `base`, logging beside the
/// bed's other logs.
fn spawn_balancer(base: &Path) -> Result<Daemon, BedError> {
    Daemon::spawn(
        "haproxy",
        Path::new("haproxy"),
        &strings(&[
            "-db",
            "-f",
            &base.join(HAPROXY_CONFIG).display().to_string(),
        ]),
        &base.join("logs").join("haproxy.log"),
    )
}
