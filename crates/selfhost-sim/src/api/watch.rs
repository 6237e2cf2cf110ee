//! Watch streams: newline-delimited JSON events over a chunked response, with bookmarks,
//! `timeoutSeconds`, 410 ERROR events, and an abrupt end when the server crashes or a fault
//! drops watches.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::stream;
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::call::Call;
use super::respond;
use crate::error::ApiError;
use crate::resources::ResourceType;
use crate::store::{WatchCursor, WatchEvent, WatchFilter, WatchStart};

fn line(kind: &str, object: &Value) -> Vec<u8> {
    let mut out =
        serde_json::to_vec(&json!({ "type": kind, "object": object })).unwrap_or_default();
    out.push(b'\n');
    out
}

/// How event objects are encoded: as themselves, or as one-row Tables for `kubectl get -w`.
struct Encoding {
    rt: ResourceType,
    /// `includeObject` of a Table watch; `None` for plain objects.
    table: Option<String>,
    /// Whether the column definitions were sent (only the first Table carries them, as the
    /// apiserver does).
    columns_sent: bool,
}

impl Encoding {
    fn chunk(&mut self, events: &[WatchEvent]) -> Bytes {
        let mut out = Vec::new();
        for e in events {
            match &self.table {
                None => out.extend(line(e.event_type.as_str(), &e.object)),
                Some(include) => {
                    let rv = crate::store::meta::resource_version(&e.object).unwrap_or("");
                    let mut table = crate::table::to_table(
                        &self.rt,
                        std::slice::from_ref(&*e.object),
                        rv,
                        include,
                    );
                    if self.columns_sent {
                        table["columnDefinitions"] = Value::Null;
                        if let Some(t) = table.as_object_mut() {
                            t.remove("columnDefinitions");
                        }
                    }
                    self.columns_sent = true;
                    out.extend(line(e.event_type.as_str(), &table));
                }
            }
        }
        Bytes::from(out)
    }
}

fn bookmark(rt: &ResourceType, revision: u64, initial_events_end: bool) -> Bytes {
    let mut object = json!({
        "kind": rt.kind,
        "apiVersion": rt.api_version(),
        "metadata": { "resourceVersion": revision.to_string() },
    });
    if initial_events_end {
        object["metadata"]["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
    }
    Bytes::from(line("BOOKMARK", &object))
}

fn error_chunk(err: &ApiError) -> Bytes {
    Bytes::from(line("ERROR", &err.to_status()))
}

/// Everything a running watch stream holds.
struct Stream {
    rt: ResourceType,
    encoding: Encoding,
    cursor: WatchCursor,
    queued: VecDeque<Bytes>,
    deadline: Instant,
    bookmarks: Option<Duration>,
    next_bookmark: Instant,
    crash: CancellationToken,
    dropped: CancellationToken,
    done: bool,
}

fn cut() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionReset, "watch stream cut")
}

impl Stream {
    async fn next_chunk(&mut self) -> Option<Result<Bytes, io::Error>> {
        if let Some(chunk) = self.queued.pop_front() {
            return Some(Ok(chunk));
        }
        if self.done {
            return None;
        }
        let bookmark_at = match self.bookmarks {
            Some(_) => self.next_bookmark,
            None => self.deadline,
        };
        tokio::select! {
            biased;
            _ = self.crash.cancelled() => {
                self.done = true;
                Some(Err(cut()))
            }
            _ = self.dropped.cancelled() => {
                self.done = true;
                Some(Err(cut()))
            }
            _ = tokio::time::sleep_until(self.deadline) => {
                self.done = true;
                None
            }
            _ = tokio::time::sleep_until(bookmark_at), if self.bookmarks.is_some() => {
                let every = self.bookmarks.unwrap_or(Duration::from_secs(60));
                self.next_bookmark = Instant::now() + every;
                Some(Ok(bookmark(&self.rt, self.cursor.position(), false)))
            }
            next = self.cursor.next() => match next {
                Ok(events) => Some(Ok(self.encoding.chunk(&events))),
                Err(err) => {
                    self.done = true;
                    Some(Ok(error_chunk(&err)))
                }
            },
        }
    }
}

/// Starts a watch response.
pub(crate) fn serve(call: &Call<'_>) -> Response {
    match start(call) {
        Ok(resp) => resp,
        Err(e) => respond::error(&e),
    }
}

fn start(call: &Call<'_>) -> Result<Response, ApiError> {
    let rt = call.req.resource;
    let mut predicate = call.query.filter(&rt)?;
    if let Some(name) = call.req.name.clone() {
        // GET of an object with watch=true watches that one object.
        let inner = predicate.take();
        predicate = Some(Arc::new(move |obj: &Value| {
            crate::store::meta::name(obj) == name && inner.as_ref().is_none_or(|f| f(obj))
        }));
    }
    let filter = WatchFilter {
        namespace: call.req.namespace.clone(),
        predicate,
    };
    let send_initial_events = call.query.flag("sendInitialEvents");
    let start = match call.query.get("resourceVersion").filter(|v| !v.is_empty()) {
        _ if send_initial_events => WatchStart::Now,
        None | Some("0") => WatchStart::Now,
        Some(rv) => WatchStart::After(rv.parse().map_err(|_| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: \"{rv}\": invalid resource version"
            ))
        })?),
    };
    let timeout = match call.query.timeout()? {
        Some(t) => t,
        None => call.app.config.default_watch_timeout,
    };
    let bookmarks = call
        .query
        .flag("allowWatchBookmarks")
        .then_some(call.app.config.bookmark_interval);
    let now = Instant::now();
    let watch = call.app.store.watch(&rt, filter, start);
    let mut queued = VecDeque::new();
    if call.app.faults.take_forced_expiry() {
        queued.push_back(error_chunk(&ApiError::expired(format!(
            "too old resource version: {} ({})",
            watch.cursor.position(),
            watch.cursor.position() + 1
        ))));
        let body = Body::from_stream(stream::iter(queued.into_iter().map(Ok::<_, io::Error>)));
        return Ok(watch_response(body));
    }
    let mut encoding = Encoding {
        rt,
        table: respond::wants_table(call.headers).then(|| {
            call.query
                .get("includeObject")
                .unwrap_or("Metadata")
                .to_string()
        }),
        columns_sent: false,
    };
    if !watch.initial.is_empty() {
        queued.push_back(encoding.chunk(&watch.initial));
    }
    if send_initial_events {
        queued.push_back(bookmark(&rt, watch.cursor.position(), true));
    }
    let state = Stream {
        rt,
        encoding,
        cursor: watch.cursor,
        queued,
        deadline: now + timeout,
        bookmarks,
        next_bookmark: now + bookmarks.unwrap_or_default(),
        crash: call.app.crash.clone(),
        dropped: call.app.faults.watch_drop_token(),
        done: false,
    };
    let body = Body::from_stream(stream::unfold(state, |mut s| async move {
        let chunk = s.next_chunk().await?;
        Some((chunk, s))
    }));
    Ok(watch_response(body))
}

fn watch_response(body: Body) -> Response {
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}
