//! Where a node's kube-apiservers listen when a front stands before them.
//!
//! Clients reach the node's API address (the address the kube-apiserver advertises, port
//! 6443 by default); the front listens there. The DaemonSet's kube-apiserver and the backup a
//! pivot starts listen on two loopback addresses of their own, on the same port. The port
//! stays, because a kube-apiserver publishes `--advertise-address` with its own secure port in
//! the `default/kubernetes` Endpoints: with the same port, pods that use the `kubernetes`
//! Service reach the front too. The addresses differ, so each process answers its own probes
//! and the front's checks, and neither ever takes the other's connections.
//!
//! The front binds the node's address, never the wildcard: a connection to a backend address
//! where no kube-apiserver listens yet must be refused, not land on the front itself.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::PodSpec;
use serde::Serialize;

use crate::command_line;

/// The annotation on the kube-apiserver DaemonSet that says its pods listen behind a front:
/// `<address of the DaemonSet's pods>,<address of a backup's pods>`.
pub const FRONT_ANNOTATION: &str = "selfhost.dev/api-front";

/// The addresses a node's kube-apiservers listen on behind its front.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FrontLayout {
    /// The DaemonSet's kube-apiserver.
    pub backend: IpAddr,
    /// A pivot's backup kube-apiserver.
    pub backup: IpAddr,
}

impl Default for FrontLayout {
    /// `127.0.0.1` and `127.0.0.2`: every Linux host routes all of `127.0.0.0/8` to its
    /// loopback interface, so both need no configuration.
    fn default() -> Self {
        FrontLayout {
            backend: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            backup: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        }
    }
}

/// Why a layout cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The annotation's value is not two addresses.
    #[error(
        "annotation {FRONT_ANNOTATION}={value:?} is not two IP addresses separated by a comma \
         (e.g. 127.0.0.1,127.0.0.2)"
    )]
    Unreadable {
        /// The value found.
        value: String,
    },
    /// The two addresses are one.
    #[error("the kube-apiserver and its backup cannot both listen on {address}")]
    Same {
        /// The address given twice.
        address: IpAddr,
    },
    /// An address every process of the node would share.
    #[error(
        "{address} is the wildcard address: the front would be its own backend; give an \
         address of the node's own, such as 127.0.0.1"
    )]
    Wildcard {
        /// The address given.
        address: IpAddr,
    },
}

impl FrontLayout {
    /// A layout of two distinct, specific addresses.
    ///
    /// # Errors
    /// The addresses are the same, or one is the wildcard.
    pub fn new(backend: IpAddr, backup: IpAddr) -> Result<Self, LayoutError> {
        for address in [backend, backup] {
            if address.is_unspecified() {
                return Err(LayoutError::Wildcard { address });
            }
        }
        if backend == backup {
            return Err(LayoutError::Same { address: backend });
        }
        Ok(FrontLayout { backend, backup })
    }

    /// The annotation's value.
    pub fn to_annotation(self) -> String {
        format!("{},{}", self.backend, self.backup)
    }

    /// Reads the annotation's value.
    ///
    /// # Errors
    /// It is not two distinct, specific addresses.
    pub fn parse(value: &str) -> Result<Self, LayoutError> {
        let unreadable = || LayoutError::Unreadable {
            value: value.to_string(),
        };
        let (backend, backup) = value.split_once(',').ok_or_else(unreadable)?;
        let backend = backend.trim().parse().map_err(|_| unreadable())?;
        let backup = backup.trim().parse().map_err(|_| unreadable())?;
        FrontLayout::new(backend, backup)
    }

    /// The layout a DaemonSet's annotation names (`None`: its pods listen without a front).
    ///
    /// # Errors
    /// The annotation is there and unreadable.
    pub fn of_daemonset(ds: &DaemonSet) -> Result<Option<Self>, LayoutError> {
        ds.metadata
            .annotations
            .as_ref()
            .map_or(Ok(None), FrontLayout::of_annotations)
    }

    /// The layout a DaemonSet's annotations name, as an observation holds them (`None`: its
    /// pods listen without a front).
    ///
    /// # Errors
    /// The annotation is there and unreadable.
    pub fn of_annotations(
        annotations: &BTreeMap<String, String>,
    ) -> Result<Option<Self>, LayoutError> {
        annotations
            .get(FRONT_ANNOTATION)
            .map(|value| FrontLayout::parse(value))
            .transpose()
    }

    /// Marks `ds` as listening behind a front with this layout.
    pub fn annotate(self, ds: &mut DaemonSet) {
        ds.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(FRONT_ANNOTATION.to_string(), self.to_annotation());
    }

    /// Puts the kube-apiserver DaemonSet `ds` behind a front with this layout: its pods
    /// listen on [`backend`](FrontLayout::backend), and the DaemonSet says so.
    pub fn put_behind(self, ds: &mut DaemonSet) {
        if let Some(template) = ds.spec.as_mut().map(|s| &mut s.template)
            && let Some(spec) = template.spec.take()
        {
            template.spec = Some(listening_on(spec, self.backend));
        }
        self.annotate(ds);
    }
}

/// The kube-apiserver pod spec listening on `address` (its port unchanged): `--bind-address`
/// set, and every HTTP probe of its main container aimed at that address, so that the kubelet
/// asks this process and not whichever one answers the node's API address.
pub fn listening_on(mut spec: PodSpec, address: IpAddr) -> PodSpec {
    let Some(container) = spec.containers.first_mut() else {
        return spec;
    };
    let command = container.command.take().unwrap_or_default();
    container.command = Some(command_line::set_flag(
        &command,
        "bind-address",
        &address.to_string(),
    ));
    let probes = [
        &mut container.liveness_probe,
        &mut container.readiness_probe,
        &mut container.startup_probe,
    ];
    for probe in probes.into_iter().flatten() {
        if let Some(http) = probe.http_get.as_mut() {
            http.host = Some(address.to_string());
        }
    }
    spec
}

/// The kube-apiserver pod spec taken out from behind a front, to listen where `original` (the
/// node's static manifest from before the front, if kept) listened: its `--bind-address`
/// (none: the wildcard) and its probes' hosts. Without an original, it listens on the
/// wildcard and is probed on the loopback address, as kubeadm's default manifest is.
pub fn out_of_front(mut spec: PodSpec, original: Option<&PodSpec>) -> PodSpec {
    let original = original.and_then(|s| s.containers.first());
    let Some(container) = spec.containers.first_mut() else {
        return spec;
    };
    let bind = original.and_then(|c| {
        let line: Vec<String> = c.command.iter().flatten().cloned().collect();
        command_line::flag_value(&line, "bind-address").map(str::to_string)
    });
    let command = container.command.take().unwrap_or_default();
    container.command = Some(match &bind {
        Some(address) => command_line::set_flag(&command, "bind-address", address),
        None => command_line::remove_flag(&command, "bind-address"),
    });
    let host_of = |probe: Option<&k8s_openapi::api::core::v1::Probe>| {
        probe
            .and_then(|p| p.http_get.as_ref())
            .map(|h| h.host.clone())
    };
    let originals = [
        host_of(original.and_then(|c| c.liveness_probe.as_ref())),
        host_of(original.and_then(|c| c.readiness_probe.as_ref())),
        host_of(original.and_then(|c| c.startup_probe.as_ref())),
    ];
    let probes = [
        &mut container.liveness_probe,
        &mut container.readiness_probe,
        &mut container.startup_probe,
    ];
    for (probe, original_host) in probes.into_iter().zip(originals) {
        if let Some(http) = probe.as_mut().and_then(|p| p.http_get.as_mut()) {
            http.host = match original_host {
                Some(host) => host,
                None => Some(loopback_of(bind.as_deref())),
            };
        }
    }
    spec
}

/// The loopback address of the family a bind address is in (IPv4 for none).
fn loopback_of(bind: Option<&str>) -> String {
    match bind.and_then(|b| b.parse::<IpAddr>().ok()) {
        Some(IpAddr::V6(_)) => "::1".to_string(),
        _ => "127.0.0.1".to_string(),
    }
}

/// The address a kube-apiserver pod's readiness probe asks (`None`: no HTTP readiness probe,
/// or one aimed at the kubelet's default, the pod's IP, which on the host network is any
/// process's on the node).
pub fn readiness_probed_at(spec: &PodSpec) -> Option<IpAddr> {
    spec.containers
        .first()?
        .readiness_probe
        .as_ref()?
        .http_get
        .as_ref()?
        .host
        .as_deref()?
        .parse()
        .ok()
}

/// The address a kube-apiserver's pod listens on by its `--bind-address` (`None`: the
/// wildcard, or not given).
pub fn bound_address(spec: &PodSpec) -> Option<IpAddr> {
    let container = spec.containers.first()?;
    let command: Vec<String> = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .cloned()
        .collect();
    command_line::flag_value(&command, "bind-address")?
        .parse::<IpAddr>()
        .ok()
        .filter(|ip| !ip.is_unspecified())
}
