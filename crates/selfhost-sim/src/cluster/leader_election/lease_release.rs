//! Whether a stopping leader clears its Lease, by policy and by the component's version.

use crate::cluster::model::{Role, image_version};

/// Whether a stopping leader clears its Lease so that a standby acquires at once.
///
/// In v1.20 neither component does: the measured hand-overs waited for the Lease to expire.
/// kube-scheduler releases it on SIGTERM from v1.21 (it sets client-go's `ReleaseOnCancel`);
/// kube-controller-manager still does not (kubernetes/kubernetes#132599), and neither has a
/// flag for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LeaseRelease {
    /// No process releases its Lease: a standby waits for expiry (v1.20, as measured).
    #[default]
    Never,
    /// As upstream releases do: a kube-scheduler from v1.21 releases, a
    /// kube-controller-manager never does.
    ByVersion,
    /// Every stopping leader releases its Lease.
    Always,
}

impl LeaseRelease {
    /// Whether a stopping leader of `role` running `image` releases its Lease.
    pub fn releases(self, role: Role, image: Option<&str>) -> bool {
        match self {
            LeaseRelease::Never => false,
            LeaseRelease::Always => true,
            LeaseRelease::ByVersion => {
                role == Role::Scheduler
                    && image
                        .and_then(image_version)
                        .is_some_and(|(major, minor, _)| (major, minor) >= (1, 21))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_policies_follow_the_upstream_versions() {
        let sched = |tag: &str| format!("registry.k8s.io/kube-scheduler:{tag}");
        let cm = |tag: &str| format!("registry.k8s.io/kube-controller-manager:{tag}");
        let cases = [
            (
                LeaseRelease::Never,
                Role::Scheduler,
                sched("v1.33.2"),
                false,
            ),
            (
                LeaseRelease::ByVersion,
                Role::Scheduler,
                sched("v1.20.15"),
                false,
            ),
            (
                LeaseRelease::ByVersion,
                Role::Scheduler,
                sched("v1.21.0"),
                true,
            ),
            (
                LeaseRelease::ByVersion,
                Role::ControllerManager,
                cm("v1.33.2"),
                false,
            ),
            (
                LeaseRelease::Always,
                Role::ControllerManager,
                cm("v1.20.15"),
                true,
            ),
        ];
        for (policy, role, image, releases) in cases {
            assert_eq!(
                policy.releases(role, Some(&image)),
                releases,
                "{policy:?} {image}"
            );
        }
    }
}
