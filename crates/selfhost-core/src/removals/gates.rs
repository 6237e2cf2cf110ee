//! Feature gates a Kubernetes release stopped recognising (the component exits with
//! `unrecognized feature gate` at start) and gates locked to their value (setting the other
//! value is refused at start; setting the locked one is accepted with a warning until the gate
//! is removed). The kube-apiserver, the controller-manager and the scheduler register the same
//! gates, so every row concerns all three.
//!
//! Sources, named per row:
//! - `website-removed`: kubernetes/website, the table of removed feature gates; the release a
//!   gate is removed in is the one after the last release the table lists it in.
//! - `website-gate`: kubernetes/website, the gate's own page (`removed: true`, and the last
//!   release of its stages); removed in the release after.
//! - `kube-features`: kubernetes/kubernetes `pkg/features/kube_features.go`, the gate's
//!   versioned spec with `LockToDefault: true` (locked from the release it became GA or
//!   deprecated in).
//!
//! To extend: for a new minor, compare `kube_features.go` with the previous minor's (gates
//! dropped, specs that gained `LockToDefault`) and read the release's feature-gate pages; add
//! rows with their source.

use super::{LockedGate, RemovedGate, m};

/// Every known removal, by release.
pub(super) const REMOVED_GATES: &[RemovedGate] = &[
    RemovedGate {
        gate: "CSIMigrationOpenStack",
        removed_in: m(26),
        source: "website-removed",
    },
    RemovedGate {
        gate: "CSRDuration",
        removed_in: m(26),
        source: "website-removed",
    },
    RemovedGate {
        gate: "DynamicKubeletConfig",
        removed_in: m(26),
        source: "website-removed",
    },
    RemovedGate {
        gate: "IndexedJob",
        removed_in: m(26),
        source: "website-removed",
    },
    RemovedGate {
        gate: "SuspendJob",
        removed_in: m(26),
        source: "website-removed",
    },
    RemovedGate {
        gate: "PodOverhead",
        removed_in: m(26),
        source: "website-removed",
    },
    RemovedGate {
        gate: "NonPreemptingPriority",
        removed_in: m(26),
        source: "website-removed",
    },
    RemovedGate {
        gate: "CSIMigration",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "CSIMigrationAWS",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "CSIMigrationAzureDisk",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "CSIInlineVolume",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "EphemeralContainers",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "ExpandCSIVolumes",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "ExpandInUsePersistentVolumes",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "ExpandPersistentVolumes",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "IdentifyPodOS",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "LocalStorageCapacityIsolation",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "NetworkPolicyEndPort",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "StatefulSetMinReadySeconds",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "ControllerManagerLeaderMigration",
        removed_in: m(27),
        source: "website-removed",
    },
    RemovedGate {
        gate: "AdvancedAuditing",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "CSIMigrationGCE",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "CSIStorageCapacity",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "DelegateFSGroupToCSIDriver",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "DevicePlugins",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "DisableAcceleratorUsageMetrics",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "DryRun",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "EndpointSliceTerminatingCondition",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "MixedProtocolLBService",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "PodSecurity",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "ServiceIPStaticSubrange",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "ServiceInternalTrafficPolicy",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "WindowsHostProcessContainers",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "NetworkPolicyStatus",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "PodHasNetworkCondition",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "UserNamespacesStatelessPodsSupport",
        removed_in: m(28),
        source: "website-removed",
    },
    RemovedGate {
        gate: "CSIMigrationvSphere",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "CronJobTimeZone",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "DaemonSetUpdateSurge",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "DownwardAPIHugePages",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "GRPCContainerProbe",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "JobMutableNodeSchedulingDirectives",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "JobTrackingWithFinalizers",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "KubeletCredentialProviders",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "LegacyServiceAccountTokenNoAutoGeneration",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "OpenAPIV3",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "ProbeTerminationGracePeriod",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "RetroactiveDefaultStorageClass",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "SeccompDefault",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "TopologyManager",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "MultiCIDRRangeAllocator",
        removed_in: m(29),
        source: "website-removed",
    },
    RemovedGate {
        gate: "LegacyServiceAccountTokenTracking",
        removed_in: m(30),
        source: "website-gate",
    },
    RemovedGate {
        gate: "ProxyTerminatingEndpoints",
        removed_in: m(30),
        source: "website-gate",
    },
    RemovedGate {
        gate: "ExpandedDNSConfig",
        removed_in: m(30),
        source: "website-gate",
    },
    RemovedGate {
        gate: "CSIMigrationAzureFile",
        removed_in: m(30),
        source: "website-gate",
    },
    RemovedGate {
        gate: "APIPriorityAndFairness",
        removed_in: m(31),
        source: "website-gate",
    },
    RemovedGate {
        gate: "JobReadyPods",
        removed_in: m(31),
        source: "website-gate",
    },
    RemovedGate {
        gate: "ReadWriteOncePod",
        removed_in: m(31),
        source: "website-gate",
    },
    RemovedGate {
        gate: "ServiceNodePortStaticSubrange",
        removed_in: m(31),
        source: "website-gate",
    },
    RemovedGate {
        gate: "CustomResourceValidationExpressions",
        removed_in: m(31),
        source: "website-gate",
    },
    RemovedGate {
        gate: "CSIMigrationRBD",
        removed_in: m(31),
        source: "website-gate",
    },
    RemovedGate {
        gate: "ValidatingAdmissionPolicy",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "PodHostIPs",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "MinDomainsInPodTopologySpread",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "ServerSideApply",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "KMSv2",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "HPAContainerMetrics",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "StableLoadBalancerNodeSet",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "CloudDualStackNodeIPs",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "LegacyServiceAccountTokenCleanUp",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "NodeOutOfServiceVolumeDetach",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "ZeroLimitedNominalConcurrencyShares",
        removed_in: m(32),
        source: "website-gate",
    },
    RemovedGate {
        gate: "DisableCloudProviders",
        removed_in: m(33),
        source: "website-gate; kubernetes/kubernetes#130162",
    },
    RemovedGate {
        gate: "DisableKubeletCloudCredentialProviders",
        removed_in: m(33),
        source: "website-gate; kubernetes/kubernetes#130162",
    },
    RemovedGate {
        gate: "APIListChunking",
        removed_in: m(33),
        source: "website-gate",
    },
    RemovedGate {
        gate: "AppArmor",
        removed_in: m(33),
        source: "website-gate",
    },
    RemovedGate {
        gate: "AdmissionWebhookMatchConditions",
        removed_in: m(33),
        source: "website-gate",
    },
    RemovedGate {
        gate: "PDBUnhealthyPodEvictionPolicy",
        removed_in: m(33),
        source: "website-gate",
    },
    RemovedGate {
        gate: "KubeProxyDrainingTerminatingNodes",
        removed_in: m(33),
        source: "website-gate",
    },
    RemovedGate {
        gate: "PersistentVolumeLastPhaseTransitionTime",
        removed_in: m(33),
        source: "website-gate",
    },
    RemovedGate {
        gate: "DevicePluginCDIDevices",
        removed_in: m(34),
        source: "website-gate",
    },
    RemovedGate {
        gate: "AllowServiceLBStatusOnNonLB",
        removed_in: m(35),
        source: "website-gate",
    },
];

/// Gates locked to a value, by the release that locked them.
pub(super) const LOCKED_GATES: &[LockedGate] = &[
    LockedGate {
        gate: "PodSchedulingReadiness",
        locked_in: m(30),
        value: true,
        source: "kube-features; website-gate",
    },
    LockedGate {
        gate: "ElasticIndexedJob",
        locked_in: m(31),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "LogarithmicScaleDown",
        locked_in: m(31),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "PodDisruptionConditions",
        locked_in: m(31),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "StatefulSetStartOrdinal",
        locked_in: m(31),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "CronJobsScheduledAnnotation",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "PodIndexLabel",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "StatefulSetAutoDeletePVC",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "MemoryManager",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "LoadBalancerIPMode",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "SizeMemoryBackedVolumes",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "RetryGenerateName",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "CustomResourceFieldSelectors",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "StrictCostEnforcementForVAP",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "StrictCostEnforcementForWebhooks",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "StructuredAuthorizationConfiguration",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "ServiceAccountTokenJTI",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "ServiceAccountTokenNodeBindingValidation",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "ServiceAccountTokenPodNodeInfo",
        locked_in: m(32),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "AllowServiceLBStatusOnNonLB",
        locked_in: m(32),
        value: false,
        source: "kube-features; website-gate",
    },
    LockedGate {
        gate: "AnyVolumeDataSource",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "CPUManagerPolicyOptions",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "CRDValidationRatcheting",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "CSIMigrationPortworx",
        locked_in: m(33),
        value: true,
        source: "kube-features; website-gate",
    },
    LockedGate {
        gate: "BtreeWatchCache",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "HonorPVReclaimPolicy",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "JobBackoffLimitPerIndex",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "JobSuccessPolicy",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "MatchLabelKeysInPodAffinity",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "NFTablesProxyMode",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "NodeInclusionPolicyInPodTopologySpread",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "RecursiveReadOnlyMounts",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "ServiceAccountTokenNodeBinding",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "ServiceTrafficDistribution",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "SidecarContainers",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "TopologyAwareHints",
        locked_in: m(33),
        value: true,
        source: "kube-features",
    },
    LockedGate {
        gate: "WatchFromStorageWithoutResourceVersion",
        locked_in: m(33),
        value: false,
        source: "kube-features",
    },
];
