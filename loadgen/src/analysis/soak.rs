//! The soak's verdict: RSS growth after warm-up, a flat fd count, no errors. Pure functions over
//! the minutes sampled.

use crate::measure::timeline::SoakSample;

/// Samples (minutes) before the baseline: pools, buffers and allocator arenas settle.
const WARMUP_SAMPLES: usize = 2;
/// Allowed RSS growth after warm-up.
const MAX_RSS_GROWTH: f64 = 0.05;
/// Allowed spread of the fd count after warm-up (backends may come and go by a few).
const FD_SLACK: f64 = 0.01;

/// The checks at the end of a soak.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub baseline_rss: f64,
    pub final_rss: f64,
    /// (final - baseline) / baseline.
    pub rss_growth: f64,
    /// (max - min) / min of the fd count after warm-up.
    pub fd_spread: f64,
    pub errors: u64,
}

impl Verdict {
    pub fn of(samples: &[SoakSample], errors: u64) -> Verdict {
        let after: &[SoakSample] = samples.get(WARMUP_SAMPLES - 1..).unwrap_or(samples);
        let baseline_rss = after.first().map(|s| s.rss_mib).unwrap_or(0.0);
        let final_rss = after.last().map(|s| s.rss_mib).unwrap_or(0.0);
        let fds = after.iter().map(|s| s.fds);
        let (lo, hi) = (fds.clone().min().unwrap_or(0), fds.max().unwrap_or(0));
        Verdict {
            baseline_rss,
            final_rss,
            rss_growth: if baseline_rss > 0.0 {
                (final_rss - baseline_rss) / baseline_rss
            } else {
                0.0
            },
            fd_spread: if lo > 0 {
                (hi - lo) as f64 / lo as f64
            } else {
                0.0
            },
            errors,
        }
    }

    pub fn passed(&self) -> bool {
        self.rss_growth <= MAX_RSS_GROWTH && self.fd_spread <= FD_SLACK && self.errors == 0
    }

    /// One PASS/FAIL line per check.
    pub fn lines(&self, idle_errors: u64) -> Vec<String> {
        let mark = |ok: bool| if ok { "PASS" } else { "FAIL" };
        vec![
            format!(
                "{} RSS after warm-up {:.1} -> {:.1} MiB ({:+.2} %, limit {:.0} %)",
                mark(self.rss_growth <= MAX_RSS_GROWTH),
                self.baseline_rss,
                self.final_rss,
                self.rss_growth * 100.0,
                MAX_RSS_GROWTH * 100.0
            ),
            format!(
                "{} open fds spread after warm-up {:.2} % (limit {:.0} %)",
                mark(self.fd_spread <= FD_SLACK),
                self.fd_spread * 100.0,
                FD_SLACK * 100.0
            ),
            format!(
                "{} errors: {} (of which idle clients failing a final ping: {idle_errors})",
                mark(self.errors == 0),
                self.errors
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(minute: f64, rss: f64, fds: u64) -> SoakSample {
        SoakSample {
            minute,
            rss_mib: rss,
            fds,
            ..SoakSample::default()
        }
    }

    #[test]
    fn growth_is_measured_from_the_end_of_the_warm_up() {
        let samples = [
            sample(1.0, 50.0, 10_000),
            sample(2.0, 100.0, 10_600),
            sample(3.0, 103.0, 10_620),
            sample(4.0, 104.0, 10_610),
        ];
        let v = Verdict::of(&samples, 0);
        assert_eq!(v.baseline_rss, 100.0);
        assert!((v.rss_growth - 0.04).abs() < 1e-9);
        assert!(v.fd_spread < 0.01);
        assert!(v.passed());
        let grown = Verdict::of(
            &[
                samples[0].clone(),
                samples[1].clone(),
                sample(3.0, 106.0, 10_600),
            ],
            0,
        );
        assert!(!grown.passed(), "6 % growth fails");
        assert!(!Verdict::of(&samples, 1).passed(), "one error fails");
    }
}
