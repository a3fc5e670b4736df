//! A small seeded generator (xorshift; no cryptographic use): the demo's think times, a chaos
//! run's schedule and each chaos worker's choices.

use std::time::{SystemTime, UNIX_EPOCH};

/// A xorshift generator.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator that repeats its numbers for the same `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }

    /// A generator seeded from the clock, this process and `id`.
    pub fn from_clock(id: u32) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Rng::new(nanos ^ (u64::from(std::process::id()) << 32) ^ u64::from(id))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    /// A number in `low..high` (`low` when the range is empty).
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low.saturating_add(self.below(high.saturating_sub(low).max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_same_seed_gives_the_same_numbers_within_range() {
        let (mut a, mut b) = (Rng::new(42), Rng::new(42));
        for _ in 0..1000 {
            let x = a.between(10, 20);
            assert_eq!(x, b.between(10, 20));
            assert!((10..20).contains(&x));
        }
        assert_eq!(Rng::new(1).between(5, 5), 5);
        assert_eq!(Rng::new(1).below(0), 0);
    }
}
