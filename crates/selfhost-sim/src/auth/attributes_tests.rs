//! Table-driven tests of how request attributes are read from method, path and query.

use http::Method;

use super::tests::resource;
use super::*;

fn attrs(method: Method, path_and_query: &str) -> Attributes {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    Attributes::of(&method, path, query)
}

#[test]
fn request_attributes_are_read_like_the_apiservers_request_info() {
    let ks = Some("kube-system");
    let rows = [
        (
            Method::GET,
            "/api/v1/namespaces/kube-system/pods",
            resource("list", "", "pods", None, ks, None),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/kube-system/pods?watch=true",
            resource("watch", "", "pods", None, ks, None),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/kube-system/pods?watch=1&fieldSelector=metadata.name%3Dp1",
            resource("watch", "", "pods", None, ks, Some("p1")),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/kube-system/pods/p1",
            resource("get", "", "pods", None, ks, Some("p1")),
        ),
        (
            Method::GET,
            "/api/v1/namespaces/kube-system/pods/p1?watch=true",
            resource("watch", "", "pods", None, ks, Some("p1")),
        ),
        (
            Method::PUT,
            "/api/v1/namespaces/kube-system/pods/p1/status",
            resource("update", "", "pods", Some("status"), ks, Some("p1")),
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/kube-system/pods",
            resource("deletecollection", "", "pods", None, ks, None),
        ),
        (
            Method::DELETE,
            "/api/v1/namespaces/kube-system/pods/p1",
            resource("delete", "", "pods", None, ks, Some("p1")),
        ),
        (
            Method::POST,
            "/apis/apps/v1/namespaces/kube-system/daemonsets",
            resource("create", "apps", "daemonsets", None, ks, None),
        ),
        (
            Method::PATCH,
            "/apis/apps/v1/namespaces/kube-system/daemonsets/d",
            resource("patch", "apps", "daemonsets", None, ks, Some("d")),
        ),
        (
            Method::GET,
            "/api/v1/nodes",
            resource("list", "", "nodes", None, None, None),
        ),
        (
            Method::GET,
            "/apis/apps/v1/daemonsets",
            resource("list", "apps", "daemonsets", None, None, None),
        ),
        (
            Method::PATCH,
            "/api/v1/nodes/n1/status",
            resource("patch", "", "nodes", Some("status"), None, Some("n1")),
        ),
        // A namespace is "in" itself, so a RoleBinding there can grant reading it.
        (
            Method::GET,
            "/api/v1/namespaces/kube-system",
            resource("get", "", "namespaces", None, ks, Some("kube-system")),
        ),
        (
            Method::PUT,
            "/api/v1/namespaces/x/finalize",
            resource(
                "update",
                "",
                "namespaces",
                Some("finalize"),
                Some("x"),
                Some("x"),
            ),
        ),
        (
            Method::GET,
            "/api/v1/namespaces",
            resource("list", "", "namespaces", None, None, None),
        ),
        // Unknown resources are still resource requests: authorization comes before 404.
        (
            Method::GET,
            "/apis/example.com/v1/widgets",
            resource("list", "example.com", "widgets", None, None, None),
        ),
    ];
    for (method, path, want) in rows {
        assert_eq!(attrs(method.clone(), path), want, "{method} {path}");
    }
    let non_resource = [
        (Method::GET, "/readyz", "get", "/readyz"),
        (Method::GET, "/readyz?verbose", "get", "/readyz"),
        (Method::GET, "/version", "get", "/version"),
        (Method::GET, "/api", "get", "/api"),
        (Method::GET, "/apis/apps/v1", "get", "/apis/apps/v1"),
        (Method::POST, "/livez", "post", "/livez"),
    ];
    for (method, path, verb, want_path) in non_resource {
        assert_eq!(
            attrs(method.clone(), path),
            Attributes::NonResource {
                verb: verb.into(),
                path: want_path.into()
            },
            "{method} {path}"
        );
    }
}
