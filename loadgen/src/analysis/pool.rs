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
