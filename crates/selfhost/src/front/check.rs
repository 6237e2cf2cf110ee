//! The backends' health checks: an anonymous HTTPS `GET /readyz` on a fresh connection, the
//! server's certificate verified against the cluster CA for the name its certificate has for
//! loopback (kube-apiserver's serving certificate has 127.0.0.1 as an IP SAN). Only the status
//! line is read: 200 passes, anything else fails.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use selfhost_core::front::Check;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::error::FrontError;

/// The longest status line read.
const MAX_STATUS_LINE: u64 = 1024;

/// Checks backends' `/readyz`.
#[derive(Clone)]
pub struct Checker {
    connector: tokio_rustls::TlsConnector,
    /// The name certificates are verified for; `None`: each backend's IP address.
    server_name: Option<ServerName<'static>>,
    timeout: Duration,
}

impl std::fmt::Debug for Checker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checker")
            .field("server_name", &self.server_name)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The certificates of a PEM CA file.
pub fn read_ca(path: &Path) -> Result<Vec<CertificateDer<'static>>, FrontError> {
    let bytes = std::fs::read(path).map_err(|source| FrontError::CaUnreadable {
        path: path.to_path_buf(),
        source,
    })?;
    let not_pem = |detail: String| FrontError::CaNotPem {
        path: path.to_path_buf(),
        detail,
    };
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| not_pem(e.to_string()))?;
    if certs.is_empty() {
        return Err(not_pem("no CERTIFICATE block in it".into()));
    }
    Ok(certs)
}

/// A TLS client configuration that trusts exactly the CA certificates `ca` (the cluster's, read
/// from `origin`), as the front's checks and any client of the kube-apiservers behind it verify
/// them.
///
/// # Errors
/// A certificate is not usable as a trust anchor.
pub fn trusting(
    ca: &[CertificateDer<'static>],
    origin: &Path,
) -> Result<rustls::ClientConfig, FrontError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in ca {
        roots.add(cert.clone()).map_err(|e| FrontError::CaNotPem {
            path: origin.to_path_buf(),
            detail: format!("a certificate in it is not usable: {e}"),
        })?;
    }
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

impl Checker {
    /// A checker trusting the CA in `ca_file`, verifying `server_name` (else each backend's
    /// IP address), giving up on a check after `timeout`.
    pub fn new(
        ca_file: &Path,
        server_name: Option<&str>,
        timeout: Duration,
    ) -> Result<Checker, FrontError> {
        let config = trusting(&read_ca(ca_file)?, ca_file)?;
        let server_name = server_name
            .map(|name| {
                ServerName::try_from(name.to_string()).map_err(|_| FrontError::ServerName {
                    name: name.to_string(),
                })
            })
            .transpose()?;
        Ok(Checker {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
            server_name,
            timeout,
        })
    }

    /// Checks `backend`'s `/readyz` once.
    pub async fn check(&self, backend: SocketAddr) -> Check {
        match tokio::time::timeout(self.timeout, self.readyz(backend)).await {
            Ok(Ok(())) => Check::Pass,
            Ok(Err(why)) => Check::Fail(why),
            Err(_) => Check::Fail(format!(
                "/readyz gave no answer within {}",
                humanize(self.timeout)
            )),
        }
    }

    async fn readyz(&self, backend: SocketAddr) -> Result<(), String> {
        let name = self
            .server_name
            .clone()
            .unwrap_or_else(|| ServerName::IpAddress(backend.ip().into()));
        let tcp = TcpStream::connect(backend)
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let mut tls = self
            .connector
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        let request = format!(
            "GET /readyz HTTP/1.1\r\nHost: {backend}\r\nUser-Agent: selfhost-front\r\n\
             Accept: text/plain\r\nConnection: close\r\n\r\n"
        );
        tls.write_all(request.as_bytes())
            .await
            .map_err(|e| format!("cannot send the request: {e}"))?;
        let mut line = String::new();
        let mut reader = BufReader::new(tokio::io::AsyncReadExt::take(tls, MAX_STATUS_LINE));
        reader
            .read_line(&mut line)
            .await
            .map_err(|e| format!("no answer: {e}"))?;
        let status = line.split_whitespace().nth(1).unwrap_or("");
        match status {
            "200" => Ok(()),
            "" => Err("the connection closed without an answer".into()),
            code => Err(format!("/readyz answered HTTP {code}")),
        }
    }
}

/// `200ms`, `1s`.
fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}
