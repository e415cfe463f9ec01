//! One digest row's numbers: relaxed atomics updated by every statement of its digest without
//! a lock, a small log-linear histogram of statement times for p50/p99, and the merge of an
//! evicted row into the overflow row.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Histogram buckets: 0-3 µs exactly, then four per power of two (25 % wide) up to
/// 2^32 µs (71 minutes); longer statements count in the last.
pub const BUCKETS: usize = 124;
/// The largest value the histogram tells apart.
const MAX_US: u64 = (1 << 32) - 1;

/// The bucket of a time in µs.
pub fn bucket(us: u64) -> usize {
    let us = us.min(MAX_US);
    if us < 4 {
        return us as usize;
    }
    let e = 63 - us.leading_zeros();
    let sub = (us >> (e - 2)) & 3;
    ((e - 1) * 4) as usize + sub as usize
}

/// The largest time in µs bucket `i` counts.
pub fn bucket_max(i: usize) -> u64 {
    if i < 4 {
        return i as u64;
    }
    let e = (i / 4 + 1) as u32;
    let sub = (i % 4) as u64;
    ((5 + sub) << (e - 2)) - 1
}

/// What one statement adds to a row (`total_us` is `queued_us + server_us`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub total_us: u64,
    pub queued_us: u64,
    pub server_us: u64,
    pub rows_sent: u64,
    pub rows_affected: u64,
    pub error: bool,
    pub pinned: bool,
    pub replica: bool,
    pub pipelined: bool,
    pub retried: bool,
    /// Milliseconds since the table's epoch.
    pub at_ms: u64,
}

/// Count and total time are not kept apart: the count is the histogram's sum, the total
/// time the queued plus the server time (two read-modify-writes fewer per statement).
pub struct Counters {
    errors: AtomicU64,
    min_us: AtomicU64,
    max_us: AtomicU64,
    rows_sent: AtomicU64,
    rows_affected: AtomicU64,
    queued_us: AtomicU64,
    server_us: AtomicU64,
    pinned: AtomicU64,
    replica: AtomicU64,
    pipelined: AtomicU64,
    retried: AtomicU64,
    first_ms: AtomicU64,
    last_ms: AtomicU64,
    hist: [AtomicU64; BUCKETS],
}

/// A row's numbers as read at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    pub count: u64,
    pub errors: u64,
    pub total_us: u64,
    /// 0 when nothing was counted.
    pub min_us: u64,
    pub max_us: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub rows_sent: u64,
    pub rows_affected: u64,
    pub queued_us: u64,
    pub server_us: u64,
    pub pinned: u64,
    pub replica: u64,
    pub pipelined: u64,
    pub retried: u64,
    /// Milliseconds since the table's epoch; `None` for a row nothing reached yet.
    pub first_ms: Option<u64>,
    pub last_ms: u64,
}

impl Counters {
    pub fn new() -> Counters {
        Counters {
            errors: AtomicU64::new(0),
            min_us: AtomicU64::new(u64::MAX),
            max_us: AtomicU64::new(0),
            rows_sent: AtomicU64::new(0),
            rows_affected: AtomicU64::new(0),
            queued_us: AtomicU64::new(0),
            server_us: AtomicU64::new(0),
            pinned: AtomicU64::new(0),
            replica: AtomicU64::new(0),
            pipelined: AtomicU64::new(0),
            retried: AtomicU64::new(0),
            first_ms: AtomicU64::new(u64::MAX),
            last_ms: AtomicU64::new(0),
            hist: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Counts one statement. Atomic read-modify-writes are what this costs, so a zero, a
    /// false flag or an unchanged minimum, maximum or last-seen costs only a load.
    pub fn add(&self, s: &Sample) {
        let add = |c: &AtomicU64, v: u64| {
            if v != 0 {
                c.fetch_add(v, Relaxed);
            }
        };
        add(&self.errors, u64::from(s.error));
        if s.total_us < self.min_us.load(Relaxed) {
            self.min_us.fetch_min(s.total_us, Relaxed);
        }
        if s.total_us > self.max_us.load(Relaxed) {
            self.max_us.fetch_max(s.total_us, Relaxed);
        }
        add(&self.rows_sent, s.rows_sent);
        add(&self.rows_affected, s.rows_affected);
        add(&self.queued_us, s.queued_us);
        add(&self.server_us, s.server_us);
        add(&self.pinned, u64::from(s.pinned));
        add(&self.replica, u64::from(s.replica));
        add(&self.pipelined, u64::from(s.pipelined));
        add(&self.retried, u64::from(s.retried));
        if self.first_ms.load(Relaxed) == u64::MAX {
            self.first_ms.fetch_min(s.at_ms, Relaxed);
        }
        if s.at_ms > self.last_ms.load(Relaxed) {
            self.last_ms.fetch_max(s.at_ms, Relaxed);
        }
        self.hist[bucket(s.total_us)].fetch_add(1, Relaxed);
    }

    /// Adds everything `other` counted (an evicted row into the overflow row). The caller
    /// keeps `other` from changing meanwhile.
    pub fn absorb(&self, other: &Counters) {
        let sums = [
            (&self.errors, &other.errors),
            (&self.rows_sent, &other.rows_sent),
            (&self.rows_affected, &other.rows_affected),
            (&self.queued_us, &other.queued_us),
            (&self.server_us, &other.server_us),
            (&self.pinned, &other.pinned),
            (&self.replica, &other.replica),
            (&self.pipelined, &other.pipelined),
            (&self.retried, &other.retried),
        ];
        for (to, from) in sums {
            to.fetch_add(from.load(Relaxed), Relaxed);
        }
        self.min_us.fetch_min(other.min_us.load(Relaxed), Relaxed);
        self.max_us.fetch_max(other.max_us.load(Relaxed), Relaxed);
        self.first_ms
            .fetch_min(other.first_ms.load(Relaxed), Relaxed);
        self.last_ms.fetch_max(other.last_ms.load(Relaxed), Relaxed);
        for (to, from) in self.hist.iter().zip(&other.hist) {
            let n = from.load(Relaxed);
            if n > 0 {
                to.fetch_add(n, Relaxed);
            }
        }
    }

    /// Back to nothing counted (RESET DIGESTS, for the overflow row).
    pub fn clear(&self) {
        for c in [
            &self.errors,
            &self.max_us,
            &self.rows_sent,
            &self.rows_affected,
            &self.queued_us,
            &self.server_us,
            &self.pinned,
            &self.replica,
            &self.pipelined,
            &self.retried,
            &self.last_ms,
        ] {
            c.store(0, Relaxed);
        }
        self.min_us.store(u64::MAX, Relaxed);
        self.first_ms.store(u64::MAX, Relaxed);
        self.hist.iter().for_each(|h| h.store(0, Relaxed));
    }

    /// When the row was last counted (ms since the epoch), for least-recently-seen eviction.
    pub fn last_ms(&self) -> u64 {
        self.last_ms.load(Relaxed)
    }

    /// The numbers now, with p50 and p99 from the histogram (each the top of its bucket,
    /// never above the maximum seen).
    pub fn read(&self) -> Totals {
        let load = |c: &AtomicU64| c.load(Relaxed);
        let counts: [u64; BUCKETS] = std::array::from_fn(|i| load(&self.hist[i]));
        let max_us = load(&self.max_us);
        let n: u64 = counts.iter().sum();
        let quantile = |q: f64| {
            let want = ((n as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= want && n > 0 {
                    return bucket_max(i).min(max_us);
                }
            }
            0
        };
        let min = load(&self.min_us);
        let first = load(&self.first_ms);
        let (queued_us, server_us) = (load(&self.queued_us), load(&self.server_us));
        Totals {
            count: n,
            errors: load(&self.errors),
            total_us: queued_us + server_us,
            min_us: if min == u64::MAX { 0 } else { min },
            max_us,
            p50_us: quantile(0.50),
            p99_us: quantile(0.99),
            rows_sent: load(&self.rows_sent),
            rows_affected: load(&self.rows_affected),
            queued_us,
            server_us,
            pinned: load(&self.pinned),
            replica: load(&self.replica),
            pipelined: load(&self.pipelined),
            retried: load(&self.retried),
            first_ms: (first != u64::MAX).then_some(first),
            last_ms: load(&self.last_ms),
        }
    }
}

impl Default for Counters {
    fn default() -> Self {
        Counters::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order_and_are_at_most_a_quarter_wide() {
        let mut last = 0;
        for us in (0..5000u64).chain([1 << 20, (1 << 20) + 1, MAX_US, u64::MAX]) {
            let b = bucket(us);
            assert!(b < BUCKETS, "{us}");
            assert!(b >= last || us > 5000, "{us}: monotonic");
            last = b;
            let top = bucket_max(b);
            assert!(us.min(MAX_US) <= top, "{us} <= {top}");
            if b > 0 {
                assert!(
                    us.min(MAX_US) > bucket_max(b - 1),
                    "{us} above bucket {}",
                    b - 1
                );
            }
            if (8..=MAX_US).contains(&us) {
                assert!((top - us) * 4 <= us, "{us} in a bucket up to {top}");
            }
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn totals_and_percentiles() {
        let c = Counters::new();
        assert_eq!(c.read().min_us, 0);
        assert_eq!(c.read().first_ms, None);
        for us in 1..=100u64 {
            c.add(&Sample {
                total_us: us * 1000,
                queued_us: us,
                server_us: us * 1000 - us,
                error: us % 10 == 0,
                replica: true,
                at_ms: us,
                ..Sample::default()
            });
        }
        let t = c.read();
        assert_eq!((t.count, t.errors, t.replica, t.pinned), (100, 10, 100, 0));
        assert_eq!((t.min_us, t.max_us), (1000, 100_000));
        assert_eq!(t.total_us, 5050 * 1000);
        assert_eq!(t.queued_us, 5050);
        assert_eq!((t.first_ms, t.last_ms), (Some(1), 100));
        // Within a bucket's width (25 %) above the exact values.
        assert!((50_000..=62_500).contains(&t.p50_us), "{}", t.p50_us);
        assert!((99_000..=100_000).contains(&t.p99_us), "{}", t.p99_us);

        let overflow = Counters::new();
        overflow.absorb(&c);
        overflow.absorb(&c);
        let o = overflow.read();
        assert_eq!(
            (o.count, o.errors, o.min_us, o.max_us),
            (200, 20, 1000, 100_000)
        );
        assert_eq!(o.p99_us, t.p99_us);
        overflow.clear();
        assert_eq!(overflow.read(), Totals::default());
    }
}
