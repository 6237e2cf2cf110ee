//! The checkpointer's decisions on one node: what to keep on disk, and when to start it
//! without the API.
//!
//! A self-hosted control plane does not survive a power cut of every node by itself: after a
//! reboot the kubelet starts the static pods of its manifests directory, but learns every
//! other pod only from the API — and the API was one of those pods. A checkpointer on each
//! control-plane node closes that circle. While the API answers, it keeps a copy of this
//! node's DaemonSet pod of each component once that pod has served for a while; when the API
//! has been unreachable for longer than a restart takes and nothing of the component serves
//! on the node, it activates the copy as a static pod; once the API answers again and the
//! DaemonSet pod serves, it retires the copy.
//!
//! [`decide`] is a pure function of a [`NodeCheckpoints`] and a [`CheckpointPolicy`]; the
//! agent reads the node and the API, calls it, performs the returned [`CheckpointStep`] of
//! each component (write a file, move one, remove one), and reads again — at the latest at a
//! wait's `recheck_at`. Nothing is remembered between decisions except what the observation
//! holds, so an agent restarted anywhere continues where it was.
//!
//! # Phases
//!
//! Every component is in exactly one [`CheckpointPhase`] ([`phase()`]), and each phase has one
//! step. `decide.rs` classifies the observation in the order below and gives the step with one
//! `match`.
//!
//! | phase | what is true on the node | step |
//! |---|---|---|
//! | a copy is active: | | |
//! | [`Superseded`](CheckpointPhase::Superseded) | kubeadm's static pod of the component is in the manifests directory | [`Retire`](CheckpointStep::Retire) |
//! | [`TakingOver`](CheckpointPhase::TakingOver) | the API answers, the DaemonSet pod serves (the kube-apiserver by its identity) and, where Leases are read, the copy's mirror pod is shown | [`Retire`](CheckpointStep::Retire) |
//! | [`Activated`](CheckpointPhase::Activated) | the API is unreachable, or the DaemonSet pod does not serve | [`Wait`](CheckpointStep::Wait) |
//! | no copy active, the API answers (with or without kubeadm's static pod beside): | | |
//! | [`HolderGone`](CheckpointPhase::HolderGone) | controller-manager or scheduler: its leader Lease names this node, and every process of it here started after the Lease was acquired or has stopped | [`HandOver`](CheckpointStep::HandOver) |
//! | [`Unserved`](CheckpointPhase::Unserved) | the DaemonSet pod is absent or does not serve | [`Wait`](CheckpointStep::Wait) |
//! | [`Soaking`](CheckpointPhase::Soaking) | the DaemonSet pod has served for less than the soak | [`Wait`](CheckpointStep::Wait) until the soak ends |
//! | [`Keeping`](CheckpointPhase::Keeping) | it has served for the soak; no checkpoint, or one of another revision | [`Keep`](CheckpointStep::Keep) |
//! | [`Kept`](CheckpointPhase::Kept) | it has served for the soak; the checkpoint is of its revision | [`Nothing`](CheckpointStep::Nothing) |
//! | no copy active, the API unreachable: | | |
//! | [`StaticOnNode`](CheckpointPhase::StaticOnNode) | kubeadm's static pod of the component is in the manifests directory | [`Nothing`](CheckpointStep::Nothing) |
//! | [`ServedLocally`](CheckpointPhase::ServedLocally) | a process of the component serves on the node | [`Wait`](CheckpointStep::Wait) |
//! | [`Unkept`](CheckpointPhase::Unkept) | no checkpoint is stored | [`Wait`](CheckpointStep::Wait) |
//! | [`InGrace`](CheckpointPhase::InGrace) | unreachable for less than the grace | [`Wait`](CheckpointStep::Wait) until the grace ends |
//! | [`AwaitingApiServer`](CheckpointPhase::AwaitingApiServer) | controller-manager or scheduler: no kube-apiserver copy active and none serves on the node | [`Wait`](CheckpointStep::Wait) |
//! | [`Orphaned`](CheckpointPhase::Orphaned) | all of the above passed | [`Activate`](CheckpointStep::Activate) |
//!
//! The rules that make it safe follow from the order: a pod is kept only while the API shows
//! it serving, and only after the soak, so a version that never served (a failed upgrade) is
//! never kept; a copy is activated only when the API has been gone for longer than one
//! restart of the kube-apiserver on the node, so an ordinary restart or an upgrade's hand-over
//! never activates one; a copy is retired only once the DaemonSet pod serves (see `leases.rs`
//! for what serving and a stopped leader mean), so the node is never left with neither; and a
//! component that kubeadm's static pod runs again (after a conversion back) is never started
//! twice from an old checkpoint — while a DaemonSet pod
//! serving beside that static pod (a conversion under way) is kept, so that the conversion
//! can wait for its checkpoint before it moves the static manifest aside.

mod checkpointer_pod;
mod decide;
pub mod grant;
mod leader_release;
mod leases;
mod local_endpoint;
mod observation;
mod phase;
mod policy;
mod presence;
mod static_copy;
mod step;
#[cfg(test)]
mod tests;

pub use checkpointer_pod::{
    CHECKPOINT_DIR, CHECKPOINTER_LABEL, CHECKPOINTER_MANIFEST, CHECKPOINTER_NAME, CheckpointTuning,
    CheckpointerPod, KUBELET_KUBECONFIG, is_checkpointer,
};
pub use decide::{decide, next_step, phase};
pub use leader_release::{kubeconfig_on_host, released};
pub use leases::{gone_leader, serving_since};
pub use local_endpoint::{LocalEndpoint, local_endpoint};
pub use observation::{
    ActiveCopy, Api, Checkpoint, ComponentOnNode, NodeCheckpoints, NodeLeases, OtherProcess,
    RunningPod,
};
pub use phase::CheckpointPhase;
pub use policy::{CheckpointPolicy, DEFAULT_API_GRACE, DEFAULT_SOAK, MIN_API_GRACE};
pub use presence::{CheckpointerState, NodeCheckpointer};
pub use static_copy::{copy_name, static_copy};
pub use step::CheckpointStep;
