//! kubeadm's certificates on a node: the files `kubeadm init` writes under
//! `/etc/kubernetes/pki`, and the controller-manager's and scheduler's kubeconfigs with their
//! client certificates embedded, each with the validity a test chooses. The simulated
//! components do not use them; they are for tools that read, check or upload a node's
//! certificates.

use std::path::Path;
use std::time::{Duration, SystemTime};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::tls::distinguished_name;

/// How long kubeadm's leaf certificates are valid.
pub const LEAF_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// How long kubeadm's CAs are valid.
pub const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Why the certificates could not be written.
#[derive(Debug, thiserror::Error)]
pub enum NodePkiError {
    /// Minting failed.
    #[error("cannot mint a certificate: {0}")]
    Mint(#[from] rcgen::Error),
    /// Writing a file failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// When each certificate stops being valid: kubeadm's lifetimes from now, except the files
/// (relative to `/etc/kubernetes`, e.g. `pki/apiserver.crt` or `scheduler.conf`) given
/// their own end.
#[derive(Debug, Clone, Default)]
pub struct NodePki {
    ends: Vec<(String, SystemTime)>,
}

impl NodePki {
    /// kubeadm's lifetimes for every file.
    pub fn new() -> Self {
        Self::default()
    }

    /// The certificate in `file` ends at `end` (in the past for an expired one).
    pub fn ending(mut self, file: &str, end: SystemTime) -> Self {
        self.ends.push((file.to_string(), end));
        self
    }

    fn params(&self, file: &str, lifetime: Duration) -> Result<CertificateParams, rcgen::Error> {
        let now = SystemTime::now();
        let end = self
            .ends
            .iter()
            .rev()
            .find(|(f, _)| f == file)
            .map_or(now + lifetime, |(_, end)| *end);
        let day = Duration::from_secs(24 * 3600);
        let start = (now - day).min(end - day);
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.not_before = start.into();
        params.not_after = end.into();
        Ok(params)
    }

    /// Writes the files under `root` (a node's own directory: they land in
    /// `root/etc/kubernetes`), private keys with mode 0600.
    pub fn write(&self, root: &Path) -> Result<(), NodePkiError> {
        let dir = root.join("etc/kubernetes");
        let write = |file: &str, content: &[u8], mode: u32| write(&dir.join(file), content, mode);
        let ca = |file: &str, name: &str| -> Result<(KeyPair, CertificateParams), NodePkiError> {
            let key = KeyPair::generate()?;
            let mut params = self.params(&format!("pki/{file}.crt"), CA_LIFETIME)?;
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            params.distinguished_name = distinguished_name(name);
            let cert = params.self_signed(&key)?;
            write(&format!("pki/{file}.crt"), cert.pem().as_bytes(), 0o644)?;
            write(
                &format!("pki/{file}.key"),
                key.serialize_pem().as_bytes(),
                0o600,
            )?;
            Ok((key, params))
        };
        let leaf = |issuer: &Issuer<'_, &KeyPair>,
                    file: &str,
                    name: &str,
                    sans: &[&str],
                    usage: ExtendedKeyUsagePurpose|
         -> Result<(String, String), NodePkiError> {
            let key = KeyPair::generate()?;
            let mut params = self.params(file, LEAF_LIFETIME)?;
            params.subject_alt_names =
                CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>())?
                    .subject_alt_names;
            params.distinguished_name = distinguished_name(name);
            params.extended_key_usages = vec![usage];
            let cert = params.signed_by(&key, issuer)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
        let pair = |file: &str, (cert, key): (String, String)| -> Result<(), NodePkiError> {
            write(&format!("pki/{file}.crt"), cert.as_bytes(), 0o644)?;
            write(&format!("pki/{file}.key"), key.as_bytes(), 0o600)
        };

        let (ca_key, ca_params) = ca("ca", "kubernetes")?;
        let cluster = Issuer::from_params(&ca_params, &ca_key);
        pair(
            "apiserver",
            leaf(
                &cluster,
                "pki/apiserver.crt",
                "kube-apiserver",
                &["kubernetes", "kubernetes.default", "localhost", "127.0.0.1"],
                ExtendedKeyUsagePurpose::ServerAuth,
            )?,
        )?;
        pair(
            "apiserver-kubelet-client",
            leaf(
                &cluster,
                "pki/apiserver-kubelet-client.crt",
                "kube-apiserver-kubelet-client",
                &[],
                ExtendedKeyUsagePurpose::ClientAuth,
            )?,
        )?;
        let (etcd_key, etcd_params) = ca("etcd/ca", "etcd-ca")?;
        let etcd = Issuer::from_params(&etcd_params, &etcd_key);
        pair(
            "apiserver-etcd-client",
            leaf(
                &etcd,
                "pki/apiserver-etcd-client.crt",
                "kube-apiserver-etcd-client",
                &[],
                ExtendedKeyUsagePurpose::ClientAuth,
            )?,
        )?;
        let (proxy_key, proxy_params) = ca("front-proxy-ca", "front-proxy-ca")?;
        let proxy = Issuer::from_params(&proxy_params, &proxy_key);
        pair(
            "front-proxy-client",
            leaf(
                &proxy,
                "pki/front-proxy-client.crt",
                "front-proxy-client",
                &[],
                ExtendedKeyUsagePurpose::ClientAuth,
            )?,
        )?;
        let service_accounts = KeyPair::generate()?;
        write(
            "pki/sa.pub",
            service_accounts.public_key_pem().as_bytes(),
            0o644,
        )?;
        write(
            "pki/sa.key",
            service_accounts.serialize_pem().as_bytes(),
            0o600,
        )?;
        for (file, user) in [
            ("controller-manager.conf", "system:kube-controller-manager"),
            ("scheduler.conf", "system:kube-scheduler"),
        ] {
            let (cert, key) = leaf(
                &cluster,
                file,
                user,
                &[],
                ExtendedKeyUsagePurpose::ClientAuth,
            )?;
            let kubeconfig = serde_json::json!({
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "kubernetes", "cluster": {"server": "https://127.0.0.1:6443"}}],
                "users": [{"name": user, "user": {
                    "client-certificate-data": STANDARD.encode(cert),
                    "client-key-data": STANDARD.encode(key),
                }}],
                "contexts": [{"name": "default", "context": {"cluster": "kubernetes", "user": user}}],
                "current-context": "default",
            });
            let text = serde_json::to_string_pretty(&kubeconfig).unwrap_or_default();
            write(file, text.as_bytes(), 0o600)?;
        }
        Ok(())
    }
}

fn write(path: &Path, content: &[u8], mode: u32) -> Result<(), NodePkiError> {
    let io = |source| NodePkiError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
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
