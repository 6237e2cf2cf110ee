//! `selfhost demo` as a user runs it: a simulated cluster upgraded while probers of both
//! kinds of client watch, a summary on stdout and an exit code that says whether the API
//! stayed up.

use std::sync::Mutex;
use std::time::Duration;

/// The demos run one at a time: each starts simulated clusters whose Lease clocks and probe
/// rates need the machine's cores more than the other tests do.
pub static ONE_DEMO_AT_A_TIME: Mutex<()> = Mutex::new(());

/// How long one demo may take on a busy machine (it takes 10–30 s).
const DEMO_DEADLINE: Duration = Duration::from_secs(240);

/// What a demo run printed and how it ended.
pub struct DemoRun {
    /// The exit code.
    pub code: Option<i32>,
    /// The summary.
    pub stdout: String,
    /// The progress lines.
    pub stderr: String,
}

/// Runs `selfhost demo --fast` with `args`.
pub fn demo(args: &[&str]) -> DemoRun {
    let _one = ONE_DEMO_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let output = crate::selfhost()
        .args(["demo", "--fast"])
        .args(args)
        .timeout(DEMO_DEADLINE)
        .output()
        .expect("selfhost demo runs");
    DemoRun {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The cells of the summary row whose name starts with `name`.
pub fn row<'a>(stdout: &'a str, name: &str) -> Vec<&'a str> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(name))
        .unwrap_or_else(|| panic!("no {name:?} row in:\n{stdout}"));
    line[name.len()..]
        .split("   ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

/// The failed count of an `ok / failed` cell.
fn failed(cell: &str) -> u64 {
    cell.rsplit('/')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("not an ok / failed count: {cell:?}"))
}

/// The summary's probe rows: reads and writes of each kind of client.
pub const PROBE_ROWS: [&str; 4] = [
    "keep-alive: probe reads ok / failed",
    "keep-alive: probe writes ok / failed",
    "new connections: probe reads ok / failed",
    "new connections: probe writes ok / failed",
];

/// The failed count of the selfhost column of the probe rows, both kinds of client.
pub fn selfhost_failures(stdout: &str) -> u64 {
    PROBE_ROWS.iter().map(|r| failed(row(stdout, r)[0])).sum()
}

/// The measured hand-over model on three nodes whose clients reach the kube-apiservers
/// through the load balancer alone (`--no-front`): zero failed probes for either kind of
/// client, as the engine's own end-to-end tests assert it. A request caught on a keep-alive
/// connection that a stopping apiserver closes is sent again by the prober's transport, as
/// Go's is; the summary counts those apart.
///
/// On several nodes the engine replaces each node's kube-apiserver with no backup there: the
/// stopping process serves through its shutdown delay while the load balancer takes the node
/// out. That holds without a front only; behind one, see the next test.
#[test]
fn three_nodes_upgrade_with_zero_failed_probes_and_a_naive_upgrade_also_finishes() {
    let run = demo(&["--compare-naive", "--no-front"]);
    let shown = format!("stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(0), "{shown}");
    // The engine's progress, as apply prints it.
    assert!(
        run.stderr.contains("kube-apiserver: create-backup:"),
        "{shown}"
    );
    assert!(run.stderr.contains("naive: kubectl set image"), "{shown}");
    let upgrade = row(&run.stdout, "upgrade");
    assert!(upgrade[0].starts_with("done in"), "selfhost: {shown}");
    assert!(upgrade[1].starts_with("done in"), "naive: {shown}");
    for probes in PROBE_ROWS {
        let cells = row(&run.stdout, probes);
        assert_eq!(failed(cells[0]), 0, "selfhost {probes}: {shown}");
    }
    assert_eq!(row(&run.stdout, "API fully down")[0], "never", "{shown}");
    let replayed: u64 = row(
        &run.stdout,
        "keep-alive: probes replayed by the client's transport",
    )[0]
    .parse()
    .expect("a count");
    if replayed > 0 {
        assert!(
            run.stdout
                .contains("Probes sent twice by the client's transport"),
            "the replays are explained: {shown}"
        );
    }
    assert!(
        run.stdout.contains("measured (real-process) hand-overs"),
        "the default model: {shown}"
    );
    let requests: u64 = row(&run.stdout, "API requests by the upgrading client")[0]
        .parse()
        .expect("a count");
    assert!(
        (10..1000).contains(&requests),
        "the tool's own requests, without the prober's thousands: {requests}"
    );
    assert!(run.stdout.contains("verdict: PASS"), "{shown}");
    for component in [
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    ] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.starts_with(component) && l.contains("update-real")),
            "the step timings of {component}: {shown}"
        );
    }
}

/// The default run, behind an API front on each node, on three nodes. A front takes a
/// kube-apiserver out at its first failed check, the moment it is told to stop, although it
/// still serves through its shutdown delay; with no other kube-apiserver on the node (the
/// engine runs no backup there on several nodes) the front holds the connections the load
/// balancer still sends it until the balancer's next check, and closes them unserved after its
/// hold: a client sees its connection reset. Those are the only failures: the upgrade
/// finishes, the API never goes down, and no probe gets an error answer or times out.
#[test]
fn three_nodes_behind_fronts_lose_only_the_connections_sent_before_the_balancer_notices() {
    let run = demo(&[]);
    let shown = format!("stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert!(
        shown.contains("behind an API front on each node"),
        "{shown}"
    );
    let upgrade = row(&run.stdout, "upgrade");
    assert!(upgrade[0].starts_with("done in"), "selfhost: {shown}");
    assert_eq!(row(&run.stdout, "API fully down")[0], "never", "{shown}");
    let reasons: Vec<&str> = run
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Why probes failed"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(
        reasons
            .iter()
            .all(|r| r.contains("Connection reset by peer")),
        "every failed probe is a connection a front closed unserved: {shown}"
    );
    let verdict_ok = if selfhost_failures(&run.stdout) == 0 {
        run.code == Some(0) && run.stdout.contains("verdict: PASS")
    } else {
        run.code == Some(1) && run.stdout.contains("verdict: FAIL")
    };
    assert!(verdict_ok, "the verdict counts them: {shown}");
}

#[test]
fn on_one_node_the_naive_upgrade_deadlocks_and_selfhost_does_not() {
    let run = demo(&["--compare-naive", "--control-plane-nodes", "1"]);
    let shown = format!("stdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(0), "{shown}");
    let upgrade = row(&run.stdout, "upgrade");
    assert!(upgrade[0].starts_with("done in"), "selfhost: {shown}");
    assert!(
        upgrade[1].contains("the API never came back; stopped after"),
        "naive: {shown}"
    );
    let down = row(&run.stdout, "API fully down");
    assert_eq!(down[0], "never", "{shown}");
    assert!(down[1].contains("never back"), "{shown}");
    assert!(
        failed(row(&run.stdout, "keep-alive: probe reads ok / failed")[1]) > 0,
        "{shown}"
    );
    assert!(
        run.stdout.contains("The naive upgrade deadlocked"),
        "{shown}"
    );
}

#[test]
fn versions_outside_the_simulated_registry_are_refused() {
    let _one = ONE_DEMO_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    for args in [
        &["--from", "v1.20.0"][..],
        &["--to", "v1.40.0"][..],
        &["--from", "not-a-version"][..],
        &["--control-plane-nodes", "0"][..],
    ] {
        crate::selfhost()
            .arg("demo")
            .args(args)
            .timeout(Duration::from_secs(30))
            .assert()
            .code(2);
    }
}

/// The power-cut scenario: without the checkpointer a self-hosted control plane never comes
/// back (the simulator's reboot tests show it); with it on each node, the demo's control plane
/// serves again on its checkpoints and hands back to its DaemonSet pods.
#[test]
fn a_power_cut_of_every_node_is_survived_on_the_checkpoints() {
    let run = demo(&["--scenario", "power-cycle", "--control-plane-nodes", "1"]);
    let shown = format!("{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.code, Some(0), "{shown}");
    assert!(run.stdout.contains("verdict: PASS"), "{shown}");
    for said in [
        "every node keeps a checkpoint",
        "activate the checkpoint",
        "retire the static copy",
    ] {
        assert!(run.stderr.contains(said), "{said:?} in {shown}");
    }
    assert!(
        run.stdout.contains("API serving again:") && !run.stdout.contains("never"),
        "{shown}"
    );
}
