//! Update strategies the pivot writes, and how they read.

use k8s_openapi::api::apps::v1::DaemonSetUpdateStrategy;

/// The strategy under which the DaemonSet controller replaces no pod by itself.
pub(super) fn on_delete() -> DaemonSetUpdateStrategy {
    DaemonSetUpdateStrategy {
        type_: Some("OnDelete".to_string()),
        rolling_update: None,
    }
}

/// The strategy in words, e.g. `RollingUpdate (maxUnavailable 1)`.
pub fn describe_strategy(strategy: &DaemonSetUpdateStrategy) -> String {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let kind = strategy.type_.as_deref().unwrap_or("RollingUpdate");
    let Some(rolling) = strategy.rolling_update.as_ref() else {
        return kind.to_string();
    };
    let show = |v: &IntOrString| match v {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    };
    let mut params = Vec::new();
    if let Some(v) = &rolling.max_unavailable {
        params.push(format!("maxUnavailable {}", show(v)));
    }
    if let Some(v) = &rolling.max_surge {
        params.push(format!("maxSurge {}", show(v)));
    }
    if params.is_empty() {
        kind.to_string()
    } else {
        format!("{kind} ({})", params.join(", "))
    }
}
