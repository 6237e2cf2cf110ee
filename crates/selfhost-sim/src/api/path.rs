//! What a request addresses and which API verb it is, decoded from method, path and query
//! the way the apiserver's request-info resolver does.

use http::Method;

use super::query::Query;
use crate::error::ApiError;
use crate::resources::{self, ResourceType};
use crate::verb::Verb;

/// A request for a served resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceRequest {
    pub(crate) resource: ResourceType,
    /// The namespace in the path (`None` for cluster-scoped types and all-namespaces paths).
    pub(crate) namespace: Option<String>,
    /// The object name, for item paths.
    pub(crate) name: Option<String>,
    /// The subresource (`status`), if any.
    pub(crate) subresource: Option<String>,
    pub(crate) verb: Verb,
}

impl ResourceRequest {
    /// `pods` or `pods/status`, as metrics and fault rules name it.
    pub(crate) fn resource_name(&self) -> String {
        match &self.subresource {
            Some(s) => format!("{}/{s}", self.resource.plural),
            None => self.resource.plural.to_string(),
        }
    }
}

/// What a path under `/api` or `/apis` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ApiPath {
    /// `/api` or `/apis`.
    Root { core: bool },
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`.
    GroupVersion { group: String, version: String },
    /// A resource collection, object or subresource.
    Resource(ResourceRequest),
}

fn not_found() -> ApiError {
    ApiError::not_found_plain()
}

fn method_not_allowed(method: &Method) -> ApiError {
    ApiError::method_not_allowed(format!(
        "the server does not allow this method on the requested resource ({method})"
    ))
}

/// Decodes a request path (without query) and method.
pub(crate) fn parse(method: &Method, path: &str, query: &Query) -> Result<ApiPath, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api"] => return Ok(ApiPath::Root { core: true }),
        ["apis"] => return Ok(ApiPath::Root { core: false }),
        ["apis", group] => return Ok(ApiPath::Group((*group).to_string())),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(not_found()),
    };
    let lookup = |plural: &str| resources::find(group, version, plural).ok_or_else(not_found);
    let (resource, namespace, name, sub) = match rest {
        [] => {
            return Ok(ApiPath::GroupVersion {
                group: group.to_string(),
                version: version.to_string(),
            });
        }
        ["namespaces", ns, plural, tail @ ..]
            if !matches!(*plural, "status" | "finalize") || !tail.is_empty() =>
        {
            let rt = lookup(plural)?;
            if !rt.namespaced {
                return Err(not_found());
            }
            match tail {
                [] => (rt, Some(*ns), None, None),
                [name] => (rt, Some(*ns), Some(*name), None),
                [name, sub] => (rt, Some(*ns), Some(*name), Some(*sub)),
                _ => return Err(not_found()),
            }
        }
        [plural] => (lookup(plural)?, None, None, None),
        [plural, name] => {
            let rt = lookup(plural)?;
            if rt.namespaced {
                return Err(not_found());
            }
            (rt, None, Some(*name), None)
        }
        [plural, name, sub] => {
            let rt = lookup(plural)?;
            if rt.namespaced {
                return Err(not_found());
            }
            (rt, None, Some(*name), Some(*sub))
        }
        _ => return Err(not_found()),
    };
    if let Some(sub) = sub {
        let known = (sub == "status" && resource.has_status)
            || (sub == "finalize" && resource == resources::NAMESPACES);
        if !known {
            return Err(not_found());
        }
    }
    let watch = matches!(query.get("watch"), Some("true" | "1"));
    let verb = match (name.is_some(), method) {
        (false, &Method::GET) if watch => Verb::Watch,
        (false, &Method::GET) => Verb::List,
        (false, &Method::POST) if namespace.is_some() || !resource.namespaced => Verb::Create,
        (false, &Method::DELETE) => Verb::DeleteCollection,
        (true, &Method::GET) if watch && sub.is_none() => Verb::Watch,
        (true, &Method::GET) => Verb::Get,
        (true, &Method::PUT) => Verb::Update,
        (true, &Method::PATCH) => Verb::Patch,
        (true, &Method::DELETE) if sub.is_none() => Verb::Delete,
        _ => return Err(method_not_allowed(method)),
    };
    Ok(ApiPath::Resource(ResourceRequest {
        resource,
        namespace: namespace.map(str::to_string),
        name: name.map(str::to_string),
        subresource: sub.map(str::to_string),
        verb,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(method: Method, path_and_query: &str) -> Result<ApiPath, ApiError> {
        let (path, q) = path_and_query
            .split_once('?')
            .unwrap_or((path_and_query, ""));
        parse(&method, path, &Query::parse(q))
    }

    fn verb(method: Method, path: &str) -> Option<(Verb, String, Option<String>, Option<String>)> {
        match parsed(method, path).ok()? {
            ApiPath::Resource(r) => Some((r.verb, r.resource_name(), r.namespace, r.name)),
            _ => None,
        }
    }

    #[test]
    fn resource_paths_decode_like_the_apiserver() {
        let s = |x: &str| Some(x.to_string());
        let cases = [
            (
                Method::GET,
                "/api/v1/pods",
                Some((Verb::List, "pods".into(), None, None)),
            ),
            (
                Method::GET,
                "/api/v1/pods?watch=true",
                Some((Verb::Watch, "pods".into(), None, None)),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/kube-system/pods/p1",
                Some((Verb::Get, "pods".into(), s("kube-system"), s("p1"))),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/ns/pods/p1/status",
                Some((Verb::Update, "pods/status".into(), s("ns"), s("p1"))),
            ),
            (
                Method::POST,
                "/apis/apps/v1/namespaces/ns/daemonsets",
                Some((Verb::Create, "daemonsets".into(), s("ns"), None)),
            ),
            (
                Method::DELETE,
                "/apis/apps/v1/namespaces/ns/daemonsets",
                Some((Verb::DeleteCollection, "daemonsets".into(), s("ns"), None)),
            ),
            (
                Method::PATCH,
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
                Some((Verb::Patch, "leases".into(), s("ns"), s("l"))),
            ),
            (
                Method::GET,
                "/api/v1/namespaces/kube-system",
                Some((Verb::Get, "namespaces".into(), None, s("kube-system"))),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/x/status",
                Some((Verb::Update, "namespaces/status".into(), None, s("x"))),
            ),
            (
                Method::PUT,
                "/api/v1/namespaces/x/finalize",
                Some((Verb::Update, "namespaces/finalize".into(), None, s("x"))),
            ),
            (
                Method::PATCH,
                "/api/v1/nodes/n1/status",
                Some((Verb::Patch, "nodes/status".into(), None, s("n1"))),
            ),
            // Namespaced types have no cluster-wide item path; configmaps have no status.
            (Method::GET, "/api/v1/pods/p1", None),
            (
                Method::GET,
                "/api/v1/namespaces/ns/configmaps/c/status",
                None,
            ),
            (Method::GET, "/api/v1/namespaces/ns/nodes", None),
            (Method::GET, "/api/v1/widgets", None),
            (Method::GET, "/apis/apps/v2/daemonsets", None),
        ];
        for (method, path, want) in cases {
            assert_eq!(verb(method.clone(), path), want, "{method} {path}");
        }
    }

    #[test]
    fn wrong_methods_are_405_and_unknown_paths_404() {
        let code = |m: Method, p: &str| parsed(m, p).err().map(|e| e.code);
        assert_eq!(code(Method::PUT, "/api/v1/namespaces/ns/pods"), Some(405));
        assert_eq!(
            code(Method::POST, "/api/v1/namespaces/ns/pods/p"),
            Some(405)
        );
        assert_eq!(code(Method::POST, "/api/v1/pods"), Some(405));
        assert_eq!(code(Method::GET, "/api/v1/widgets"), Some(404));
        assert_eq!(code(Method::GET, "/apis/apps"), None);
    }
}
