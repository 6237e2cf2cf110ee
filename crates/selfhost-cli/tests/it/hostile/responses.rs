//! API servers that answer junk, too much, or nothing: the tool must say what it got, stop in
//! bounded time, and never panic.

use std::time::Duration;

use super::server::Junk;
use super::{Case, On};

/// `plan v1.34.0` against a hostile server.
fn plan_against(junk: Junk) -> Case {
    Case::new(&["plan", "v1.34.0"])
        .on(On::Hostile(junk))
        .exits(3)
        .within(Duration::from_secs(60))
}

crate::hostile_cases! {
    api_malformed_json => plan_against(Junk::MalformedJson)
        .says(&["list DaemonSets in kube-system", "does not answer as a Kubernetes API server", "kube-apiserver"]),
    api_truncated_answer => plan_against(Junk::Truncated)
        .says(&["list DaemonSets in kube-system", "check its health"]),
    api_wrong_kind => plan_against(Junk::WrongKind)
        .says(&["list DaemonSets in kube-system", "does not answer as a Kubernetes API server"]),
    api_enormous_answer => plan_against(Junk::Enormous)
        .says(&["list DaemonSets in kube-system", "does not answer as a Kubernetes API server"]),
    api_endless_answer => plan_against(Junk::Endless)
        .says(&["list DaemonSets in kube-system", "larger than 64 MiB", "does not answer as a Kubernetes API server"]),
    api_silent_beyond_the_deadline => plan_against(Junk::Silent)
        .says(&["no answer within 10s", "does not answer them", "readyz"]),
    api_health_silent => plan_against(Junk::SilentHealth)
        .says(&["cannot reach the API server", "does not answer", "overloaded"]),
    api_is_a_web_page => plan_against(Junk::WebPage)
        .says(&["does not answer as a Kubernetes API server", "not a proxy or web page"]),
    api_refuses_every_credential => Case::new(&["status"])
        .on(On::Hostile(Junk::Unauthorized))
        .exits(2)
        .says(&["refused the credentials", "401", "get a fresh kubeconfig"]),
    api_forbids_the_daemonsets => Case::new(&["apply", "v1.34.0", "--yes"])
        .on(On::Hostile(Junk::Forbidden))
        .exits(3)
        .says(&["403", "may not list DaemonSets in kube-system", "role"]),
    api_server_errors => plan_against(Junk::ServerError)
        .says(&["500", "after 8 attempts", "check its health"]),
}
