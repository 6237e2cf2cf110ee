//! Whether a component's process takes connections on this node: asked at the port its
//! checkpoint's flags give ([`local_endpoint`]) before a copy is started, so that an API that
//! is unreachable from here while the node's own processes run (a load balancer's outage, a
//! partition) never starts a second process beside them.

use std::collections::BTreeMap;
use std::time::Duration;

use selfhost_core::Component;
use selfhost_core::checkpoint::{LocalEndpoint, local_endpoint};

use super::NodeDisk;

/// How long a connection may take to be accepted: a listening socket accepts in the kernel,
/// before the process reads anything, so a live one answers at once.
const PATIENCE: Duration = Duration::from_secs(1);

/// Whether something accepts a TCP connection at `endpoint` within [`PATIENCE`].
pub(super) async fn listens(endpoint: &LocalEndpoint) -> bool {
    let connect = tokio::net::TcpStream::connect((endpoint.host.as_str(), endpoint.port));
    matches!(tokio::time::timeout(PATIENCE, connect).await, Ok(Ok(_)))
}

/// For each component with a checkpoint on `disk`, whether its process takes connections on
/// the node (the others are absent: without a checkpoint there is nothing to start anyway).
pub(super) async fn local_processes(disk: &NodeDisk) -> BTreeMap<Component, bool> {
    let asks = Component::ALL.into_iter().filter_map(|component| {
        let pod = disk.checkpoint_pod(component)?;
        let host_ip = disk.checkpoint_host_ip(component);
        let endpoint = local_endpoint(component, pod.spec.as_ref()?, host_ip.as_deref())?;
        Some(async move { (component, listens(&endpoint).await) })
    });
    futures::future::join_all(asks).await.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_listening_port_is_a_process_and_a_closed_one_is_not() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let endpoint = LocalEndpoint {
            host: "127.0.0.1".into(),
            port,
        };
        assert!(listens(&endpoint).await, "bound and listening");
        drop(listener);
        assert!(!listens(&endpoint).await, "closed: refused");
    }
}
