//! The Secret and ConfigMap volumes a static pod cannot mount: which objects they name, and
//! each turned into a host directory holding its files.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{HostPathVolumeSource, KeyToPath, PodSpec, Volume};

use super::{
    CONFIG_FILE_MODE, FileContent, HostFile, ObjectRef, RECOVERED_DIR, RecoverError, Referenced,
    SECRET_FILE_MODE,
};
use crate::component::Component;
use crate::etcd::StoredKind;

/// One object a volume projects: which, which keys to which paths, and whether it may be
/// missing.
struct Projection<'a> {
    object: ObjectRef,
    items: Option<&'a Vec<KeyToPath>>,
    optional: bool,
    default_mode: Option<i32>,
}

/// The projections of a volume that reads from the API, or `None` for one that does not.
fn projections(volume: &Volume) -> Option<Result<Vec<Projection<'_>>, String>> {
    if let Some(secret) = &volume.secret {
        return Some(Ok(vec![Projection {
            object: secret_ref(secret.secret_name.clone().unwrap_or_default()),
            items: secret.items.as_ref(),
            optional: secret.optional == Some(true),
            default_mode: secret.default_mode,
        }]));
    }
    if let Some(config) = &volume.config_map {
        return Some(Ok(vec![Projection {
            object: config_ref(config.name.clone()),
            items: config.items.as_ref(),
            optional: config.optional == Some(true),
            default_mode: config.default_mode,
        }]));
    }
    let projected = volume.projected.as_ref()?;
    let mut found = Vec::new();
    for source in projected.sources.iter().flatten() {
        if let Some(secret) = &source.secret {
            found.push(Projection {
                object: secret_ref(secret.name.clone()),
                items: secret.items.as_ref(),
                optional: secret.optional == Some(true),
                default_mode: projected.default_mode,
            });
        } else if let Some(config) = &source.config_map {
            found.push(Projection {
                object: config_ref(config.name.clone()),
                items: config.items.as_ref(),
                optional: config.optional == Some(true),
                default_mode: projected.default_mode,
            });
        } else {
            return Some(Err(format!(
                "volume {:?} projects something other than Secrets and ConfigMaps \
                 (a service account token, the downward API, a trust bundle)",
                volume.name
            )));
        }
    }
    Some(Ok(found))
}

fn secret_ref(name: String) -> ObjectRef {
    ObjectRef {
        kind: StoredKind::Secret,
        name,
    }
}

fn config_ref(name: String) -> ObjectRef {
    ObjectRef {
        kind: StoredKind::ConfigMap,
        name,
    }
}

/// The objects the API-reading volumes of `spec` name.
pub(super) fn referenced(spec: &PodSpec) -> Vec<ObjectRef> {
    spec.volumes
        .iter()
        .flatten()
        .filter_map(projections)
        .filter_map(Result::ok)
        .flatten()
        .map(|p| p.object)
        .collect()
}

/// Refuses a variable taken from a Secret or a ConfigMap: a static pod has no way to read it.
pub(super) fn refuse_env_from_objects(
    component: Component,
    spec: &PodSpec,
) -> Result<(), RecoverError> {
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for container in containers {
        let unsupported = |what: String| RecoverError::Unsupported { component, what };
        if container.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
            return Err(unsupported(format!(
                "container {:?} takes its environment from a Secret or ConfigMap (envFrom)",
                container.name
            )));
        }
        for var in container.env.iter().flatten() {
            let from = var.value_from.as_ref();
            if from.is_some_and(|f| f.secret_key_ref.is_some() || f.config_map_key_ref.is_some()) {
                return Err(unsupported(format!(
                    "container {:?} takes variable {} from a Secret or ConfigMap",
                    container.name, var.name
                )));
            }
        }
    }
    Ok(())
}

/// The value of `key` in the object, `None` when it has no such key.
pub(super) fn secret_key(
    component: Component,
    read: &Referenced,
    object: &ObjectRef,
    key: &str,
) -> Result<Option<Vec<u8>>, RecoverError> {
    Ok(data(read, object)
        .ok_or_else(|| RecoverError::Missing {
            component,
            object: object.clone(),
        })?
        .remove(key))
}

/// Every key of the object with its bytes, `None` when the object was not read.
fn data(read: &Referenced, object: &ObjectRef) -> Option<BTreeMap<String, Vec<u8>>> {
    match object.kind {
        StoredKind::Secret => read.secrets.get(&object.name).map(|s| {
            s.data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()))
                .collect()
        }),
        StoredKind::ConfigMap => read.config_maps.get(&object.name).map(|c| {
            let text = c
                .data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone().into_bytes()));
            let binary = c
                .binary_data
                .iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.0.clone()));
            text.chain(binary).collect()
        }),
        StoredKind::DaemonSet => None,
    }
}

/// Turns every volume of `spec` that reads from the API into a host directory under
/// [`RECOVERED_DIR`], and returns the files to write there.
pub(super) fn to_host_directories(
    component: Component,
    spec: &mut PodSpec,
    read: &Referenced,
) -> Result<Vec<HostFile>, RecoverError> {
    let mut files = Vec::new();
    for volume in spec.volumes.iter_mut().flatten() {
        let Some(found) = projections(volume) else {
            continue;
        };
        let found = found.map_err(|what| RecoverError::Unsupported { component, what })?;
        let dir = format!("{RECOVERED_DIR}/{}/{}", component.name(), volume.name);
        for projection in found {
            files.extend(projected_files(component, read, &dir, &projection)?);
        }
        *volume = Volume {
            name: volume.name.clone(),
            host_path: Some(HostPathVolumeSource {
                path: dir,
                type_: Some("DirectoryOrCreate".into()),
            }),
            ..Volume::default()
        };
    }
    Ok(files)
}

fn projected_files(
    component: Component,
    read: &Referenced,
    dir: &str,
    projection: &Projection<'_>,
) -> Result<Vec<HostFile>, RecoverError> {
    let object = &projection.object;
    let Some(mut data) = data(read, object) else {
        if projection.optional {
            return Ok(Vec::new());
        }
        return Err(RecoverError::Missing {
            component,
            object: object.clone(),
        });
    };
    let wanted: Vec<(String, String, Option<i32>)> = match projection.items {
        Some(items) => items
            .iter()
            .map(|i| (i.key.clone(), i.path.clone(), i.mode))
            .collect(),
        None => data.keys().map(|k| (k.clone(), k.clone(), None)).collect(),
    };
    let mut files = Vec::new();
    for (key, path, mode) in wanted {
        let Some(content) = data.remove(&key) else {
            if projection.optional {
                continue;
            }
            return Err(RecoverError::MissingKey {
                component,
                object: object.clone(),
                key,
            });
        };
        let mode = match object.kind {
            StoredKind::Secret => SECRET_FILE_MODE,
            _ => mode
                .or(projection.default_mode)
                .and_then(|m| u32::try_from(m).ok())
                .unwrap_or(CONFIG_FILE_MODE),
        };
        files.push(HostFile {
            path: format!("{dir}/{path}"),
            mode,
            from: format!("{object} key {key}"),
            content: FileContent(content),
        });
    }
    Ok(files)
}
