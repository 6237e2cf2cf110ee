//! `apply --etcd-snapshot DIR`: a snapshot of etcd, taken after preflight and before the
//! first change, streamed from the first endpoint that gives one through etcd's gateway
//! (`POST /v3/maintenance/snapshot`). etcd ends the stream with the SHA-256 of the database;
//! the file keeps it, as `etcdctl snapshot save` does, so `etcdutl snapshot restore` can
//! check it, and it is checked here before the snapshot counts as taken.

use std::io::Write;
use std::path::{Path, PathBuf};

use http_body_util::BodyExt;
use k8s_openapi::ByteString;
use serde::{Deserialize, Serialize};

use crate::etcd_client::{EtcdAccess, EtcdAccessError, EtcdEndpoint, endpoints};

/// The gateway's path of the snapshot stream.
const SNAPSHOT_PATH: &str = "/v3/maintenance/snapshot";
/// Length of the SHA-256 etcd appends.
const HASH_LEN: usize = 32;

/// A snapshot written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EtcdSnapshot {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes (the database and its hash).
    pub bytes: u64,
    /// The endpoint it came from.
    pub endpoint: String,
    /// etcd's revision when it was taken, if the stream said.
    pub revision: Option<i64>,
}

/// Why no snapshot was taken; nothing in the cluster was changed.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The etcd flags cannot be used.
    #[error(transparent)]
    Access(#[from] EtcdAccessError),
    /// No endpoint to take it from.
    #[error(
        "--etcd-snapshot: no etcd endpoint is known (the kube-apiserver template names none); \
         pass --etcd-endpoints"
    )]
    NoEndpoint,
    /// The directory cannot be written.
    #[error("--etcd-snapshot {}: {source}", path.display())]
    Directory {
        /// The directory or file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No endpoint gave a whole, verified snapshot.
    #[error(
        "cannot take an etcd snapshot from {endpoints}: {reasons}; nothing was changed (check \
         --etcd-endpoints, --etcd-cacert, --etcd-cert and --etcd-key, or leave out \
         --etcd-snapshot)"
    )]
    Failed {
        /// The endpoints tried.
        endpoints: String,
        /// Why each failed.
        reasons: String,
    },
}

#[derive(Deserialize)]
struct StreamLine {
    result: Option<SnapshotChunk>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct SnapshotChunk {
    #[serde(default)]
    header: Option<ChunkHeader>,
    #[serde(default)]
    blob: Option<ByteString>,
}

#[derive(Deserialize)]
struct ChunkHeader {
    #[serde(default)]
    revision: Option<String>,
}

/// Takes a snapshot into `dir` (created if missing), named by the time, mode 0600: it holds
/// every Secret of the cluster.
pub async fn take(access: &EtcdAccess, dir: &Path) -> Result<EtcdSnapshot, SnapshotError> {
    if access.endpoints.is_empty() {
        return Err(SnapshotError::NoEndpoint);
    }
    let clients = endpoints(access).await?;
    std::fs::create_dir_all(dir).map_err(|source| SnapshotError::Directory {
        path: dir.to_path_buf(),
        source,
    })?;
    let stamp = k8s_openapi::jiff::Timestamp::now().strftime("%Y%m%dT%H%M%SZ");
    let path = dir.join(format!("etcd-snapshot-{stamp}.db"));
    let partial = dir.join(format!(".etcd-snapshot-{stamp}.db.part"));
    let mut reasons = Vec::new();
    for endpoint in &clients {
        match stream(endpoint, &partial).await {
            Ok((bytes, revision)) => {
                std::fs::rename(&partial, &path).map_err(|source| SnapshotError::Directory {
                    path: path.clone(),
                    source,
                })?;
                return Ok(EtcdSnapshot {
                    path,
                    bytes,
                    endpoint: endpoint.endpoint.clone(),
                    revision,
                });
            }
            Err(reason) => {
                let _ = std::fs::remove_file(&partial);
                reasons.push(format!("{}: {reason}", endpoint.endpoint));
            }
        }
    }
    Err(SnapshotError::Failed {
        endpoints: access.endpoints.join(","),
        reasons: reasons.join("; "),
    })
}

/// Streams one endpoint's snapshot into `to`; the size written and the revision.
async fn stream(endpoint: &EtcdEndpoint, to: &Path) -> Result<(u64, Option<i64>), String> {
    let request = http::Request::post(SNAPSHOT_PATH)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(kube::client::Body::from(b"{}".to_vec()))
        .map_err(|e| e.to_string())?;
    let response = endpoint
        .client
        .send(request)
        .await
        .map_err(|e| crate::api_call::describe(&e))?;
    if !response.status().is_success() {
        return Err(format!("the gateway answered {}", response.status()));
    }
    let mut file = create_private(to).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    let mut body = response.into_body();
    let mut pending: Vec<u8> = Vec::new();
    let mut digest = Digest::default();
    let mut revision = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("the stream broke: {e}"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        pending.extend_from_slice(&data);
        // The gateway writes one JSON object per line.
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            chunk(&line, &mut file, &mut digest, &mut revision)?;
        }
    }
    if !pending.iter().all(u8::is_ascii_whitespace) {
        chunk(&pending, &mut file, &mut digest, &mut revision)?;
    }
    file.sync_all()
        .map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    let bytes = digest.finish()?;
    Ok((bytes, revision))
}

fn chunk(
    line: &[u8],
    file: &mut std::fs::File,
    digest: &mut Digest,
    revision: &mut Option<i64>,
) -> Result<(), String> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    let line: StreamLine = serde_json::from_slice(line)
        .map_err(|_| "the stream is not etcd's snapshot".to_string())?;
    if let Some(error) = line.error {
        let message = error
            .get("message")
            .and_then(|m| m.as_str())
            .unwrap_or("an error");
        return Err(format!("etcd: {message}"));
    }
    let Some(result) = line.result else {
        return Ok(());
    };
    if revision.is_none() {
        *revision = result
            .header
            .and_then(|h| h.revision)
            .and_then(|r| r.parse().ok());
    }
    if let Some(blob) = result.blob {
        file.write_all(&blob.0)
            .map_err(|e| format!("cannot write the snapshot: {e}"))?;
        digest.add(&blob.0);
    }
    Ok(())
}

/// SHA-256 of everything but the last [`HASH_LEN`] bytes, which must equal it.
#[derive(Default)]
struct Digest {
    hashed: Option<ring::digest::Context>,
    /// The last bytes seen: the hash, once the stream ends.
    tail: Vec<u8>,
    total: u64,
}

impl Digest {
    fn add(&mut self, bytes: &[u8]) {
        let context = self
            .hashed
            .get_or_insert_with(|| ring::digest::Context::new(&ring::digest::SHA256));
        self.total += bytes.len() as u64;
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > HASH_LEN {
            let spill = self.tail.len() - HASH_LEN;
            context.update(&self.tail[..spill]);
            self.tail.drain(..spill);
        }
    }

    /// The size, if the hash matches.
    fn finish(self) -> Result<u64, String> {
        let Some(context) = self.hashed else {
            return Err("the stream held no data".into());
        };
        if self.tail.len() < HASH_LEN {
            return Err("the stream ended before its hash".into());
        }
        if context.finish().as_ref() != self.tail.as_slice() {
            return Err("the snapshot does not match the SHA-256 etcd sent with it".into());
        }
        Ok(self.total)
    }
}

fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> Vec<u8> {
        ring::digest::digest(&ring::digest::SHA256, bytes)
            .as_ref()
            .to_vec()
    }

    #[test]
    fn the_digest_checks_the_trailing_hash_across_any_chunking() {
        let db: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let mut whole = db.clone();
        whole.extend(sha(&db));
        for size in [1, 7, 32, 33, 512, 10_000] {
            let mut digest = Digest::default();
            for chunk in whole.chunks(size) {
                digest.add(chunk);
            }
            assert_eq!(digest.finish(), Ok(whole.len() as u64), "chunks of {size}");
        }
        let mut broken = whole.clone();
        broken[10] ^= 1;
        let mut digest = Digest::default();
        digest.add(&broken);
        assert_eq!(
            digest.finish(),
            Err("the snapshot does not match the SHA-256 etcd sent with it".into())
        );
        let mut short = Digest::default();
        short.add(&[1, 2, 3]);
        assert_eq!(
            short.finish(),
            Err("the stream ended before its hash".into())
        );
        assert_eq!(
            Digest::default().finish(),
            Err("the stream held no data".into())
        );
    }
}
