//! Where the real Kubernetes binaries live: `scripts/build-kubernetes.sh` builds them into a
//! cache outside the checkout, one directory per image tag (`<dir>/<tag>/<binary>`), which is
//! exactly the layout the process kubelet resolves images in.

use std::path::{Path, PathBuf};

use crate::BedError;

/// The tag the bed's control plane starts on.
pub const FROM_TAG: &str = "v1.20.2";
/// The tag an upgrade moves to: the same source built with the version set to v1.20.3.
pub const TO_TAG: &str = "v1.20.3";
/// The binaries every tag has.
pub const COMPONENT_BINARIES: [&str; 3] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
];
/// Environment variable naming the binaries directory (what the build script prints).
pub const BIN_DIR_ENV: &str = "SELFHOST_E2E_BIN";
/// Environment variable naming the build cache (default [`DEFAULT_CACHE`]).
pub const CACHE_ENV: &str = "SELFHOST_E2E_CACHE";
/// Where the build script caches by default.
pub const DEFAULT_CACHE: &str = "/var/cache/selfhost-e2e";

/// The directory of built binaries, one sub-directory per tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// Finds the binaries: `$SELFHOST_E2E_BIN`, else the newest `kubernetes-*/bin` in the cache.
    ///
    /// # Errors
    /// No directory holds both tags' binaries; the message says how to build them.
    pub fn locate() -> Result<Binaries, BedError> {
        let candidates = match std::env::var_os(BIN_DIR_ENV) {
            Some(dir) => vec![PathBuf::from(dir)],
            None => {
                let cache = std::env::var_os(CACHE_ENV)
                    .map_or_else(|| PathBuf::from(DEFAULT_CACHE), PathBuf::from);
                let mut found: Vec<PathBuf> = std::fs::read_dir(&cache)
                    .map(|entries| {
                        entries
                            .filter_map(Result::ok)
                            .map(|e| e.path())
                            .filter(|p| {
                                p.file_name()
                                    .and_then(|n| n.to_str())
                                    .is_some_and(|n| n.starts_with("kubernetes-"))
                            })
                            .map(|p| p.join("bin"))
                            .collect()
                    })
                    .unwrap_or_default();
                found.sort();
                found.reverse();
                found
            }
        };
        candidates
            .into_iter()
            .map(|dir| Binaries { dir })
            .find(Binaries::complete)
            .ok_or(BedError::NoBinaries)
    }

    /// A directory laid out as the build script lays it out (for tests of the layout).
    pub fn at(dir: impl Into<PathBuf>) -> Binaries {
        Binaries { dir: dir.into() }
    }

    fn complete(&self) -> bool {
        [FROM_TAG, TO_TAG].iter().all(|tag| {
            COMPONENT_BINARIES
                .iter()
                .all(|bin| self.dir.join(tag).join(bin).is_file())
        })
    }

    /// The directory (the process kubelet's `--images`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One binary of one tag.
    pub fn binary(&self, tag: &str, name: &str) -> PathBuf {
        self.dir.join(tag).join(name)
    }
}
