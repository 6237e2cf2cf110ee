//! Hostile input, one named test per case: bad versions, version-skew violations, files that
//! are not kubeadm configurations, broken kubeconfigs, API servers that answer junk or
//! nothing, and DaemonSets edited by hand into odd shapes.
//!
//! Every case runs the real binary and checks what an operator would: a message that names
//! the problem and the fix (key words), the exit code of docs/design.md, no panic, no escape
//! codes, and — where there is a cluster — nothing changed in it.

mod configs;
mod daemonsets;
mod kubeconfigs;
mod responses;
pub mod server;
mod skew;
pub mod snapshot;
mod versions;

use std::path::Path;
use std::process::Output;
use std::sync::LazyLock;
use std::time::{Duration, Instant};

use selfhost_sim::bootstrap::BootstrapMode;
use selfhost_sim::controllers::kubelet::ImageBehaviour;
use selfhost_sim::{SimCluster, SimTimings};

use self::server::{HostileServer, Junk};
use self::snapshot::{Snapshot, assert_unchanged, snapshot};

/// Longest any one case may run; the tool must give up on a dead or silent server well
/// before this.
const RUN_LIMIT: Duration = Duration::from_secs(150);

/// The runtime that serves the shared clusters and hostile servers while cases run their
/// binaries from plain test threads.
static SUPPORT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("support runtime")
});

/// A simulated cluster shared by every case that only reads it (none may change it, which is
/// what each case checks).
struct Shared {
    cluster: SimCluster,
}

fn start_shared(tls: bool) -> Shared {
    let cluster = SUPPORT.block_on(async {
        SimCluster::builder()
            .control_plane_nodes(1)
            .version("v1.33.1")
            .mode(BootstrapMode::SelfHosted)
            .port_sharing(true)
            .timings(SimTimings::fast())
            .tls(tls)
            .start()
            .await
            .expect("cluster starts")
    });
    Shared { cluster }
}

static PLAIN: LazyLock<Shared> = LazyLock::new(|| start_shared(false));
static TLS: LazyLock<Shared> = LazyLock::new(|| start_shared(true));

/// Where a case runs.
#[derive(Clone, Copy)]
pub enum On {
    /// No cluster: the kubeconfig names a file that does not exist.
    Nothing,
    /// The shared plain-HTTP simulator.
    Sim,
    /// The shared simulator that serves HTTPS and wants a bearer token.
    TlsSim,
    /// A hostile server.
    Hostile(Junk),
}

/// A kubeconfig rewrite: the simulator's kubeconfig in, the case's out.
type Rewrite = fn(&str) -> String;

/// One hostile case.
pub struct Case {
    args: Vec<String>,
    on: On,
    rewrite: Option<Rewrite>,
    file: Option<Vec<u8>>,
    sparse_file: Option<u64>,
    code: i32,
    says: Vec<&'static str>,
    within: Option<Duration>,
}

impl Case {
    /// The command line after `--kubeconfig`; `{file}` stands for the case's file, `{dir}`
    /// for its scratch directory.
    pub fn new(args: &[&str]) -> Case {
        Case {
            args: args.iter().map(|s| s.to_string()).collect(),
            on: On::Nothing,
            rewrite: None,
            file: None,
            sparse_file: None,
            code: 2,
            says: Vec::new(),
            within: None,
        }
    }

    /// Where it runs.
    pub fn on(mut self, on: On) -> Case {
        self.on = on;
        self
    }

    /// Rewrites the simulator's kubeconfig for this case.
    pub fn kubeconfig(mut self, rewrite: Rewrite) -> Case {
        self.rewrite = Some(rewrite);
        self
    }

    /// The content of `{file}`.
    pub fn file(mut self, content: impl Into<Vec<u8>>) -> Case {
        self.file = Some(content.into());
        self
    }

    /// `{file}` is a sparse file of this many bytes (huge without costing the disk).
    pub fn huge_file(mut self, bytes: u64) -> Case {
        self.sparse_file = Some(bytes);
        self
    }

    /// The exit code expected.
    pub fn exits(mut self, code: i32) -> Case {
        self.code = code;
        self
    }

    /// Words the output must contain (case-insensitive): the problem and the fix.
    pub fn says(mut self, words: &[&'static str]) -> Case {
        self.says.extend_from_slice(words);
        self
    }

    /// The run must end within this long.
    pub fn within(mut self, limit: Duration) -> Case {
        self.within = Some(limit);
        self
    }

    /// Runs the case and checks everything it promises.
    pub fn run(self) {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("input");
        if let Some(content) = &self.file {
            std::fs::write(&file, content).expect("write the case's file");
        }
        if let Some(bytes) = self.sparse_file {
            std::fs::File::create(&file)
                .and_then(|f| f.set_len(bytes))
                .expect("sparse file");
        }
        let kubeconfig = dir.path().join("kubeconfig");
        let shared = match self.on {
            On::Nothing => None,
            On::Sim => Some(&*PLAIN),
            On::TlsSim => Some(&*TLS),
            On::Hostile(junk) => {
                let server = SUPPORT.block_on(HostileServer::start(junk));
                write_kubeconfig(&kubeconfig, &server.kubeconfig(), self.rewrite);
                None
            }
        };
        if let Some(shared) = shared {
            write_kubeconfig(&kubeconfig, shared.cluster.kubeconfig_yaml(), self.rewrite);
        }
        let before = shared.map(|s| SUPPORT.block_on(snapshot(&s.cluster.client())));
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| {
                a.replace("{file}", &file.display().to_string())
                    .replace("{dir}", &dir.path().display().to_string())
            })
            .collect();
        let started = Instant::now();
        let out = crate::selfhost()
            .env("HOME", dir.path())
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(&args)
            .timeout(RUN_LIMIT)
            .output()
            .expect("selfhost runs");
        let took = started.elapsed();
        check_output(&out, self.code, &self.says, &args);
        if let Some(limit) = self.within {
            assert!(took < limit, "{args:?} took {took:?}, more than {limit:?}");
        }
        if let (Some(shared), Some(before)) = (shared, before) {
            let after: Snapshot = SUPPORT.block_on(snapshot(&shared.cluster.client()));
            assert_unchanged(&before, &after);
        }
    }
}

/// A cluster of its own, for a case that edits it first: `nodes` control-plane nodes at
/// `version`, with `images` (beyond the control plane's) in its registry.
pub async fn own_cluster(nodes: usize, version: &str, images: &[&str]) -> SimCluster {
    let mut builder = SimCluster::builder()
        .control_plane_nodes(nodes)
        .version(version)
        .mode(BootstrapMode::SelfHosted)
        .port_sharing(true)
        .timings(SimTimings::fast());
    for image in images {
        builder = builder.image(image, ImageBehaviour::default());
    }
    builder.start().await.expect("cluster starts")
}

/// Runs `selfhost --kubeconfig <sim> args...` on a cluster of its own and checks what every
/// case checks, including that the cluster is unchanged.
pub async fn run_on(sim: &SimCluster, args: &[&str], code: i32, says: &[&str]) {
    let client = sim.client();
    let before = snapshot(&client).await;
    let kubeconfig = sim.kubeconfig_path().to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let shown = args.clone();
    let out = tokio::task::spawn_blocking(move || {
        crate::selfhost()
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(&args)
            .timeout(RUN_LIMIT)
            .output()
    })
    .await
    .expect("joined")
    .expect("selfhost runs");
    check_output(&out, code, says, &shown);
    assert_unchanged(&before, &snapshot(&client).await);
}

fn write_kubeconfig(path: &Path, yaml: &str, rewrite: Option<Rewrite>) {
    let yaml = rewrite.map_or_else(|| yaml.to_string(), |r| r(yaml));
    std::fs::write(path, yaml).expect("write kubeconfig");
}

/// The checks every hostile case shares: the exit code, no panic, no escape codes, and the
/// key words of the problem and its fix.
pub fn check_output(out: &Output, code: i32, says: &[&str], args: &[String]) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let both = format!("{stdout}\n{stderr}");
    // Shown with --nocapture (and kept by the harness for a failing case).
    println!("$ selfhost {}\n{both}", args.join(" "));
    assert_eq!(
        out.status.code(),
        Some(code),
        "{args:?} exits {code} (a run killed by the time limit has no code):\n{both}"
    );
    assert!(!stderr.contains("panicked"), "{args:?} panicked:\n{stderr}");
    assert!(
        !both.contains('\u{1b}'),
        "{args:?} printed escape codes with NO_COLOR set:\n{both:?}"
    );
    assert!(
        code == 0
            || stderr.lines().any(|l| l.starts_with("error: "))
            || stdout.contains("apply would refuse"),
        "{args:?} says `error: ...` on stderr (or, for plan, why apply would refuse):\n{both}"
    );
    let lower = both.to_lowercase();
    for word in says {
        assert!(
            lower.contains(&word.to_lowercase()),
            "{args:?}: the message lacks {word:?}:\n{both}"
        );
    }
}

/// One `#[test]` per row: `name => case,`.
#[macro_export]
macro_rules! hostile_cases {
    ($($name:ident => $case:expr,)*) => {
        $(
            #[test]
            fn $name() {
                $case.run();
            }
        )*
    };
}
