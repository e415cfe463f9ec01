//! Latency histograms recorded on the hot path: how long statements wait for a slot and a
//! backend (`queue_wait`), and how long the backend takes to answer (`backend_time`).
//!
//! Every session records into a shared [`Recorder`]. A single `Mutex<Histogram>` would
//! serialise all sessions on every statement, so each recorder holds `SHARDS` histograms
//! and a thread always records into "its" shard; with one shard per worker thread the locks
//! are practically uncontended. Readers (SHOW LATENCY, /metrics) merge the shards.
//!
//! Values are microseconds, 2 significant digits (1 % precision, 20 KiB per histogram),
//! clamped to `MAX_US`. The histograms cover the whole life of the process, as Prometheus
//! histograms do.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Shards per recorder; more than the worker threads of any runtime we expect.
const SHARDS: usize = 16;
/// Largest recorded value: one hour in µs. Longer waits are clamped.
const MAX_US: u64 = 3_600_000_000;
const SIGFIG: u8 = 2;

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
    shards: Vec<Mutex<Histogram<u64>>>,
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
            shards: (0..SHARDS).map(|_| Mutex::new(empty())).collect(),
            sum_us: AtomicU64::new(0),
        }
    }

    /// Records one duration. Never blocks on another thread's shard for long: a shard is
    /// held only for one counter increment.
    pub fn record(&self, d: Duration) {
        // As `as_micros`, clamped, without its 128-bit arithmetic.
        let us = d
            .as_secs()
            .saturating_mul(1_000_000)
            .saturating_add(u64::from(d.subsec_micros()))
            .min(MAX_US);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        let shard = &self.shards[shard_index()];
        let mut h = shard.lock().unwrap_or_else(|p| p.into_inner());
        h.saturating_record(us);
    }

    /// All shards merged into one histogram.
    pub fn snapshot(&self) -> Snapshot {
        let mut merged = empty();
        for shard in &self.shards {
            let h = shard.lock().unwrap_or_else(|p| p.into_inner());
            // Same bounds everywhere, so `add` cannot fail.
            let _ = merged.add(&*h);
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
    fn empty_and_huge_values_are_safe() {
        let r = Recorder::new();
        assert_eq!(r.snapshot().summary(), Summary::default());
        r.record(Duration::from_secs(100_000));
        assert_eq!(r.snapshot().count(), 1);
        assert!(r.snapshot().summary().max >= MAX_US / 100 * 99);
    }
}
