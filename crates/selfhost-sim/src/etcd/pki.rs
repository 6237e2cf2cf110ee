//! The etcd PKI as kubeadm lays it out: an etcd CA, a serving certificate for the loopback
//! address, and a client certificate (kubeadm's `apiserver-etcd-client`) that the server
//! requires. The client's files are written to a directory for tools to pass as
//! `--etcd-cacert`, `--etcd-cert` and `--etcd-key`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, Issuer, KeyPair};
use rustls::RootCertStore;
use rustls::ServerConfig;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;

use super::EtcdError;
use crate::tls::{distinguished_name, mint_ca};

/// Where a client of the simulated etcd finds its credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdClientFiles {
    /// The etcd CA certificate (kubeadm: `/etc/kubernetes/pki/etcd/ca.crt`).
    pub ca: PathBuf,
    /// The client certificate (kubeadm: `/etc/kubernetes/pki/apiserver-etcd-client.crt`).
    pub cert: PathBuf,
    /// Its private key, mode 0600 (kubeadm: `.../apiserver-etcd-client.key`).
    pub key: PathBuf,
}

/// Mints the PKI, writes the client's files into `dir`, and returns the server's TLS
/// configuration, which accepts only clients with a certificate of this CA.
pub(super) fn mint(dir: &Path) -> Result<(Arc<ServerConfig>, EtcdClientFiles), EtcdError> {
    let (ca_key, ca_params, ca_cert) = mint_ca("etcd-ca")?;
    let issuer = Issuer::from_params(&ca_params, &ca_key);

    let server_key = KeyPair::generate()?;
    let mut server_params =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    server_params.distinguished_name = distinguished_name("etcd-server");
    server_params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let server_cert = server_params.signed_by(&server_key, &issuer)?;

    let client_key = KeyPair::generate()?;
    let mut client_params = CertificateParams::new(Vec::<String>::new())?;
    client_params.distinguished_name = distinguished_name("kube-apiserver-etcd-client");
    client_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = client_params.signed_by(&client_key, &issuer)?;

    let files = EtcdClientFiles {
        ca: dir.join("ca.crt"),
        cert: dir.join("apiserver-etcd-client.crt"),
        key: dir.join("apiserver-etcd-client.key"),
    };
    write(&files.ca, ca_cert.pem().as_bytes(), 0o644)?;
    write(&files.cert, client_cert.pem().as_bytes(), 0o644)?;
    write(&files.key, client_key.serialize_pem().as_bytes(), 0o600)?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    roots.add(ca_cert.der().clone())?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| EtcdError::Tls(e.to_string()))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![server_cert.der().clone()], key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok((Arc::new(config), files))
}

fn write(path: &Path, content: &[u8], mode: u32) -> Result<(), EtcdError> {
    let io = |source| EtcdError::Files {
        path: path.to_path_buf(),
        source,
    };
    std::fs::write(path, content).map_err(io)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io)?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    Ok(())
}
