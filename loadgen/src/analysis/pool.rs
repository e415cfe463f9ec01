//! Which pool size did best: pure functions over experiment C's and the proxy's rows.

use crate::measure::level::LevelResult;

/// The best pool row: most QPS; within 3 % of that, the lowest p99.
pub fn best_pool<'a>(rows: &[&'a LevelResult]) -> Option<&'a LevelResult> {
    let top = rows.iter().map(|r| r.qps).fold(0.0, f64::max);
    rows.iter()
        .filter(|r| r.qps >= top * 0.97)
        .min_by(|x, y| x.p99_ms.total_cmp(&y.p99_ms))
        .copied()
}

/// How many standard errors of the difference two QPS may differ by and still count as the
/// same: 2, about 95 % when the noise is normal.
pub const NOISE_SIGMAS: f64 = 2.0;

/// Which pool size to run, from one row per P.
#[derive(Debug, Clone)]
pub struct Recommendation<'a> {
    /// The smallest P whose QPS is within the noise of the best.
    pub chosen: &'a LevelResult,
    /// The row with the most QPS.
    pub best: &'a LevelResult,
    /// Every row within the noise of the best (the best and the chosen included), by P.
    pub tied: Vec<&'a LevelResult>,
    /// The noise band between the chosen row and the best: [`NOISE_SIGMAS`] standard errors
    /// of their difference, QPS. `None` when the rows carry no noise (CSVs from before
    /// `qps_se`): then the pick falls back to [`best_pool`].
    pub band: Option<f64>,
}

/// The noise band between two rows, QPS (`None` unless both measured their noise).
pub fn band(a: &LevelResult, b: &LevelResult) -> Option<f64> {
    Some(NOISE_SIGMAS * (a.qps_se?.powi(2) + b.qps_se?.powi(2)).sqrt())
}

/// The smallest P whose QPS cannot be told apart from the best's: throughput beyond it is
/// not shown to grow, and a smaller pool keeps the contention (and the p99) down.
pub fn recommend<'a>(rows: &[&'a LevelResult]) -> Option<Recommendation<'a>> {
    let best = *rows.iter().max_by(|x, y| x.qps.total_cmp(&y.qps))?;
    if rows.iter().any(|r| r.qps_se.is_none()) {
        let chosen = best_pool(rows)?;
        return Some(Recommendation {
            chosen,
            best,
            tied: vec![chosen],
            band: None,
        });
    }
    let mut tied: Vec<&LevelResult> = rows
        .iter()
        .copied()
        .filter(|r| std::ptr::eq(*r, best) || band(r, best).is_some_and(|b| best.qps - r.qps <= b))
        .collect();
    tied.sort_by_key(|r| r.pool_size.unwrap_or(usize::MAX));
    let chosen = tied.first().copied().unwrap_or(best);
    Some(Recommendation {
        chosen,
        best,
        band: band(chosen, best),
        tied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(p: usize, qps: f64, se: Option<f64>, p99_ms: f64) -> LevelResult {
        LevelResult {
            pool_size: Some(p),
            qps,
            qps_se: se,
            p99_ms,
            ..LevelResult::default()
        }
    }

    /// A sweep whose knee is at 2, where P=16's 140 QPS beat P=2's 106 QPS in one noisy
    /// 10 s window. Per-second QPS swinging by about +-50 (se 17-18 over 8 slices)
    /// puts 34 QPS inside the noise of the difference.
    #[test]
    fn the_smallest_pool_within_the_noise_of_the_best_is_recommended() {
        let sweep = [
            row(1, 70.0, Some(6.0), 9000.0),
            row(2, 106.0, Some(17.0), 4800.0),
            row(4, 118.0, Some(16.0), 4400.0),
            row(8, 122.0, Some(18.0), 4300.0),
            row(16, 140.0, Some(18.0), 3900.0),
            row(32, 128.0, Some(15.0), 4100.0),
        ];
        let rows: Vec<&LevelResult> = sweep.iter().collect();
        let r = recommend(&rows).unwrap();
        assert_eq!(r.chosen.pool_size, Some(2));
        assert_eq!(r.best.pool_size, Some(16));
        let band = r.band.unwrap();
        // 2 x sqrt(17^2 + 18^2) = 49.5 QPS covers 140 - 106 = 34.
        assert!((band - 2.0 * (17f64.powi(2) + 18f64.powi(2)).sqrt()).abs() < 1e-9);
        assert!(140.0 - 106.0 <= band);
        let tied: Vec<usize> = r.tied.iter().filter_map(|t| t.pool_size).collect();
        assert_eq!(tied, [2, 4, 8, 16, 32]);
        // P=1 is 70 QPS short of the best, outside 2 x sqrt(6^2 + 18^2) = 38 QPS.
        assert!(!tied.contains(&1));
    }

    #[test]
    fn a_quiet_host_separates_the_pool_sizes() {
        let sweep = [
            row(2, 106.0, Some(2.0), 4800.0),
            row(16, 140.0, Some(2.5), 3900.0),
        ];
        let rows: Vec<&LevelResult> = sweep.iter().collect();
        let r = recommend(&rows).unwrap();
        assert_eq!(r.chosen.pool_size, Some(16));
        assert_eq!(r.tied.len(), 1);
        assert!((r.band.unwrap() - 2.0 * (2.5f64.powi(2) * 2.0).sqrt()).abs() < 1e-9);
    }

    #[test]
    fn rows_without_noise_fall_back_to_the_best_pool() {
        let sweep = [row(2, 106.0, None, 4800.0), row(16, 140.0, None, 3900.0)];
        let rows: Vec<&LevelResult> = sweep.iter().collect();
        let r = recommend(&rows).unwrap();
        assert_eq!((r.chosen.pool_size, r.band), (Some(16), None));
        assert!(recommend(&[]).is_none());
    }
}
