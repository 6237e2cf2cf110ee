//! Help, version and usage errors.

use predicates::prelude::*;

use crate::selfhost;

#[test]
fn version_prints_the_package_version() {
    selfhost()
        .arg("--version")
        .assert()
        .success()
        .stdout(predicate::str::starts_with(format!(
            "selfhost {}",
            env!("CARGO_PKG_VERSION")
        )));
}

#[test]
fn every_command_has_help() {
    selfhost()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("manifests").and(predicate::str::contains("demo")))
        .stdout(
            predicate::str::contains("--kubeconfig").and(predicate::str::contains("--context")),
        );
    for (command, mentions) in [("manifests", "--as"), ("demo", "Usage: selfhost demo")] {
        selfhost()
            .args([command, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains(mentions));
    }
}

#[test]
fn usage_errors_exit_2_and_say_what_to_do() {
    let rows: &[(&[&str], &str)] = &[
        (&[], "Usage: selfhost"),
        (&["frobnicate"], "unrecognized subcommand 'frobnicate'"),
        (&["manifests"], "required arguments were not provided"),
        (
            &["manifests", "v1.33.1", "--as", "helm"],
            "possible values: static-pods, daemonsets",
        ),
        (
            &["manifests", "v1.33.1", "-o", "xml"],
            "possible values: text, json, yaml",
        ),
        (
            &["manifests", "v1.33.1", "--no-such-flag"],
            "unexpected argument '--no-such-flag'",
        ),
        (&["checkpoint"], "needs --node NAME"),
        (&["checkpoint", "install"], "--node <NODE>"),
        (
            &[
                "checkpoint",
                "install",
                "--node",
                "cp-1",
                "--timeout",
                "soon",
            ],
            "invalid duration \"soon\"",
        ),
        (
            &["checkpoint", "--node", "cp-1", "--api-grace", "500ms"],
            "shorter than the second a pod's Ready time is known to",
        ),
        (
            &["checkpoint", "--node", "cp-1", "--soak", "soon"],
            "invalid duration \"soon\"",
        ),
        (
            &["checkpoint", "--node", "cp-1", "--interval", "0s"],
            "no time at all",
        ),
    ];
    for (args, says) in rows {
        selfhost()
            .args(*args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(*says));
    }
}
