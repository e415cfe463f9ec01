//! Experiments A and B read from their rows: the peak, the collapse at the largest C, and the
//! knee a recommendation starts from. Pure functions over measured rows.

use crate::measure::level::LevelResult;
use crate::measure::stats::ratio;

/// Experiment B: the peak of the curve against its largest C.
#[derive(Debug, Clone)]
pub struct Collapse {
    /// The row with the most QPS.
    pub peak: LevelResult,
    /// The row with the most clients.
    pub worst: LevelResult,
    /// Peak QPS over the largest C's QPS.
    pub qps_ratio: f64,
    /// The largest C's p99 over the peak's p99.
    pub p99_ratio: f64,
}

/// The collapse of a curve (`None` without rows).
pub fn collapse_of(rows: &[&LevelResult]) -> Option<Collapse> {
    let peak = rows.iter().max_by(|x, y| x.qps.total_cmp(&y.qps))?;
    let worst = rows.iter().max_by_key(|r| r.clients)?;
    Some(Collapse {
        peak: (*peak).clone(),
        worst: (*worst).clone(),
        qps_ratio: ratio(peak.qps, worst.qps),
        p99_ratio: ratio(worst.p99_ms, peak.p99_ms),
    })
}

/// The knee: the fewest connections that already reach 95 % of the best throughput (the
/// exact maximum is often a noisy point further right).
pub fn knee<'a>(rows: &[&'a LevelResult]) -> Option<&'a LevelResult> {
    let peak = rows.iter().map(|r| r.qps).fold(f64::NAN, f64::max);
    rows.iter()
        .filter(|r| r.qps >= 0.95 * peak)
        .min_by_key(|r| r.clients)
        .copied()
}
