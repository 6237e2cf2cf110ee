//! A self-hosted control plane behind node-local API fronts, as `convert to-self-hosted`
//! builds it: the kube-apiserver DaemonSet's pods listen on a loopback address of their own
//! (`--bind-address`, with their probes aimed there), a pivot's backup on another, the same
//! port; the DaemonSet names both in an annotation. A front on each node's API address passes
//! connections to them. (The front's own static pod is the caller's to place: the simulator
//! does not render the product's manifests.)

use std::net::{IpAddr, Ipv4Addr};

use serde_json::{Value, json};

/// The annotation on the kube-apiserver DaemonSet naming where its pods and a backup's listen
/// behind the front: `<DaemonSet's address>,<backup's address>`.
pub const FRONT_ANNOTATION: &str = "selfhost.dev/api-front";

/// Where a node's kube-apiservers listen behind its front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrontLayout {
    /// The DaemonSet's kube-apiserver.
    pub backend: IpAddr,
    /// A pivot's backup kube-apiserver.
    pub backup: IpAddr,
}

impl Default for FrontLayout {
    /// `127.0.0.1` and `127.0.0.2`, as selfhost lays them out.
    fn default() -> Self {
        FrontLayout {
            backend: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
            backup: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)),
        }
    }
}

impl FrontLayout {
    /// The annotation's value.
    pub fn annotation(&self) -> String {
        format!("{},{}", self.backend, self.backup)
    }

    /// Makes the kube-apiserver DaemonSet `ds` (as [`super::daemonset`] renders it) listen
    /// behind the front: `--bind-address` set to the backend address, every HTTP probe of its
    /// container aimed there, the annotation on the DaemonSet.
    pub fn apply(&self, ds: &mut Value) {
        let address = self.backend.to_string();
        let container = &mut ds["spec"]["template"]["spec"]["containers"][0];
        if let Some(command) = container["command"].as_array_mut() {
            command.retain(|w| !w.as_str().is_some_and(|w| w.starts_with("--bind-address")));
            command.push(json!(format!("--bind-address={address}")));
            // Flags stay sorted after the binary, as the template renders them.
            if command.len() > 1 {
                command[1..].sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            }
        }
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
            if let Some(http) = container[probe]["httpGet"].as_object_mut() {
                http.insert("host".into(), json!(address));
            }
        }
        ds["metadata"]["annotations"][FRONT_ANNOTATION] = json!(self.annotation());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_apiserver_daemonset_listens_on_its_address_and_names_the_layout() {
        let mut ds = super::super::daemonset("kube-apiserver", "v1.33.2", true);
        FrontLayout::default().apply(&mut ds);
        let container = &ds["spec"]["template"]["spec"]["containers"][0];
        let command: Vec<&str> = container["command"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(command[0], "kube-apiserver");
        assert_eq!(
            command
                .iter()
                .filter(|w| w.starts_with("--bind-address"))
                .copied()
                .collect::<Vec<_>>(),
            ["--bind-address=127.0.0.1"]
        );
        let mut sorted = command[1..].to_vec();
        sorted.sort_unstable();
        assert_eq!(command[1..], sorted[..]);
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
            assert_eq!(container[probe]["httpGet"]["host"], "127.0.0.1", "{probe}");
        }
        assert_eq!(
            ds["metadata"]["annotations"][FRONT_ANNOTATION],
            "127.0.0.1,127.0.0.2"
        );
    }
}
