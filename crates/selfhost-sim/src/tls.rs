//! The simulator's TLS mode: a throw-away certificate authority and a serving certificate
//! minted at start (rcgen with ring), a rustls server configuration offering HTTP/2 and
//! HTTP/1.1, and random bearer tokens. The CA goes into the kubeconfig as
//! `certificate-authority-data`, so kube-rs and kubectl verify the server as they would a
//! real cluster's.
//!
//! Private keys and tokens never appear in `Debug` output or errors.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Why a TLS identity could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A host name is not a valid DNS name or IP address for a certificate.
    #[error("cannot put {host:?} in a certificate: {source}")]
    BadHost {
        /// The offending host.
        host: String,
        /// What rcgen said.
        #[source]
        source: rcgen::Error,
    },
    /// Key generation or signing failed.
    #[error("cannot mint the certificate: {0}")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the certificate or key.
    #[error("cannot configure TLS: {0}")]
    Config(#[from] rustls::Error),
}

/// A CA plus a serving certificate and key, ready to serve HTTPS.
pub struct TlsIdentity {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    server_config: Arc<ServerConfig>,
}

impl fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsIdentity")
            .field("ca_pem", &self.ca_pem)
            .finish_non_exhaustive()
    }
}

impl TlsIdentity {
    /// Mints a CA and a serving certificate valid for `localhost`, `127.0.0.1`, `::1` and
    /// `hosts` (DNS names or IP addresses).
    ///
    /// # Errors
    /// An unusable host name, or a failure of key generation or of rustls.
    pub fn generate(hosts: &[String]) -> Result<TlsIdentity, TlsError> {
        let (ca_key, ca_params, ca_cert) = mint_ca("selfhost-sim-ca")?;

        let mut names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        for host in hosts {
            if !names.contains(host) {
                names.push(host.clone());
            }
        }
        for host in &names {
            CertificateParams::new(vec![host.clone()]).map_err(|source| TlsError::BadHost {
                host: host.clone(),
                source,
            })?;
        }
        let server_key = KeyPair::generate()?;
        let mut server_params = CertificateParams::new(names)?;
        server_params.distinguished_name = distinguished_name("kube-apiserver");
        server_params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let issuer = Issuer::from_params(&ca_params, &ca_key);
        let server_cert = server_params.signed_by(&server_key, &issuer)?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![server_cert.der().clone(), ca_cert.der().clone()], key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsIdentity {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().clone(),
            server_config: Arc::new(config),
        })
    }

    /// The CA certificate in PEM, for `certificate-authority-data` (base64 of this text).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate in DER, for building a client trust store.
    pub fn ca_der(&self) -> &CertificateDer<'static> {
        &self.ca_der
    }

    /// The server configuration (ALPN `h2` then `http/1.1`), shareable across listeners.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.server_config)
    }
}

/// A distinguished name holding only a common name.
/// A self-signed certificate authority named `common_name`: its key, its parameters (to
/// issue with) and its certificate.
pub(crate) fn mint_ca(
    common_name: &str,
) -> Result<(KeyPair, CertificateParams, rcgen::Certificate), rcgen::Error> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.distinguished_name = distinguished_name(common_name);
    let cert = params.self_signed(&key)?;
    Ok((key, params, cert))
}

pub(crate) fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

/// A random bearer token (64 hex digits, 256 bits) for the simulator's kubeconfig. Callers
/// must not log it.
pub fn generate_token() -> String {
    let mut bytes = [0u8; 32];
    let provider = rustls::crypto::ring::default_provider();
    if provider.secure_random.fill(&mut bytes).is_err() {
        // The system RNG is unavailable (rustls could not work either); fall back to std's
        // per-process random hash keys, which are themselves seeded by the OS.
        fill_from_random_state(&mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn fill_from_random_state(bytes: &mut [u8]) {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u128(nanos);
        hasher.write_usize(i);
        let word = hasher.finish().to_le_bytes();
        chunk.copy_from_slice(&word[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConnection};

    use super::*;

    fn client_trusting(ca: &CertificateDer<'static>, alpn: &[&[u8]]) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(ca.clone()).expect("CA is a valid certificate");
        let mut config =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("ring supports the default versions")
                .with_root_certificates(roots)
                .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// Runs a handshake in memory, shuttling TLS records between the two ends, and sends one
    /// message from the client to the server.
    fn handshake(
        identity: &TlsIdentity,
        client: Arc<ClientConfig>,
        host: &str,
    ) -> Result<(Option<Vec<u8>>, Vec<u8>), rustls::Error> {
        let server_name = ServerName::try_from(host.to_string()).expect("valid server name");
        let mut client = ClientConnection::new(client, server_name)?;
        let mut server = ServerConnection::new(identity.server_config())?;
        client
            .writer()
            .write_all(b"GET /readyz")
            .expect("buffered write");
        for _ in 0..20 {
            let mut wire = Vec::new();
            client.write_tls(&mut wire).expect("in-memory write");
            server
                .read_tls(&mut wire.as_slice())
                .expect("in-memory read");
            server.process_new_packets()?;
            let mut wire = Vec::new();
            server.write_tls(&mut wire).expect("in-memory write");
            client
                .read_tls(&mut wire.as_slice())
                .expect("in-memory read");
            client.process_new_packets()?;
            if !client.is_handshaking() && !server.is_handshaking() && !client.wants_write() {
                break;
            }
        }
        let mut received = vec![0u8; 11];
        server
            .reader()
            .read_exact(&mut received)
            .expect("the client's message arrived");
        Ok((server.alpn_protocol().map(<[u8]>::to_vec), received))
    }

    #[test]
    fn a_client_trusting_the_ca_completes_a_handshake_and_gets_h2() {
        let identity = TlsIdentity::generate(&["sim.local".to_string()]).expect("identity");
        assert!(identity.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        for host in ["localhost", "127.0.0.1", "sim.local"] {
            let client = client_trusting(identity.ca_der(), &[b"h2", b"http/1.1"]);
            let (alpn, received) = handshake(&identity, client, host).expect("handshake succeeds");
            assert_eq!(alpn.as_deref(), Some(&b"h2"[..]), "{host}");
            assert_eq!(received, b"GET /readyz");
        }
        let http1 = client_trusting(identity.ca_der(), &[b"http/1.1"]);
        let (alpn, _) = handshake(&identity, http1, "localhost").expect("handshake succeeds");
        assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    }

    #[test]
    fn a_client_trusting_another_ca_or_naming_another_host_is_refused() {
        let identity = TlsIdentity::generate(&[]).expect("identity");
        let stranger = TlsIdentity::generate(&[]).expect("identity");
        let wrong_ca = client_trusting(stranger.ca_der(), &[]);
        assert!(handshake(&identity, wrong_ca, "localhost").is_err());
        let right_ca = client_trusting(identity.ca_der(), &[]);
        assert!(handshake(&identity, right_ca, "elsewhere.example").is_err());
        assert!(matches!(
            TlsIdentity::generate(&["sïm.local".to_string()]),
            Err(TlsError::BadHost { .. })
        ));
    }

    #[test]
    fn tokens_are_long_random_and_distinct() {
        let (a, b) = (generate_token(), generate_token());
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        let mut fallback = [0u8; 32];
        fill_from_random_state(&mut fallback);
        assert_ne!(fallback, [0u8; 32]);
    }
}
