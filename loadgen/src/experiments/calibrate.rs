//! Calibration: the query's serial latency on one connection, before any load.

use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;
use rand::SeedableRng;

use super::run::{Experiment, Plan, Run};
use crate::measure::calibration;
use crate::settings::Settings;
use crate::workload::{self, conn_opts};

/// Serial queries in the calibration (the issue asks for at least 500).
const CALIBRATION_QUERIES: u64 = 500;
/// Serial queries before those (see [`calibration::calibrate`]).
const WARM_UP_QUERIES: u64 = calibration::WARM_UP_QUERIES;

/// Serial single-connection latency of the query.
pub struct Calibrate;

#[async_trait(?Send)]
impl Experiment for Calibrate {
    fn name(&self) -> &'static str {
        "calibration"
    }

    fn plan(&self, _: &Settings, query: Duration) -> Plan {
        Plan::fixed(query * (CALIBRATION_QUERIES + WARM_UP_QUERIES) as u32)
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        let mut conn = workload::connect(&conn_opts(&run.server_url)?).await?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(run.s.seed);
        let cal =
            calibration::calibrate(&mut conn, run.workload, CALIBRATION_QUERIES, &mut rng).await?;
        let _ = conn.disconnect().await;
        run.progress.log(format!(
            "calibration: serial p50 {:.2} ms, p99 {:.2} ms over {} queries",
            cal.p50_ms, cal.p99_ms, cal.queries
        ));
        run.report.meta("calibration_queries", cal.queries);
        run.report
            .meta("calibration_p50_ms", format!("{:.3}", cal.p50_ms));
        run.report
            .meta("calibration_p99_ms", format!("{:.3}", cal.p99_ms));
        run.report
            .meta("calibration_mean_ms", format!("{:.3}", cal.mean_ms));
        if let Some(n) = cal.rows_returned {
            run.report.meta("calibration_rows_returned", n);
        }
        run.report.calibration = Some(cal);
        Ok(())
    }
}
