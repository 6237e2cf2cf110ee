//! Image pulls of one container: the pull policy, the pull's latency, success (the image is
//! on the node) or the registry's "not found" with the kubelet's pull back-off.

use k8s_openapi::jiff::Timestamp;

use super::container::{ContainerMachine, PodContext, Stage};
use super::duration_text::go_duration;
use super::images::{ImageRef, Registry};
use super::runtime::NodeRuntime;
use crate::controllers::clock;

impl ContainerMachine {
    /// The image pull policy, defaulted as the API server does: `Always` for `:latest`.
    pub(super) fn pull_policy(&self) -> &str {
        match self.spec.image_pull_policy.as_deref() {
            Some(policy) => policy,
            None => match &self.image {
                Ok(image) if image.tag.as_deref() == Some("latest") => "Always",
                _ => "IfNotPresent",
            },
        }
    }

    /// Starts pulling `image` at `at`.
    pub(super) fn pull(
        &mut self,
        at: Timestamp,
        rt: &mut NodeRuntime,
        registry: &Registry,
        image: &ImageRef,
        ctx: &PodContext<'_>,
    ) {
        let delay = registry
            .lookup(image)
            .and_then(|b| b.pull_delay)
            .unwrap_or(rt.timings.pull);
        self.stage = Stage::Pulling {
            since: at,
            until: clock::after(at, delay),
        };
        let message = format!("Pulling image \"{}\"", self.image_text());
        self.event(rt, ctx, at, false, "Pulling", message);
    }

    /// The pull started at `since` ends at `at`: the image is on the node and the container
    /// is created, or the pull failed and backs off.
    pub(super) fn finish_pull(
        &mut self,
        since: Timestamp,
        at: Timestamp,
        rt: &mut NodeRuntime,
        registry: &Registry,
        ctx: &PodContext<'_>,
    ) {
        let Ok(image) = self.image.clone() else {
            return;
        };
        match registry.lookup(&image) {
            Some(behaviour) => {
                self.behaviour = behaviour.clone();
                rt.images.insert(image.clone());
                rt.pull_backoff.reset(&image.to_string());
                self.image_id = Some(format!(
                    "{}/{}@{}",
                    image.registry,
                    image.repository,
                    Registry::digest(&image)
                ));
                let message = format!(
                    "Successfully pulled image \"{}\" in {}",
                    self.image_text(),
                    go_duration(clock::elapsed(since, at))
                );
                self.event(rt, ctx, at, false, "Pulled", message);
                self.create(at, rt);
            }
            None => {
                let key = image.to_string();
                rt.pull_backoff.step(&key, at, at);
                let retry_at = rt.pull_backoff.window_end(&key, at).unwrap_or(at);
                let message = format!(
                    "rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": \
                     failed to resolve reference \"{image}\": {image}: not found"
                );
                self.event(
                    rt,
                    ctx,
                    at,
                    true,
                    "Failed",
                    format!("Failed to pull image \"{}\": {message}", self.image_text()),
                );
                self.event(rt, ctx, at, true, "Failed", "Error: ErrImagePull".into());
                self.stage = Stage::PullFailed {
                    at,
                    retry_at,
                    message,
                    backing_off: false,
                };
            }
        }
    }
}
