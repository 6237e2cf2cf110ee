//! A client of etcd's JSON gateway: kube-rs's HTTP client pointed at an etcd endpoint, with
//! the etcd CA and the API server's etcd client certificate, reading one key at a time.

use std::path::{Path, PathBuf};
use std::time::Duration;

use selfhost_core::etcd::{RANGE_PATH, RangeRequest, RangeResponse};

use super::RecoverError;

/// How to reach etcd, as the API server does (kubeadm's files by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdAccess {
    /// `https://host:port` endpoints, tried in order.
    pub endpoints: Vec<String>,
    /// The etcd CA certificate, as this run reaches it (beneath the host root).
    pub ca: PathBuf,
    /// The client certificate, as this run reaches it.
    pub cert: PathBuf,
    /// Its key, as this run reaches it.
    pub key: PathBuf,
    /// The API server's `--etcd-prefix`.
    pub prefix: String,
}

/// One etcd endpoint that answered.
pub(super) struct Etcd {
    client: kube::Client,
    pub endpoint: String,
}

fn readable(flag: &str, path: &Path) -> Result<String, RecoverError> {
    std::fs::metadata(path)
        .map_err(|e| RecoverError::CertificateFile {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
        .map(|_| path.display().to_string())
}

async fn client_for(endpoint: &str, access: &EtcdAccess) -> Result<kube::Client, RecoverError> {
    let invalid = |reason: String| RecoverError::Endpoint {
        endpoint: endpoint.to_string(),
        reason,
    };
    let uri: http::Uri = endpoint.parse().map_err(|e| invalid(format!("{e}")))?;
    if uri.scheme_str() != Some("https") || uri.host().is_none() {
        return Err(invalid("give it as https://HOST:PORT".into()));
    }
    let kubeconfig = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "etcd", "cluster": {
            "server": endpoint,
            "certificate-authority": readable("--etcd-cacert", &access.ca)?,
        }}],
        "users": [{"name": "etcd", "user": {
            "client-certificate": readable("--etcd-cert", &access.cert)?,
            "client-key": readable("--etcd-key", &access.key)?,
        }}],
        "contexts": [{"name": "etcd", "context": {"cluster": "etcd", "user": "etcd"}}],
        "current-context": "etcd",
    });
    let kubeconfig: kube::config::Kubeconfig =
        serde_json::from_value(kubeconfig).map_err(|e| invalid(e.to_string()))?;
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| RecoverError::CertificateFile {
            flag: "--etcd-cacert/--etcd-cert/--etcd-key".into(),
            path: access.cert.clone(),
            reason: e.to_string(),
        })?;
    let mut config = config;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(10));
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| invalid(e.to_string()))
}

impl Etcd {
    /// The first endpoint that answers a read, with why each before it did not.
    pub async fn connect(access: &EtcdAccess) -> Result<Etcd, RecoverError> {
        // Every endpoint is checked before any is tried: a bad flag is bad input, whichever
        // endpoint would have answered first.
        let mut clients = Vec::new();
        for endpoint in &access.endpoints {
            clients.push((endpoint, client_for(endpoint, access).await?));
        }
        let mut failures = Vec::new();
        for (endpoint, client) in clients {
            let etcd = Etcd {
                client,
                endpoint: endpoint.clone(),
            };
            // A read of the prefix itself proves the endpoint, the TLS and the certificate.
            match etcd.get(&access.prefix).await {
                Ok(_) => return Ok(etcd),
                Err(e) => failures.push(e.to_string()),
            }
        }
        Err(RecoverError::Unreachable {
            endpoints: access.endpoints.join(","),
            reasons: failures.join("; "),
        })
    }

    /// The value at `key`, `None` when there is none.
    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, RecoverError> {
        let failed = |reason: String| RecoverError::Request {
            endpoint: self.endpoint.clone(),
            reason,
        };
        let body =
            serde_json::to_vec(&RangeRequest::key(key)).map_err(|e| failed(e.to_string()))?;
        let request = http::Request::post(RANGE_PATH)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| failed(e.to_string()))?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|e| failed(crate::api_call::describe(&e)))?;
        let answer: RangeResponse = serde_json::from_str(&text)
            .map_err(|e| failed(format!("not an etcd range answer: {e}")))?;
        Ok(answer
            .kvs
            .into_iter()
            .find(|kv| kv.key.0 == key.as_bytes())
            .map(|kv| kv.value.map(|v| v.0).unwrap_or_default()))
    }
}
