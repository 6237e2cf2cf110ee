//! A small deterministic random source (SplitMix64): one seed gives one run, on any machine,
//! with no dependency whose sequence could change under us between releases.

/// The generator; its whole state is one word, so a seed names a run completely.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `percent`/100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.between(0, items.len() as u64 - 1) as usize]
    }
}

/// The seed of the `index`-th run of a profile whose base seed is `base`: spread out, so that
/// neighbouring runs share nothing.
pub fn run_seed(base: u64, index: u64) -> u64 {
    Rng::new(base ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03)).next_u64() >> 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_sequence_and_stays_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            let x = a.between(3, 9);
            assert_eq!(x, b.between(3, 9));
            assert!((3..=9).contains(&x));
        }
        assert_ne!(run_seed(1, 0), run_seed(1, 1));
    }
}
