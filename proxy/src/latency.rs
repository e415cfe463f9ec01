//! Latency histograms recorded on the hot path: how long statements wait for a slot and a
//! backend (`queue_wait`), and how long the backend takes to answer (`backend_time`).
//!
//! Every session records into a shared [`Recorder`]. Each recorder holds `SHARDS` arrays of
//! atomic counts, one per bucket of the histogram, and a thread always records into "its"
//! shard: a record is one atomic add, no lock (a `Mutex<Histogram>` per shard would take a
//! lock per record, two records a statement). The buckets are hdrhistogram's own
//! ([`index_of`], [`value_of`]); readers (SHOW LATENCY, /metrics) rebuild the histogram from
//! the summed counts, which is the histogram the same records would have built.
//!
//! Values are microseconds, 2 significant digits (1 % precision), clamped to `MAX_US`. The
//! histograms cover the whole life of the process, as Prometheus histograms do.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

/// Shards per recorder; more than the worker threads of any runtime we expect.
const SHARDS: usize = 16;
/// Largest recorded value: one hour in µs. Longer waits are clamped.
const MAX_US: u64 = 3_600_000_000;
const SIGFIG: u8 = 2;

/// hdrhistogram's layout for [1, MAX_US] at 2 significant digits (`empty()`): 256 sub-buckets
/// (the smallest power of two over 2 x 10^2), of which each bucket after the first uses the
/// upper half; unit magnitude 0.
const SUB_HALF_MAGNITUDE: u32 = 7;
const SUB_MASK: u64 = (1 << (SUB_HALF_MAGNITUDE + 1)) - 1;
const LEADING_ZERO_BASE: u32 = 64 - (SUB_HALF_MAGNITUDE + 1);
/// Buckets of a shard: every index up to that of `MAX_US`.
const COUNTS: usize = index_of(MAX_US) + 1;

/// The histogram's counts index of `v` (`v` <= MAX_US), as hdrhistogram computes it.
const fn index_of(v: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (v | SUB_MASK).leading_zeros();
    let sub = (v >> bucket) as usize;
    ((bucket as usize + 1) << SUB_HALF_MAGNITUDE) + sub - (1 << SUB_HALF_MAGNITUDE)
}

/// The lowest value counted at `index`, as hdrhistogram computes it.
fn value_of(index: usize) -> u64 {
    let half = 1usize << SUB_HALF_MAGNITUDE;
    let bucket = (index >> SUB_HALF_MAGNITUDE).saturating_sub(1);
    let mut sub = (index & (half - 1)) + half;
    if index >> SUB_HALF_MAGNITUDE == 0 {
        sub -= half;
    }
    (sub as u64) << bucket
}

/// The two latencies every statement has.
#[derive(Default)]
pub struct Latency {
    /// From asking for an execution slot until the slot and a ready backend are held.
    pub queue_wait: Recorder,
    /// From sending the statement to the backend until its response is relayed.
    pub backend_time: Recorder,
}

impl Latency {
    pub fn new() -> Latency {
        Latency::default()
    }
}

/// A sharded histogram of durations.
pub struct Recorder {
    /// `SHARDS` x `COUNTS` counts, shard by shard.
    counts: Box<[AtomicU64]>,
    /// Exact sum of all recorded values in µs (the histogram only knows them to 1 %).
    sum_us: AtomicU64,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

/// Percentiles of one merged histogram, in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub count: u64,
    pub p50: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
    pub sum: u64,
}

impl Recorder {
    pub fn new() -> Recorder {
        Recorder {
            counts: (0..SHARDS * COUNTS).map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
        }
    }

    /// Records one duration: two relaxed atomic adds, never a wait.
    pub fn record(&self, d: Duration) {
        // As `as_micros`, clamped, without its 128-bit arithmetic.
        let us = d
            .as_secs()
            .saturating_mul(1_000_000)
            .saturating_add(u64::from(d.subsec_micros()))
            .min(MAX_US);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.counts[shard_index() * COUNTS + index_of(us)].fetch_add(1, Ordering::Relaxed);
    }

    /// All shards merged into one histogram.
    pub fn snapshot(&self) -> Snapshot {
        let mut merged = empty();
        for index in 0..COUNTS {
            let n: u64 = (0..SHARDS)
                .map(|shard| self.counts[shard * COUNTS + index].load(Ordering::Relaxed))
                .sum();
            if n > 0 {
                // Every index's value is within the bounds, so this cannot fail.
                let _ = merged.record_n(value_of(index), n);
            }
        }
        Snapshot {
            hist: merged,
            sum_us: self.sum_us.load(Ordering::Relaxed),
        }
    }
}

/// A merged, point-in-time copy of a recorder.
pub struct Snapshot {
    hist: Histogram<u64>,
    sum_us: u64,
}

impl Snapshot {
    pub fn summary(&self) -> Summary {
        let h = &self.hist;
        let q = |x: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(x)
            }
        };
        Summary {
            count: h.len(),
            p50: q(0.5),
            p99: q(0.99),
            p999: q(0.999),
            max: h.max(),
            sum: self.sum_us,
        }
    }

    /// Counts per bucket for the upper bounds `bounds_us` (ascending), plus a last entry for
    /// everything above the last bound. Not cumulative.
    pub fn buckets(&self, bounds_us: &[u64]) -> Vec<u64> {
        let mut counts = vec![0u64; bounds_us.len() + 1];
        for v in self.hist.iter_recorded() {
            // Values within 1 % of a bound may land on either side; that is the precision.
            let value = self.hist.highest_equivalent(v.value_iterated_to());
            let i = bounds_us.partition_point(|b| *b < value);
            counts[i] += v.count_since_last_iteration();
        }
        counts
    }

    pub fn sum_us(&self) -> u64 {
        self.sum_us
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }
}

fn empty() -> Histogram<u64> {
    // Constant, valid bounds: this cannot fail.
    Histogram::new_with_bounds(1, MAX_US, SIGFIG).expect("valid histogram bounds")
}

/// This thread's shard: threads are numbered round-robin the first time they record.
fn shard_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_every_thread() {
        let r = std::sync::Arc::new(Recorder::new());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let r = r.clone();
                std::thread::spawn(move || {
                    for i in 0..250u64 {
                        r.record(Duration::from_micros(t * 250 + i + 1));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = r.snapshot().summary();
        assert_eq!(s.count, 1000);
        assert!((495..=505).contains(&s.p50), "p50 {}", s.p50);
        assert!((985..=1000).contains(&s.p99), "p99 {}", s.p99);
        assert!((995..=1010).contains(&s.max), "max {}", s.max);
        assert_eq!(s.sum, (1..=1000).sum::<u64>());
    }

    #[test]
    fn buckets_split_at_the_bounds_and_keep_an_overflow_bucket() {
        let r = Recorder::new();
        for us in [10, 20, 900, 5_000, 2_000_000] {
            r.record(Duration::from_micros(us));
        }
        let b = r.snapshot().buckets(&[100, 1_000, 10_000]);
        assert_eq!(b, vec![2, 1, 1, 1]);
    }

    #[test]
    fn the_counts_rebuild_the_histogram_hdrhistogram_would_have_recorded() {
        let mut direct = empty();
        let r = Recorder::new();
        let mut v = 1u64;
        let mut values = vec![
            0,
            1,
            127,
            128,
            255,
            256,
            257,
            511,
            512,
            1000,
            MAX_US - 1,
            MAX_US,
        ];
        while v < MAX_US {
            values.extend([v, v + 1, v * 3 / 2, v.saturating_sub(1)]);
            v = v * 7 / 5 + 1;
        }
        // As `record` clamps them.
        for us in values.into_iter().map(|v| v.min(MAX_US)) {
            assert_eq!(direct.lowest_equivalent(us), value_of(index_of(us)), "{us}");
            direct.saturating_record(us);
            r.record(Duration::from_micros(us));
        }
        let rebuilt = r.snapshot();
        assert_eq!(rebuilt.hist, direct);
        assert_eq!(rebuilt.hist.max(), direct.max());
    }

    #[test]
    fn empty_and_huge_values_are_safe() {
        let r = Recorder::new();
        assert_eq!(r.snapshot().summary(), Summary::default());
        r.record(Duration::from_secs(100_000));
        assert_eq!(r.snapshot().count(), 1);
        assert!(r.snapshot().summary().max >= MAX_US / 100 * 99);
    }
}
