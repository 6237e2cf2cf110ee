//! The attributes an authorizer decides on, read from method, path and query the way the
//! apiserver's request-info resolver reads them — whether or not the resource is served
//! (authorization comes before routing, so an unknown resource is denied before it is 404).

use http::Method;

use crate::api::Query;

/// A request for an API object or collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceAttributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// The API group (`""` for core).
    pub group: String,
    /// The API version.
    pub version: String,
    /// The resource (plural), e.g. `daemonsets`.
    pub resource: String,
    /// The subresource, e.g. `status`.
    pub subresource: Option<String>,
    /// The namespace (`None` for cluster-scoped and all-namespaces requests).
    pub namespace: Option<String>,
    /// The object name (also taken from a `metadata.name=` field selector of a list or watch).
    pub name: Option<String>,
}

/// What a request asks to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attributes {
    /// An API resource request.
    Resource(ResourceAttributes),
    /// Any other path (`/readyz`, `/version`, discovery): the verb is the lower-case method.
    NonResource {
        /// `get`, `post`, ...
        verb: String,
        /// The path, without query.
        path: String,
    },
}

impl Attributes {
    /// The namespace the request is in, if any.
    pub fn namespace(&self) -> Option<&str> {
        match self {
            Attributes::Resource(r) => r.namespace.as_deref(),
            Attributes::NonResource { .. } => None,
        }
    }

    /// The attributes of a request.
    pub fn of(method: &Method, path: &str, query: &str) -> Attributes {
        let query = Query::parse(query);
        let non_resource = || Attributes::NonResource {
            verb: method.as_str().to_ascii_lowercase(),
            path: path.to_string(),
        };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let (group, version, rest) = match parts.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => ("", *version, rest),
            ["apis", group, version, rest @ ..] if !rest.is_empty() => (*group, *version, rest),
            _ => return non_resource(),
        };
        let mut verb = match *method {
            Method::GET | Method::HEAD => "get",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => return non_resource(),
        };
        // `namespaces/<ns>/<resource>/...` is in namespace <ns>; `namespaces/<ns>` and its
        // `status`/`finalize` are the namespace object itself (also "in" <ns>).
        let (namespace, rest) = match rest {
            ["namespaces", ns, tail @ ..]
                if !tail.is_empty() && !matches!(tail[0], "status" | "finalize") =>
            {
                (Some(*ns), tail)
            }
            ["namespaces", ns, ..] => (Some(*ns), rest),
            _ => (None, rest),
        };
        let (resource, name, subresource) = match rest {
            [resource] => (*resource, None, None),
            [resource, name] => (*resource, Some(*name), None),
            [resource, name, sub, ..] => (*resource, Some(*name), Some(*sub)),
            [] => return non_resource(),
        };
        let mut name = name.map(str::to_string);
        let watch = matches!(query.get("watch"), Some("true" | "1"));
        if name.is_none() {
            verb = match verb {
                "get" if watch => "watch",
                "get" => "list",
                "delete" => "deletecollection",
                other => other,
            };
        } else if verb == "get" && watch {
            verb = "watch";
        }
        if matches!(verb, "list" | "watch") && name.is_none() {
            name = field_selector_name(query.get("fieldSelector").unwrap_or(""));
        }
        Attributes::Resource(ResourceAttributes {
            verb: verb.to_string(),
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
            subresource: subresource.map(str::to_string),
            namespace: namespace.map(str::to_string),
            name,
        })
    }
}

/// The name a list or watch is limited to by `metadata.name=<name>` (or `==`), as the
/// apiserver uses it for resourceNames rules.
fn field_selector_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let value = term
            .strip_prefix("metadata.name==")
            .or_else(|| term.strip_prefix("metadata.name="))?;
        (!value.is_empty()).then(|| value.to_string())
    })
}
