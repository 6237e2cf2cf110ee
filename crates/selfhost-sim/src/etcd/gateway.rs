//! etcd's JSON gateway, `POST /v3/kv/range`: the store's objects under the keys the API
//! server gives them (`/registry/<resource>/<namespace>/<name>`), DaemonSets, Secrets and
//! ConfigMaps as protobuf in the `k8s\0` envelope as a real kube-apiserver stores them by
//! default, other kinds as JSON; resources marked encrypted as `k8s:enc:aescbc:v1:…`. Also
//! etcd's `/health` and `/version`, and `POST /v3/maintenance/snapshot`, streamed as etcd
//! streams it: chunks of the data, then its SHA-256. The data is the key-values written one
//! after the other (a length, the key, a length, the value), not etcd's bbolt file.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::encode::{message_name, stored_protobuf};
use crate::resources::{self, ResourceType};
use crate::store::{ListOptions, Store, meta};

/// The key prefix the simulated API server stores under (kube-apiserver's default).
pub const PREFIX: &str = "/registry";

/// What the gateway serves from.
#[derive(Clone)]
pub(super) struct Gateway {
    pub store: Store,
    /// Resources (`secrets`) whose values are served as encrypted at rest.
    pub encrypted: Arc<Mutex<BTreeSet<String>>>,
    /// The member's version and health, as tests set them.
    pub member: Arc<Mutex<Member>>,
}

/// What `/version` and `/health` say.
#[derive(Debug, Clone)]
pub(super) struct Member {
    pub version: String,
    pub healthy: bool,
}

impl Default for Member {
    fn default() -> Self {
        Member {
            version: "3.5.24".into(),
            healthy: true,
        }
    }
}

/// The bytes of one snapshot chunk.
const SNAPSHOT_CHUNK: usize = 32 * 1024;

/// A gateway answer: the HTTP status and the JSON body.
pub(super) struct Answer {
    pub status: u16,
    pub body: Value,
}

fn error(status: u16, code: u32, message: &str) -> Answer {
    Answer {
        status,
        body: json!({"error": message, "code": code, "message": message}),
    }
}

impl Gateway {
    /// Answers one request.
    pub fn answer(&self, method: &str, path: &str, body: &[u8]) -> Answer {
        let member = self.member.lock().map(|m| m.clone()).unwrap_or_default();
        match (method, path) {
            ("GET", "/version") => {
                return Answer {
                    status: 200,
                    body: json!({"etcdserver": member.version, "etcdcluster": "3.5.0"}),
                };
            }
            ("GET", "/health") => {
                return if member.healthy {
                    Answer {
                        status: 200,
                        body: json!({"health": "true", "reason": ""}),
                    }
                } else {
                    Answer {
                        status: 503,
                        body: json!({"health": "false", "reason": "RAFT NO LEADER"}),
                    }
                };
            }
            _ => {}
        }
        if path != "/v3/kv/range" {
            return error(404, 5, "Not Found");
        }
        if method != "POST" {
            return error(405, 12, "Method Not Allowed");
        }
        let Ok(request) = serde_json::from_slice::<Value>(body) else {
            return error(400, 3, "the body is not JSON");
        };
        let decode = |field: &str| -> Result<Option<Vec<u8>>, ()> {
            match request.get(field).and_then(Value::as_str) {
                None => Ok(None),
                Some(text) => STANDARD.decode(text).map(Some).map_err(|_| ()),
            }
        };
        let (Ok(Some(key)), Ok(range_end)) = (decode("key"), decode("range_end")) else {
            return error(400, 3, "key and range_end must be base64");
        };
        let kvs: Vec<Value> = self
            .pairs(&key, range_end.as_deref())
            .into_iter()
            .map(|(key, value)| {
                json!({
                    "key": STANDARD.encode(key),
                    "create_revision": "1",
                    "mod_revision": self.store.revision().to_string(),
                    "version": "1",
                    "value": STANDARD.encode(value),
                })
            })
            .collect();
        let revision = self.store.revision().to_string();
        let mut body = json!({"header": {"revision": revision}});
        if !kvs.is_empty() {
            body["count"] = Value::from(kvs.len().to_string());
            body["kvs"] = Value::Array(kvs);
        }
        Answer { status: 200, body }
    }

    /// The snapshot stream's lines (one JSON object each, as the gateway streams a server
    /// stream): the data in chunks, then its SHA-256 as the last chunk.
    pub fn snapshot(&self) -> Vec<String> {
        let mut data = Vec::new();
        for (key, value) in self.pairs(PREFIX.as_bytes(), Some(&[0])) {
            for part in [key, value] {
                data.extend((part.len() as u64).to_be_bytes());
                data.extend(part);
            }
        }
        let hash = ring::digest::digest(&ring::digest::SHA256, &data);
        let revision = self.store.revision().to_string();
        let mut chunks: Vec<&[u8]> = data.chunks(SNAPSHOT_CHUNK).collect();
        chunks.push(hash.as_ref());
        let total: usize = chunks.iter().map(|c| c.len()).sum();
        let mut sent = 0;
        chunks
            .into_iter()
            .map(|chunk| {
                sent += chunk.len();
                json!({"result": {
                    "header": {"revision": revision},
                    "remaining_bytes": (total - sent).to_string(),
                    "blob": STANDARD.encode(chunk),
                }})
                .to_string()
            })
            .collect()
    }

    /// The key-values in `[key, range_end)`, or the one at `key`.
    fn pairs(&self, key: &[u8], range_end: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut found = Vec::new();
        for rt in resources::ALL {
            let Ok(list) = self.store.list(rt, &ListOptions::default()) else {
                continue;
            };
            for object in list.items {
                let object_key = storage_key(rt, &object);
                let inside = match range_end {
                    None => object_key.as_bytes() == key,
                    // An end of one zero byte means "to the end of the keyspace".
                    Some([0]) => object_key.as_bytes() >= key,
                    Some(end) => object_key.as_bytes() >= key && object_key.as_bytes() < end,
                };
                if inside && let Some(value) = self.value(rt, &object) {
                    found.push((object_key.into_bytes(), value));
                }
            }
        }
        found.sort();
        found
    }

    fn value(&self, rt: &ResourceType, object: &Value) -> Option<Vec<u8>> {
        let encrypted = self
            .encrypted
            .lock()
            .map(|e| e.contains(rt.plural))
            .unwrap_or(false);
        if encrypted {
            // What aescbc leaves: the prefix, then ciphertext no one without the key can read.
            let mut value = b"k8s:enc:aescbc:v1:key1:".to_vec();
            value.extend(meta::uid(object).bytes().rev());
            return Some(value);
        }
        match message_name(&rt.api_version(), rt.kind) {
            Some(name) => match stored_protobuf(name, object) {
                Ok(value) => Some(value),
                Err(e) => {
                    tracing::warn!(error = %e, key = %storage_key(rt, object), "cannot encode");
                    None
                }
            },
            None => serde_json::to_vec(object).ok(),
        }
    }
}

/// The key the API server stores an object under.
fn storage_key(rt: &ResourceType, object: &Value) -> String {
    let name = meta::name(object);
    if rt.namespaced {
        format!("{PREFIX}/{}/{}/{name}", rt.plural, meta::namespace(object))
    } else {
        format!("{PREFIX}/{}/{name}", rt.plural)
    }
}
