//! Integration tests of the simulated API server: conformance through kube-rs, and kubectl as an independent real client.

// Tests state their expectations with unwrap/expect: a failure is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster;
mod common;
mod conformance;
mod conformance_bodies;
mod conformance_delete;
mod conformance_patch;
mod conformance_server;
mod conformance_tables;
mod conformance_validation;
mod conformance_watch;
mod kubectl;
mod leases;
mod rbac;
