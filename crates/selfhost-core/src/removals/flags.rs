//! Command-line flags of the control-plane components that a Kubernetes release stopped
//! accepting: the binary exits with `unknown flag` at start, so a template carrying one never
//! becomes Ready. Each row names where its facts come from (release notes and pull requests of
//! kubernetes/kubernetes, cited by number).
//!
//! To extend: for a new minor, read the "Removed" and "Deprecation" sections of its
//! `CHANGELOG-1.N.md` and compare `--help` of each component with the previous minor's; add a
//! row per flag gone, with the minor that no longer accepts it.

use super::{RemovedFlag, m};
use crate::component::Component::{ApiServer, ControllerManager, Scheduler};

/// Every known removal, oldest first.
pub(super) const REMOVED_FLAGS: &[RemovedFlag] = &[
    RemovedFlag {
        component: Scheduler,
        flag: "algorithm-provider",
        removed_in: m(22),
        instead: "scheduler profiles and plugins in the file --config names",
        source: "kubernetes/kubernetes#102239",
    },
    RemovedFlag {
        component: Scheduler,
        flag: "scheduler-name",
        removed_in: m(22),
        instead: "profiles[].schedulerName in the file --config names",
        source: "kubernetes/kubernetes#102805",
    },
    RemovedFlag {
        component: Scheduler,
        flag: "hard-pod-affinity-symmetric-weight",
        removed_in: m(22),
        instead: "the InterPodAffinity plugin's arguments in the file --config names",
        source: "kubernetes/kubernetes#102805",
    },
    RemovedFlag {
        component: Scheduler,
        flag: "policy-config-file",
        removed_in: m(23),
        instead: "a KubeSchedulerConfiguration in the file --config names",
        source: "kubernetes/kubernetes#105424 (CHANGELOG-1.23)",
    },
    RemovedFlag {
        component: Scheduler,
        flag: "policy-configmap",
        removed_in: m(23),
        instead: "a KubeSchedulerConfiguration in the file --config names",
        source: "kubernetes/kubernetes#105424 (CHANGELOG-1.23)",
    },
    RemovedFlag {
        component: Scheduler,
        flag: "policy-configmap-namespace",
        removed_in: m(23),
        instead: "a KubeSchedulerConfiguration in the file --config names",
        source: "kubernetes/kubernetes#105424 (CHANGELOG-1.23)",
    },
    RemovedFlag {
        component: Scheduler,
        flag: "use-legacy-policy-config",
        removed_in: m(23),
        instead: "a KubeSchedulerConfiguration in the file --config names",
        source: "kubernetes/kubernetes#105424 (CHANGELOG-1.23)",
    },
    RemovedFlag {
        component: ApiServer,
        flag: "insecure-port",
        removed_in: m(24),
        instead: "nothing, the insecure port is gone, serve on --secure-port only",
        source: "kubernetes/kubernetes#106859, announced in #95856 (CHANGELOG-1.20)",
    },
    RemovedFlag {
        component: ApiServer,
        flag: "insecure-bind-address",
        removed_in: m(24),
        instead: "nothing, the insecure port is gone, --bind-address serves the secure one",
        source: "kubernetes/kubernetes#106859, announced in #95856 (CHANGELOG-1.20)",
    },
    RemovedFlag {
        component: ApiServer,
        flag: "port",
        removed_in: m(24),
        instead: "--secure-port",
        source: "kubernetes/kubernetes#106859, announced in #95856 (CHANGELOG-1.20)",
    },
    RemovedFlag {
        component: ApiServer,
        flag: "address",
        removed_in: m(24),
        instead: "--bind-address",
        source: "kubernetes/kubernetes#106859, announced in #95856 (CHANGELOG-1.20)",
    },
    RemovedFlag {
        component: ControllerManager,
        flag: "port",
        removed_in: m(24),
        instead: "--secure-port",
        source: "kubernetes/kubernetes#106860, announced in #96216 (CHANGELOG-1.24)",
    },
    RemovedFlag {
        component: ControllerManager,
        flag: "address",
        removed_in: m(24),
        instead: "--bind-address",
        source: "kubernetes/kubernetes#106860, announced in #96216 (CHANGELOG-1.24)",
    },
    RemovedFlag {
        component: Scheduler,
        flag: "port",
        removed_in: m(24),
        instead: "--secure-port",
        source: "kubernetes/kubernetes#96345 (CHANGELOG-1.24)",
    },
    RemovedFlag {
        component: Scheduler,
        flag: "address",
        removed_in: m(24),
        instead: "--bind-address",
        source: "kubernetes/kubernetes#96345 (CHANGELOG-1.24)",
    },
    RemovedFlag {
        component: ApiServer,
        flag: "service-account-api-audiences",
        removed_in: m(25),
        instead: "--api-audiences",
        source: "kubernetes/kubernetes#108624 (CHANGELOG-1.25)",
    },
    RemovedFlag {
        component: ControllerManager,
        flag: "experimental-cluster-signing-duration",
        removed_in: m(25),
        instead: "--cluster-signing-duration",
        source: "kubernetes/kubernetes#108476 (CHANGELOG-1.25)",
    },
    RemovedFlag {
        component: ApiServer,
        flag: "master-service-namespace",
        removed_in: m(27),
        instead: "nothing, it has had no effect since v1.6",
        source: "kubernetes/kubernetes#114446, deprecated in #112797",
    },
    RemovedFlag {
        component: ControllerManager,
        flag: "pod-eviction-timeout",
        removed_in: m(27),
        instead: "kube-apiserver's --default-not-ready-toleration-seconds and \
                  --default-unreachable-toleration-seconds",
        source: "kubernetes/kubernetes#115840, deprecated in #113710",
    },
    RemovedFlag {
        component: ControllerManager,
        flag: "enable-taint-manager",
        removed_in: m(27),
        instead: "nothing, taint-based eviction is always on",
        source: "kubernetes/kubernetes#115840, deprecated in #112312",
    },
    RemovedFlag {
        component: ApiServer,
        flag: "cloud-provider",
        removed_in: m(33),
        instead: "nothing on kube-apiserver, run an external cloud-controller-manager",
        source: "kubernetes/kubernetes#130162, deprecated in #120903",
    },
    RemovedFlag {
        component: ApiServer,
        flag: "cloud-config",
        removed_in: m(33),
        instead: "nothing on kube-apiserver, run an external cloud-controller-manager",
        source: "kubernetes/kubernetes#130162, deprecated in #120903",
    },
];
