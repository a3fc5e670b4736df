//! Percentiles over a sorted vector of samples (exact, like an HDR histogram without the
//! bucketing), and medians of repetitions.

use std::time::Duration;

/// Latency samples in nanoseconds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Samples {
    nanos: Vec<u64>,
    sorted: bool,
}

impl Samples {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Samples {
            nanos: Vec::with_capacity(n),
            sorted: true,
        }
    }

    pub(crate) fn push(&mut self, d: Duration) {
        self.nanos
            .push(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        self.sorted = false;
    }

    pub(crate) fn len(&self) -> usize {
        self.nanos.len()
    }

    fn sort(&mut self) {
        if !self.sorted {
            self.nanos.sort_unstable();
            self.sorted = true;
        }
    }

    /// The `q`-quantile (0..=1) by the nearest-rank method, in microseconds; `None` without
    /// samples.
    pub(crate) fn quantile_us(&mut self, q: f64) -> Option<f64> {
        self.sort();
        quantile_sorted(&self.nanos, q).map(|n| n as f64 / 1000.0)
    }

    pub(crate) fn mean_us(&self) -> Option<f64> {
        if self.nanos.is_empty() {
            return None;
        }
        let sum: u128 = self.nanos.iter().map(|n| u128::from(*n)).sum();
        Some(sum as f64 / self.nanos.len() as f64 / 1000.0)
    }
}

/// Nearest-rank quantile of sorted values.
pub(crate) fn quantile_sorted(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let q = q.clamp(0.0, 1.0);
    // Nearest rank: the smallest value with at least q of the samples at or below it.
    let rank = (q * sorted.len() as f64).ceil() as usize;
    let index = rank.saturating_sub(1).min(sorted.len() - 1);
    sorted.get(index).copied()
}

/// The median of some values (the mean of the middle two for an even count).
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v.get(mid).copied()
    } else {
        Some((v[mid - 1] + v[mid]) / 2.0)
    }
}

/// Repetitions of one measurement: each one's rate and latency percentiles, reported as their
/// medians.
#[derive(Debug, Default)]
pub(crate) struct Repetitions {
    rates: Vec<f64>,
    p50s: Vec<f64>,
    p99s: Vec<f64>,
}

impl Repetitions {
    /// One repetition: `cycles` in `seconds`, each cycle's latency in `samples`.
    pub(crate) fn record(&mut self, cycles: u64, seconds: f64, samples: &mut Samples) {
        self.rates.push(cycles as f64 / seconds);
        self.p50s
            .push(samples.quantile_us(0.50).unwrap_or(f64::NAN));
        self.p99s
            .push(samples.quantile_us(0.99).unwrap_or(f64::NAN));
    }

    /// The median rate (0 if none ran).
    pub(crate) fn rate(&self) -> f64 {
        median(&self.rates).unwrap_or(0.0)
    }

    pub(crate) fn p50_us(&self) -> Option<f64> {
        median(&self.p50s)
    }

    pub(crate) fn p99_us(&self) -> Option<f64> {
        median(&self.p99s)
    }

    /// How many repetitions ran.
    pub(crate) fn len(&self) -> usize {
        self.rates.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile_sorted(&v, 0.5), Some(50));
        assert_eq!(quantile_sorted(&v, 0.99), Some(99));
        assert_eq!(quantile_sorted(&v, 1.0), Some(100));
        assert_eq!(quantile_sorted(&v, 0.0), Some(1));
        assert_eq!(quantile_sorted(&[], 0.5), None);
        assert_eq!(quantile_sorted(&[7], 0.99), Some(7));
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn samples_in_microseconds() {
        let mut s = Samples::with_capacity(3);
        for us in [30, 10, 20] {
            s.push(Duration::from_micros(us));
        }
        assert_eq!(s.quantile_us(0.5), Some(20.0));
        assert_eq!(s.mean_us(), Some(20.0));
    }
}
