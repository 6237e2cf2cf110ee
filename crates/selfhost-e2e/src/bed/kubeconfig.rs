//! kubeconfig files with embedded client certificates, as `kubeadm init phase kubeconfig`
//! writes them.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::json;

use crate::pki::KeyedCertificate;

/// A kubeconfig for `user` at `server`, trusting `ca_pem`.
///
/// # Errors
/// The document cannot be rendered as YAML.
pub fn render(
    server: &str,
    ca_pem: &str,
    user: &str,
    client: &KeyedCertificate,
) -> Result<String, serde_saphyr::SerializeError> {
    let b64 = |text: &str| STANDARD.encode(text.as_bytes());
    let context = format!("{user}@kubernetes");
    serde_saphyr::to_string(&json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{
            "name": "kubernetes",
            "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)},
        }],
        "users": [{
            "name": user,
            "user": {
                "client-certificate-data": b64(&client.cert_pem),
                "client-key-data": b64(&client.key_pem),
            },
        }],
        "contexts": [{
            "name": context,
            "context": {"cluster": "kubernetes", "user": user},
        }],
        "current-context": context,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubeconfig_names_its_server_and_embeds_the_credentials() {
        let client = KeyedCertificate {
            cert_pem: "CERT".into(),
            key_pem: "KEY".into(),
        };
        let text = render("https://127.0.1.1:6443", "CA", "admin", &client).unwrap();
        let value: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(
            value["clusters"][0]["cluster"]["server"],
            "https://127.0.1.1:6443"
        );
        assert_eq!(
            value["users"][0]["user"]["client-key-data"],
            STANDARD.encode("KEY")
        );
        assert_eq!(value["current-context"], "admin@kubernetes");
    }
}
