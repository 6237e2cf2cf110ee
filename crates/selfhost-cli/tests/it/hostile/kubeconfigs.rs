//! Kubeconfigs that are missing, malformed, point nowhere or at the wrong server, name what
//! they do not define, or carry credentials or a CA the server does not accept.

use super::{Case, On};

/// The shared simulator's kubeconfig with `from` replaced by `to` (which must occur).
fn replaced(yaml: &str, from: &str, to: &str) -> String {
    assert!(yaml.contains(from), "{from:?} is in {yaml}");
    yaml.replacen(from, to, 1)
}

/// The `server: URL` line replaced.
fn with_server(yaml: &str, server: &str) -> String {
    yaml.lines()
        .map(|l| match l.split_once("server: ") {
            Some((indent, _)) => format!("{indent}server: {server}"),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The TLS simulator's CA replaced by another, freshly minted one.
fn with_other_ca(yaml: &str) -> String {
    use base64::Engine;
    let other = selfhost_sim::tls::TlsIdentity::generate(&[]).expect("a CA");
    let data = base64::engine::general_purpose::STANDARD.encode(other.ca_pem());
    with_ca_data(yaml, &data)
}

/// The value of `certificate-authority-data` replaced (it may be folded over two lines).
fn with_ca_data(yaml: &str, data: &str) -> String {
    let mut out = Vec::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some((indent, value)) = line.split_once("certificate-authority-data:") {
            if value.trim().starts_with('>')
                || value.trim().starts_with('|')
                || value.trim().is_empty()
            {
                lines.next();
            }
            if !data.is_empty() {
                out.push(format!("{indent}certificate-authority-data: {data}"));
            }
        } else {
            out.push(line.to_string());
        }
    }
    out.join("\n")
}

/// `status` against the shared simulator, through a rewritten kubeconfig.
fn status_with(rewrite: fn(&str) -> String) -> Case {
    Case::new(&["status"]).on(On::Sim).kubeconfig(rewrite)
}

/// `plan v1.34.0` against the shared TLS simulator, through a rewritten kubeconfig.
fn plan_tls_with(rewrite: fn(&str) -> String) -> Case {
    Case::new(&["plan", "v1.34.0"])
        .on(On::TlsSim)
        .kubeconfig(rewrite)
}

crate::hostile_cases! {
    kubeconfig_missing => Case::new(&["status"])
        .exits(2)
        .says(&["cannot read the kubeconfig", "No such file", "pass --kubeconfig PATH or set KUBECONFIG"]),
    kubeconfig_not_yaml => status_with(|_| "{{{ not: [yaml".into())
        .exits(2)
        .says(&["is not valid", "line 1", "unclosed bracket"]),
    kubeconfig_binary_junk => status_with(|_| "\u{0}\u{1}\u{2} binary junk \u{3}".into())
        .exits(2)
        .says(&["is not valid", "unexpected character"]),
    kubeconfig_of_the_wrong_kind => status_with(|_| "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n".into())
        .exits(2)
        .says(&["defines no contexts", "it is a Pod", "/etc/kubernetes/admin.conf"]),
    kubeconfig_without_current_context => status_with(|y| replaced(y, "current-context: selfhost-sim", ""))
        .exits(2)
        .says(&["has no current-context", "pass --context NAME", "selfhost-sim"]),
    kubeconfig_unknown_context => Case::new(&["--context", "nope", "status"])
        .on(On::Sim)
        .exits(2)
        .says(&["context \"nope\" is not in the kubeconfig", "it has: selfhost-sim"]),
    kubeconfig_context_names_a_missing_user => status_with(|y| replaced(y, "user: selfhost-sim", "user: ghost"))
        .exits(2)
        .says(&["user \"ghost\"", "not in the kubeconfig's users", "fix the context's user"]),
    kubeconfig_context_names_a_missing_cluster => status_with(|y| replaced(y, "cluster: selfhost-sim", "cluster: ghost"))
        .exits(2)
        .says(&["cluster \"ghost\"", "fix the context's cluster"]),
    kubeconfig_server_not_a_url => status_with(|y| with_server(y, "\"::not a url::\""))
        .exits(2)
        .says(&["cannot use context", "cluster url"]),
    kubeconfig_points_at_a_dead_server => status_with(|y| with_server(y, "http://127.0.0.1:1"))
        .exits(3)
        .says(&["cannot reach the API server http://127.0.0.1:1", "connection refused", "check that the cluster is up"]),
    kubeconfig_exec_plugin_missing => status_with(|y| replaced(y, "user: {}",
        "user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: no-such-credential-helper\n      interactionMode: Never"))
        .exits(2)
        .says(&["cannot use context", "auth exec"]),
    kubeconfig_invalid_token => plan_tls_with(|y| {
            let token = y.lines().find_map(|l| l.split_once("token: ")).map(|(_, t)| t.to_string()).expect("a token");
            replaced(y, &token, "expired-or-revoked-token")
        })
        .exits(2)
        .says(&["refused the credentials", "401", "expired", "get a fresh kubeconfig"]),
    kubeconfig_tls_server_with_the_wrong_ca => plan_tls_with(with_other_ca)
        .exits(2)
        .says(&["cannot verify the API server", "invalid peer certificate", "certificate authority", "use the cluster's own CA"]),
    kubeconfig_tls_server_without_a_ca => plan_tls_with(|y| with_ca_data(y, ""))
        .exits(2)
        .says(&["cannot verify the API server", "certificate authority"]),
    kubeconfig_http_to_a_tls_server => plan_tls_with(|y| {
            let server = y.lines().find_map(|l| l.split_once("server: ")).map(|(_, s)| s.to_string()).expect("server");
            with_server(y, &server.replace("https://", "http://"))
        })
        .exits(3)
        .says(&["cannot reach the API server", "write https://"]),
}
