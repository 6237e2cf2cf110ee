//! Progress on stderr as a person at a terminal sees it: through a pseudo-terminal made by
//! util-linux `script`, the live spinner line (erased and redrawn in place) above permanent
//! lines, coloured unless `NO_COLOR` is set. The plain form for pipes is checked by the
//! other tests, which read stderr through a pipe.

use std::process::Output;
use std::time::Duration;

use super::prepull::{cluster, leftovers};

/// Runs `selfhost ARGS` under `script`, which gives it a terminal for stdin, stdout and stderr
/// and copies what it writes there to its own stdout. `None` when `script` is missing.
async fn on_a_terminal(
    kubeconfig: &std::path::Path,
    args: &[&str],
    no_color: bool,
) -> Option<Output> {
    let script = ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())?;
    let binary = assert_cmd::cargo::cargo_bin("selfhost");
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = format!(
        "{} --kubeconfig {}",
        quote(&binary.to_string_lossy()),
        quote(&kubeconfig.to_string_lossy())
    );
    for arg in args {
        line.push(' ');
        line.push_str(&quote(arg));
    }
    let mut command = assert_cmd::Command::new(script);
    command
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env("TERM", "xterm")
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG")
        .timeout(Duration::from_secs(120));
    if no_color {
        command.env("NO_COLOR", "1");
    } else {
        command.env_remove("NO_COLOR");
    }
    Some(
        tokio::task::spawn_blocking(move || command.output())
            .await
            .expect("joined")
            .expect("script runs"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_a_spinner_line_is_redrawn_above_permanent_lines_and_no_color_is_honoured() {
    let sim = cluster(1, true).await;
    let Some(coloured) = on_a_terminal(
        sim.kubeconfig_path(),
        &["plan", "v1.34.0", "--prepull"],
        false,
    )
    .await
    else {
        eprintln!("skipped: util-linux `script` is not installed, so no pseudo-terminal");
        return;
    };
    let text = String::from_utf8_lossy(&coloured.stdout).into_owned();
    assert_eq!(coloured.status.code(), Some(0), "{text}");
    // The live line: erased and redrawn in place, with a spinner frame, the step and its time.
    assert!(text.contains("\r\x1b[2K"), "{text:?}");
    assert!(
        text.contains("\x1b[36m⠋\x1b[0m prepull: creating the prepull DaemonSets"),
        "{text:?}"
    );
    assert!(
        text.contains("prepull: waiting for every node to pull"),
        "{text:?}"
    );
    // Permanent lines each start on an erased line and end with a newline.
    assert!(
        text.contains("\r\x1b[2Kprepull:   removed the prepull DaemonSets and their pods\r\n"),
        "{text:?}"
    );
    // The result still reaches stdout (the same terminal here).
    assert!(text.contains("PASS  images-pullable"), "{text:?}");

    let plain = on_a_terminal(
        sim.kubeconfig_path(),
        &["plan", "v1.34.0", "--prepull"],
        true,
    )
    .await
    .expect("script was there a moment ago");
    let text = String::from_utf8_lossy(&plain.stdout).into_owned();
    assert_eq!(plain.status.code(), Some(0), "{text}");
    assert!(
        text.contains("\r\x1b[2K⠋ prepull: creating the prepull DaemonSets"),
        "still a live line, without colour: {text:?}"
    );
    assert!(
        !text.contains("\x1b[36m") && !text.contains("\x1b[2m"),
        "{text:?}"
    );
    assert_eq!(leftovers(&sim).await, Vec::<String>::new());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_apply_shows_each_components_step_live_and_colours_its_outcome() {
    let sim = cluster(1, true).await;
    let Some(out) = on_a_terminal(
        sim.kubeconfig_path(),
        &["apply", "v1.34.0", "--yes", "--prepull"],
        false,
    )
    .await
    else {
        eprintln!("skipped: util-linux `script` is not installed, so no pseudo-terminal");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        // The live line names the component's current step...
        assert!(
            text.contains(&format!("\x1b[0m {component}: create-backup")),
            "{component}: {text:?}"
        );
        // ... and its end is a permanent line, green.
        let done = text
            .find(&format!("{component}: done after"))
            .unwrap_or_else(|| panic!("{component} done: {text:?}"));
        assert!(
            text[..done].ends_with("s] ") && text[..done].contains("\r\x1b[2K\x1b[32m["),
            "{component}: {text:?}"
        );
    }
    assert!(
        text.contains("\x1b[2K\x1b[36m⠋\x1b[0m prepull: creating the prepull DaemonSets"),
        "{text:?}"
    );
    assert!(
        text.trim_end().ends_with("the control plane runs v1.34.0"),
        "the live line is erased before the result: {text:?}"
    );
    assert_eq!(leftovers(&sim).await, Vec::<String>::new());
    sim.shutdown().await;
}
