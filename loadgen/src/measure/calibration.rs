//! Calibration: the query's serial latency on one connection, before any load.

use std::time::Instant;

use anyhow::Result;
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use rand::Rng;

use super::stats;

/// Unmeasured serial queries before the calibration's, after the first.
pub const WARM_UP_QUERIES: u64 = 20;
use crate::workload::Workload;

/// Serial single-connection latency of the query.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calibration {
    /// Queries measured.
    pub queries: u64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Mean latency, ms.
    pub mean_ms: f64,
    /// Rows the first query returned (50 expected).
    pub rows_returned: Option<usize>,
}

/// Runs `queries` serial queries on `conn` (after a short warm-up) and measures them.
pub async fn calibrate(
    conn: &mut Conn,
    workload: Workload,
    queries: u64,
    rng: &mut impl Rng,
) -> Result<Calibration> {
    let rows: Vec<(i32, i32)> = conn.query(workload.query(rng)).await?;
    for _ in 0..WARM_UP_QUERIES {
        conn.query_drop(workload.query(rng)).await?;
    }
    let mut h = stats::new_histogram();
    for _ in 0..queries {
        let q = workload.query(rng);
        let t = Instant::now();
        conn.query_drop(q).await?;
        h.saturating_record(t.elapsed().as_micros() as u64);
    }
    let l = stats::latency(&h);
    Ok(Calibration {
        queries,
        p50_ms: l.p50_ms,
        p99_ms: l.p99_ms,
        mean_ms: l.mean_ms,
        rows_returned: Some(rows.len()),
    })
}
