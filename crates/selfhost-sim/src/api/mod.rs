//! The HTTP face of the simulated apiserver: axum routes for discovery, health, version and
//! every served resource, answering like kube-apiserver.

mod body;
mod call;
mod discovery_routes;
mod patch;
pub(crate) mod path;
mod protobuf;
mod query;
mod resource;
mod respond;
mod strict;
pub(crate) mod system;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State};
use axum::response::Response;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

pub(crate) use query::Query;

use crate::error::ApiError;
use crate::faults::Faults;
use crate::store::Store;
use path::ApiPath;
use system::{Control, Probe};

/// The largest request body the apiserver accepts (3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// Timings of the API that tests may want shorter than the real ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiConfig {
    /// How often a watch with `allowWatchBookmarks=true` gets a BOOKMARK when idle (the
    /// real apiserver sends one about every minute).
    pub bookmark_interval: Duration,
    /// How long a watch without `timeoutSeconds` lasts (the real one picks 30–60 minutes).
    pub default_watch_timeout: Duration,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
        }
    }
}

/// What every handler can reach.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) store: Store,
    pub(crate) faults: Faults,
    pub(crate) control: Arc<Control>,
    /// Cancelled when this server incarnation crashes: every watch stream races it.
    pub(crate) crash: CancellationToken,
    pub(crate) config: ApiConfig,
}

/// A `metav1.Status` error response (for the layers in front of the router).
pub(crate) fn error_response(err: &ApiError) -> Response {
    respond::error(err)
}

/// The routes of one server incarnation.
pub(crate) fn router(state: AppState) -> Router {
    Router::new()
        .route("/version", get(version))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/healthz/{*check}", get(healthz_check))
        .route("/livez/{*check}", get(livez_check))
        .route("/readyz/{*check}", get(readyz_check))
        .route("/openapi/v2", get(discovery_routes::openapi_v2))
        .route("/openapi/v3", get(discovery_routes::openapi_v3_root))
        .route(
            "/openapi/v3/{*path}",
            get(discovery_routes::openapi_v3_group),
        )
        .fallback(api)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// `/metrics` in the Prometheus text format. Of a kube-apiserver's metrics it carries the one
/// upgrade preflight reads, `apiserver_requested_deprecated_apis`: with no series, since the
/// simulator serves no deprecated API version for a client to request. Who may read it is
/// RBAC's decision, as on a real apiserver (the non-resource URL `/metrics`).
async fn metrics() -> Response {
    respond::text(
        200,
        "# HELP apiserver_requested_deprecated_apis [STABLE] Gauge of deprecated APIs that have \
         been requested, broken out by API group, version, resource, subresource, and \
         removed_release.\n# TYPE apiserver_requested_deprecated_apis gauge\n"
            .to_string(),
    )
}

async fn version(State(app): State<AppState>) -> Response {
    system::version(&app.control)
}

fn probe(app: &AppState, probe: Probe, check: Option<&str>, query: Option<String>) -> Response {
    system::health(
        &app.control,
        probe,
        check,
        &Query::parse(query.as_deref().unwrap_or("")),
    )
}

async fn healthz(State(app): State<AppState>, RawQuery(q): RawQuery) -> Response {
    probe(&app, Probe::Healthz, None, q)
}

async fn livez(State(app): State<AppState>, RawQuery(q): RawQuery) -> Response {
    probe(&app, Probe::Livez, None, q)
}

async fn readyz(State(app): State<AppState>, RawQuery(q): RawQuery) -> Response {
    probe(&app, Probe::Readyz, None, q)
}

async fn healthz_check(
    State(app): State<AppState>,
    Path(check): Path<String>,
    RawQuery(q): RawQuery,
) -> Response {
    probe(&app, Probe::Healthz, Some(&check), q)
}

async fn livez_check(
    State(app): State<AppState>,
    Path(check): Path<String>,
    RawQuery(q): RawQuery,
) -> Response {
    probe(&app, Probe::Livez, Some(&check), q)
}

async fn readyz_check(
    State(app): State<AppState>,
    Path(check): Path<String>,
    RawQuery(q): RawQuery,
) -> Response {
    probe(&app, Probe::Readyz, Some(&check), q)
}

/// Everything under `/api` and `/apis`, and 404 for the rest.
async fn api(State(app): State<AppState>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let query = Query::parse(parts.uri.query().unwrap_or(""));
    let path = parts.uri.path();
    if !(path == "/api"
        || path.starts_with("/api/")
        || path == "/apis"
        || path.starts_with("/apis/"))
    {
        return respond::error(&ApiError::not_found_plain());
    }
    let target = match path::parse(&parts.method, path, &query) {
        Ok(t) => t,
        Err(e) => return respond::error(&e),
    };
    match target {
        ApiPath::Root { core } => discovery_routes::root(core, &parts.headers),
        ApiPath::Group(group) => discovery_routes::group(&group),
        ApiPath::GroupVersion { group, version } => {
            discovery_routes::group_version(&group, &version)
        }
        ApiPath::Resource(req) => {
            let body = match axum::body::to_bytes(body, MAX_BODY).await {
                Ok(b) => b,
                Err(_) => {
                    return respond::error(&ApiError {
                        code: 413,
                        reason: "RequestEntityTooLarge".into(),
                        message: "the request body is too large or could not be read".into(),
                        details: None,
                        retry_after: None,
                    });
                }
            };
            resource::serve(call::Call {
                app: &app,
                req,
                query,
                headers: &parts.headers,
                body,
            })
            .await
        }
    }
}
