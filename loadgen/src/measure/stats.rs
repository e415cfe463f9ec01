//! Statistics on one level's samples: latency quantiles, per-client fairness, in-flight
//! requests at window close, and the Little's-law check. Pure functions, no I/O.

use hdrhistogram::Histogram;

/// Largest latency we record, in µs (one hour); larger values saturate.
const MAX_US: u64 = 3_600_000_000;

/// A latency histogram in µs with 2 significant figures (1 % precision, about 20 KiB, so
/// one per client task stays cheap at 512 clients).
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts, so this cannot fail.
    Histogram::new_with_bounds(1, MAX_US, 2).expect("valid histogram bounds")
}

/// Latency summary in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
    /// Arithmetic mean.
    pub mean_ms: f64,
}

/// Quantiles of `h` (all zero when it is empty).
pub fn latency(h: &Histogram<u64>) -> Latency {
    if h.is_empty() {
        return Latency::default();
    }
    let ms = |us: u64| us as f64 / 1000.0;
    Latency {
        p50_ms: ms(h.value_at_quantile(0.50)),
        p90_ms: ms(h.value_at_quantile(0.90)),
        p99_ms: ms(h.value_at_quantile(0.99)),
        p999_ms: ms(h.value_at_quantile(0.999)),
        max_ms: ms(h.max()),
        mean_ms: h.mean() / 1000.0,
    }
}

/// The p-quantile (ms) of the finished requests *plus* the requests still unfinished at
/// window close, each counted at its age then. Ages are a lower bound on their eventual
/// latency, so this is the honest tail when the plain p99 ignores stuck requests.
pub fn quantile_with_unfinished(h: &Histogram<u64>, unfinished_us: &[u64], q: f64) -> f64 {
    let mut all = h.clone();
    for &age in unfinished_us {
        all.saturating_record(age.max(1));
    }
    if all.is_empty() {
        0.0
    } else {
        all.value_at_quantile(q) as f64 / 1000.0
    }
}

/// How evenly the window's queries were spread over the clients.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spread {
    /// Clients that finished at least one query in the window.
    pub served: usize,
    /// Fewest queries any client finished.
    pub min: u64,
    /// Median queries per client.
    pub median: f64,
    /// Most queries any client finished.
    pub max: u64,
    /// Jain's fairness index: 1 = perfectly even, 1/n = one client got everything.
    pub jain: f64,
}

/// Spread of per-client query counts (one entry per client, zeros included).
pub fn spread(counts: &[u64]) -> Spread {
    if counts.is_empty() {
        return Spread::default();
    }
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2] as f64
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) as f64 / 2.0
    };
    Spread {
        served: counts.iter().filter(|&&c| c > 0).count(),
        min: sorted[0],
        median,
        max: sorted[n - 1],
        jain: jain_index(counts),
    }
}

/// Jain's fairness index `(Σx)² / (n·Σx²)`; 0 when nobody got anything.
pub fn jain_index(xs: &[u64]) -> f64 {
    let sum: f64 = xs.iter().map(|&x| x as f64).sum();
    let sum_sq: f64 = xs.iter().map(|&x| (x as f64) * (x as f64)).sum();
    if xs.is_empty() || sum_sq == 0.0 {
        0.0
    } else {
        sum * sum / (xs.len() as f64 * sum_sq)
    }
}

/// Little's law: the mean number of requests in the system is `L = λ·W`
/// (throughput × mean latency). In a closed loop with no think time every client always
/// has exactly one request outstanding, so `L` must equal the offered concurrency; a ratio
/// well below 1 means time went missing from the measured latencies (for instance the
/// load generator itself was the bottleneck between queries).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Littles {
    /// `qps × mean latency (s)`.
    pub l: f64,
    /// `l / offered concurrency`.
    pub ratio: f64,
}

/// Computes the Little's-law check.
pub fn littles(qps: f64, mean_latency_ms: f64, offered: usize) -> Littles {
    let l = qps * mean_latency_ms / 1000.0;
    Littles {
        l,
        ratio: if offered == 0 {
            0.0
        } else {
            l / offered as f64
        },
    }
}

/// Mean of the values, `None` when empty.
pub fn mean(v: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (n, sum) = v
        .into_iter()
        .fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| sum / n as f64)
}

/// `a / b`, NaN when `b` is not positive.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

/// Standard error of a window's QPS from its answered counts per equal slice: the sample
/// standard deviation of the slices' QPS over the square root of their number (0 with
/// fewer than two slices).
pub fn qps_se(slices: &[u64], window_s: f64) -> f64 {
    let n = slices.len();
    if n < 2 || window_s <= 0.0 {
        return 0.0;
    }
    let slice_s = window_s / n as f64;
    let qps: Vec<f64> = slices.iter().map(|&c| c as f64 / slice_s).collect();
    let mean = qps.iter().sum::<f64>() / n as f64;
    let var = qps.iter().map(|q| (q - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    var.sqrt() / (n as f64).sqrt()
}

/// Requests unfinished at window close: how many, and the oldest one's age in ms.
pub fn unfinished(ages_us: &[u64]) -> (usize, f64) {
    let oldest = ages_us.iter().copied().max().unwrap_or(0);
    (ages_us.len(), oldest as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist_of_ms(values: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        let mut h = new_histogram();
        for v in values {
            h.record(v * 1000).unwrap();
        }
        h
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= b.abs() * 0.011 + 1e-9
    }

    #[test]
    fn percentiles_of_one_to_a_thousand_ms() {
        let l = latency(&hist_of_ms(1..=1000));
        assert!(close(l.p50_ms, 500.0), "{l:?}");
        assert!(close(l.p90_ms, 900.0), "{l:?}");
        assert!(close(l.p99_ms, 990.0), "{l:?}");
        assert!(close(l.p999_ms, 999.0), "{l:?}");
        assert!(close(l.max_ms, 1000.0), "{l:?}");
        assert!(close(l.mean_ms, 500.5), "{l:?}");
        assert_eq!(latency(&new_histogram()), Latency::default());
    }

    #[test]
    fn unfinished_requests_raise_the_tail() {
        // 98 fast answers at 10 ms, two requests still stuck at 5 s and 8 s.
        let h = hist_of_ms(std::iter::repeat_n(10, 98));
        assert!(close(latency(&h).p99_ms, 10.0));
        let ages = [5_000_000, 8_000_000];
        let p99 = quantile_with_unfinished(&h, &ages, 0.99);
        assert!(close(p99, 5000.0), "{p99}");
        assert_eq!(unfinished(&ages), (2, 8000.0));
        assert_eq!(unfinished(&[]), (0, 0.0));
    }

    #[test]
    fn jain_index_known_answers() {
        assert!(close(jain_index(&[5, 5, 5, 5]), 1.0));
        assert!(close(jain_index(&[10, 0, 0, 0]), 0.25));
        // (1+2+3)^2 / (3 * 14) = 36/42
        assert!(close(jain_index(&[1, 2, 3]), 36.0 / 42.0));
        assert_eq!(jain_index(&[0, 0]), 0.0);
        assert_eq!(jain_index(&[]), 0.0);
    }

    #[test]
    fn spread_counts_served_and_median() {
        let s = spread(&[0, 4, 1, 7]);
        assert_eq!((s.served, s.min, s.max), (3, 0, 7));
        assert!(close(s.median, 2.5));
        assert!(close(s.jain, 144.0 / (4.0 * 66.0)));
        assert!(close(spread(&[3, 1, 2]).median, 2.0));
    }

    #[test]
    fn qps_noise_is_the_standard_error_of_the_slices() {
        // 4 one-second slices of 90, 110, 90, 110 answers: QPS 100, sd 11.55, se 5.77.
        let se = qps_se(&[90, 110, 90, 110], 4.0);
        assert!((se - 20.0 / 3f64.sqrt() / 2.0).abs() < 1e-9, "{se}");
        // The same counts in half-second slices are twice the QPS and twice the noise.
        assert!((qps_se(&[90, 110, 90, 110], 2.0) - 2.0 * se).abs() < 1e-9);
        assert_eq!(qps_se(&[100, 100, 100], 3.0), 0.0);
        assert_eq!(qps_se(&[100], 1.0), 0.0);
    }

    #[test]
    fn littles_law_matches_a_saturated_closed_loop() {
        // 64 clients, 1000 q/s, 64 ms mean: L = 64, ratio 1.
        let l = littles(1000.0, 64.0, 64);
        assert!(close(l.l, 64.0) && close(l.ratio, 1.0), "{l:?}");
        // Half the time unaccounted for: ratio 0.5.
        assert!(close(littles(1000.0, 32.0, 64).ratio, 0.5));
        assert_eq!(littles(1.0, 1.0, 0).ratio, 0.0);
    }
}
