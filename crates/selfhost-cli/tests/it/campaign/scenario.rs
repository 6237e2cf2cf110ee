//! One run of the campaign, drawn from its seed: the cluster, the upgrade and the fault
//! schedule, and the outcome the tool must reach under it.

use std::fmt;
use std::time::Duration;

use selfhost_core::Component;

use super::rng::Rng;

/// How the target image of one component fails (the simulated registry's three ways).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breakage {
    /// The image cannot be pulled (`ErrImagePull`, then `ImagePullBackOff`).
    Unpullable,
    /// Every process exits shortly after it starts.
    CrashLoop,
    /// The process runs and never passes its readiness probe.
    NeverReady,
}

/// A control-plane node whose kubelet reports `Ready=False` for a while.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotReadyWindow {
    /// Index among the control-plane nodes (`cp-<index+1>`).
    pub node: usize,
    pub at: Duration,
    pub lasting: Duration,
}

/// The apiserver crashes (listener closed, connections cut, new ones refused) and restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crash {
    pub at: Duration,
    pub down_for: Duration,
}

/// Where SIGKILL lands: after the `after_step`-th step event of the first run, `delay` later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kill {
    pub after_step: usize,
    pub delay: Duration,
}

/// A control-plane node loses its power and boots again, its processes gone (a reboot).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reboot {
    /// Index among the control-plane nodes (`cp-<index+1>`).
    pub node: usize,
    pub at: Duration,
    pub off_for: Duration,
}

/// Every node loses its power after the `after_step`-th step event of the first run, `delay`
/// later, and gets it back after `off_for`: the tool, running on one of them, dies with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerCut {
    pub after_step: usize,
    pub delay: Duration,
    pub off_for: Duration,
}

/// Everything one run does, drawn from its seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    pub seed: u64,
    pub control_plane: usize,
    pub workers: usize,
    pub from: String,
    pub to: String,
    /// Pod latencies this many times faster than real ones (`SimTimings::scaled`).
    pub speedup: u32,
    /// The measured hand-over model (`true`) or the idealised one.
    pub measured_handovers: bool,
    /// Share of the tool's API requests answered with 500/503/429 or a reset, in percent.
    pub error_percent: u64,
    pub watch_drops: Vec<Duration>,
    /// When, and how many watch requests then start with 410 Expired.
    pub expiries: Vec<(Duration, u32)>,
    pub crashes: Vec<Crash>,
    pub not_ready: Option<NotReadyWindow>,
    /// A concurrent actor annotating the real DaemonSets every this often.
    pub writer_every: Option<Duration>,
    pub broken: Option<(Component, Breakage)>,
    pub kill: Option<Kill>,
    /// `apply --prepull`: the target images are pulled on every control-plane node first, by
    /// temporary DaemonSets that must be gone afterwards. With an unpullable or crash-looping
    /// target the prepull refuses before any change (see [`Scenario::prepull_refuses`]); with a NotReady
    /// node the operator model applies as without it.
    pub prepull: bool,
    pub reboot: Option<Reboot>,
    /// Replaces the SIGKILL where both are drawn: the power cut kills the tool too.
    pub power_cut: Option<PowerCut>,
}

/// The window over which faults are spread, measured from the first run's start.
const FAULT_WINDOW_MS: u64 = 6_000;

impl Scenario {
    /// The run a seed names.
    pub fn from_seed(seed: u64) -> Scenario {
        let mut rng = Rng::new(seed);
        let control_plane = rng.between(1, 5) as usize;
        let workers = rng.between(0, 3) as usize;
        // v1.29 to v1.37 are supported and in the simulated registry; one minor up, or a
        // patch within the minor.
        let minor = rng.between(29, 36);
        let patch = rng.between(0, 7);
        let from = format!("v1.{minor}.{patch}");
        let to = if rng.percent(25) {
            format!("v1.{minor}.{}", rng.between(patch + 1, 9))
        } else {
            format!("v1.{}.{}", minor + 1, rng.between(0, 9))
        };
        let speedup = rng.pick(&[100, 150, 200]);
        let measured_handovers = rng.percent(50);
        let error_percent = if rng.percent(30) {
            0
        } else {
            rng.between(1, 20)
        };
        let at = |rng: &mut Rng| Duration::from_millis(rng.between(100, FAULT_WINDOW_MS));
        let watch_drops = (0..rng.between(0, 3)).map(|_| at(&mut rng)).collect();
        let expiries = (0..rng.between(0, 2))
            .map(|_| (at(&mut rng), rng.between(1, 3) as u32))
            .collect();
        let crashes = (0..rng.pick(&[0, 0, 1, 1, 2]))
            .map(|_| Crash {
                at: at(&mut rng),
                down_for: Duration::from_millis(rng.between(100, 800)),
            })
            .collect();
        let not_ready = rng.percent(25).then(|| NotReadyWindow {
            node: rng.between(0, control_plane as u64 - 1) as usize,
            at: Duration::from_millis(rng.between(300, 4_000)),
            lasting: Duration::from_millis(rng.between(300, 2_500)),
        });
        // A real actor writes far less often than one API round trip (which on a loaded
        // machine is tens of milliseconds, unscaled): every 0.2 to 1 s here.
        let writer_every = rng
            .percent(35)
            .then(|| Duration::from_millis(rng.between(200, 1_000)));
        let broken = rng.percent(25).then(|| {
            (
                rng.pick(&Component::ALL),
                rng.pick(&[
                    Breakage::Unpullable,
                    Breakage::CrashLoop,
                    Breakage::NeverReady,
                ]),
            )
        });
        let kill = rng.percent(40).then(|| Kill {
            after_step: rng.between(1, 14) as usize,
            delay: Duration::from_millis(rng.between(0, 60)),
        });
        // Drawn last, so that the draws before it name the same runs as before it existed.
        let prepull = rng.percent(30);
        // Drawn after it, for the same reason.
        let reboot = rng.percent(20).then(|| Reboot {
            node: rng.between(0, control_plane as u64 - 1) as usize,
            at: Duration::from_millis(rng.between(300, 5_000)),
            off_for: Duration::from_millis(rng.between(300, 3_000)),
        });
        let power_cut = rng.percent(20).then(|| PowerCut {
            after_step: rng.between(1, 14) as usize,
            delay: Duration::from_millis(rng.between(0, 60)),
            off_for: Duration::from_millis(rng.between(100, 1_000)),
        });
        Scenario {
            seed,
            control_plane,
            workers,
            from,
            to,
            speedup,
            measured_handovers,
            error_percent,
            watch_drops,
            expiries,
            crashes,
            not_ready,
            writer_every,
            broken,
            kill,
            prepull,
            reboot,
            power_cut,
        }
    }

    /// The same run without the fault kinds named (comma-separated: `errors`, `drops`,
    /// `expiries`, `crashes`, `not-ready`, `writer`, `broken`, `kill`, `prepull`, `reboot`,
    /// `power`): to find which fault a failing seed needs, when replaying it.
    pub fn without(mut self, kinds: &str) -> Scenario {
        for kind in kinds.split(',').map(str::trim) {
            match kind {
                "errors" => self.error_percent = 0,
                "drops" => self.watch_drops.clear(),
                "expiries" => self.expiries.clear(),
                "crashes" => self.crashes.clear(),
                "not-ready" => self.not_ready = None,
                "writer" => self.writer_every = None,
                "broken" => self.broken = None,
                "kill" => self.kill = None,
                "prepull" => self.prepull = false,
                "reboot" => self.reboot = None,
                "power" => self.power_cut = None,
                _ => {}
            }
        }
        self
    }

    /// The per-component deadline given to `apply --timeout`: short where a never-Ready
    /// target must run into it, generous elsewhere so that only real failures roll back.
    /// Whether `--prepull` meets a target image it must refuse (exit 3) before the upgrade
    /// changes anything: one no node can pull, or a crash-looping one (the simulator's
    /// crash-looping binary fails its `--version` too: "this binary does not run here",
    /// docs/simulator.md, which is what the prepull's init container checks).
    pub fn prepull_refuses(&self) -> bool {
        self.prepull
            && matches!(
                self.broken,
                Some((_, Breakage::Unpullable | Breakage::CrashLoop))
            )
    }

    pub fn timeout(&self) -> Duration {
        match self.broken {
            Some((_, Breakage::NeverReady)) => Duration::from_secs(12),
            _ => Duration::from_secs(90),
        }
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {}: {} cp + {} workers, {} -> {}, x{} {}, {}% errors",
            self.seed,
            self.control_plane,
            self.workers,
            self.from,
            self.to,
            self.speedup,
            if self.measured_handovers {
                "measured"
            } else {
                "idealised"
            },
            self.error_percent
        )?;
        let ms = |d: &Duration| d.as_millis();
        if !self.watch_drops.is_empty() {
            let at: Vec<_> = self.watch_drops.iter().map(ms).collect();
            write!(f, ", watch drops at {at:?} ms")?;
        }
        if !self.expiries.is_empty() {
            let at: Vec<_> = self.expiries.iter().map(|(t, n)| (ms(t), n)).collect();
            write!(f, ", 410s (ms, n) {at:?}")?;
        }
        for c in &self.crashes {
            write!(f, ", crash at {} ms for {} ms", ms(&c.at), ms(&c.down_for))?;
        }
        if let Some(w) = &self.not_ready {
            write!(
                f,
                ", cp-{} NotReady at {} ms for {} ms",
                w.node + 1,
                ms(&w.at),
                ms(&w.lasting)
            )?;
        }
        if let Some(every) = &self.writer_every {
            write!(f, ", writer every {} ms", ms(every))?;
        }
        if let Some((component, how)) = &self.broken {
            write!(f, ", {component} target {how:?}")?;
        }
        if self.prepull {
            write!(f, ", --prepull")?;
        }
        if let Some(r) = &self.reboot {
            write!(
                f,
                ", cp-{} reboots at {} ms, off for {} ms",
                r.node + 1,
                ms(&r.at),
                ms(&r.off_for)
            )?;
        }
        if let Some(p) = &self.power_cut {
            write!(
                f,
                ", power cut after step {} +{} ms, off for {} ms",
                p.after_step,
                ms(&p.delay),
                ms(&p.off_for)
            )?;
        }
        if let (Some(k), None) = (&self.kill, &self.power_cut) {
            write!(
                f,
                ", SIGKILL after step {} +{} ms",
                k.after_step,
                ms(&k.delay)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_names_one_run_within_the_supported_ranges() {
        for seed in 0..500 {
            let s = Scenario::from_seed(seed);
            assert_eq!(s, Scenario::from_seed(seed), "deterministic");
            assert!((1..=5).contains(&s.control_plane) && s.workers <= 3);
            assert!(s.error_percent <= 20);
            let minor = |v: &str| v.split('.').nth(1).unwrap().parse::<u32>().unwrap();
            assert!((29..=37).contains(&minor(&s.to)));
            assert!(minor(&s.to) - minor(&s.from) <= 1 && s.from != s.to);
            assert!(s.not_ready.is_none_or(|w| w.node < s.control_plane));
            assert!(s.reboot.is_none_or(|r| r.node < s.control_plane));
        }
    }
}
