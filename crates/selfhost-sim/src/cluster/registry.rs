//! The image registry of a running cluster, shared by every kubelet and changeable while the
//! cluster runs: a test can make an image crash-loop, never get Ready, or vanish.

use std::sync::{Arc, RwLock, RwLockReadGuard};
use std::time::Duration;

use tokio::sync::watch;

use crate::controllers::kubelet::{ImageBehaviour, ImageRef, InvalidImageName, Registry};

/// A handle on the cluster's registry (cheap to clone). Changes reach the kubelets at once;
/// a behaviour applies to processes started after the change (a running process keeps the
/// fate it started with, as a real one would).
#[derive(Debug, Clone)]
pub struct RegistryHandle {
    registry: Arc<RwLock<Registry>>,
    changes: Arc<watch::Sender<u64>>,
}

impl RegistryHandle {
    /// Shares `registry`.
    pub fn new(registry: Registry) -> Self {
        RegistryHandle {
            registry: Arc::new(RwLock::new(registry)),
            changes: Arc::new(watch::channel(0).0),
        }
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn change<T>(&self, f: impl FnOnce(&mut Registry) -> T) -> T {
        let out = f(&mut self.registry.write().unwrap_or_else(|e| e.into_inner()));
        self.changes.send_modify(|n| *n += 1);
        out
    }

    /// Adds an image with a behaviour (or changes the behaviour of a known one).
    ///
    /// # Errors
    /// The name is not a valid image reference.
    pub fn set_behaviour(
        &self,
        image: &str,
        behaviour: ImageBehaviour,
    ) -> Result<(), InvalidImageName> {
        self.change(|r| r.set_behaviour(image, behaviour))
    }

    /// Adds an image that holds a real program: a container of it runs `program` for as long
    /// as its modelled process runs (see [`ImageBehaviour::program`]).
    ///
    /// # Errors
    /// The name is not a valid image reference.
    pub fn add_program_image(
        &self,
        image: &str,
        program: &std::path::Path,
    ) -> Result<(), InvalidImageName> {
        self.set_behaviour(
            image,
            ImageBehaviour {
                program: Some(program.to_path_buf()),
                ..ImageBehaviour::default()
            },
        )
    }

    /// Adds a well-behaved image.
    ///
    /// # Errors
    /// The name is not a valid image reference.
    pub fn add_image(&self, image: &str) -> Result<(), InvalidImageName> {
        self.set_behaviour(image, ImageBehaviour::default())
    }

    /// Makes every new process of `image` exit `after` its start (a crash loop).
    ///
    /// # Errors
    /// The name is not a valid image reference.
    pub fn make_crash_loop(&self, image: &str, after: Duration) -> Result<(), InvalidImageName> {
        self.set_behaviour(image, ImageBehaviour::crash_looping(after))
    }

    /// Makes new processes of `image` run without ever passing their readiness probe.
    ///
    /// # Errors
    /// The name is not a valid image reference.
    pub fn make_never_ready(&self, image: &str) -> Result<(), InvalidImageName> {
        self.set_behaviour(image, ImageBehaviour::never_ready())
    }

    /// Removes `image`: pulls fail (`ErrImagePull`, then `ImagePullBackOff`); nodes that
    /// pulled it already keep it.
    pub fn make_unpullable(&self, image: &str) {
        self.change(|r| r.remove(image));
    }

    /// The behaviour of a known image (`None`: pulls fail).
    pub fn behaviour(&self, image: &str) -> Option<ImageBehaviour> {
        let reference = ImageRef::parse(image).ok()?;
        self.read().lookup(&reference).cloned()
    }
}
