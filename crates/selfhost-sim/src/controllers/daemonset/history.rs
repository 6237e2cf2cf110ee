//! ControllerRevisions: the DaemonSet's template history (upstream `constructHistory`,
//! `snapshot`, `dedupCurHistories`, `cleanupHistory`, `controller.ComputeHash`).
//!
//! Each distinct template gets one revision named `<ds>-<hash>` whose data is the patch that
//! restores it (`{"spec":{"template":{…,"$patch":"replace"}}}`) and whose number is one more
//! than any older revision. The hash labels the pods made from that template.

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use serde_json::{Value, json};

use super::Action;
use super::template::daemon_set_reference;
use crate::controllers::objects::{self, CONTROLLER_REVISION_HASH_LABEL};

/// How many old revisions a DaemonSet keeps when `revisionHistoryLimit` is unset.
pub const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;

/// The characters upstream's `rand.SafeEncodeString` uses: no vowels (no words), no
/// look-alikes.
const SAFE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn fnv1a32(bytes: &[u8], mut hash: u32) -> u32 {
    for byte in bytes {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// The template hash: FNV-1a (32 bit) of the template's canonical JSON, then of the collision
/// count, written as its decimal digits mapped through the safe alphabet — the same shape as
/// upstream's (`5d4f8b7c9`), though not byte-identical (Go hashes its own struct printing).
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    // Serializing a typed struct cannot fail: every field is a plain value or a map with
    // string keys.
    let bytes = serde_json::to_vec(template).unwrap_or_default();
    let mut hash = fnv1a32(&bytes, 0x811c_9dc5);
    if let Some(count) = collision_count {
        hash = fnv1a32(&count.to_le_bytes(), hash);
    }
    hash.to_string()
        .bytes()
        .map(|digit| char::from(SAFE_ALPHABET[usize::from(digit) % SAFE_ALPHABET.len()]))
        .collect()
}

/// The revision data for a DaemonSet's current template.
pub fn revision_data(ds: &DaemonSet) -> Value {
    let template = ds.spec.as_ref().map(|s| &s.template);
    let mut template = serde_json::to_value(template).unwrap_or(Value::Null);
    if let Value::Object(fields) = &mut template {
        fields.insert("$patch".into(), json!("replace"));
    }
    json!({ "spec": { "template": template } })
}

/// Whether a revision records the DaemonSet's current template.
pub fn revision_matches(ds: &DaemonSet, revision: &ControllerRevision) -> bool {
    revision
        .data
        .as_ref()
        .is_some_and(|d| d.0 == revision_data(ds))
}

fn revision_hash(revision: &ControllerRevision) -> Option<&str> {
    objects::labels(&revision.metadata)
        .get(CONTROLLER_REVISION_HASH_LABEL)
        .map(String::as_str)
}

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

/// An older revision the DaemonSet still holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OldRevision {
    /// Its name.
    pub name: String,
    /// Its revision number.
    pub revision: i64,
    /// Its hash label (its name when the label was missing).
    pub hash: String,
}

/// The result of reconciling the history.
#[derive(Debug, Clone, PartialEq)]
pub enum History {
    /// The current revision is known (or about to be created).
    Current {
        /// The current template's hash.
        hash: String,
        /// Older revisions.
        old: Vec<OldRevision>,
        /// Writes that bring the history up to date.
        actions: Vec<Action>,
    },
    /// `<ds>-<hash>` already exists with another template: the collision count must be bumped
    /// (in the status) and the hash computed again.
    Collision {
        /// The new `status.collisionCount`.
        collision_count: i32,
    },
}

/// Reconciles the DaemonSet's history. `claimed` are the revisions the DaemonSet controls
/// after the claim; `all` are every revision in its namespace (to detect name collisions).
pub fn construct(
    ds: &DaemonSet,
    claimed: &[&ControllerRevision],
    all: &[ControllerRevision],
    claimed_pod_hashes: &[(String, String)],
) -> History {
    let mut actions = Vec::new();
    let mut current = Vec::new();
    let mut old = Vec::new();
    for revision in claimed {
        let hash = match revision_hash(revision) {
            Some(hash) => hash.to_string(),
            None => {
                // Upstream labels a revision missing its hash with its own name.
                let hash = name(&revision.metadata);
                actions.push(Action::LabelRevision {
                    name: hash.clone(),
                    hash: hash.clone(),
                });
                hash
            }
        };
        if revision_matches(ds, revision) {
            current.push((*revision, hash));
        } else {
            old.push(OldRevision {
                name: name(&revision.metadata),
                revision: revision.revision,
                hash,
            });
        }
    }
    let next_number = old.iter().map(|r| r.revision).max().unwrap_or(0) + 1;
    let hash = match current.as_slice() {
        [] => {
            let template = ds
                .spec
                .as_ref()
                .map(|s| s.template.clone())
                .unwrap_or_default();
            let collision_count = ds.status.as_ref().and_then(|s| s.collision_count);
            let hash = template_hash(&template, collision_count);
            let wanted = format!("{}-{hash}", ds.metadata.name.as_deref().unwrap_or_default());
            match all
                .iter()
                .find(|r| r.metadata.name.as_deref() == Some(&wanted))
            {
                Some(existing) if revision_matches(ds, existing) => {
                    // Created by an earlier sync that did not see it yet; use it as it is.
                }
                Some(_) => {
                    return History::Collision {
                        collision_count: collision_count.unwrap_or(0).saturating_add(1),
                    };
                }
                None => actions.push(Action::CreateRevision(Box::new(snapshot(
                    ds,
                    &hash,
                    next_number,
                )))),
            }
            hash
        }
        [(only, hash)] => {
            if only.revision < next_number {
                actions.push(Action::SetRevisionNumber {
                    name: name(&only.metadata),
                    revision: next_number,
                });
            }
            hash.clone()
        }
        [first, rest @ ..] => {
            // Keep the highest revision (the last one on ties, as upstream); relabel pods made
            // from the duplicates and drop them.
            let (keep, keep_hash) = rest.iter().fold(first, |best, r| {
                if r.0.revision >= best.0.revision {
                    r
                } else {
                    best
                }
            });
            for (duplicate, duplicate_hash) in current.iter() {
                if duplicate.metadata.name == keep.metadata.name {
                    continue;
                }
                for (pod, pod_hash) in claimed_pod_hashes {
                    if pod_hash == duplicate_hash && duplicate_hash != keep_hash {
                        actions.push(Action::LabelPod {
                            name: pod.clone(),
                            hash: keep_hash.clone(),
                        });
                    }
                }
                actions.push(Action::DeleteRevision {
                    name: name(&duplicate.metadata),
                });
            }
            if keep.revision < next_number {
                actions.push(Action::SetRevisionNumber {
                    name: name(&keep.metadata),
                    revision: next_number,
                });
            }
            keep_hash.clone()
        }
    };
    History::Current { hash, old, actions }
}

/// The revision recording the DaemonSet's current template.
pub fn snapshot(ds: &DaemonSet, hash: &str, revision: i64) -> ControllerRevision {
    let template_labels = ds
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone());
    let mut labels = template_labels.unwrap_or_default();
    labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.to_string());
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{hash}",
                ds.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: ds.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: ds.metadata.annotations.clone(),
            owner_references: Some(vec![daemon_set_reference(ds)]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(revision_data(ds))),
        revision,
    }
}

/// Old revisions to delete beyond `revisionHistoryLimit`, oldest first, never one whose hash
/// a live pod still carries.
pub fn cleanup(ds: &DaemonSet, old: &[OldRevision], live_hashes: &[&str]) -> Vec<Action> {
    let limit = ds
        .spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .unwrap_or(DEFAULT_REVISION_HISTORY_LIMIT);
    let keep = usize::try_from(limit).unwrap_or(0);
    let mut to_kill = old.len().saturating_sub(keep);
    let mut by_age: Vec<&OldRevision> = old.iter().collect();
    by_age.sort_by_key(|r| r.revision);
    let mut actions = Vec::new();
    for revision in by_age {
        if to_kill == 0 {
            break;
        }
        if live_hashes.contains(&revision.hash.as_str()) {
            continue;
        }
        actions.push(Action::DeleteRevision {
            name: revision.name.clone(),
        });
        to_kill -= 1;
    }
    actions
}
