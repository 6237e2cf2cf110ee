//! Handlers of the resource verbs: get, list, create, update, delete, deletecollection (watch
//! and patch have their own modules).

use std::sync::Arc;

use axum::response::Response;
use serde_json::Value;

use super::call::Call;
use super::strict::FieldValidation;
use super::{body, patch, respond, watch};
use crate::error::ApiError;
use crate::resources;
use crate::store::{Deletion, ListOptions, meta};
use crate::verb::Verb;

/// Serves a resource request.
pub(crate) async fn serve(call: Call<'_>) -> Response {
    let result = match call.req.verb {
        Verb::Get => get(&call),
        Verb::List => list(&call),
        Verb::Watch => return watch::serve(&call),
        Verb::Create => create(&call),
        Verb::Update => update(&call),
        Verb::Patch => patch::serve(&call),
        Verb::Delete => delete(&call),
        Verb::DeleteCollection => delete_collection(&call),
    };
    result.unwrap_or_else(|e| respond::error(&e))
}

fn get(call: &Call<'_>) -> Result<Response, ApiError> {
    let rt = &call.req.resource;
    let obj = call.app.store.get(rt, call.namespace(), call.name())?;
    if respond::wants_table(call.headers) {
        let rv = meta::resource_version(&obj)
            .and_then(|r| r.parse().ok())
            .unwrap_or(0);
        let include = call.query.get("includeObject").unwrap_or("Metadata");
        return Ok(respond::table(
            rt,
            &[obj],
            rv,
            respond::Page::default(),
            include,
        ));
    }
    Ok(respond::json(200, &*obj))
}

fn list(call: &Call<'_>) -> Result<Response, ApiError> {
    let rt = &call.req.resource;
    let filter = call.query.filter(rt)?;
    let list = call.app.store.list(
        rt,
        &ListOptions {
            namespace: call.req.namespace.as_deref(),
            filter: filter.as_deref(),
            limit: call.query.number("limit")?,
            continue_token: call.query.get("continue"),
            resource_version: call.query.get("resourceVersion"),
            resource_version_match: call.query.get("resourceVersionMatch"),
        },
    )?;
    if respond::wants_table(call.headers) {
        let include = call.query.get("includeObject").unwrap_or("Metadata");
        return Ok(respond::table(
            rt,
            &list.items,
            list.resource_version,
            respond::Page::of(&list),
            include,
        ));
    }
    Ok(respond::list(rt, &list))
}

fn create(call: &Call<'_>) -> Result<Response, ApiError> {
    let rt = &call.req.resource;
    let directive = FieldValidation::from_query(&call.query, "CreateOptions")?;
    let opts = call.query.write_options(call.user_agent())?;
    let decoded = body::decode_object(rt, call.headers, &call.body, directive)?;
    let created = call
        .app
        .store
        .create(rt, call.namespace(), decoded.object, &opts)?;
    Ok(respond::with_warnings(
        respond::json(201, &*created),
        &decoded.warnings,
    ))
}

fn update(call: &Call<'_>) -> Result<Response, ApiError> {
    let rt = &call.req.resource;
    let directive = FieldValidation::from_query(&call.query, "UpdateOptions")?;
    let opts = call.query.write_options(call.user_agent())?;
    let decoded = body::decode_object(rt, call.headers, &call.body, directive)?;
    let written = call.app.store.update(
        rt,
        call.namespace(),
        call.name(),
        decoded.object,
        call.subresource(),
        &opts,
    )?;
    Ok(respond::with_warnings(
        respond::json(if written.created { 201 } else { 200 }, &*written.object),
        &decoded.warnings,
    ))
}

/// The response to a delete: the object while deletion is pending, and for pods always; a
/// `Status` when the object is gone.
pub(crate) fn deletion_response(rt: &resources::ResourceType, deletion: &Deletion) -> Response {
    match deletion {
        Deletion::Pending(obj) => respond::json(200, &**obj),
        Deletion::Deleted(obj) if *rt == resources::PODS => respond::json(200, &**obj),
        Deletion::Deleted(obj) => respond::json(200, &respond::deleted_status(rt, obj)),
    }
}

fn delete(call: &Call<'_>) -> Result<Response, ApiError> {
    let rt = &call.req.resource;
    let opts = call.query.delete_options(&call.body)?;
    let deletion = call
        .app
        .store
        .delete(rt, call.namespace(), call.name(), &opts)?;
    Ok(deletion_response(rt, &deletion))
}

fn delete_collection(call: &Call<'_>) -> Result<Response, ApiError> {
    let rt = &call.req.resource;
    let filter = call.query.filter(rt)?;
    let opts = call.query.delete_options(&call.body)?;
    let deletions = call.app.store.delete_collection(
        rt,
        &ListOptions {
            namespace: call.req.namespace.as_deref(),
            filter: filter.as_deref(),
            ..ListOptions::default()
        },
        &opts,
    )?;
    let items: Vec<Arc<Value>> = deletions.iter().map(|d| d.object().clone()).collect();
    Ok(respond::plain_list(rt, &items, call.app.store.revision()))
}
