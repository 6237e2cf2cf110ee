//! The selfhost engine: connects to a cluster through kube-rs, observes it, and carries out
//! the steps the pure state machine of `selfhost-core` decides on.

pub mod access;
pub mod apply;
pub mod client;
pub mod convert;
mod driver;
pub mod error;
pub mod events;
pub mod execute;
pub mod health;
pub mod identity;
pub mod measure;
pub mod observe;
pub mod outcome;
pub mod permission;
pub mod plan;
pub mod prepull;
pub mod reconnect;
pub mod record;
pub mod retry;
pub mod stopped;
pub mod target;
pub mod upgrade;
pub mod view;

pub use client::{ClientArgs, ClientError, Clients, RequestCount, connect};
pub use error::{ApiCallError, FailureKind};
pub use outcome::ComponentOutcome;
pub use retry::{RetryPolicy, with_retries};
