//! Black-box tests of the `selfhost` binary.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed expectation is a failed test

mod campaign;
mod convert;
mod demo;
mod hostile;
mod kubectl_apply;
mod manifests;
mod preflight;
mod prepull;
mod progress;
mod rbac;
mod report;
mod resume;
mod signals;
mod sim_command;
mod sim_fidelity;
mod summary;
mod terminals;
mod usage;

use assert_cmd::Command;

/// The binary under test, with a clean environment for the things it reads.
pub fn selfhost() -> Command {
    let mut cmd = Command::cargo_bin("selfhost").expect("binary is built");
    cmd.env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1");
    cmd
}

/// A fixture file shared with the core crate's tests.
pub fn fixture(name: &str) -> String {
    format!(
        "{}/../selfhost-core/tests/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}
