//! The newest patch of a Kubernetes minor, from a release index: `<index>/stable-1.NN.txt`
//! holds it, as `https://dl.k8s.io/release` publishes it and `kubeadm upgrade plan` reads it.
//! A chained upgrade asks it for each minor between, unless `--via` gives the version.

use std::time::Duration;

use selfhost_core::version::{KubeVersion, MinorVersion};

/// The index upstream publishes.
pub const DEFAULT_RELEASES_URL: &str = "https://dl.k8s.io/release";

/// Why the newest patch of a minor is not known.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// The index's URL cannot be used.
    #[error("--releases-url {url}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The index did not say.
    #[error(
        "cannot tell the newest {minor} patch: {url}: {reason}; give the version of each hop \
         with --via (e.g. --via {minor}.0), or a reachable index with --releases-url"
    )]
    Unknown {
        /// The minor.
        minor: String,
        /// The file asked for.
        url: String,
        /// Why not.
        reason: String,
    },
}

/// The newest patch of `minor` the index at `base` names.
pub async fn newest_patch(base: &str, minor: MinorVersion) -> Result<KubeVersion, ReleaseError> {
    let base = base.trim_end_matches('/');
    let file = format!("stable-{}.{}.txt", minor.major(), minor.minor());
    let url = format!("{base}/{file}");
    let unknown = |reason: String| ReleaseError::Unknown {
        minor: minor.to_string(),
        url: url.clone(),
        reason,
    };
    let bad_url = |reason: String| ReleaseError::Url {
        url: base.to_string(),
        reason,
    };
    let uri: http::Uri = base.parse().map_err(|e| bad_url(format!("{e}")))?;
    if !matches!(uri.scheme_str(), Some("https" | "http")) || uri.host().is_none() {
        return Err(bad_url("give it as https://HOST/PATH".into()));
    }
    let mut config = kube::Config::new(uri);
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(10));
    config.default_retry = false;
    let client = kube::Client::try_from(config).map_err(|e| bad_url(e.to_string()))?;
    let request = http::Request::get(format!("/{file}"))
        .body(Vec::new())
        .map_err(|e| bad_url(e.to_string()))?;
    let text = client
        .request_text(request)
        .await
        .map_err(|e| unknown(crate::api_call::describe(&e)))?;
    let version = KubeVersion::parse(text.trim())
        .map_err(|_| unknown(format!("not a version: {:?}", text.trim())))?;
    if version.minor_version() != minor {
        return Err(unknown(format!("names {version}, not a {minor} release")));
    }
    Ok(version)
}
