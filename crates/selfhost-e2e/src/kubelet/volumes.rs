//! Volumes without mount namespaces: each volume is a directory (or file) on this machine,
//! and [`mounts`] tells the command line where a container's mount paths really are.
//!
//! hostPath `P` is `<root>/P` (the `…OrCreate` types create it, the others must exist);
//! emptyDir is a per-pod directory; secret, configMap, projected and downwardAPI volumes are
//! their keys written as files into a per-pod directory, with the modes the pod asks for
//! (0644 by default). Secret data is never logged.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{ConfigMap, Container, KeyToPath, Pod, Secret, Volume};
use kube::Client;
use kube::api::Api;

use super::api::call;
use super::command::{Mount, PodFields};
use super::config::Layout;
use super::error::KubeletError;

/// A file's mode when the pod does not say.
const DEFAULT_MODE: u32 = 0o644;

/// Where a volume lives under the pod's directory, by the kubelet's plugin names.
fn plugin(volume: &Volume) -> &'static str {
    match () {
        () if volume.secret.is_some() => "kubernetes.io~secret",
        () if volume.config_map.is_some() => "kubernetes.io~configmap",
        () if volume.projected.is_some() => "kubernetes.io~projected",
        () if volume.downward_api.is_some() => "kubernetes.io~downward-api",
        () => "kubernetes.io~empty-dir",
    }
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or_default()
}

/// Where each volume of `pod` is on this machine, by volume name.
pub(crate) fn volume_sources(layout: &Layout, pod: &Pod) -> BTreeMap<String, PathBuf> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .map(|v| {
            let source = match &v.host_path {
                Some(host) => layout.host_path(&host.path),
                None => layout.volume_dir(uid(pod), plugin(v), &v.name),
            };
            (v.name.clone(), source)
        })
        .collect()
}

/// The container's mounts: mount path to source, honouring `subPath`. Mounts of volumes the
/// pod does not declare are skipped (the apiserver refuses such pods).
pub(crate) fn mounts(container: &Container, sources: &BTreeMap<String, PathBuf>) -> Vec<Mount> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .filter_map(|m| {
            let mut source = sources.get(&m.name)?.clone();
            if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
                source.push(safe_relative(sub)?);
            }
            Some(Mount {
                mount_path: m.mount_path.clone(),
                source,
            })
        })
        .collect()
}

/// Whether setting up the pod's volumes needs the API (Secrets, ConfigMaps).
pub(crate) fn needs_api(pod: &Pod) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| {
            v.secret.is_some()
                || v.config_map.is_some()
                || v.projected.as_ref().is_some_and(|p| {
                    p.sources
                        .iter()
                        .flatten()
                        .any(|s| s.secret.is_some() || s.config_map.is_some())
                })
        })
}

/// A relative path inside a volume; absolute paths and `..` are refused.
fn safe_relative(path: &str) -> Option<PathBuf> {
    let relative = Path::new(path);
    relative
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        .then(|| relative.to_path_buf())
        .filter(|p| !p.as_os_str().is_empty())
}

/// One file of a volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct VolumeFile {
    /// Inside the volume.
    pub path: PathBuf,
    pub content: Vec<u8>,
    pub mode: u32,
}

fn mode(value: Option<i32>, default: u32) -> u32 {
    value
        .and_then(|m| u32::try_from(m).ok())
        .map_or(default, |m| m & 0o7777)
}

/// The files of a Secret or ConfigMap (`what` and `name` say which, for messages): every key,
/// or only `items`, each with its mode, `default_mode` otherwise. `data` is `None` when the
/// object does not exist, which only an optional volume accepts.
pub(crate) fn key_files(
    what: &str,
    name: &str,
    data: Option<&BTreeMap<String, Vec<u8>>>,
    items: Option<&[KeyToPath]>,
    default_mode: u32,
    optional: bool,
) -> Result<Vec<VolumeFile>, String> {
    let Some(data) = data else {
        return if optional {
            Ok(Vec::new())
        } else {
            Err(format!("{what} \"{name}\" not found"))
        };
    };
    let Some(items) = items.filter(|i| !i.is_empty()) else {
        return data
            .iter()
            .map(|(key, content)| {
                let path = safe_relative(key)
                    .ok_or_else(|| format!("{what} {name}: invalid key {key:?}"))?;
                Ok(VolumeFile {
                    path,
                    content: content.clone(),
                    mode: default_mode,
                })
            })
            .collect();
    };
    let mut files = Vec::new();
    for item in items {
        let Some(content) = data.get(&item.key) else {
            if optional {
                continue;
            }
            return Err(format!("{what} \"{name}\" has no key {:?}", item.key));
        };
        let path = safe_relative(&item.path)
            .ok_or_else(|| format!("{what} {name}: invalid path {:?}", item.path))?;
        files.push(VolumeFile {
            path,
            content: content.clone(),
            mode: mode(item.mode, default_mode),
        });
    }
    Ok(files)
}

/// The text the kubelet writes for a downwardAPI `fieldRef`.
fn downward_value(fields: &PodFields, path: &str) -> Option<String> {
    let pairs = |map: &BTreeMap<String, String>| {
        map.iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    match path {
        "metadata.labels" => Some(pairs(&fields.labels)),
        "metadata.annotations" => Some(pairs(&fields.annotations)),
        _ => fields.field(path),
    }
}

async fn secret_data(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, KubeletError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = call(format!("get secret {namespace}/{name}"), api.get_opt(name)).await?;
    Ok(secret.map(|s| {
        s.data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect()
    }))
}

async fn config_map_data(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, KubeletError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let map = call(
        format!("get configmap {namespace}/{name}"),
        api.get_opt(name),
    )
    .await?;
    Ok(map.map(|m| {
        let mut data: BTreeMap<String, Vec<u8>> = m
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.into_bytes()))
            .collect();
        data.extend(
            m.binary_data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0)),
        );
        data
    }))
}

/// The files a volume holds, fetching Secrets and ConfigMaps from the API.
async fn volume_files(
    client: &Client,
    namespace: &str,
    volume: &Volume,
    fields: &PodFields,
) -> Result<Vec<VolumeFile>, KubeletError> {
    let failed = |reason: String| KubeletError::Volume {
        volume: volume.name.clone(),
        reason,
    };
    if let Some(secret) = &volume.secret {
        let name = secret.secret_name.clone().unwrap_or_default();
        let data = secret_data(client, namespace, &name).await?;
        let default = mode(secret.default_mode, DEFAULT_MODE);
        return key_files(
            "secret",
            &name,
            data.as_ref(),
            secret.items.as_deref(),
            default,
            secret.optional == Some(true),
        )
        .map_err(failed);
    }
    if let Some(map) = &volume.config_map {
        let data = config_map_data(client, namespace, &map.name).await?;
        let default = mode(map.default_mode, DEFAULT_MODE);
        return key_files(
            "configmap",
            &map.name,
            data.as_ref(),
            map.items.as_deref(),
            default,
            map.optional == Some(true),
        )
        .map_err(failed);
    }
    let downward = |items: &[k8s_openapi::api::core::v1::DownwardAPIVolumeFile], default: u32| {
        items
            .iter()
            .filter_map(|item| {
                let value = downward_value(fields, &item.field_ref.as_ref()?.field_path)?;
                Some(VolumeFile {
                    path: safe_relative(&item.path)?,
                    content: value.into_bytes(),
                    mode: mode(item.mode, default),
                })
            })
            .collect::<Vec<_>>()
    };
    if let Some(api) = &volume.downward_api {
        let default = mode(api.default_mode, DEFAULT_MODE);
        return Ok(downward(api.items.as_deref().unwrap_or_default(), default));
    }
    let mut files = Vec::new();
    if let Some(projected) = &volume.projected {
        let default = mode(projected.default_mode, DEFAULT_MODE);
        for source in projected.sources.iter().flatten() {
            if let Some(secret) = &source.secret {
                let data = secret_data(client, namespace, &secret.name).await?;
                files.extend(
                    key_files(
                        "secret",
                        &secret.name,
                        data.as_ref(),
                        secret.items.as_deref(),
                        default,
                        secret.optional == Some(true),
                    )
                    .map_err(failed)?,
                );
            }
            if let Some(map) = &source.config_map {
                let data = config_map_data(client, namespace, &map.name).await?;
                files.extend(
                    key_files(
                        "configmap",
                        &map.name,
                        data.as_ref(),
                        map.items.as_deref(),
                        default,
                        map.optional == Some(true),
                    )
                    .map_err(failed)?,
                );
            }
            if let Some(api) = &source.downward_api {
                files.extend(downward(api.items.as_deref().unwrap_or_default(), default));
            }
            if source.service_account_token.is_some() {
                tracing::warn!(volume = %volume.name, "serviceAccountToken projections are not supported; skipped");
            }
        }
    }
    Ok(files)
}

/// Writes `files` into `dir`, each atomically and only when its content or mode changed.
fn write_files(dir: &Path, files: &[VolumeFile]) -> Result<(), KubeletError> {
    std::fs::create_dir_all(dir).map_err(|e| KubeletError::io("create", dir, e))?;
    for file in files {
        let path = dir.join(&file.path);
        let unchanged = std::fs::read(&path).is_ok_and(|c| c == file.content)
            && std::fs::metadata(&path).is_ok_and(|m| m.permissions().mode() & 0o7777 == file.mode);
        if unchanged {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| KubeletError::io("create", parent, e))?;
        }
        let temporary = path.with_extension("kubelet-tmp");
        std::fs::write(&temporary, &file.content)
            .map_err(|e| KubeletError::io("write", &temporary, e))?;
        std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(file.mode))
            .map_err(|e| KubeletError::io("chmod", &temporary, e))?;
        std::fs::rename(&temporary, &path).map_err(|e| KubeletError::io("rename", &path, e))?;
    }
    Ok(())
}

/// Checks or creates a hostPath of `type_` at `path`.
fn host_path(volume: &str, path: &Path, type_: &str) -> Result<(), KubeletError> {
    let failed = |reason: String| KubeletError::Volume {
        volume: volume.to_string(),
        reason,
    };
    let meta = std::fs::metadata(path);
    match type_ {
        "DirectoryOrCreate" if meta.is_err() => {
            std::fs::create_dir_all(path).map_err(|e| KubeletError::io("create", path, e))
        }
        "FileOrCreate" if meta.is_err() => {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| KubeletError::io("create", parent, e))?;
            }
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map(|_| ())
                .map_err(|e| KubeletError::io("create", path, e))
        }
        "Directory" | "DirectoryOrCreate" if !meta.as_ref().is_ok_and(|m| m.is_dir()) => {
            Err(failed(format!(
                "hostPath type check failed: {} is not a directory",
                path.display()
            )))
        }
        "File" | "FileOrCreate" if !meta.as_ref().is_ok_and(|m| m.is_file()) => {
            Err(failed(format!(
                "hostPath type check failed: {} is not a file",
                path.display()
            )))
        }
        "Socket" | "CharDevice" | "BlockDevice" if meta.is_err() => Err(failed(format!(
            "hostPath type check failed: {} does not exist",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// Puts every volume of `pod` in place (or refreshes it). `client` is needed only when
/// [`needs_api`] says so.
pub(crate) async fn set_up(
    client: &Client,
    layout: &Layout,
    pod: &Pod,
    fields: &PodFields,
) -> Result<(), KubeletError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let sources = volume_sources(layout, pod);
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(dir) = sources.get(&volume.name) else {
            continue;
        };
        if let Some(host) = &volume.host_path {
            host_path(&volume.name, dir, host.type_.as_deref().unwrap_or_default())?;
            continue;
        }
        let files = volume_files(client, namespace, volume, fields).await?;
        write_files(dir, &files)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        HostPathVolumeSource, PodSpec, SecretVolumeSource, VolumeMount,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                uid: Some("u1".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                volumes: Some(vec![
                    Volume {
                        name: "k8s-certs".into(),
                        host_path: Some(HostPathVolumeSource {
                            path: "/etc/kubernetes/pki".into(),
                            type_: Some("DirectoryOrCreate".into()),
                        }),
                        ..Volume::default()
                    },
                    Volume {
                        name: "kubeconfig".into(),
                        secret: Some(SecretVolumeSource {
                            secret_name: Some("scheduler.conf".into()),
                            ..SecretVolumeSource::default()
                        }),
                        ..Volume::default()
                    },
                    Volume {
                        name: "scratch".into(),
                        ..Volume::default()
                    },
                ]),
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn mounts_point_at_each_volume_and_honour_sub_paths() {
        let layout = Layout::new(Path::new("/n1"));
        let sources = volume_sources(&layout, &pod());
        let mount = |name: &str, path: &str, sub: Option<&str>| VolumeMount {
            name: name.into(),
            mount_path: path.into(),
            sub_path: sub.map(str::to_string),
            ..VolumeMount::default()
        };
        let container = Container {
            volume_mounts: Some(vec![
                mount("k8s-certs", "/etc/kubernetes/pki", None),
                mount(
                    "kubeconfig",
                    "/etc/kubernetes/scheduler.conf",
                    Some("scheduler.conf"),
                ),
                mount("scratch", "/tmp/x", None),
                mount("undeclared", "/nowhere", None),
                mount("k8s-certs", "/escape", Some("../../etc")),
            ]),
            ..Container::default()
        };
        let got: Vec<(String, String)> = mounts(&container, &sources)
            .into_iter()
            .map(|m| (m.mount_path, m.source.display().to_string()))
            .collect();
        let want = [
            ("/etc/kubernetes/pki", "/n1/etc/kubernetes/pki"),
            (
                "/etc/kubernetes/scheduler.conf",
                "/n1/var/lib/kubelet/pods/u1/volumes/kubernetes.io~secret/kubeconfig/scheduler.conf",
            ),
            (
                "/tmp/x",
                "/n1/var/lib/kubelet/pods/u1/volumes/kubernetes.io~empty-dir/scratch",
            ),
        ];
        assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())));
        assert!(needs_api(&pod()));
    }

    #[test]
    fn keys_become_files_with_their_modes() {
        let data: BTreeMap<String, Vec<u8>> = [
            ("ca.crt".to_string(), b"cert".to_vec()),
            ("ca.key".to_string(), b"key".to_vec()),
        ]
        .into();
        let item = |key: &str, path: &str, mode: Option<i32>| KeyToPath {
            key: key.into(),
            path: path.into(),
            mode,
        };
        let summary = |files: Vec<VolumeFile>| -> Vec<(String, u32)> {
            files
                .into_iter()
                .map(|f| (f.path.display().to_string(), f.mode))
                .collect()
        };
        let all = key_files("secret", "ca", Some(&data), None, 0o600, false).unwrap();
        assert_eq!(
            summary(all),
            [("ca.crt".to_string(), 0o600), ("ca.key".to_string(), 0o600)]
        );
        let items = [
            item("ca.crt", "pki/ca.crt", None),
            item("ca.key", "pki/ca.key", Some(0o400)),
        ];
        let picked = key_files("secret", "ca", Some(&data), Some(&items), 0o644, false).unwrap();
        assert_eq!(
            summary(picked),
            [
                ("pki/ca.crt".to_string(), 0o644),
                ("pki/ca.key".to_string(), 0o400)
            ]
        );
        let cases = [
            (
                key_files("secret", "ca", None, None, 0o644, false),
                Some("secret \"ca\" not found"),
            ),
            (key_files("secret", "ca", None, None, 0o644, true), None),
            (
                key_files(
                    "secret",
                    "ca",
                    Some(&data),
                    Some(&[item("x", "x", None)]),
                    0o644,
                    false,
                ),
                Some("has no key \"x\""),
            ),
            (
                key_files(
                    "secret",
                    "ca",
                    Some(&data),
                    Some(&[item("ca.crt", "../x", None)]),
                    0o644,
                    false,
                ),
                Some("invalid path"),
            ),
        ];
        for (result, error) in cases {
            match error {
                Some(text) => assert!(result.as_ref().unwrap_err().contains(text), "{result:?}"),
                None => assert_eq!(result, Ok(Vec::new())),
            }
        }
    }

    #[test]
    fn files_are_written_with_modes_and_host_paths_checked() {
        let dir = tempfile::tempdir().unwrap();
        let files = [VolumeFile {
            path: "a/b.key".into(),
            content: b"x".to_vec(),
            mode: 0o600,
        }];
        write_files(dir.path(), &files).unwrap();
        write_files(dir.path(), &files).unwrap();
        let meta = std::fs::metadata(dir.path().join("a/b.key")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
        let cases = [
            ("made", "DirectoryOrCreate", true),
            ("f/made.conf", "FileOrCreate", true),
            ("missing", "Directory", false),
            ("missing", "File", false),
            ("a/b.key", "Directory", false),
            ("missing", "", true),
        ];
        for (path, type_, ok) in cases {
            let result = host_path("v", &dir.path().join(path), type_);
            assert_eq!(result.is_ok(), ok, "{path} {type_}: {result:?}");
        }
        assert!(dir.path().join("made").is_dir());
        assert!(dir.path().join("f/made.conf").is_file());
    }
}
