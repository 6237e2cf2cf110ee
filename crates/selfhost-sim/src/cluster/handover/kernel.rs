//! How a node's kernel spreads new connections over the sockets sharing a port
//! (`SO_REUSEPORT`): by a hash of each connection, which looks random, or in turn. The same
//! picker serves HTTP connections and the node's readiness probes, as one kernel would.

use std::sync::Mutex;

/// How the kernel picks among the sockets bound to a shared port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortBalancing {
    /// In turn, in bind order.
    RoundRobin,
    /// At random, from a seeded generator (as Linux hashes each connection's addresses).
    Random {
        /// The seed (each node derives its own from it).
        seed: u64,
    },
}

/// A small, seeded, deterministic generator (SplitMix64): the simulator must be reproducible,
/// and this is all the randomness it needs.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn next_f64(&mut self) -> f64 {
        // The top 53 bits fill an f64's mantissa exactly.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A seed for one node from the model's seed.
pub(crate) fn node_seed(seed: u64, node: &str) -> u64 {
    node.bytes().fold(seed ^ 0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One node's choice among the sockets of a shared port.
#[derive(Debug)]
pub(crate) struct Kernel {
    balancing: PortBalancing,
    state: Mutex<SplitMix>,
    turn: Mutex<usize>,
}

impl Kernel {
    pub(crate) fn new(balancing: PortBalancing, node: &str) -> Self {
        let seed = match balancing {
            PortBalancing::Random { seed } => node_seed(seed, node),
            PortBalancing::RoundRobin => 0,
        };
        Kernel {
            balancing,
            state: Mutex::new(SplitMix::new(seed)),
            turn: Mutex::new(0),
        }
    }

    /// Which of `n` sockets (in bind order) gets the next connection; `None` when there is
    /// none.
    pub(crate) fn pick(&self, n: usize) -> Option<usize> {
        if n == 0 {
            return None;
        }
        Some(match self.balancing {
            PortBalancing::RoundRobin => {
                let mut turn = self.turn.lock().unwrap_or_else(|e| e.into_inner());
                *turn = turn.wrapping_add(1);
                *turn % n
            }
            PortBalancing::Random { .. } => {
                let mut rng = self.state.lock().unwrap_or_else(|e| e.into_inner());
                // n is small; the modulo bias of a 64-bit draw is negligible.
                (rng.next_u64() % n as u64) as usize
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_takes_turns_and_random_spreads_reproducibly() {
        let rr = Kernel::new(PortBalancing::RoundRobin, "cp-1");
        let turns: Vec<_> = (0..4).filter_map(|_| rr.pick(2)).collect();
        assert_eq!(turns, [1, 0, 1, 0]);
        assert_eq!(rr.pick(0), None);

        let draw = |node: &str| {
            let k = Kernel::new(PortBalancing::Random { seed: 7 }, node);
            (0..1_000).filter_map(|_| k.pick(2)).collect::<Vec<_>>()
        };
        let a = draw("cp-1");
        assert_eq!(a, draw("cp-1"), "same seed, same node: same choices");
        assert_ne!(a, draw("cp-2"), "each node has its own sequence");
        let firsts = a.iter().filter(|i| **i == 0).count();
        assert!((400..=600).contains(&firsts), "about half each: {firsts}");
    }

    #[test]
    fn uniform_draws_stay_in_the_unit_interval() {
        let mut rng = SplitMix::new(1);
        let draws: Vec<f64> = (0..10_000).map(|_| rng.next_f64()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
    }
}
