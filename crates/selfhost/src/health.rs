//! Health probes of the API server: `/readyz?verbose`, `/livez` and `/version`, through the
//! probe client (no retries, short timeouts). Only the HTTP status decides health, as the
//! Kubernetes health-endpoint documentation says; the verbose lines are for people.

use selfhost_core::KubeVersion;

/// One check line of `/readyz?verbose`: `[+]etcd ok` or `[-]etcd failed: reason withheld`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    /// The check's name, e.g. `etcd` or `poststarthook/rbac/bootstrap-roles`.
    pub name: String,
    /// Whether it passed.
    pub ok: bool,
}

/// What a health endpoint said.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Health {
    /// 200 OK.
    pub healthy: bool,
    /// The individual checks, when the endpoint listed them.
    pub checks: Vec<Check>,
    /// Why it is not healthy: the failing checks, the status, or the connection error.
    pub problem: Option<String>,
}

/// Parses the verbose output of `/readyz` or `/livez`.
pub fn parse_checks(body: &str) -> Vec<Check> {
    body.lines()
        .filter_map(|line| {
            let (ok, rest) = if let Some(rest) = line.strip_prefix("[+]") {
                (true, rest)
            } else {
                (false, line.strip_prefix("[-]")?)
            };
            let name = rest.split_whitespace().next()?.to_string();
            Some(Check { name, ok })
        })
        .collect()
}

async fn probe(client: &kube::Client, path: &str) -> Health {
    let request = match http::Request::get(path).body(Vec::new()) {
        Ok(r) => r,
        Err(e) => {
            return Health {
                healthy: false,
                checks: vec![],
                problem: Some(e.to_string()),
            };
        }
    };
    match client.request_text(request).await {
        Ok(body) => Health {
            healthy: true,
            checks: parse_checks(&body),
            problem: None,
        },
        // Not a health verdict: the credentials may not read the path.
        Err(ref err @ kube::Error::Api(ref status)) if status.code == 403 => Health {
            healthy: false,
            checks: vec![],
            problem: Some(crate::api_call::describe(err)),
        },
        Err(kube::Error::Api(status)) => {
            // kube turns a plain-text error body into a Status whose message is that body.
            let checks = parse_checks(&status.message);
            let failing: Vec<_> = checks
                .iter()
                .filter(|c| !c.ok)
                .map(|c| c.name.clone())
                .collect();
            let problem = if failing.is_empty() {
                format!("HTTP {}", status.code)
            } else {
                format!(
                    "HTTP {}: failing checks {}",
                    status.code,
                    failing.join(", ")
                )
            };
            Health {
                healthy: false,
                checks,
                problem: Some(problem),
            }
        }
        Err(other) => Health {
            healthy: false,
            checks: vec![],
            problem: Some(crate::api_call::describe(&other)),
        },
    }
}

/// `GET /readyz?verbose`.
pub async fn readyz(probe_client: &kube::Client) -> Health {
    probe(probe_client, "/readyz?verbose").await
}

/// Why the API server's version could not be read.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    /// The request failed.
    #[error("cannot read the API server's /version: {0}")]
    Request(String),
    /// The answer is not a Kubernetes version.
    #[error(transparent)]
    Invalid(#[from] selfhost_core::version::VersionError),
}

/// `GET /version`, parsed.
pub async fn server_version(probe_client: &kube::Client) -> Result<KubeVersion, VersionError> {
    let info = probe_client
        .apiserver_version()
        .await
        .map_err(|e| VersionError::Request(crate::api_call::describe(&e)))?;
    Ok(KubeVersion::from_git_version(&info.git_version)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbose_lines_become_checks() {
        let body = "[+]ping ok\n[+]etcd ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\nreadyz check failed\n";
        let checks = parse_checks(body);
        assert_eq!(checks.len(), 3);
        assert_eq!(
            checks[2],
            Check {
                name: "poststarthook/rbac/bootstrap-roles".into(),
                ok: false
            }
        );
        assert!(checks[0].ok && checks[1].ok);
    }
}
