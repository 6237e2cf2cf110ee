//! Lists: consistent snapshots at a revision (rebuilt from the event history, the way etcd
//! serves an old revision), `limit`/`continue` paging and the resourceVersion semantics.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::meta;
use super::state::State;
use crate::error::ApiError;
use crate::resources::ResourceType;

/// A predicate over objects (selectors, compiled by the caller).
pub type ObjectFilter = dyn Fn(&Value) -> bool + Send + Sync;

/// What to list.
#[derive(Clone, Copy, Default)]
pub struct ListOptions<'a> {
    /// Only this namespace; `None` lists every namespace (and cluster-scoped types).
    pub namespace: Option<&'a str>,
    /// Only objects it accepts; `None` is everything.
    pub filter: Option<&'a ObjectFilter>,
    /// At most this many items (0 or `None`: no limit).
    pub limit: Option<usize>,
    /// The `continue` token of the previous page.
    pub continue_token: Option<&'a str>,
    /// `resourceVersion` parameter.
    pub resource_version: Option<&'a str>,
    /// `resourceVersionMatch` parameter (`Exact`, `NotOlderThan`).
    pub resource_version_match: Option<&'a str>,
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct ObjectList {
    /// The items, ordered by namespace then name.
    pub items: Vec<Arc<Value>>,
    /// The revision the list is consistent with (`metadata.resourceVersion`).
    pub resource_version: u64,
    /// Token for the next page, if there is one.
    pub continue_token: Option<String>,
    /// How many items follow, when no selector filtered the list (as the apiserver reports).
    pub remaining_item_count: Option<u64>,
}

type Key = (String, String);

fn encode_continue(revision: u64, last: &Key) -> String {
    let token = json!({
        "v": "meta.k8s.io/v1",
        "rv": revision,
        "start": format!("{}/{}\u{0}", last.0, last.1),
    });
    STANDARD.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, Key), ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let bytes = STANDARD
        .decode(token)
        .map_err(|_| bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad("invalid json"))?;
    if v.get("v").and_then(Value::as_str) != Some("meta.k8s.io/v1") {
        return Err(bad("server does not recognize this encoded key"));
    }
    let rv = v
        .get("rv")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("no resource version"))?;
    let start = v
        .get("start")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no start key"))?;
    let start = start.strip_suffix('\u{0}').unwrap_or(start);
    let (ns, name) = start
        .split_once('/')
        .ok_or_else(|| bad("malformed start key"))?;
    Ok((rv, (ns.to_string(), name.to_string())))
}

fn parse_revision(rv: &str) -> Result<u64, ApiError> {
    rv.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "resourceVersion: Invalid value: \"{rv}\": invalid resource version"
        ))
    })
}

/// The revision a list is served at.
fn list_revision(state: &State, opts: &ListOptions<'_>) -> Result<(u64, Option<Key>), ApiError> {
    if let Some(token) = opts.continue_token.filter(|t| !t.is_empty()) {
        let (rv, after) = decode_continue(token)?;
        if rv < state.oldest_servable() {
            return Err(ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
            ));
        }
        return Ok((rv.min(state.revision), Some(after)));
    }
    let rv = match opts.resource_version.filter(|r| !r.is_empty()) {
        None => return Ok((state.revision, None)),
        Some(rv) => parse_revision(rv)?,
    };
    if rv > state.revision {
        return Err(ApiError::too_large_resource_version(rv, state.revision));
    }
    if opts.resource_version_match == Some("Exact") {
        if rv == 0 {
            return Err(ApiError::bad_request(
                "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        if rv < state.oldest_servable() {
            return Err(ApiError::expired(
                "The resourceVersion for the provided list is too old.",
            ));
        }
        return Ok((rv, None));
    }
    // "0" (any) and NotOlderThan: the newest state satisfies both.
    Ok((state.revision, None))
}

/// Lists objects of one type.
pub(crate) fn list(
    state: &State,
    rt: &ResourceType,
    opts: &ListOptions<'_>,
) -> Result<ObjectList, ApiError> {
    let (at, after) = list_revision(state, opts)?;
    let lower: Bound<Key> = match (&after, opts.namespace) {
        (Some(k), Some(ns)) if k.0.as_str() < ns => {
            Bound::Included((ns.to_string(), String::new()))
        }
        (Some(k), _) => Bound::Excluded(k.clone()),
        (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
        (None, None) => Bound::Unbounded,
    };
    let range = (lower, Bound::Unbounded);
    // The state at `at`: the current objects, overridden by what the history says they were.
    let mut overrides: BTreeMap<Key, Option<Arc<Value>>> = BTreeMap::new();
    if at < state.revision {
        let events = state.events_after(at).ok_or_else(|| {
            ApiError::expired("The resourceVersion for the provided list is too old.")
        })?;
        for e in events.filter(|e| e.resource == *rt) {
            let key = (
                meta::namespace(&e.object).to_string(),
                meta::name(&e.object).to_string(),
            );
            overrides.entry(key).or_insert_with(|| e.previous.clone());
        }
    }
    let mut current = state.objects(rt).range(range.clone()).peekable();
    let mut past = overrides.range(range).peekable();
    let limit = opts.limit.filter(|l| *l > 0).unwrap_or(usize::MAX);
    let mut items = Vec::new();
    let mut last: Option<Key> = None;
    let mut more = false;
    let mut remaining = 0u64;
    loop {
        let next = match (current.peek(), past.peek()) {
            (None, None) => break,
            (Some((ck, _)), Some((pk, _))) if ck == pk => {
                current.next();
                past.next().map(|(k, v)| (k, v.clone()))
            }
            (Some((ck, _)), Some((pk, _))) if pk < ck => past.next().map(|(k, v)| (k, v.clone())),
            (Some(_), _) => current.next().map(|(k, v)| (k, Some(v.clone()))),
            (None, Some(_)) => past.next().map(|(k, v)| (k, v.clone())),
        };
        let Some((key, obj)) = next else { break };
        if let Some(ns) = opts.namespace
            && key.0 != ns
        {
            break;
        }
        let Some(obj) = obj else { continue };
        if opts.filter.is_some_and(|f| !f(&obj)) {
            continue;
        }
        if items.len() == limit {
            more = true;
            remaining += 1;
            if opts.filter.is_some() {
                break;
            }
            continue;
        }
        last = Some(key.clone());
        items.push(obj);
    }
    let continue_token = match (more, &last) {
        (true, Some(last)) => Some(encode_continue(at, last)),
        _ => None,
    };
    Ok(ObjectList {
        items,
        resource_version: at,
        continue_token,
        remaining_item_count: (more && opts.filter.is_none()).then_some(remaining),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let t = encode_continue(42, &("kube-system".into(), "p-1".into()));
        assert_eq!(
            decode_continue(&t).unwrap(),
            (42, ("kube-system".into(), "p-1".into()))
        );
        for bad in ["", "!!!", &STANDARD.encode("{\"v\":\"x\"}")] {
            assert_eq!(decode_continue(bad).unwrap_err().code, 400, "{bad}");
        }
    }
}
