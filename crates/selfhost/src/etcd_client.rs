//! A client of etcd's HTTP endpoints (its JSON gateway, `/health`, `/version`): kube-rs's HTTP
//! client pointed at an etcd endpoint with the etcd CA and the API server's etcd client
//! certificate. `recover` reads keys through it, preflight asks each member's health and
//! version, and `--etcd-snapshot` streams a snapshot.

use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::BodyExt;
use serde::Deserialize;

/// How to reach etcd, as the API server does (kubeadm's files by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdAccess {
    /// `https://host:port` endpoints, tried in order.
    pub endpoints: Vec<String>,
    /// The etcd CA certificate, as this run reaches it.
    pub ca: PathBuf,
    /// The client certificate, as this run reaches it.
    pub cert: PathBuf,
    /// Its key, as this run reaches it.
    pub key: PathBuf,
}

/// Why etcd cannot be asked: bad input, found before any request.
#[derive(Debug, thiserror::Error)]
pub enum EtcdAccessError {
    /// A certificate or key file cannot be used.
    #[error(
        "{flag} {}: {reason}; pass the etcd CA and the API server's etcd client certificate \
         and key (kubeadm: /etc/kubernetes/pki/etcd/ca.crt, \
         /etc/kubernetes/pki/apiserver-etcd-client.crt and .key)",
        path.display()
    )]
    CertificateFile {
        /// The flag that names it.
        flag: String,
        /// The file.
        path: PathBuf,
        /// Why it cannot be used.
        reason: String,
    },
    /// An endpoint is not a URL of etcd.
    #[error("--etcd-endpoints {endpoint}: {reason}")]
    Endpoint {
        /// The endpoint.
        endpoint: String,
        /// What is wrong.
        reason: String,
    },
}

/// One etcd endpoint and the client that reaches it.
pub(crate) struct EtcdEndpoint {
    pub client: kube::Client,
    pub endpoint: String,
}

fn readable(flag: &str, path: &Path) -> Result<String, EtcdAccessError> {
    std::fs::metadata(path)
        .map_err(|e| EtcdAccessError::CertificateFile {
            flag: flag.to_string(),
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
        .map(|_| path.display().to_string())
}

async fn client_for(endpoint: &str, access: &EtcdAccess) -> Result<kube::Client, EtcdAccessError> {
    let invalid = |reason: String| EtcdAccessError::Endpoint {
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
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| EtcdAccessError::CertificateFile {
            flag: "--etcd-cacert/--etcd-cert/--etcd-key".into(),
            path: access.cert.clone(),
            reason: e.to_string(),
        })?;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(10));
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| invalid(e.to_string()))
}

/// A client for every endpoint, in order. Every endpoint and file is checked before any is
/// asked: a bad flag is bad input, whichever endpoint would have answered.
pub(crate) async fn endpoints(access: &EtcdAccess) -> Result<Vec<EtcdEndpoint>, EtcdAccessError> {
    let mut all = Vec::new();
    for endpoint in &access.endpoints {
        all.push(EtcdEndpoint {
            client: client_for(endpoint, access).await?,
            endpoint: endpoint.clone(),
        });
    }
    Ok(all)
}

#[derive(Deserialize)]
struct Health {
    #[serde(default)]
    health: String,
    #[serde(default)]
    reason: String,
}

#[derive(Deserialize)]
struct Version {
    #[serde(default)]
    etcdserver: String,
}

impl EtcdEndpoint {
    /// A GET's status and body, whatever the status: etcd's `/health` answers 503 with a
    /// body that says why.
    async fn get(&self, path: &str) -> Result<(http::StatusCode, String), String> {
        let request = http::Request::get(path)
            .body(kube::client::Body::empty())
            .map_err(|e| e.to_string())?;
        let response = self
            .client
            .send(request)
            .await
            .map_err(|e| crate::api_call::describe(&e))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("the answer broke off: {e}"))?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    /// `/health`: `Ok` when the member says it is healthy (it has a leader and serves reads).
    pub async fn health(&self) -> Result<(), String> {
        let (status, text) = self.get("/health").await?;
        let Ok(health) = serde_json::from_str::<Health>(&text) else {
            return Err(format!("/health answered {status}: {}", text.trim()));
        };
        if health.health == "true" {
            Ok(())
        } else if health.reason.is_empty() {
            Err("/health says it is not healthy".into())
        } else {
            Err(format!("/health says it is not healthy: {}", health.reason))
        }
    }

    /// `/version`'s server version.
    pub async fn version(&self) -> Result<String, String> {
        let (status, text) = self.get("/version").await?;
        let version: Version = serde_json::from_str(&text)
            .map_err(|_| format!("/version answered {status}: {}", text.trim()))?;
        Ok(version.etcdserver)
    }
}
