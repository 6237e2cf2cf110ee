//! A node agent's static pod (the checkpointer, the API front) as the API shows it: whether
//! the kubelet runs it, from its mirror pod.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use selfhost_core::component::NAMESPACE;
use tokio::time::Instant;

/// How often the mirror pod is read while waiting.
const POLL: Duration = Duration::from_millis(250);

/// Waits until the mirror pod `name` is Running with its container ready, or says what it
/// shows at `until`. It lists by name rather than gets: the conversion's
/// permissions include listing pods in kube-system, and nothing more is needed.
pub(crate) async fn wait_running(
    api: &kube::Client,
    name: &str,
    until: Instant,
) -> Result<(), String> {
    let pods: Api<Pod> = Api::namespaced(api.clone(), NAMESPACE);
    let by_name = ListParams::default().fields(&format!("metadata.name={name}"));
    loop {
        let shown = match pods.list(&by_name).await {
            Ok(list) => match list.items.first() {
                Some(pod) => match running(pod) {
                    Ok(()) => return Ok(()),
                    Err(why) => why,
                },
                None => format!(
                    "the kubelet has not published its mirror pod {NAMESPACE}/{name} (is the \
                     manifests directory the kubelet's staticPodPath?)"
                ),
            },
            Err(e) => format!("listing pod {NAMESPACE}/{name}: {e}"),
        };
        if Instant::now() >= until {
            return Err(shown);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether the pod runs with its container ready, or what it shows instead.
pub fn running(pod: &Pod) -> Result<(), String> {
    let status = pod.status.as_ref();
    let container = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first());
    if container.is_some_and(|c| c.ready) {
        return Ok(());
    }
    let waiting = container
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.waiting.as_ref());
    if let Some(waiting) = waiting {
        let reason = waiting.reason.as_deref().unwrap_or("Waiting");
        return Err(match &waiting.message {
            Some(message) => format!("its container waits: {reason}: {message}"),
            None => format!("its container waits: {reason}"),
        });
    }
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    Err(format!("its pod is {phase}, its container not ready"))
}
