//! The phases of one component's conversion on one node, read from one observation.

use serde::{Serialize, Serializer};

/// Where one component's conversion stands on one node, and so which decision its next step
/// comes from ([`super::next_step`], classified by [`super::phase()`]).
///
/// To self-hosted, a node moves through [`CreatingDaemonSet`](ConvertPhase::CreatingDaemonSet)
/// → [`GatingDaemonSet`](ConvertPhase::GatingDaemonSet) (an existing DaemonSet not gated yet)
/// → [`LabellingNode`](ConvertPhase::LabellingNode) →
/// [`StartingDaemonSetPod`](ConvertPhase::StartingDaemonSetPod) →
/// [`RetiringStaticPod`](ConvertPhase::RetiringStaticPod); to static, through
/// [`GatingDaemonSet`](ConvertPhase::GatingDaemonSet) →
/// [`WritingManifest`](ConvertPhase::WritingManifest) →
/// [`StartingStaticPod`](ConvertPhase::StartingStaticPod) →
/// [`RetiringDaemonSetPod`](ConvertPhase::RetiringDaemonSetPod). A failure puts the node back
/// ([`RestoringStatic`](ConvertPhase::RestoringStatic),
/// [`RestoringSelfHosted`](ConvertPhase::RestoringSelfHosted)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConvertPhase {
    /// To self-hosted: the static manifest is on disk and no DaemonSet is there to take over
    /// (or an old one is being deleted): it is created.
    CreatingDaemonSet,
    /// Either way: the DaemonSet runs on any node its selector allows. Every node that runs
    /// one of its pods is labelled, then its template is made to require the node label.
    GatingDaemonSet,
    /// To self-hosted: the gated DaemonSet exists and the node does not carry its label: it
    /// is labelled, so that the DaemonSet pod starts there.
    LabellingNode,
    /// To self-hosted: the node is labelled; the DaemonSet pod starts beside the static pod
    /// (the static pod restarted with port sharing first if it has none), and once it serves,
    /// the static manifest moves aside.
    StartingDaemonSetPod,
    /// To self-hosted: the static manifest is moved aside; the static pod stops and the
    /// DaemonSet pod serves alone. Done.
    RetiringStaticPod,
    /// To self-hosted: the node has no static manifest, on disk or moved aside. Done if the
    /// DaemonSet pod serves alone there; refused otherwise.
    NoStaticManifest,
    /// To self-hosted, after a failure: the static pod comes back and the DaemonSet pod leaves
    /// the node.
    RestoringStatic,
    /// To static: no DaemonSet. Done once the static pod serves; refused without a manifest.
    NoDaemonSet,
    /// To static: the gated DaemonSet runs and no static manifest is on disk: it is written.
    WritingManifest,
    /// To static: the manifest is written and the node still labelled; the static pod starts
    /// beside the DaemonSet pod, and once it serves, the node's label is removed.
    StartingStaticPod,
    /// To static: the node's label is removed; the DaemonSet controller retires its pod there,
    /// and the DaemonSet is deleted once no node runs it. Done.
    RetiringDaemonSetPod,
    /// To static, after a failure: the DaemonSet pod comes back and the static manifest goes.
    RestoringSelfHosted,
}

impl ConvertPhase {
    /// Every phase: towards self-hosted, the one shared, then towards static.
    pub const ALL: [ConvertPhase; 12] = [
        ConvertPhase::CreatingDaemonSet,
        ConvertPhase::LabellingNode,
        ConvertPhase::StartingDaemonSetPod,
        ConvertPhase::RetiringStaticPod,
        ConvertPhase::NoStaticManifest,
        ConvertPhase::RestoringStatic,
        ConvertPhase::GatingDaemonSet,
        ConvertPhase::NoDaemonSet,
        ConvertPhase::WritingManifest,
        ConvertPhase::StartingStaticPod,
        ConvertPhase::RetiringDaemonSetPod,
        ConvertPhase::RestoringSelfHosted,
    ];

    /// A stable kebab-case name, for events and reports.
    pub fn name(self) -> &'static str {
        match self {
            ConvertPhase::CreatingDaemonSet => "creating-daemonset",
            ConvertPhase::GatingDaemonSet => "gating-daemonset",
            ConvertPhase::LabellingNode => "labelling-node",
            ConvertPhase::StartingDaemonSetPod => "starting-daemonset-pod",
            ConvertPhase::RetiringStaticPod => "retiring-static-pod",
            ConvertPhase::NoStaticManifest => "no-static-manifest",
            ConvertPhase::RestoringStatic => "restoring-static",
            ConvertPhase::NoDaemonSet => "no-daemonset",
            ConvertPhase::WritingManifest => "writing-manifest",
            ConvertPhase::StartingStaticPod => "starting-static-pod",
            ConvertPhase::RetiringDaemonSetPod => "retiring-daemonset-pod",
            ConvertPhase::RestoringSelfHosted => "restoring-self-hosted",
        }
    }

    /// A few words an operator reads: what the conversion is doing on the node.
    pub fn describe(self) -> &'static str {
        match self {
            ConvertPhase::CreatingDaemonSet => "creating the self-hosted DaemonSet",
            ConvertPhase::GatingDaemonSet => "making the DaemonSet run only on labelled nodes",
            ConvertPhase::LabellingNode => "labelling the node for the DaemonSet",
            ConvertPhase::StartingDaemonSetPod => {
                "starting the DaemonSet pod beside the static pod"
            }
            ConvertPhase::RetiringStaticPod => "retiring the static pod",
            ConvertPhase::NoStaticManifest => "no static manifest to convert",
            ConvertPhase::RestoringStatic => "putting the static pod back",
            ConvertPhase::NoDaemonSet => "no DaemonSet left: the static pod runs",
            ConvertPhase::WritingManifest => "writing the static manifest",
            ConvertPhase::StartingStaticPod => "starting the static pod beside the DaemonSet pod",
            ConvertPhase::RetiringDaemonSetPod => "retiring the DaemonSet pod",
            ConvertPhase::RestoringSelfHosted => "putting the DaemonSet pod back",
        }
    }
}

/// Serialised as its [`name`](ConvertPhase::name).
impl Serialize for ConvertPhase {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}
