//! Running probes: HTTP(S) GET, TCP connect and exec, each within the probe's timeout.
//!
//! HTTPS probes do not verify the server's certificate, exactly as the kubelet does
//! (`InsecureSkipVerify`): a control-plane component serves a certificate for its own names,
//! which the kubelet has no reason to trust or check. The TLS handshake's signatures are still
//! verified, so the connection is real TLS.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::command::{Launch, program_for, rewrite_arg};
use super::images::ImageTarget;

/// The probe result: `Some(true)` passed, `Some(false)` failed (with why), `None` could not
/// run at all (its result is thrown away, as the kubelet does on a prober error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeOutcome {
    pub success: Option<bool>,
    pub detail: String,
}

impl ProbeOutcome {
    fn passed() -> Self {
        ProbeOutcome {
            success: Some(true),
            detail: String::new(),
        }
    }

    fn failed(detail: impl Into<String>) -> Self {
        ProbeOutcome {
            success: Some(false),
            detail: detail.into(),
        }
    }
}

/// Accepts any server certificate: see the module documentation for why.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Runs probes; shared by every pod worker.
#[derive(Clone)]
pub(crate) struct Prober {
    tls: Option<tokio_rustls::TlsConnector>,
}

impl std::fmt::Debug for Prober {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prober")
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Prober {
    pub(crate) fn new() -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map(|builder| {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
                    .with_no_client_auth()
            })
            .map_err(|e| tracing::error!(error = %e, "no TLS for HTTPS probes"))
            .ok()
            .map(|config| tokio_rustls::TlsConnector::from(Arc::new(config)));
        Prober { tls }
    }

    /// Runs `probe` of `container` against `pod_ip`; exec probes run as `exec` describes.
    pub(crate) async fn run(
        &self,
        probe: &Probe,
        container: &Container,
        pod_ip: &str,
        exec: Option<Launch>,
    ) -> ProbeOutcome {
        let timeout = Duration::from_secs(
            u64::try_from(probe.timeout_seconds.unwrap_or(1).max(1)).unwrap_or(1),
        );
        let attempt = async {
            if let Some(http) = &probe.http_get {
                self.http(http, container, pod_ip).await
            } else if let Some(tcp) = &probe.tcp_socket {
                match port(&tcp.port, container) {
                    Some(port) => {
                        let host = tcp.host.clone().unwrap_or_else(|| pod_ip.to_string());
                        match TcpStream::connect((host.as_str(), port)).await {
                            Ok(_) => ProbeOutcome::passed(),
                            Err(e) => ProbeOutcome::failed(format!("dial tcp {host}:{port}: {e}")),
                        }
                    }
                    None => ProbeOutcome {
                        success: None,
                        detail: "unknown port".into(),
                    },
                }
            } else if let Some(launch) = exec {
                run_exec(launch).await
            } else {
                ProbeOutcome {
                    success: None,
                    detail: "the probe has no handler this kubelet runs".into(),
                }
            }
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(outcome) => outcome,
            Err(_) => ProbeOutcome::failed(format!("timeout after {}s", timeout.as_secs())),
        }
    }

    async fn http(
        &self,
        http: &HTTPGetAction,
        container: &Container,
        pod_ip: &str,
    ) -> ProbeOutcome {
        let Some(port) = port(&http.port, container) else {
            return ProbeOutcome {
                success: None,
                detail: "unknown port".into(),
            };
        };
        let host = http
            .host
            .clone()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| pod_ip.to_string());
        let https = http
            .scheme
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("HTTPS"));
        let request = http_request(http, &host, port);
        let url = format!(
            "{}://{}:{port}{}",
            if https { "https" } else { "http" },
            host,
            http.path.as_deref().unwrap_or("/")
        );
        let stream = match TcpStream::connect((host.as_str(), port)).await {
            Ok(stream) => stream,
            Err(e) => {
                return ProbeOutcome::failed(format!("Get \"{url}\": dial tcp {host}:{port}: {e}"));
            }
        };
        let answer = if https {
            let Some(tls) = &self.tls else {
                return ProbeOutcome {
                    success: None,
                    detail: "no TLS".into(),
                };
            };
            let name = match ServerName::try_from(host.clone()) {
                Ok(name) => name,
                Err(e) => return ProbeOutcome::failed(format!("Get \"{url}\": {e}")),
            };
            match tls.connect(name, stream).await {
                Ok(stream) => exchange(stream, &request).await,
                Err(e) => Err(e),
            }
        } else {
            exchange(stream, &request).await
        };
        match answer {
            Ok(code) if (200..400).contains(&code) => ProbeOutcome::passed(),
            Ok(code) => ProbeOutcome::failed(format!("HTTP probe failed with statuscode: {code}")),
            Err(e) => ProbeOutcome::failed(format!("Get \"{url}\": {e}")),
        }
    }
}

/// A probe port: a number, or the name of one of the container's ports.
fn port(port: &IntOrString, container: &Container) -> Option<u16> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n).ok(),
        IntOrString::String(name) => match name.parse::<u16>() {
            Ok(n) => Some(n),
            Err(_) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok()),
        },
    }
}

/// The GET request a kubelet sends, with its `Host`, `User-Agent` and `Accept` (a header of
/// the probe replaces the default of the same name).
pub(crate) fn http_request(http: &HTTPGetAction, host: &str, port: u16) -> String {
    let path = match http.path.as_deref() {
        None | Some("") => "/".to_string(),
        Some(p) if p.starts_with('/') => p.to_string(),
        Some(p) => format!("/{p}"),
    };
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let mut headers: Vec<(String, String)> = vec![
        ("Host".into(), authority),
        ("User-Agent".into(), "kube-probe/1.20".into()),
        ("Accept".into(), "*/*".into()),
    ];
    for header in http.http_headers.iter().flatten() {
        headers.retain(|(name, _)| !name.eq_ignore_ascii_case(&header.name));
    }
    for header in http.http_headers.iter().flatten() {
        headers.push((header.name.clone(), header.value.clone()));
    }
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    for (name, value) in headers {
        // A header cannot break the request into two.
        let clean = |s: &str| s.replace(['\r', '\n'], "");
        request.push_str(&format!("{}: {}\r\n", clean(&name), clean(&value)));
    }
    request.push_str("Connection: close\r\n\r\n");
    request
}

/// The status code of an HTTP/1.x status line.
pub(crate) fn status_code(line: &str) -> Option<u16> {
    let mut parts = line.split_whitespace();
    parts.next().filter(|v| v.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &str,
) -> std::io::Result<u16> {
    stream.write_all(request.as_bytes()).await?;
    stream.flush().await?;
    let mut head = Vec::new();
    let mut buffer = [0_u8; 512];
    while !head.contains(&b'\n') && head.len() < 8192 {
        let read = stream.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let text = String::from_utf8_lossy(&head);
    status_code(text.lines().next().unwrap_or_default())
        .ok_or_else(|| std::io::Error::other("malformed HTTP response"))
}

async fn run_exec(launch: Launch) -> ProbeOutcome {
    let output = tokio::process::Command::new(&launch.program)
        .args(&launch.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&launch.cwd)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await;
    match output {
        Ok(out) if out.status.success() => ProbeOutcome::passed(),
        Ok(out) => {
            let text = String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr);
            ProbeOutcome::failed(format!(
                "command exited with {}: {}",
                super::process::exit_code(out.status),
                text.trim()
            ))
        }
        Err(e) => ProbeOutcome {
            success: None,
            detail: format!("cannot run {}: {e}", launch.program.display()),
        },
    }
}

/// How to run an exec probe's command for a container: like its command line, with the
/// container's environment and paths.
pub(crate) fn exec_launch(
    probe: &Probe,
    target: &ImageTarget,
    container_launch: &Launch,
    mounts: &[super::command::Mount],
) -> Option<Launch> {
    let command: Vec<String> = probe
        .exec
        .as_ref()?
        .command
        .iter()
        .flatten()
        .map(|w| rewrite_arg(w, mounts))
        .collect();
    let (program, args) = match target {
        ImageTarget::Executable { .. } => program_for(target, &command)?,
        ImageTarget::Pause => {
            let (first, rest) = command.split_first()?;
            (first.into(), rest.to_vec())
        }
    };
    Some(Launch {
        program,
        args,
        env: container_launch.env.clone(),
        cwd: container_launch.cwd.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, HTTPHeader};

    #[test]
    fn ports_are_numbers_or_named_container_ports() {
        let container = Container {
            ports: Some(vec![ContainerPort {
                name: Some("probe-port".into()),
                container_port: 6443,
                ..ContainerPort::default()
            }]),
            ..Container::default()
        };
        let cases = [
            (IntOrString::Int(10257), Some(10257)),
            (IntOrString::String("probe-port".into()), Some(6443)),
            (IntOrString::String("8080".into()), Some(8080)),
            (IntOrString::String("nope".into()), None),
            (IntOrString::Int(70000), None),
        ];
        for (given, expected) in cases {
            assert_eq!(port(&given, &container), expected, "{given:?}");
        }
    }

    #[test]
    fn requests_carry_the_kubelets_headers() {
        let http = HTTPGetAction {
            path: Some("livez".into()),
            http_headers: Some(vec![HTTPHeader {
                name: "host".into(),
                value: "api.local\r\nX: y".into(),
            }]),
            ..HTTPGetAction::default()
        };
        let request = http_request(&http, "127.0.1.1", 6443);
        assert_eq!(
            request,
            "GET /livez HTTP/1.1\r\nUser-Agent: kube-probe/1.20\r\nAccept: */*\r\nhost: api.localX: y\r\nConnection: close\r\n\r\n"
        );
        let plain = http_request(&HTTPGetAction::default(), "::1", 80);
        assert!(
            plain.starts_with("GET / HTTP/1.1\r\nHost: [::1]:80\r\n"),
            "{plain}"
        );
    }

    #[test]
    fn status_lines_give_their_code() {
        let cases = [
            ("HTTP/1.1 200 OK", Some(200)),
            ("HTTP/1.0 503 Service Unavailable", Some(503)),
            ("HTTP/1.1 302", Some(302)),
            ("SSH-2.0-OpenSSH", None),
            ("", None),
        ];
        for (line, code) in cases {
            assert_eq!(status_code(line), code, "{line}");
        }
    }

    #[tokio::test]
    async fn http_and_tcp_probes_reach_a_local_server() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            for code in ["200 OK", "500 Internal Server Error"] {
                let (mut socket, _) = listener.accept().await.unwrap();
                let mut buffer = [0_u8; 1024];
                let _ = socket.read(&mut buffer).await.unwrap();
                socket
                    .write_all(format!("HTTP/1.1 {code}\r\nContent-Length: 0\r\n\r\n").as_bytes())
                    .await
                    .unwrap();
            }
        });
        let prober = Prober::new();
        let probe = Probe {
            http_get: Some(HTTPGetAction {
                port: IntOrString::Int(i32::from(port)),
                path: Some("/readyz".into()),
                ..HTTPGetAction::default()
            }),
            ..Probe::default()
        };
        let container = Container::default();
        assert_eq!(
            prober
                .run(&probe, &container, "127.0.0.1", None)
                .await
                .success,
            Some(true)
        );
        let second = prober.run(&probe, &container, "127.0.0.1", None).await;
        assert_eq!(second.success, Some(false));
        assert!(
            second.detail.contains("statuscode: 500"),
            "{}",
            second.detail
        );
        server.await.unwrap();
        // A port bound but not listening: nothing accepts there, and no connection can get it
        // as its own source port (a connection to a free local port now and then gets it, and
        // then connects to itself).
        let reserved = tokio::net::TcpSocket::new_v4().unwrap();
        reserved.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let closed = reserved.local_addr().unwrap().port();
        let tcp = Probe {
            tcp_socket: Some(k8s_openapi::api::core::v1::TCPSocketAction {
                port: IntOrString::Int(i32::from(closed)),
                host: None,
            }),
            ..Probe::default()
        };
        assert_eq!(
            prober
                .run(&tcp, &container, "127.0.0.1", None)
                .await
                .success,
            Some(false)
        );
        drop(reserved);
    }

    #[tokio::test]
    async fn exec_probes_pass_on_exit_zero() {
        let prober = Prober::new();
        let launch = |script: &str| Launch {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![],
            cwd: "/".into(),
        };
        let probe = Probe::default();
        let container = Container::default();
        assert_eq!(
            prober
                .run(&probe, &container, "ip", Some(launch("exit 0")))
                .await
                .success,
            Some(true)
        );
        let failed = prober
            .run(&probe, &container, "ip", Some(launch("echo no; exit 3")))
            .await;
        assert_eq!(failed.success, Some(false));
        assert!(
            failed.detail.contains("exited with 3: no"),
            "{}",
            failed.detail
        );
        let slow = Probe {
            timeout_seconds: Some(1),
            ..Probe::default()
        };
        let timed_out = prober
            .run(&slow, &container, "ip", Some(launch("sleep 5")))
            .await;
        assert_eq!(timed_out.success, Some(false));
    }
}
