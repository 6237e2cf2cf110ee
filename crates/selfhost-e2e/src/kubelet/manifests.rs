//! Reading the manifests directory: every `*.yaml`, `*.yml` or `*.json` file that holds a v1
//! Pod becomes a static pod. The directory is read every second; a file that changed gives a
//! pod with another uid (the old one is stopped, the new one started), a removed file's pod is
//! stopped. A bad file is logged once and skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::static_pods::{config_hash, is_manifest_name, parse_manifest, stable_hex, static_pod};

/// Remembers what it reported and when it first saw each pod.
#[derive(Debug, Default)]
pub(crate) struct ManifestScanner {
    /// `kubernetes.io/config.seen` of each pod, by uid.
    seen: BTreeMap<String, Timestamp>,
    /// Errors already logged, by file and content hash.
    reported: BTreeSet<(PathBuf, String)>,
}

impl ManifestScanner {
    /// The static pods `contents` (file path and bytes) describe at `now`.
    pub(crate) fn pods(
        &mut self,
        contents: &[(PathBuf, Vec<u8>)],
        node_name: &str,
        now: Timestamp,
    ) -> Vec<Pod> {
        let mut pods = Vec::new();
        let mut seen = BTreeMap::new();
        let mut reported = BTreeSet::new();
        for (path, content) in contents {
            let file = path.display().to_string();
            match parse_manifest(content, &file) {
                Ok(manifest) => {
                    let uid = config_hash(&manifest, &file, node_name);
                    let first_seen = self.seen.get(&uid).copied().unwrap_or(now);
                    seen.insert(uid, first_seen);
                    pods.push(static_pod(&manifest, &file, node_name, first_seen));
                }
                Err(error) => {
                    let key = (path.clone(), stable_hex(content));
                    if !self.reported.contains(&key) {
                        tracing::warn!(%error, "skipping a manifest");
                    }
                    reported.insert(key);
                }
            }
        }
        self.seen = seen;
        self.reported = reported;
        pods
    }
}

/// The manifest files of `dir` and their contents, by name. A missing directory holds none.
pub(crate) fn read_dir(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(PathBuf, Vec<u8>)> = entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(is_manifest_name))
        .filter(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.is_file()))
        .filter_map(|e| Some((e.path(), std::fs::read(e.path()).ok()?)))
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::clock::t;

    const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: kube-system}\nspec: {containers: [{name: c, image: k8s.gcr.io/pause:3.2}]}\n";

    #[test]
    fn pods_keep_when_they_were_first_seen_and_follow_their_content() {
        let mut scanner = ManifestScanner::default();
        let file = PathBuf::from("/m/p.yaml");
        let uid = |pods: &[Pod]| pods[0].metadata.uid.clone().unwrap();
        let seen = |pods: &[Pod]| {
            pods[0].metadata.annotations.clone().unwrap()["kubernetes.io/config.seen"].clone()
        };
        let first = scanner.pods(&[(file.clone(), POD.into())], "n1", t(0));
        let again = scanner.pods(&[(file.clone(), POD.into())], "n1", t(5));
        assert_eq!((uid(&first), seen(&first)), (uid(&again), seen(&again)));
        let changed = scanner.pods(
            &[(file.clone(), POD.replace("3.2", "3.3").into())],
            "n1",
            t(6),
        );
        assert_ne!(uid(&changed), uid(&first));
        assert!(seen(&changed).starts_with("2023-11-14T22:13:26"));
        let broken = scanner.pods(&[(file, b"kind: [".to_vec())], "n1", t(7));
        assert!(broken.is_empty());
    }

    #[test]
    fn only_manifest_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.yaml", "b.json", ".hidden.yaml", "c.yaml.bak", "d.yml"] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        std::fs::create_dir(dir.path().join("e.yaml")).unwrap();
        let names: Vec<String> = read_dir(dir.path())
            .into_iter()
            .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.yaml", "b.json", "d.yml"]);
        assert!(read_dir(&dir.path().join("missing")).is_empty());
    }
}
