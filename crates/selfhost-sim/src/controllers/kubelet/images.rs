//! The image registry model: which images exist, and how the processes they contain behave.
//!
//! It knows `registry.k8s.io/kube-{apiserver,controller-manager,scheduler}:<tag>` for the
//! releases it is given, the `pause` images nodes use as their sandbox image (when asked:
//! [`Registry::add_pause_images`]), plus any image a test adds. Pulling anything else fails like a real
//! registry's "not found" (`ErrImagePull`, then `ImagePullBackOff`). Each image carries an
//! [`ImageBehaviour`]: slow pulls, slow starts, never Ready, crash loops, slow or stubborn
//! shutdown.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::time::Duration;

/// The control-plane binaries the registry knows by default.
pub const CONTROL_PLANE_COMPONENTS: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];

/// Where kubeadm pulls the control plane from.
pub const DEFAULT_REPOSITORY: &str = "registry.k8s.io";

/// The `pause` images kubeadm pairs with the releases the simulator covers (3.9 up to v1.29,
/// 3.10 for v1.30–v1.33, 3.10.1 since): real registries serve them and real nodes run them as
/// their pod sandbox image.
pub const PAUSE_IMAGES: [&str; 3] = [
    "registry.k8s.io/pause:3.9",
    "registry.k8s.io/pause:3.10",
    "registry.k8s.io/pause:3.10.1",
];

/// A parsed image reference, normalized as container runtimes do (`nginx` is
/// `docker.io/library/nginx:latest`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ImageRef {
    /// The registry host (and port).
    pub registry: String,
    /// The repository path inside the registry.
    pub repository: String,
    /// The tag (`latest` when neither tag nor digest is given).
    pub tag: Option<String>,
    /// The digest, `sha256:…`.
    pub digest: Option<String>,
}

/// An image name no runtime would accept (the kubelet reports `InvalidImageName`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Failed to apply default image tag {image:?}: couldn't parse image name {image:?}: invalid reference format"
)]
pub struct InvalidImageName {
    /// The name as written.
    pub image: String,
}

impl ImageRef {
    /// Parses and normalizes an image reference.
    ///
    /// # Errors
    /// Empty names, upper-case repositories, whitespace, empty path components or tags.
    pub fn parse(image: &str) -> Result<Self, InvalidImageName> {
        let invalid = || InvalidImageName {
            image: image.to_string(),
        };
        if image.is_empty() || image.chars().any(char::is_whitespace) {
            return Err(invalid());
        }
        let (name, digest) = match image.split_once('@') {
            Some((name, digest)) if digest.starts_with("sha256:") && digest.len() > 7 => {
                (name, Some(digest.to_string()))
            }
            Some(_) => return Err(invalid()),
            None => (image, None),
        };
        let last_slash = name.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match name[last_slash..].split_once(':') {
            Some((_, "")) => return Err(invalid()),
            Some((base, tag)) => (&name[..last_slash + base.len()], Some(tag.to_string())),
            None => (name, None),
        };
        let (registry, repository) = match path.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string())
            }
            Some(_) => ("docker.io".to_string(), path.to_string()),
            None => ("docker.io".to_string(), format!("library/{path}")),
        };
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "._-".contains(ch))
        };
        if !repository.split('/').all(component_ok) {
            return Err(invalid());
        }
        let tag = match (tag, &digest) {
            (None, None) => Some("latest".to_string()),
            (tag, _) => tag,
        };
        Ok(ImageRef {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The last path component (`kube-apiserver`), which is also the binary name of the
    /// control-plane images.
    pub fn name(&self) -> &str {
        self.repository
            .rsplit('/')
            .next()
            .unwrap_or(&self.repository)
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// How the process inside an image behaves. The default is a well-behaved server.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageBehaviour {
    /// Pulling takes this long instead of the kubelet's pull latency (a slow pull).
    pub pull_delay: Option<Duration>,
    /// Starting takes this much longer than the kubelet's start latency (a slow start).
    pub extra_start_delay: Duration,
    /// The readiness probe passes this long after start instead of the kubelet's default.
    pub ready_delay: Option<Duration>,
    /// The readiness probe never passes.
    pub never_ready: bool,
    /// The process exits on its own this long after start (a crash loop when restarted).
    pub crash_after: Option<Duration>,
    /// The exit code of such a crash (1 when unset).
    pub crash_exit_code: Option<i32>,
    /// The process opens its listening ports this long after start (zero: at start).
    pub listen_delay: Duration,
    /// The process accepts the connections queued on its sockets only this long after start
    /// (`None`: as soon as it listens). Until then a connection the kernel hands it hangs, as
    /// with a kube-apiserver that has created its socket but not started serving.
    pub accept_delay: Option<Duration>,
    /// After SIGTERM the process exits this long later instead of the kubelet's default.
    pub stop_delay: Option<Duration>,
    /// The process ignores SIGTERM and lingers until killed at the end of the grace period.
    pub ignores_sigterm: bool,
    /// On SIGTERM the process closes its listening sockets (after its
    /// `--shutdown-delay-duration`, if set) while it lingers, as kube-apiserver does; otherwise
    /// it holds them until it exits.
    pub closes_listener_on_sigterm: bool,
    /// The image holds a real program: while the modelled process runs, this executable runs
    /// too, started with the container's command line (its host paths mapped under the node's
    /// directory), signalled as the model signals the process; when it exits by itself, the
    /// modelled process exits with its code.
    pub program: Option<std::path::PathBuf>,
}

impl ImageBehaviour {
    /// A process that crashes this long after every start.
    pub fn crash_looping(after: Duration) -> Self {
        ImageBehaviour {
            crash_after: Some(after),
            ..Self::default()
        }
    }

    /// A process that runs but never becomes Ready.
    pub fn never_ready() -> Self {
        ImageBehaviour {
            never_ready: true,
            ..Self::default()
        }
    }

    /// A process that takes `extra` longer to start.
    pub fn slow_start(extra: Duration) -> Self {
        ImageBehaviour {
            extra_start_delay: extra,
            ..Self::default()
        }
    }

    /// An image that takes `delay` to pull.
    pub fn slow_pull(delay: Duration) -> Self {
        ImageBehaviour {
            pull_delay: Some(delay),
            ..Self::default()
        }
    }
}

/// The images that exist, with their behaviours.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    images: BTreeMap<ImageRef, ImageBehaviour>,
}

impl Registry {
    /// An empty registry: every pull fails.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an image (replacing its behaviour if it exists).
    ///
    /// # Errors
    /// The name is not a valid image reference.
    pub fn add(&mut self, image: &str, behaviour: ImageBehaviour) -> Result<(), InvalidImageName> {
        self.images.insert(ImageRef::parse(image)?, behaviour);
        Ok(())
    }

    /// Removes an image: later pulls fail (images already on a node stay there).
    pub fn remove(&mut self, image: &str) {
        if let Ok(reference) = ImageRef::parse(image) {
            self.images.remove(&reference);
        }
    }

    /// Adds the three control-plane images of one release (`tag` like `v1.33.2`) under
    /// `repository` (`registry.k8s.io`).
    pub fn add_control_plane_release(
        &mut self,
        repository: &str,
        tag: &str,
    ) -> Result<(), InvalidImageName> {
        for component in CONTROL_PLANE_COMPONENTS {
            self.add(
                &format!("{repository}/{component}:{tag}"),
                ImageBehaviour::default(),
            )?;
        }
        Ok(())
    }

    /// Adds the control-plane images of every `v1.<minor>.<patch>` in the ranges, under
    /// `registry.k8s.io`.
    pub fn add_control_plane_releases(
        &mut self,
        minors: RangeInclusive<u32>,
        patches: RangeInclusive<u32>,
    ) {
        for minor in minors {
            for patch in patches.clone() {
                // Tags built from integers are always valid references.
                let _ = self
                    .add_control_plane_release(DEFAULT_REPOSITORY, &format!("v1.{minor}.{patch}"));
            }
        }
    }

    /// A registry with the control plane of Kubernetes 1.`minors`.0 to 1.`minors`.`max_patch`.
    pub fn with_control_plane(minors: RangeInclusive<u32>, max_patch: u32) -> Self {
        let mut registry = Self::new();
        registry.add_control_plane_releases(minors, 0..=max_patch);
        registry
    }

    /// Adds the [`PAUSE_IMAGES`], well-behaved: a pause process runs until stopped.
    pub fn add_pause_images(&mut self) {
        for image in PAUSE_IMAGES {
            // Constant, valid references.
            let _ = self.add(image, ImageBehaviour::default());
        }
    }

    /// The behaviour of an existing image (`None`: the pull fails).
    pub fn lookup(&self, image: &ImageRef) -> Option<&ImageBehaviour> {
        self.images.get(image)
    }

    /// Changes the behaviour of an image, adding it if needed.
    ///
    /// # Errors
    /// The name is not a valid image reference.
    pub fn set_behaviour(
        &mut self,
        image: &str,
        behaviour: ImageBehaviour,
    ) -> Result<(), InvalidImageName> {
        self.add(image, behaviour)
    }

    /// The content digest the runtime reports in `imageID` (stable per image name).
    pub fn digest(image: &ImageRef) -> String {
        format!(
            "sha256:{}",
            super::stable_id::stable_hex(&image.to_string(), 64)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_normalized_like_a_container_runtime() {
        let cases = [
            ("nginx", "docker.io/library/nginx:latest"),
            ("bitnami/nginx:1.2", "docker.io/bitnami/nginx:1.2"),
            (
                "registry.k8s.io/kube-apiserver:v1.33.2",
                "registry.k8s.io/kube-apiserver:v1.33.2",
            ),
            ("localhost:5000/app", "localhost:5000/app:latest"),
            (
                "registry.k8s.io/pause@sha256:abc",
                "registry.k8s.io/pause@sha256:abc",
            ),
        ];
        for (input, normalized) in cases {
            assert_eq!(
                ImageRef::parse(input).unwrap().to_string(),
                normalized,
                "{input}"
            );
        }
        assert_eq!(
            ImageRef::parse("registry.k8s.io/kube-apiserver:v1")
                .unwrap()
                .name(),
            "kube-apiserver"
        );
        for bad in ["", "Nginx", "a b", "nginx:", "x@md5:1", "reg.io//x"] {
            assert!(ImageRef::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_control_plane_range_is_known_and_nothing_else() {
        let registry = Registry::with_control_plane(31..=33, 2);
        let known = |image: &str| registry.lookup(&ImageRef::parse(image).unwrap()).is_some();
        assert!(known("registry.k8s.io/kube-apiserver:v1.31.0"));
        assert!(known("registry.k8s.io/kube-scheduler:v1.33.2"));
        assert!(known("registry.k8s.io/kube-controller-manager:v1.32.1"));
        assert!(!known("registry.k8s.io/kube-apiserver:v1.33.3"));
        assert!(!known("registry.k8s.io/kube-apiserver:v1.30.0"));
        assert!(!known("nginx"));
    }

    #[test]
    fn pause_images_are_known_once_added() {
        let mut registry = Registry::with_control_plane(33..=33, 0);
        let known =
            |r: &Registry, image: &str| r.lookup(&ImageRef::parse(image).unwrap()).is_some();
        assert!(!known(&registry, "registry.k8s.io/pause:3.10"));
        registry.add_pause_images();
        for image in PAUSE_IMAGES {
            assert!(known(&registry, image), "{image}");
        }
        assert!(!known(&registry, "registry.k8s.io/pause:3.8"));
    }

    #[test]
    fn behaviours_can_be_set_and_digests_are_stable() {
        let mut registry = Registry::new();
        registry
            .add("example.com/app:1", ImageBehaviour::never_ready())
            .unwrap();
        let app = ImageRef::parse("example.com/app:1").unwrap();
        assert!(registry.lookup(&app).unwrap().never_ready);
        registry
            .set_behaviour(
                "example.com/app:1",
                ImageBehaviour::crash_looping(Duration::from_secs(1)),
            )
            .unwrap();
        assert_eq!(
            registry.lookup(&app).unwrap().crash_after,
            Some(Duration::from_secs(1))
        );
        registry.remove("example.com/app:1");
        assert!(registry.lookup(&app).is_none());
        let digest = Registry::digest(&app);
        assert_eq!(digest.len(), "sha256:".len() + 64);
        assert_eq!(
            digest,
            Registry::digest(&ImageRef::parse("example.com/app:1").unwrap())
        );
        assert_ne!(
            digest,
            Registry::digest(&ImageRef::parse("example.com/app:2").unwrap())
        );
    }
}
