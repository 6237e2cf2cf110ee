//! Taints and tolerations, with upstream's matching rules (`Toleration.ToleratesTaint`,
//! `FindMatchingUntoleratedTaint`, `AddOrUpdateTolerationInPodSpec`) and the well-known taints
//! the node lifecycle controller and kubeadm put on nodes.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::jiff::Timestamp;

use super::clock;

/// Taint effects.
pub mod effect {
    /// New pods are not scheduled unless they tolerate it.
    pub const NO_SCHEDULE: &str = "NoSchedule";
    /// Prefer not to schedule (ignored by filters).
    pub const PREFER_NO_SCHEDULE: &str = "PreferNoSchedule";
    /// Running pods that do not tolerate it are evicted.
    pub const NO_EXECUTE: &str = "NoExecute";
}

/// Taint keys Kubernetes itself uses.
pub mod key {
    /// The node's Ready condition is False.
    pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
    /// The node's Ready condition is Unknown (the kubelet stopped reporting).
    pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
    /// The node is cordoned (`spec.unschedulable`).
    pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
    /// Memory pressure.
    pub const MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
    /// Disk pressure.
    pub const DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
    /// PID pressure.
    pub const PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
    /// The node's network is not configured.
    pub const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";
    /// kubeadm's control-plane taint.
    pub const CONTROL_PLANE: &str = "node-role.kubernetes.io/control-plane";
}

/// Whether a toleration tolerates a taint: same effect (or any, when the toleration's effect is
/// empty), same key (or any, when empty with `Exists`), and equal value for `Equal`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => {
            toleration.value.as_deref().unwrap_or_default()
                == taint.value.as_deref().unwrap_or_default()
        }
        "Exists" => true,
        _ => false,
    }
}

/// The first taint selected by `include` that no toleration tolerates.
pub fn find_untolerated<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    include: impl Fn(&Taint) -> bool,
) -> Option<&'a Taint> {
    taints
        .iter()
        .filter(|t| include(t))
        .find(|taint| !tolerations.iter().any(|tol| tolerates(tol, taint)))
}

/// Whether the taint keeps new pods off the node (`NoSchedule` or `NoExecute`).
pub fn blocks_scheduling(taint: &Taint) -> bool {
    taint.effect == effect::NO_SCHEDULE || taint.effect == effect::NO_EXECUTE
}

/// Whether the taint evicts running pods (`NoExecute`).
pub fn evicts(taint: &Taint) -> bool {
    taint.effect == effect::NO_EXECUTE
}

/// Two tolerations are "the same" when key, operator, value and effect agree; the seconds
/// may differ (upstream `MatchToleration`).
fn same_toleration(a: &Toleration, b: &Toleration) -> bool {
    a.key == b.key && a.operator == b.operator && a.value == b.value && a.effect == b.effect
}

/// Adds a toleration, replacing an existing one that matches it (so a DaemonSet's defaults
/// override a user's `tolerationSeconds` on the same taint, as upstream).
pub fn add_or_update_toleration(tolerations: &mut Vec<Toleration>, toleration: Toleration) {
    if let Some(existing) = tolerations
        .iter_mut()
        .find(|t| same_toleration(t, &toleration))
    {
        *existing = toleration;
    } else {
        tolerations.push(toleration);
    }
}

/// A toleration of every taint with `key` and `effect`, forever.
pub fn exists_toleration(key: &str, effect: &str) -> Toleration {
    Toleration {
        key: Some(key.to_string()),
        operator: Some("Exists".to_string()),
        effect: Some(effect.to_string()),
        ..Toleration::default()
    }
}

/// A taint without value or time.
pub fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.to_string(),
        effect: effect.to_string(),
        ..Taint::default()
    }
}

/// When a pod with these tolerations must be evicted from a node with these taints (the
/// taint-based eviction of the node lifecycle controller): `Some(at)` if a `NoExecute` taint is
/// untolerated (`at` = when it was added, or `now`) or tolerated only for `tolerationSeconds`
/// (the earliest expiry); `None` if the pod may stay forever.
pub fn eviction_time(
    taints: &[Taint],
    tolerations: &[Toleration],
    now: Timestamp,
) -> Option<Timestamp> {
    let mut earliest: Option<Timestamp> = None;
    for taint in taints.iter().filter(|t| evicts(t)) {
        let added = taint.time_added.as_ref().map_or(now, |t| t.0);
        let matching: Vec<&Toleration> =
            tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        let deadline = if matching.is_empty() {
            Some(added)
        } else if matching.iter().any(|t| t.toleration_seconds.is_none()) {
            None
        } else {
            matching
                .iter()
                .filter_map(|t| t.toleration_seconds)
                .min()
                .map(|s| clock::after(added, clock::seconds(s)))
        };
        earliest = clock::earliest(earliest, deadline);
    }
    earliest
}

/// How long until [`eviction_time`], for callers that schedule a wake-up.
pub fn time_until_eviction(
    taints: &[Taint],
    tolerations: &[Toleration],
    now: Timestamp,
) -> Option<Duration> {
    eviction_time(taints, tolerations, now).map(|at| clock::elapsed(now, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn tol(key: &str, op: &str, value: &str, eff: &str) -> Toleration {
        let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Toleration {
            key: opt(key),
            operator: opt(op),
            value: opt(value),
            effect: opt(eff),
            toleration_seconds: None,
        }
    }

    fn valued(key: &str, value: &str, eff: &str) -> Taint {
        Taint {
            value: Some(value.into()),
            ..taint(key, eff)
        }
    }

    #[test]
    fn toleration_matching() {
        let t = valued("dedicated", "db", effect::NO_SCHEDULE);
        let cases = [
            (tol("dedicated", "Equal", "db", "NoSchedule"), true),
            (tol("dedicated", "", "db", ""), true),
            (tol("dedicated", "Equal", "web", "NoSchedule"), false),
            (tol("dedicated", "Exists", "", "NoSchedule"), true),
            (tol("dedicated", "Exists", "", "NoExecute"), false),
            (tol("", "Exists", "", ""), true),
            (tol("other", "Exists", "", ""), false),
            (tol("dedicated", "Gt", "1", ""), false),
        ];
        for (toleration, expected) in cases {
            assert_eq!(tolerates(&toleration, &t), expected, "{toleration:?}");
        }
    }

    #[test]
    fn untolerated_taints_respect_the_filter() {
        let taints = [
            taint(key::CONTROL_PLANE, effect::NO_SCHEDULE),
            taint("soft", effect::PREFER_NO_SCHEDULE),
        ];
        assert_eq!(
            find_untolerated(&taints, &[], blocks_scheduling).map(|t| t.key.as_str()),
            Some(key::CONTROL_PLANE)
        );
        let tolerations = [exists_toleration(key::CONTROL_PLANE, effect::NO_SCHEDULE)];
        assert!(find_untolerated(&taints, &tolerations, blocks_scheduling).is_none());
        assert!(find_untolerated(&taints, &[], evicts).is_none());
    }

    #[test]
    fn add_or_update_replaces_the_same_toleration() {
        let mut tolerations = vec![Toleration {
            toleration_seconds: Some(300),
            ..exists_toleration(key::NOT_READY, effect::NO_EXECUTE)
        }];
        add_or_update_toleration(
            &mut tolerations,
            exists_toleration(key::NOT_READY, effect::NO_EXECUTE),
        );
        add_or_update_toleration(
            &mut tolerations,
            exists_toleration(key::UNREACHABLE, effect::NO_EXECUTE),
        );
        assert_eq!(tolerations.len(), 2);
        assert_eq!(tolerations[0].toleration_seconds, None);
    }

    #[test]
    fn eviction_honours_toleration_seconds() {
        let t0 = Timestamp::from_second(1_000).unwrap();
        let added = Taint {
            time_added: Some(Time(t0)),
            ..taint(key::UNREACHABLE, effect::NO_EXECUTE)
        };
        let forever = exists_toleration(key::UNREACHABLE, effect::NO_EXECUTE);
        let for_300 = Toleration {
            toleration_seconds: Some(300),
            ..forever.clone()
        };
        let now = clock::after(t0, Duration::from_secs(10));
        assert_eq!(
            eviction_time(std::slice::from_ref(&added), &[], now),
            Some(t0)
        );
        assert_eq!(
            eviction_time(
                std::slice::from_ref(&added),
                std::slice::from_ref(&for_300),
                now
            ),
            Some(clock::after(t0, Duration::from_secs(300)))
        );
        assert_eq!(
            time_until_eviction(
                std::slice::from_ref(&added),
                std::slice::from_ref(&for_300),
                now
            ),
            Some(Duration::from_secs(290))
        );
        assert_eq!(eviction_time(&[added], &[forever], now), None);
        assert_eq!(
            eviction_time(&[taint("x", effect::NO_SCHEDULE)], &[], now),
            None
        );
    }
}
