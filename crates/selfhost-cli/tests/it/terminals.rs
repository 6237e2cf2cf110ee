//! Output that stays correct off a terminal: stdout closed early by its reader (`| head -1`),
//! stderr a pipe, and `NO_COLOR`. Escape codes are for a person at a terminal: none at all
//! into a pipe, and no colour for one who set `NO_COLOR` (the live progress line may still
//! redraw itself in place there: that is not colour).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::{SimCluster, SimTimings};

async fn cluster() -> SimCluster {
    SimCluster::builder()
        .control_plane_nodes(1)
        .version("v1.33.1")
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::fast())
        .start()
        .await
        .expect("cluster starts")
}

/// How the reader treats stdout.
#[derive(Clone, Copy)]
enum Reader {
    /// Closes it before the command writes anything (`| true`).
    ClosesAtOnce,
    /// Reads one line, then closes it (`| head -1`).
    HeadOne,
}

/// What a run with its stdout closed early showed.
struct Closed {
    first_line: Option<String>,
    code: Option<i32>,
    stderr: String,
}

/// Runs the binary with `args`, its stdout read as `reader` says.
async fn with_stdout_closed(kubeconfig: &Path, args: &[&str], reader: Reader) -> Closed {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("selfhost"))
            .env("NO_COLOR", "1")
            .env("KUBECONFIG", &kubeconfig)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("selfhost runs");
        let stdout = child.stdout.take().expect("stdout");
        let first_line = match reader {
            Reader::ClosesAtOnce => {
                drop(stdout);
                None
            }
            Reader::HeadOne => {
                let mut line = String::new();
                BufReader::new(stdout)
                    .read_line(&mut line)
                    .expect("first line");
                Some(line)
            }
        };
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut stderr)
            .expect("stderr");
        let status = child.wait().expect("exits");
        Closed {
            first_line,
            code: status.code(),
            stderr,
        }
    })
    .await
    .expect("joined")
}

fn quiet(closed: &Closed, what: &str) {
    assert!(
        !closed.stderr.contains("panicked"),
        "{what}: {}",
        closed.stderr
    );
    assert!(
        !closed.stderr.to_lowercase().contains("broken pipe"),
        "{what}: no complaint about the reader's choice: {}",
        closed.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_piped_into_head_end_quietly_with_their_own_exit_code() {
    let sim = cluster().await;
    let kubeconfig = sim.kubeconfig_path();
    // (command, reader, exit code, what the first line starts with)
    let rows: &[(&[&str], Reader, i32, &str)] = &[
        (&["status"], Reader::HeadOne, 0, "API server "),
        (&["status"], Reader::ClosesAtOnce, 0, ""),
        (&["status", "-o", "json"], Reader::ClosesAtOnce, 0, ""),
        (&["manifests", "v1.34.0"], Reader::HeadOne, 0, "---"),
        (
            &["manifests", "v1.34.0", "--as", "static-pods"],
            Reader::ClosesAtOnce,
            0,
            "",
        ),
        (
            &["plan", "v1.34.0"],
            Reader::HeadOne,
            0,
            "Upgrade to v1.34.0",
        ),
        // A refusal stays a refusal when nobody reads it.
        (&["plan", "v1.31.0"], Reader::ClosesAtOnce, 3, ""),
        (
            &["apply", "v1.31.0", "--yes", "-o", "json"],
            Reader::ClosesAtOnce,
            3,
            "",
        ),
    ];
    for (args, reader, code, first) in rows {
        let closed = with_stdout_closed(kubeconfig, args, *reader).await;
        let what = args.join(" ");
        assert_eq!(closed.code, Some(*code), "{what}: {}", closed.stderr);
        quiet(&closed, &what);
        if let Some(line) = &closed.first_line {
            assert!(line.starts_with(first), "{what}: {line:?}");
        }
    }
    sim.shutdown().await;
}

/// A script that stops reading the event stream does not stop the upgrade half-way: it runs
/// to the end and exits with its outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_whose_event_reader_goes_away_still_finishes() {
    let sim = cluster().await;
    let closed = with_stdout_closed(
        sim.kubeconfig_path(),
        &["apply", "v1.34.0", "--yes", "-o", "json"],
        Reader::HeadOne,
    )
    .await;
    assert_eq!(closed.code, Some(0), "{}", closed.stderr);
    quiet(&closed, "apply -o json | head -1");
    let first: serde_json::Value =
        serde_json::from_str(closed.first_line.as_deref().unwrap_or_default()).expect("JSON");
    assert_eq!(first["event"], "component-started");
    let status = run(sim.kubeconfig_path(), &["status", "-o", "json"], true).await;
    let value: serde_json::Value = serde_json::from_slice(&status.stdout).expect("JSON");
    assert_eq!(value["api"]["git_version"], "v1.34.0", "{value}");
    sim.shutdown().await;
}

/// Runs the binary with stdout and stderr as pipes; `no_color` sets NO_COLOR, else it is
/// removed from the environment.
async fn run(kubeconfig: &Path, args: &[&str], no_color: bool) -> Output {
    let kubeconfig = kubeconfig.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let mut cmd = crate::selfhost();
        if !no_color {
            cmd.env_remove("NO_COLOR");
        }
        cmd.env("KUBECONFIG", kubeconfig)
            .args(&args)
            .timeout(Duration::from_secs(120))
            .output()
            .expect("runs")
    })
    .await
    .expect("joined")
}

fn has_escapes(bytes: &[u8]) -> bool {
    bytes.contains(&0x1b)
}

/// Whether `text` holds a colour or style sequence (SGR: ESC `[` parameters `m`).
fn has_colour(text: &str) -> bool {
    text.split('\u{1b}').skip(1).any(|rest| {
        rest.strip_prefix('[').is_some_and(|params| {
            let end = params.trim_start_matches(|c: char| c.is_ascii_digit() || c == ';');
            end.starts_with('m')
        })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_escape_codes_when_stderr_is_not_a_terminal() {
    let sim = cluster().await;
    let kubeconfig = sim.kubeconfig_path();
    // -vv: the log lines are where colour crept in.
    for args in [
        &["-vv", "status"][..],
        &["-vv", "plan", "v1.34.0"],
        &["-v", "apply", "v1.34.0", "--yes"],
        &["apply", "v1.31.0", "--yes"],
        &["manifests", "v1.34.0", "--config", "/no/such/file"],
    ] {
        let out = run(kubeconfig, args, false).await;
        assert!(
            !has_escapes(&out.stderr) && !has_escapes(&out.stdout),
            "{args:?} wrote escape codes into a pipe:\n{:?}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !out.stderr.is_empty(),
            "{args:?} said something on stderr to check"
        );
    }
    sim.shutdown().await;
}

/// Runs `selfhost args...` with stdout and stderr on a pseudo-terminal (util-linux `script`);
/// returns what the terminal showed, or `None` where `script` is not installed.
fn on_a_terminal(kubeconfig: &Path, args: &str, no_color: bool) -> Option<String> {
    let binary: PathBuf = assert_cmd::cargo::cargo_bin("selfhost");
    let mut cmd = Command::new("script");
    cmd.args(["--quiet", "--return", "--command"])
        .arg(format!("{} {args}", binary.display()))
        .arg("/dev/null")
        .env("KUBECONFIG", kubeconfig)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    if no_color {
        cmd.env("NO_COLOR", "1");
    } else {
        cmd.env_remove("NO_COLOR");
    }
    let out = cmd.output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_color_means_no_colour_even_on_a_terminal() {
    let sim = cluster().await;
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let shown = tokio::task::spawn_blocking(move || {
        (
            on_a_terminal(&kubeconfig, "-vv status", false),
            on_a_terminal(&kubeconfig, "-vv status", true),
            on_a_terminal(&kubeconfig, "-v apply v1.34.0 --yes", true),
        )
    })
    .await
    .expect("joined");
    let (Some(coloured), Some(plain), Some(apply)) = shown else {
        eprintln!("skipping: util-linux `script` is not installed");
        sim.shutdown().await;
        return;
    };
    // The terminal is real: without NO_COLOR the log lines are coloured.
    assert!(has_colour(&coloured), "{coloured:?}");
    assert!(coloured.contains("DEBUG"), "{coloured:?}");
    for (what, text) in [("status", &plain), ("apply", &apply)] {
        assert!(
            !has_colour(text),
            "{what} with NO_COLOR wrote colour to a terminal:\n{text:?}"
        );
    }
    assert!(apply.contains("the control plane runs v1.34.0"), "{apply}");
    sim.shutdown().await;
}
