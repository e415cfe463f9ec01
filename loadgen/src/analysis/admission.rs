//! Experiment F read from its rows: the peak, one service time, the goal for the admitted
//! p99, and whether admission control met it. Pure functions.

use crate::measure::level::LevelResult;

/// Everything F's summary and metadata say.
#[derive(Debug, Clone, PartialEq)]
pub struct FFindings {
    /// The closed-loop clients alone through sluice: the peak the overload is a multiple of.
    pub peak: f64,
    /// Sluice's pool size for F.
    pub pool: usize,
    /// The open stream's rate, queries/s, and as a multiple of the peak.
    pub open_qps: f64,
    pub load: f64,
    /// The open stream's connections.
    pub open_clients: usize,
    /// One service time at that pool: what a statement holds its slot for, ms.
    pub service_ms: f64,
    /// `max_queue_wait` of the admission row, ms.
    pub target_ms: Option<f64>,
}

impl FFindings {
    /// The goal for the admitted p99: the target plus one service time, ms.
    pub fn goal_ms(&self) -> Option<f64> {
        self.target_ms.map(|t| t + self.service_ms)
    }

    /// Whether an admission-control row meets the goal: p99 within it and QPS >= 95 % of
    /// the peak.
    pub fn meets(&self, r: &LevelResult) -> bool {
        self.goal_ms().is_some_and(|g| r.p99_ms <= g) && r.qps >= 0.95 * self.peak
    }
}

/// Statements shed, as a fraction of attempts.
pub fn shed_fraction(r: &LevelResult) -> f64 {
    if r.attempts > 0 {
        r.shed as f64 / r.attempts as f64
    } else {
        0.0
    }
}

/// F's findings from its rows (the peak row first: closed loop only, through sluice).
pub fn f_findings(rows: &[&LevelResult]) -> Option<FFindings> {
    let peak_row = rows
        .iter()
        .find(|r| r.target == "proxy" && r.open_clients.is_none())?;
    let peak = peak_row.qps;
    let pool = peak_row.pool_size.unwrap_or(0);
    let open_qps = rows.iter().find_map(|r| r.offered_qps).unwrap_or(0.0);
    Some(FFindings {
        peak,
        pool,
        open_qps,
        load: if peak > 0.0 { open_qps / peak } else { 0.0 },
        open_clients: rows.iter().find_map(|r| r.open_clients).unwrap_or(0),
        service_ms: if peak > 0.0 {
            pool as f64 / peak * 1e3
        } else {
            0.0
        },
        target_ms: rows.iter().find_map(|r| r.max_queue_wait_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        target: &str,
        open: Option<usize>,
        wait: Option<f64>,
        qps: f64,
        p99: f64,
    ) -> LevelResult {
        LevelResult {
            target: target.into(),
            open_clients: open,
            offered_qps: open.map(|_| 167.0),
            max_queue_wait_ms: wait,
            pool_size: (target == "proxy").then_some(2),
            qps,
            p99_ms: p99,
            ..LevelResult::default()
        }
    }

    #[test]
    fn the_goal_is_the_target_plus_one_service_time() {
        // The README's run: peak 111 QPS at P=2 (18 ms a statement), 200 ms target.
        let rows = [
            row("proxy", None, None, 111.0, 5000.0),
            row("direct", Some(256), None, 128.0, 8782.0),
            row("proxy", Some(256), None, 103.0, 7471.0),
            row("proxy", Some(256), Some(200.0), 112.0, 212.0),
        ];
        let refs: Vec<&LevelResult> = rows.iter().collect();
        let f = f_findings(&refs).unwrap();
        assert_eq!((f.peak, f.pool, f.open_clients), (111.0, 2, 256));
        assert!((f.service_ms - 18.02).abs() < 0.01, "{f:?}");
        assert!((f.load - 167.0 / 111.0).abs() < 1e-9);
        assert!((f.goal_ms().unwrap() - 218.02).abs() < 0.01);
        assert!(f.meets(&rows[3]));
        assert!(!f.meets(&rows[2]), "unbounded: p99 far over the goal");
        assert!(f_findings(&refs[1..]).is_none(), "no peak row");
    }
}
