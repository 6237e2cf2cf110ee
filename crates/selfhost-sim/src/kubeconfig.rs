//! The kubeconfig a running simulator writes for its endpoint, so that kubectl, kube-rs and
//! our own CLI reach it like any cluster.

use std::io::Write;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

/// Name of the cluster, user and context in the kubeconfig.
pub const CONTEXT_NAME: &str = "selfhost-sim";

/// How clients reach and authenticate to the simulator.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `http://127.0.0.1:PORT` or `https://127.0.0.1:PORT`.
    pub server: String,
    /// PEM of the CA that signed the serving certificate (TLS mode).
    pub ca_pem: Option<String>,
    /// Bearer token clients must send (TLS mode).
    pub token: Option<String>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is a credential: never print it.
        f.debug_struct("Endpoint")
            .field("server", &self.server)
            .field("tls", &self.ca_pem.is_some())
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// The kubeconfig document for an endpoint, with `namespace` as the context's default.
pub fn kubeconfig(endpoint: &Endpoint, namespace: &str) -> Value {
    let mut cluster = json!({ "server": endpoint.server });
    if let Some(ca) = &endpoint.ca_pem {
        cluster["certificate-authority-data"] = json!(STANDARD.encode(ca.as_bytes()));
    }
    let user = match &endpoint.token {
        Some(t) => json!({ "token": t }),
        None => json!({}),
    };
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": CONTEXT_NAME, "cluster": cluster }],
        "users": [{ "name": CONTEXT_NAME, "user": user }],
        "contexts": [{
            "name": CONTEXT_NAME,
            "context": { "cluster": CONTEXT_NAME, "user": CONTEXT_NAME, "namespace": namespace },
        }],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    })
}

/// The kubeconfig as YAML text.
pub fn render(
    endpoint: &Endpoint,
    namespace: &str,
) -> Result<String, serde_saphyr::SerializeError> {
    serde_saphyr::to_string(&kubeconfig(endpoint, namespace))
}

/// Writes the kubeconfig to `path`, readable by the owner only (it may hold a token).
pub fn write(path: &Path, yaml: &str) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(yaml.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_http_kubeconfigs_have_an_empty_user() {
        let e = Endpoint {
            server: "http://127.0.0.1:1234".into(),
            ca_pem: None,
            token: None,
        };
        let yaml = render(&e, "default").unwrap();
        let parsed = kube::config::Kubeconfig::from_yaml(&yaml).unwrap();
        assert_eq!(parsed.current_context.as_deref(), Some(CONTEXT_NAME));
        let cluster = parsed.clusters[0].cluster.as_ref().unwrap();
        assert_eq!(cluster.server.as_deref(), Some("http://127.0.0.1:1234"));
        assert!(cluster.certificate_authority_data.is_none());
    }

    #[test]
    fn tls_kubeconfigs_carry_the_ca_and_token_but_debug_hides_the_token() {
        let e = Endpoint {
            server: "https://127.0.0.1:1".into(),
            ca_pem: Some("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into()),
            token: Some("s3cret".into()),
        };
        let doc = kubeconfig(&e, "kube-system");
        assert_eq!(doc["users"][0]["user"]["token"], "s3cret");
        assert_eq!(doc["contexts"][0]["context"]["namespace"], "kube-system");
        let ca = doc["clusters"][0]["cluster"]["certificate-authority-data"]
            .as_str()
            .unwrap();
        assert!(
            String::from_utf8(STANDARD.decode(ca).unwrap())
                .unwrap()
                .contains("BEGIN CERTIFICATE")
        );
        assert!(!format!("{e:?}").contains("s3cret"));
    }
}
