//! Reading and writing `metadata` of objects kept as JSON, and the small sources of
//! identity (uids, generated names, timestamps) the apiserver stamps on them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value};

/// The `metadata` map of an object, if it has one.
pub fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// The `metadata` map of an object, created if absent (or if it was not a map).
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let Value::Object(root) = obj else {
        unreachable!("replaced by an object just above")
    };
    let meta = root
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(m) => m,
        _ => unreachable!("replaced by an object just above"),
    }
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    metadata(obj)?.get(field)?.as_str()
}

/// `metadata.name`, empty if absent.
pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name").unwrap_or("")
}

/// `metadata.namespace`, empty if absent.
pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace").unwrap_or("")
}

/// `metadata.uid`, empty if absent.
pub fn uid(obj: &Value) -> &str {
    meta_str(obj, "uid").unwrap_or("")
}

/// `metadata.resourceVersion`, if present and not empty.
pub fn resource_version(obj: &Value) -> Option<&str> {
    meta_str(obj, "resourceVersion").filter(|s| !s.is_empty())
}

/// `metadata.deletionTimestamp`, if the object is being deleted.
pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    meta_str(obj, "deletionTimestamp")
}

/// `metadata.deletionGracePeriodSeconds`, if set.
pub fn deletion_grace_period(obj: &Value) -> Option<i64> {
    metadata(obj)?.get("deletionGracePeriodSeconds")?.as_i64()
}

/// `metadata.generation`, 0 if absent.
pub fn generation(obj: &Value) -> i64 {
    metadata(obj)
        .and_then(|m| m.get("generation"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// `metadata.labels` as a map (non-string values are skipped).
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    string_map(obj, "labels")
}

/// `metadata.annotations` as a map (non-string values are skipped).
pub fn annotations(obj: &Value) -> BTreeMap<String, String> {
    string_map(obj, "annotations")
}

fn string_map(obj: &Value, field: &str) -> BTreeMap<String, String> {
    metadata(obj)
        .and_then(|m| m.get(field))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<String> {
    metadata(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Replaces `metadata.finalizers` (removing the field when empty, as the apiserver omits it).
pub fn set_finalizers(obj: &mut Value, finalizers: &[String]) {
    let meta = metadata_mut(obj);
    if finalizers.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert(
            "finalizers".into(),
            Value::Array(finalizers.iter().cloned().map(Value::String).collect()),
        );
    }
}

/// One entry of `metadata.ownerReferences`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerReference {
    /// `apiVersion` of the owner.
    pub api_version: String,
    /// `kind` of the owner.
    pub kind: String,
    /// `name` of the owner.
    pub name: String,
    /// `uid` of the owner: the garbage collector's identity of an owner.
    pub uid: String,
    /// Whether this reference blocks foreground deletion of the owner.
    pub block_owner_deletion: bool,
    /// Whether the owner is the managing controller.
    pub controller: bool,
}

/// `metadata.ownerReferences` (entries without a uid are skipped: they can own nothing).
pub fn owner_references(obj: &Value) -> Vec<OwnerReference> {
    let Some(refs) = metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    refs.iter()
        .filter_map(|r| {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let b = |k: &str| r.get(k).and_then(Value::as_bool).unwrap_or(false);
            let uid = s("uid");
            (!uid.is_empty()).then(|| OwnerReference {
                api_version: s("apiVersion"),
                kind: s("kind"),
                name: s("name"),
                uid,
                block_owner_deletion: b("blockOwnerDeletion"),
                controller: b("controller"),
            })
        })
        .collect()
}

/// Whether the object has at least one owner reference.
pub fn has_owner_references(obj: &Value) -> bool {
    metadata(obj)
        .and_then(|m| m.get("ownerReferences"))
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty())
}

/// Removes the owner references that point at `owner_uid`.
pub fn remove_owner_reference(obj: &mut Value, owner_uid: &str) {
    let meta = metadata_mut(obj);
    if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
        refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
        if refs.is_empty() {
            meta.remove("ownerReferences");
        }
    }
}

/// The current time as the apiserver writes it in `metav1.Time` fields (seconds precision).
pub fn now() -> String {
    timestamp_after(0)
}

/// The time `seconds` from now, formatted as a `metav1.Time`.
pub fn timestamp_after(seconds: i64) -> String {
    let now = jiff::Timestamp::now();
    let at = now
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .unwrap_or(now);
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn random_bytes<const N: usize>() -> [u8; N] {
    static FALLBACK: AtomicU64 = AtomicU64::new(0x5eed_1234_abcd_0001);
    let mut buf = [0u8; N];
    if getrandom::fill(&mut buf).is_err() {
        // The OS refused randomness: uniqueness within this process is all uids need here.
        for chunk in buf.chunks_mut(8) {
            let n = FALLBACK
                .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
                .to_le_bytes();
            chunk.copy_from_slice(&n[..chunk.len()]);
        }
    }
    buf
}

/// A new random (version 4) UUID, the format of `metadata.uid`.
pub fn new_uid() -> String {
    let mut b = random_bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The 5-character random suffix the apiserver appends to `generateName` (no vowels, so no
/// words; the same alphabet as the real name generator).
pub fn generated_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    random_bytes::<5>()
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uids_look_like_version_4_uuids_and_differ() {
        let a = new_uid();
        let b = new_uid();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!(a.chars().all(|c| c.is_ascii_hexdigit() || c == '-'));
    }

    #[test]
    fn timestamps_are_rfc3339_seconds_in_utc() {
        let t = now();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z'));
        assert!(timestamp_after(30) > t);
    }

    #[test]
    fn owner_references_without_uid_are_ignored() {
        let obj = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "uid": "u1", "blockOwnerDeletion": true, "controller": true},
            {"apiVersion": "v1", "kind": "Node", "name": "n"}
        ]}});
        let refs = owner_references(&obj);
        assert_eq!(refs.len(), 1);
        assert!(refs[0].block_owner_deletion && refs[0].controller);
        let mut obj = obj;
        remove_owner_reference(&mut obj, "u1");
        assert_eq!(owner_references(&obj), vec![]);
    }

    #[test]
    fn metadata_mut_repairs_odd_shapes() {
        let mut v = json!({"metadata": 3});
        metadata_mut(&mut v).insert("name".into(), json!("x"));
        assert_eq!(name(&v), "x");
    }
}
