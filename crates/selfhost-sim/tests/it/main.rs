//! Integration tests of the simulated API server: conformance through kube-rs, and kubectl as an independent real client.

mod common;
mod conformance;
mod kubectl;
