//! What Go's transport would make of a request and its failure: whether it may be sent
//! again, and how an error reads.

/// Whether Go's transport may send `request` again on another connection
/// (`net/http.Request.isReplayable`: its body can be sent again, which ours always can).
pub(super) fn is_replayable(request: &http::Request<Vec<u8>>) -> bool {
    matches!(
        *request.method(),
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS | http::Method::TRACE
    ) || request.headers().contains_key("idempotency-key")
        || request.headers().contains_key("x-idempotency-key")
}

/// Whether `error` says the server ended the connection before any of its answer arrived —
/// the failures Go's transport replays on a reused connection (`errServerClosedIdle`, or a
/// read from the server failing, `transportReadFromServerError`). hyper reports an answer
/// whose head was cut as "connection closed before message completed" too; a server writes a
/// head at once, so on a connection closed while idle that means nothing had arrived.
pub(super) fn closed_before_answer(error: &kube::Error) -> Option<&'static str> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        // A new connection that could not be set up (hyper's own retry of a request a closed
        // pooled connection never sent, then a failed dial or handshake): Go returns the dial
        // error, it does not dial again.
        if e.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(hyper_util::client::legacy::Error::is_connect)
        {
            return None;
        }
        if let Some(h) = e.downcast_ref::<hyper::Error>()
            && h.is_incomplete_message()
        {
            return Some("the server closed a reused connection before answering");
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(io.kind(), std::io::ErrorKind::ConnectionReset)
        {
            return Some("the server reset a reused connection before answering");
        }
        source = e.source();
    }
    None
}

/// An error and its causes, `outer: inner: ...` (kube's own message for a failed send is only
/// "client error (SendRequest)").
pub(super) fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = cause.source();
    }
    text
}

/// An error answer as the client reports it: the `Status` message when there is one.
pub(super) fn status_error(status: http::StatusCode, body: &[u8]) -> String {
    let message = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    format!("{}: {message}", status.as_u16())
}
