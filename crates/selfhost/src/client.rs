//! Connecting to a cluster the way kubectl does: `--kubeconfig`, else `$KUBECONFIG` (a list
//! of files, merged), else `~/.kube/config`; `--context`, else the current context. TLS
//! verification, exec plugins, tokens and client certificates all come from kube-rs.
//!
//! Two clients come out of it. Neither retries on its own: kube-rs's default policy retries
//! 429/503/504 up to 15 times and would hide the real error from the user for minutes; the
//! engine's own bounded retries decide instead (`retry.rs`). The probe client also has short
//! timeouts, because a health probe that hangs is itself the answer.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// Read timeout of the probe client: an apiserver that takes longer to answer `/readyz` is
/// not serving in any sense that matters during a hand-over.
pub const PROBE_READ_TIMEOUT: Duration = Duration::from_secs(2);
/// Connect timeout of both clients.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest response body either client accepts. kube-rs reads a whole answer into memory, so
/// a server (or proxy) that sends an endless body would otherwise exhaust it. Every list the
/// engine makes is filtered or paged to a few megabytes, and a watch is restarted by the
/// server every few minutes, long before it streams this much.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// Where the cluster connection comes from, as given on the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientArgs {
    /// `--kubeconfig PATH`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context NAME`.
    pub context: Option<String>,
}

/// Which kubeconfig files were chosen, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeconfigSource {
    /// `--kubeconfig PATH`.
    Flag(PathBuf),
    /// `$KUBECONFIG`, a list of files merged in order.
    Env(Vec<PathBuf>),
    /// `~/.kube/config`.
    Home(PathBuf),
}

impl KubeconfigSource {
    /// Chooses the kubeconfig files as kubectl does. `env` is the value of `$KUBECONFIG` and
    /// `home` the user's home directory (passed in, so that the rule can be tested).
    pub fn choose(
        args: &ClientArgs,
        env: Option<&OsStr>,
        home: Option<&Path>,
    ) -> Result<KubeconfigSource, ClientError> {
        if let Some(path) = &args.kubeconfig {
            return Ok(KubeconfigSource::Flag(path.clone()));
        }
        if let Some(value) = env {
            let paths: Vec<PathBuf> = std::env::split_paths(value)
                .filter(|p| !p.as_os_str().is_empty())
                .collect();
            if !paths.is_empty() {
                return Ok(KubeconfigSource::Env(paths));
            }
        }
        match home {
            Some(home) => Ok(KubeconfigSource::Home(home.join(".kube").join("config"))),
            None => Err(ClientError::NoKubeconfig),
        }
    }

    /// The files, in merge order.
    pub fn paths(&self) -> Vec<&Path> {
        match self {
            KubeconfigSource::Flag(p) | KubeconfigSource::Home(p) => vec![p.as_path()],
            KubeconfigSource::Env(ps) => ps.iter().map(PathBuf::as_path).collect(),
        }
    }

    fn describe(&self) -> String {
        match self {
            KubeconfigSource::Flag(p) => format!("{} (from --kubeconfig)", p.display()),
            KubeconfigSource::Env(ps) => format!(
                "{} (from KUBECONFIG)",
                ps.iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(":")
            ),
            KubeconfigSource::Home(p) => format!("{} (the default)", p.display()),
        }
    }
}

/// Why no client could be built. Every message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nowhere to look for a kubeconfig.
    #[error(
        "no kubeconfig to use: pass --kubeconfig PATH or set KUBECONFIG (HOME is not set, so \
         ~/.kube/config cannot be found)"
    )]
    NoKubeconfig,
    /// A kubeconfig file could not be read.
    #[error(
        "cannot read the kubeconfig {path}: {error}; pass --kubeconfig PATH or set KUBECONFIG to a readable file"
    )]
    Read {
        /// The file and where its name came from.
        path: String,
        /// The I/O error (in the message rather than as a source, or it would print twice).
        error: std::io::Error,
    },
    /// A kubeconfig file is not a kubeconfig.
    #[error("the kubeconfig {path} is not valid: {detail}")]
    Parse {
        /// The file and where its name came from.
        path: String,
        /// What the parser said.
        detail: String,
    },
    /// The kubeconfig defines no context at all: an empty file, or some other YAML.
    #[error(
        "the kubeconfig {path} defines no contexts{kind}: it is empty or not a kubeconfig; pass \
         --kubeconfig with the cluster's kubeconfig (kubeadm writes /etc/kubernetes/admin.conf)"
    )]
    NoContexts {
        /// The kubeconfig.
        path: String,
        /// ` (it is a <kind>)` when the file names another kind, else empty.
        kind: String,
    },
    /// `--context` names a context the kubeconfig does not have.
    #[error("context {context:?} is not in the kubeconfig {path}; it has: {available}")]
    UnknownContext {
        /// The context asked for.
        context: String,
        /// The kubeconfig.
        path: String,
        /// The contexts it does have.
        available: String,
    },
    /// No `--context` and no current context.
    #[error(
        "the kubeconfig {path} has no current-context; pass --context NAME (it has: {available})"
    )]
    NoContext {
        /// The kubeconfig.
        path: String,
        /// The contexts it has.
        available: String,
    },
    /// The selected context cannot be turned into a connection (bad server URL, bad
    /// certificate data, exec plugin failure...).
    #[error("cannot use context {context:?} of {path}: {detail}")]
    Context {
        /// The context.
        context: String,
        /// The kubeconfig.
        path: String,
        /// What kube-rs said.
        detail: String,
    },
}

/// The clients the engine works with.
#[derive(Clone)]
pub struct Clients {
    /// For API reads, writes and watches.
    pub api: kube::Client,
    /// For `/readyz`, `/livez` and `/version`: no retries, short timeouts.
    pub probe: kube::Client,
    /// The context in use.
    pub context: String,
    /// The API server URL of that context.
    pub server: String,
    /// Every HTTP request both clients have sent.
    pub requests: RequestCount,
}

/// How many HTTP requests the clients have sent (lists, watches, writes and health probes,
/// retries included): the tool's load on the API servers.
#[derive(Debug, Clone, Default)]
pub struct RequestCount(Arc<AtomicU64>);

impl RequestCount {
    /// The requests sent so far.
    pub fn total(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    fn count<B>(&self, request: http::Request<B>) -> http::Request<B> {
        self.0.fetch_add(1, Ordering::Relaxed);
        request
    }
}

impl std::fmt::Debug for Clients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clients")
            .field("context", &self.context)
            .field("server", &self.server)
            .finish()
    }
}

/// Builds the clients from the kubeconfig chosen as kubectl would.
pub async fn connect(args: &ClientArgs) -> Result<Clients, ClientError> {
    connect_as(args, None).await
}

/// [`connect`], the clients sending `user_agent` as their `User-Agent` (`None`: kube-rs's).
pub(crate) async fn connect_as(
    args: &ClientArgs,
    user_agent: Option<&'static str>,
) -> Result<Clients, ClientError> {
    let env = std::env::var_os("KUBECONFIG");
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let source = KubeconfigSource::choose(args, env.as_deref(), home.as_deref())?;
    connect_from(&source, args.context.as_deref(), user_agent).await
}

/// Builds the clients from a chosen kubeconfig source.
pub async fn connect_with(
    source: &KubeconfigSource,
    context: Option<&str>,
) -> Result<Clients, ClientError> {
    connect_from(source, context, None).await
}

async fn connect_from(
    source: &KubeconfigSource,
    context: Option<&str>,
    user_agent: Option<&'static str>,
) -> Result<Clients, ClientError> {
    let described = source.describe();
    let kubeconfig = read_kubeconfig(source)?;
    if kubeconfig.contexts.is_empty() {
        let kind = match kubeconfig.kind.as_deref() {
            Some(kind) if kind != "Config" => format!(" (it is a {kind}, not a Config)"),
            _ => String::new(),
        };
        return Err(ClientError::NoContexts {
            path: described,
            kind,
        });
    }
    let available = kubeconfig
        .contexts
        .iter()
        .map(|c| c.name.clone())
        .collect::<Vec<_>>();
    let available_text = if available.is_empty() {
        "no contexts".to_string()
    } else {
        available.join(", ")
    };
    let context = match context
        .map(str::to_string)
        .or_else(|| kubeconfig.current_context.clone())
    {
        Some(c) if available.contains(&c) => c,
        Some(c) => {
            return Err(ClientError::UnknownContext {
                context: c,
                path: described,
                available: available_text,
            });
        }
        None => {
            return Err(ClientError::NoContext {
                path: described,
                available: available_text,
            });
        }
    };
    check_references(&kubeconfig, &context).map_err(|detail| ClientError::Context {
        context: context.clone(),
        path: described.clone(),
        detail,
    })?;
    let options = KubeConfigOptions {
        context: Some(context.clone()),
        ..KubeConfigOptions::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| ClientError::Context {
            context: context.clone(),
            path: described.clone(),
            detail: e.to_string(),
        })?;
    if let Some(agent) = user_agent {
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static(agent),
        ));
    }
    let server = config.cluster_url.to_string();
    let requests = RequestCount::default();

    let build = |mut config: kube::Config, read_timeout: Option<Duration>| {
        config.default_retry = false;
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = read_timeout;
        let builder =
            kube::client::ClientBuilder::try_from(config).map_err(|e| ClientError::Context {
                context: context.clone(),
                path: described.clone(),
                detail: e.to_string(),
            })?;
        let limit = tower::util::MapResponseLayer::new(|response: http::Response<_>| {
            response.map(|body| http_body_util::Limited::new(body, MAX_RESPONSE_BYTES))
        });
        let fresh = tower::util::MapRequestLayer::new(own_connection);
        let counted = requests.clone();
        let count = tower::util::MapRequestLayer::new(move |r| counted.count(r));
        Ok::<_, ClientError>(
            builder
                .with_layer(&limit)
                .with_layer(&fresh)
                .with_layer(&count)
                .build(),
        )
    };
    // Watches are long-lived, so the API client has no read timeout; unary calls get an outer
    // deadline from the retry layer instead.
    let api = build(config.clone(), None)?;
    let probe = build(config, Some(PROBE_READ_TIMEOUT))?;
    Ok(Clients {
        api,
        probe,
        context,
        server,
        requests,
    })
}

/// Every request asks for a connection of its own (`Connection: close`), so that no
/// connection is ever reused. Behind a load balancer, and on a node where two kube-apiserver
/// processes share the port during a hand-over, a kept-alive connection stays with the one
/// process it first reached: one that accepts but never finishes starting answers every
/// request on it with 500, and the pool hands that idle connection back to the next request
/// and to each retry: a write can then fail again and again, and the watches cannot relist,
/// while every other process serves. A new connection per
/// call lets the balancer and the node's kernel choose again, as kubectl does once per
/// command. The engine makes few unary calls (its reads come from watches, which are
/// long-lived), so the extra handshakes cost little.
fn own_connection<B>(mut request: http::Request<B>) -> http::Request<B> {
    request.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    request
}

/// The cluster and user a context names must exist, as kubectl requires: kube-rs would
/// connect anonymously for a missing user, and the API's refusal would hide the typo.
fn check_references(kubeconfig: &Kubeconfig, context: &str) -> Result<(), String> {
    let Some(named) = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
    else {
        return Ok(());
    };
    if !kubeconfig.clusters.iter().any(|c| c.name == named.cluster) {
        return Err(format!(
            "it names cluster {:?}, which is not in the kubeconfig's clusters; fix the context's cluster",
            named.cluster
        ));
    }
    if let Some(user) = &named.user
        && !kubeconfig.auth_infos.iter().any(|u| &u.name == user)
    {
        return Err(format!(
            "it names user {user:?}, which is not in the kubeconfig's users; fix the context's user"
        ));
    }
    Ok(())
}

fn read_kubeconfig(source: &KubeconfigSource) -> Result<Kubeconfig, ClientError> {
    let mut merged: Option<Kubeconfig> = None;
    for path in source.paths() {
        let shown = match source {
            KubeconfigSource::Env(_) => format!("{} (from KUBECONFIG)", path.display()),
            _ => source.describe(),
        };
        let text = std::fs::read_to_string(path).map_err(|error| ClientError::Read {
            path: shown.clone(),
            error,
        })?;
        let config = Kubeconfig::from_yaml(&text).map_err(|e| ClientError::Parse {
            path: shown.clone(),
            // kube's message for a parse error carries serde-saphyr's line and column.
            detail: e.to_string(),
        })?;
        merged = Some(match merged {
            None => config,
            Some(m) => m.merge(config).map_err(|e| ClientError::Parse {
                path: shown.clone(),
                detail: e.to_string(),
            })?,
        });
    }
    merged.ok_or(ClientError::NoKubeconfig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_asks_for_its_own_connection() {
        for uri in [
            "/apis/apps/v1/namespaces/kube-system/daemonsets/x",
            "/api/v1/pods?watch=true",
        ] {
            let sent = own_connection(http::Request::get(uri).body(()).unwrap());
            assert_eq!(
                sent.headers().get(http::header::CONNECTION),
                Some(&http::HeaderValue::from_static("close")),
                "{uri}"
            );
        }
    }

    fn args(kubeconfig: Option<&str>) -> ClientArgs {
        ClientArgs {
            kubeconfig: kubeconfig.map(PathBuf::from),
            context: None,
        }
    }

    #[test]
    fn kubeconfig_is_chosen_like_kubectl() {
        let home = Path::new("/home/op");
        type Row<'a> = (
            ClientArgs,
            Option<&'a str>,
            Option<&'a Path>,
            Result<KubeconfigSource, &'a str>,
        );
        let rows: Vec<Row> = vec![
            (
                args(Some("/k")),
                Some("/a:/b"),
                Some(home),
                Ok(KubeconfigSource::Flag("/k".into())),
            ),
            (
                args(None),
                Some("/a:/b"),
                Some(home),
                Ok(KubeconfigSource::Env(vec!["/a".into(), "/b".into()])),
            ),
            // empty entries are skipped, as kubectl skips them
            (
                args(None),
                Some(":/b:"),
                Some(home),
                Ok(KubeconfigSource::Env(vec!["/b".into()])),
            ),
            (
                args(None),
                Some(""),
                Some(home),
                Ok(KubeconfigSource::Home("/home/op/.kube/config".into())),
            ),
            (
                args(None),
                None,
                Some(home),
                Ok(KubeconfigSource::Home("/home/op/.kube/config".into())),
            ),
            (
                args(None),
                None,
                None,
                Err("pass --kubeconfig PATH or set KUBECONFIG"),
            ),
        ];
        for (args, env, home, want) in rows {
            let got = KubeconfigSource::choose(&args, env.map(OsStr::new), home);
            match (got, want) {
                (Ok(got), Ok(want)) => assert_eq!(got, want),
                (Err(got), Err(want)) => assert!(got.to_string().contains(want), "{got}"),
                (got, want) => panic!("{args:?} {env:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
