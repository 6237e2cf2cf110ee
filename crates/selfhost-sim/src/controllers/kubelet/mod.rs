//! The kubelet of each simulated node, as a state machine with injected time.
//!
//! A pod goes through admission, the sandbox (`PodReadyToStartContainers`), its init
//! containers one at a time (`Initialized`), image pull (or `ErrImagePull`/`ImagePullBackOff`
//! when the registry does not know the image), container creation, the process start, and
//! readiness after the readiness delay. A process serves until stopped unless its command line
//! is a one-shot invocation such as `--version`. Processes are
//! modelled apart from pod objects: they hold host ports (with SO_REUSEPORT semantics), crash
//! and restart under the kubelet's crash-loop back-off, and exit after SIGTERM or at SIGKILL
//! when the grace period ends — a Terminating pod's process still holds its ports until then.
//!
//! The wiring feeds a [`Kubelet`] what its watches and manifest directory show, calls
//! [`Kubelet::advance`] at the time the report's `next_wakeup` asks for (or on any change), and
//! writes back the [`KubeletReport`].

mod agent;
mod config;
mod container;
mod duration_text;
mod front_command;
mod images;
mod node;
mod pod;
mod port_table;
mod ports;
mod probe;
mod process;
mod pull;
mod report;
mod runtime;
mod stable_id;
mod static_pods;
mod status;

pub use agent::{Kubelet, NodeState};
pub use config::{KubeletConfig, Timings};
pub use duration_text::{go_duration, parse_go_duration};
pub use front_command::{
    DEFAULT_CHECK_INTERVAL as DEFAULT_FRONT_CHECK_INTERVAL, DEFAULT_DRAIN as DEFAULT_FRONT_DRAIN,
    DEFAULT_HOLD as DEFAULT_FRONT_HOLD, FRONT_BINARY, FRONT_SUBCOMMAND, FrontCommand,
};
pub use images::{
    CONTROL_PLANE_COMPONENTS, DEFAULT_REPOSITORY, ImageBehaviour, ImageRef, InvalidImageName,
    PAUSE_IMAGES, Registry,
};
pub use node::{NODE_LEASE_NAMESPACE, NodeHealth, node_conditions, node_lease, registration};
pub use port_table::{AddressInUse, PortTable};
pub use ports::{
    HostPort, PortClaim, Protocol, binary_name, bool_flag, default_secure_port, flag_value,
    listen_text, port_claim,
};
pub use probe::{BindContext, OwnProcessReadiness, ProbeContext, ProbeResult, ReadinessModel};
pub use process::{Exit, Process, ProcessId, ProcessState};
pub use report::{
    ContainerView, HostMount, KubeletEvent, KubeletReport, PodRef, StatusUpdate, host_mounts,
};
pub use runtime::SIGKILL_EXIT_CODE;
pub use stable_id::{stable_hex, stable_uuid};
pub use static_pods::{
    CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION, CONFIG_SEEN_ANNOTATION,
    CONFIG_SOURCE_ANNOTATION, ManifestError, config_hash, is_mirror_pod, mirror_hash, mirror_pod,
    parse_manifest, static_pod,
};

#[cfg(test)]
mod tests;
