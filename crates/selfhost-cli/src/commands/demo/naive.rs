//! The upgrade a user without selfhost would make: `kubectl set image` on each self-hosted
//! DaemonSet in turn, then `kubectl rollout status` until it is rolled out. Nothing protects
//! the API while a DaemonSet rolls: on one node the old apiserver is deleted before its
//! replacement exists, and the replacement can only be learnt of through the API it replaces.

use std::time::Duration;

use k8s_openapi::api::apps::v1::DaemonSet;
use kube::Api;
use kube::api::{Patch, PatchParams};
use selfhost::Component;
use selfhost::NAMESPACE;
use tokio::time::Instant;

use crate::ui;

/// How often the rollout's status is read, as `kubectl rollout status` re-reads it.
const POLL: Duration = Duration::from_millis(200);

/// How the naive upgrade ended.
#[derive(Debug, Clone, PartialEq)]
pub struct NaiveRun {
    /// The components rolled out, with the seconds each took.
    pub rolled_out: Vec<(Component, f64)>,
    /// The component it was stuck on at the deadline, and the last error it saw.
    pub stuck: Option<(Component, String)>,
    /// Seconds from start to end (or to the deadline).
    pub elapsed: f64,
}

/// What `kubectl rollout status` waits for on a DaemonSet: the controller saw the change,
/// and every scheduled pod is updated and available.
fn rolled_out(ds: &DaemonSet) -> bool {
    let Some(status) = &ds.status else {
        return false;
    };
    let generation = ds.metadata.generation.unwrap_or(0);
    status.observed_generation.unwrap_or(0) >= generation
        && status.updated_number_scheduled.unwrap_or(0) >= status.desired_number_scheduled
        && status.number_available.unwrap_or(0) >= status.desired_number_scheduled
}

/// The image with its tag replaced by `version`.
fn retagged(image: &str, version: &str) -> String {
    let repository = match image.rsplit_once(':') {
        // A colon inside the last path segment is a tag; one before a slash is a port.
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => image,
    };
    format!("{repository}:{version}")
}

/// Says what the naive run does, like the engine's progress lines.
fn say(started: Instant, message: impl std::fmt::Display) {
    ui::say(format!(
        "[{:>6.1}s] naive: {message}",
        started.elapsed().as_secs_f64()
    ));
}

/// `kubectl set image` for one DaemonSet: a strategic merge patch of its container's image.
async fn set_image(api: &Api<DaemonSet>, component: Component, to: &str) -> Result<String, String> {
    let name = component.daemonset_name();
    let ds = api.get(&name).await.map_err(|e| e.to_string())?;
    let current = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.iter().find(|c| c.name == component.name()))
        .and_then(|c| c.image.clone())
        .ok_or_else(|| format!("DaemonSet {name} has no {} container", component.name()))?;
    let image = retagged(&current, to);
    let patch = serde_json::json!({"spec": {"template": {"spec": {"containers": [
        {"name": component.name(), "image": image}
    ]}}}});
    api.patch(&name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .map_err(|e| e.to_string())?;
    Ok(image)
}

/// The status fields a user watching `kubectl rollout status` sees move: observed generation,
/// updated, available and ready pods.
type Progress = (Option<i64>, Option<i32>, Option<i32>, i32);

/// What a user watching `kubectl rollout status` sees move.
fn progress(ds: &DaemonSet) -> Option<Progress> {
    ds.status.as_ref().map(|s| {
        (
            s.observed_generation,
            s.updated_number_scheduled,
            s.number_available,
            s.number_ready,
        )
    })
}

/// When the naive run gives up: after `stall` without any progress (no answer, or a rollout
/// status that does not move), and in any case after `limit`.
#[derive(Debug, Clone, Copy)]
pub struct Patience {
    /// The longest time without progress.
    pub stall: Duration,
    /// The longest run.
    pub limit: Duration,
}

/// Runs the naive upgrade to `to` with `client` until it is done or out of `patience`.
pub async fn upgrade(client: kube::Client, to: &str, patience: Patience) -> NaiveRun {
    let started = Instant::now();
    let limit = started + patience.limit;
    let mut moved = started;
    let out_of_patience =
        |moved: Instant| Instant::now() + POLL > limit || moved.elapsed() > patience.stall;
    let api: Api<DaemonSet> = Api::namespaced(client, NAMESPACE);
    let mut rolled = Vec::new();
    for component in Component::ALL {
        let began = Instant::now();
        // Set the image, retrying as a user re-runs a command that failed.
        loop {
            match set_image(&api, component, to).await {
                Ok(image) => {
                    say(
                        started,
                        format!(
                            "kubectl set image ds/{} {}={image}",
                            component.daemonset_name(),
                            component.name()
                        ),
                    );
                    break;
                }
                Err(e) if out_of_patience(moved) => {
                    return stuck(started, rolled, component, e);
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
        moved = Instant::now();
        let mut last_error;
        let mut seen = None;
        say(
            started,
            format!("kubectl rollout status ds/{}", component.daemonset_name()),
        );
        // Said once when the API stops answering, and once when it answers again.
        let mut unanswered = false;
        loop {
            let read = api.get(&component.daemonset_name()).await;
            if read.is_err() != unanswered {
                unanswered = read.is_err();
                let what = match &read {
                    Err(e) => format!("the API does not answer ({e})"),
                    Ok(_) => "the API answers again".into(),
                };
                say(started, format!("{}: {what}", component.name()));
            }
            match read {
                Ok(ds) if rolled_out(&ds) => break,
                Ok(ds) => {
                    last_error = "the rollout does not progress".into();
                    let now = progress(&ds);
                    if now != seen {
                        seen = now;
                        moved = Instant::now();
                    }
                }
                Err(e) => last_error = e.to_string(),
            }
            if out_of_patience(moved) {
                return stuck(started, rolled, component, last_error);
            }
            tokio::time::sleep(POLL).await;
        }
        let took = began.elapsed().as_secs_f64();
        say(
            started,
            format!("{}: rolled out after {took:.1}s", component.name()),
        );
        rolled.push((component, took));
    }
    NaiveRun {
        rolled_out: rolled,
        stuck: None,
        elapsed: started.elapsed().as_secs_f64(),
    }
}

fn stuck(
    started: Instant,
    rolled: Vec<(Component, f64)>,
    component: Component,
    error: String,
) -> NaiveRun {
    say(
        started,
        format!(
            "{}: not rolled out, and nothing moves; giving up ({error})",
            component.name()
        ),
    );
    NaiveRun {
        rolled_out: rolled,
        stuck: Some((component, error)),
        elapsed: started.elapsed().as_secs_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_image_keeps_the_repository_and_replaces_the_tag() {
        for (image, want) in [
            (
                "registry.k8s.io/kube-apiserver:v1.33.1",
                "registry.k8s.io/kube-apiserver:v1.34.0",
            ),
            ("kube-apiserver", "kube-apiserver:v1.34.0"),
            (
                "localhost:5000/kube-apiserver",
                "localhost:5000/kube-apiserver:v1.34.0",
            ),
        ] {
            assert_eq!(retagged(image, "v1.34.0"), want);
        }
    }

    #[test]
    fn rollout_status_waits_for_every_pod_updated_and_available() {
        let ds = |generation: i64, observed: i64, updated: i32, available: i32| -> DaemonSet {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "d", "generation": generation},
                "status": {
                    "currentNumberScheduled": 3, "desiredNumberScheduled": 3,
                    "numberMisscheduled": 0, "numberReady": available,
                    "observedGeneration": observed, "updatedNumberScheduled": updated,
                    "numberAvailable": available
                }
            }))
            .expect("a DaemonSet")
        };
        for (generation, observed, updated, available, want) in [
            (2, 2, 3, 3, true),
            (2, 1, 3, 3, false),
            (2, 2, 2, 3, false),
            (2, 2, 3, 2, false),
        ] {
            assert_eq!(
                rolled_out(&ds(generation, observed, updated, available)),
                want,
                "{generation} {observed} {updated} {available}"
            );
        }
    }
}
