//! Certificates out of a file's bytes: PEM `CERTIFICATE` blocks, or the
//! `client-certificate-data` of a kubeconfig's users. Any other block (a private key kept
//! beside the certificate) is skipped unparsed, and no error quotes the content.

use k8s_openapi::jiff::Timestamp;
use serde::Deserialize;
use x509_parser::pem::Pem;

use super::CertificateDates;

/// The certificates of a PEM file, in order; an error says why none could be read.
pub fn read_certificates(bytes: &[u8]) -> Result<Vec<CertificateDates>, String> {
    let mut found = Vec::new();
    for (index, block) in Pem::iter_from_buffer(bytes).enumerate() {
        let block = block.map_err(|_| format!("PEM block {} is malformed", index + 1))?;
        if block.label != "CERTIFICATE" {
            continue;
        }
        let certificate = block
            .parse_x509()
            .map_err(|_| format!("PEM block {} is not an X.509 certificate", index + 1))?;
        let validity = certificate.validity();
        let at = |t: &x509_parser::time::ASN1Time| {
            Timestamp::from_second(t.timestamp())
                .map_err(|_| format!("certificate {} has a date out of range", index + 1))
        };
        found.push(CertificateDates {
            subject: certificate.subject().to_string(),
            ca: certificate.is_ca(),
            not_before: at(&validity.not_before)?,
            not_after: at(&validity.not_after)?,
        });
    }
    if found.is_empty() {
        return Err("holds no PEM certificate".into());
    }
    Ok(found)
}

#[derive(Deserialize)]
struct Kubeconfig {
    #[serde(default)]
    users: Vec<NamedUser>,
}

#[derive(Deserialize)]
struct NamedUser {
    #[serde(default)]
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Deserialize, Default)]
struct User {
    #[serde(rename = "client-certificate-data", default)]
    client_certificate_data: Option<String>,
}

/// The client certificates a kubeconfig embeds, user by user. A kubeconfig that embeds none
/// (a token, or certificate files named by path) is an error saying so.
pub fn read_kubeconfig_certificates(bytes: &[u8]) -> Result<Vec<CertificateDates>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())?;
    let config: Kubeconfig =
        serde_saphyr::from_str(text).map_err(|_| "is not a kubeconfig".to_string())?;
    let mut found = Vec::new();
    for user in &config.users {
        let Some(data) = &user.user.client_certificate_data else {
            continue;
        };
        let pem = decode_base64(data.trim())
            .ok_or_else(|| format!("user {}: client-certificate-data is not base64", user.name))?;
        let read = read_certificates(&pem)
            .map_err(|e| format!("user {}: client-certificate-data {e}", user.name))?;
        found.extend(read);
    }
    if found.is_empty() {
        return Err("embeds no client certificate (client-certificate-data)".into());
    }
    Ok(found)
}

/// Standard base64 with padding, as kubeconfigs carry it.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let value = serde_json::Value::String(text.to_string());
    serde_json::from_value::<k8s_openapi::ByteString>(value)
        .ok()
        .map(|b| b.0)
}
