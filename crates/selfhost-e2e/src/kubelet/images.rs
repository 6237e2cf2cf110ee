//! Images are directories of executables: `…/<component>:<tag>` is `<images>/<tag>/<component>`,
//! and `…/pause:<any tag>` is the pause container. An image with no such executable cannot be
//! pulled, with the error a containerd-backed kubelet reports.

use std::path::{Path, PathBuf};

/// The component name of the pause image.
pub(crate) const PAUSE: &str = "pause";

/// An image reference, reduced to what finds its executable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImageName {
    /// The last path element of the repository (`kube-apiserver`).
    pub component: String,
    /// The tag (`latest` when the reference has none).
    pub tag: String,
}

/// Why a container's image is not there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PullFailure {
    /// The reference cannot be parsed (`InvalidImageName`).
    InvalidName(String),
    /// The registry does not have it (`ErrImagePull`).
    NotFound(String),
    /// Policy `Never` and it is not on the node (`ErrImageNeverPull`).
    NeverPull(String),
}

impl PullFailure {
    /// The container's waiting reason.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            PullFailure::InvalidName(_) => "InvalidImageName",
            PullFailure::NotFound(_) => "ErrImagePull",
            PullFailure::NeverPull(_) => "ErrImageNeverPull",
        }
    }

    /// The message, as the kubelet words it.
    pub(crate) fn message(&self) -> &str {
        match self {
            PullFailure::InvalidName(m) | PullFailure::NotFound(m) | PullFailure::NeverPull(m) => m,
        }
    }
}

/// What runs for an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ImageTarget {
    /// The image's executable.
    Executable {
        /// Its path on this machine.
        path: PathBuf,
        /// The component it is (`kube-apiserver`).
        component: String,
    },
    /// The pause container: waits for SIGTERM.
    Pause,
}

impl ImageTarget {
    /// The image ID the kubelet reports (the resolved executable).
    pub(crate) fn image_id(&self, image: &str) -> String {
        match self {
            ImageTarget::Executable { path, .. } => format!("file://{}", path.display()),
            ImageTarget::Pause => format!("builtin://{image}"),
        }
    }
}

fn valid_part(part: &str) -> bool {
    !part.is_empty()
        && part != "."
        && part != ".."
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Parses `registry/path/component:tag[@digest]`.
pub(crate) fn parse_image(image: &str) -> Result<ImageName, PullFailure> {
    let invalid = || {
        PullFailure::InvalidName(format!(
            "Failed to apply default image tag \"{image}\": couldn't parse image reference \
             \"{image}\": invalid reference format"
        ))
    };
    let without_digest = image.split('@').next().unwrap_or_default();
    let last = without_digest.rsplit('/').next().unwrap_or_default();
    let (component, tag) = match last.split_once(':') {
        Some((component, tag)) => (component, tag),
        None => (last, "latest"),
    };
    if !valid_part(component) || !valid_part(tag) || image.chars().any(char::is_whitespace) {
        return Err(invalid());
    }
    Ok(ImageName {
        component: component.to_string(),
        tag: tag.to_string(),
    })
}

/// Finds what runs for `image` in `images_dir`; `never_pull` is `imagePullPolicy: Never`.
pub(crate) fn resolve(
    images_dir: &Path,
    image: &str,
    never_pull: bool,
) -> Result<ImageTarget, PullFailure> {
    let name = parse_image(image)?;
    if name.component == PAUSE {
        return Ok(ImageTarget::Pause);
    }
    let path = images_dir.join(&name.tag).join(&name.component);
    if is_executable(&path) {
        return Ok(ImageTarget::Executable {
            path,
            component: name.component,
        });
    }
    if never_pull {
        return Err(PullFailure::NeverPull(format!(
            "Container image \"{image}\" is not present with pull policy of Never"
        )));
    }
    Err(PullFailure::NotFound(format!(
        "rpc error: code = NotFound desc = failed to pull and unpack image \"{image}\": failed to \
         resolve reference \"{image}\": {image}: not found"
    )))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Orders `v1.20.10` after `v1.20.9`: numeric parts compare as numbers.
fn version_key(tag: &str) -> Vec<(u64, String)> {
    tag.trim_start_matches('v')
        .split(['.', '-', '+'])
        .map(|part| (part.parse().unwrap_or(0), part.to_string()))
        .collect()
}

/// The newest version tag among `tags` (`vX.Y.Z` directories), the kubelet's version.
pub(crate) fn newest_version<'a>(tags: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    tags.into_iter()
        .filter(|t| t.starts_with('v') && t[1..].starts_with(|c: char| c.is_ascii_digit()))
        .max_by_key(|t| version_key(t))
}

/// The tags (directory names) in `images_dir`.
pub(crate) fn tags(images_dir: &Path) -> Vec<String> {
    std::fs::read_dir(images_dir)
        .map(|entries| {
            entries
                .flatten()
                // Tags may be symbolic links to build directories.
                .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()))
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_reduce_to_component_and_tag() {
        let cases = [
            (
                "k8s.gcr.io/kube-apiserver:v1.20.3",
                Some(("kube-apiserver", "v1.20.3")),
            ),
            ("registry.k8s.io/pause:3.2", Some(("pause", "3.2"))),
            ("localhost:5000/a/etcd:3.4.13-0", Some(("etcd", "3.4.13-0"))),
            ("kube-scheduler", Some(("kube-scheduler", "latest"))),
            (
                "k8s.gcr.io/kube-proxy:v1.20.2@sha256:abc",
                Some(("kube-proxy", "v1.20.2")),
            ),
            ("k8s.gcr.io/kube-apiserver:..", None),
            ("k8s.gcr.io/:v1", None),
            ("", None),
            ("a b:c", None),
        ];
        for (image, expected) in cases {
            let parsed = parse_image(image).ok();
            assert_eq!(
                parsed
                    .as_ref()
                    .map(|n| (n.component.as_str(), n.tag.as_str())),
                expected,
                "{image}"
            );
        }
    }

    #[test]
    fn images_resolve_to_executables_or_fail_to_pull() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("v1.20.2");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("kube-apiserver"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(
            bin.join("kube-apiserver"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::write(bin.join("not-executable"), "").unwrap();
        let resolved = resolve(dir.path(), "k8s.gcr.io/kube-apiserver:v1.20.2", false);
        assert_eq!(
            resolved,
            Ok(ImageTarget::Executable {
                path: bin.join("kube-apiserver"),
                component: "kube-apiserver".into()
            })
        );
        assert_eq!(
            resolve(dir.path(), "k8s.gcr.io/pause:3.2", false),
            Ok(ImageTarget::Pause)
        );
        let cases = [
            (
                "k8s.gcr.io/kube-apiserver:v1.20.9",
                false,
                "ErrImagePull",
                "not found",
            ),
            (
                "k8s.gcr.io/not-executable:v1.20.2",
                false,
                "ErrImagePull",
                "not found",
            ),
            (
                "k8s.gcr.io/kube-apiserver:v1.20.9",
                true,
                "ErrImageNeverPull",
                "Never",
            ),
            (
                "k8s.gcr.io/kube apiserver:v1",
                false,
                "InvalidImageName",
                "invalid",
            ),
        ];
        for (image, never, reason, text) in cases {
            let failure = resolve(dir.path(), image, never).unwrap_err();
            assert_eq!(failure.reason(), reason, "{image}");
            assert!(
                failure.message().contains(text),
                "{image}: {}",
                failure.message()
            );
        }
    }

    #[test]
    fn the_newest_version_wins() {
        let tags = ["v1.20.2", "v1.20.10", "v1.20.3", "latest", "3.2"];
        assert_eq!(newest_version(tags), Some("v1.20.10"));
        assert_eq!(newest_version(["latest"]), None);
    }
}
