//! Experiment A, the curve: one dedicated connection per client for each offered
//! concurrency C. Experiment B, the collapse, is read from these rows
//! ([`crate::analysis::curve`]).

use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;

use super::run::{Experiment, Plan, Run};
use crate::analysis::curve::collapse_of;
use crate::cli::{ArrivalKind, Rate};
use crate::measure::level::{Arrival, Mode, Target};
use crate::settings::Settings;

/// Experiment A at CONC_LEVELS.
pub struct Curve;

#[async_trait(?Send)]
impl Experiment for Curve {
    fn name(&self) -> &'static str {
        "A (curve)"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        Plan::levels(s.conc_levels.len(), s)
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        let levels = run.s.conc_levels.clone();
        curve_at(run, &levels).await
    }
}

/// Experiment A at the given levels.
pub async fn curve_at(run: &mut Run<'_>, levels: &[usize]) -> Result<()> {
    let ctx = run.ctx(&run.server_url, Some(run.workload))?;
    let (arrival, fraction) = arrival(run);
    for &c in levels {
        let mut spec = run.spec("A", Target::Direct, Mode::Direct, c);
        spec.arrival = arrival;
        spec.rate_fraction = fraction;
        run.measure(&ctx, spec, format!("A: C={c} direct")).await?;
    }
    Ok(())
}

/// Runs a short curve when this run has none yet, so the peak is known: it sits near the
/// server's core count.
pub async fn ensure_curve(run: &mut Run<'_>) -> Result<()> {
    if run.report.rows_of("A").is_empty() {
        curve_at(run, &short_levels(run.s)).await?;
    }
    Ok(())
}

/// The levels of that short curve: 1, 2, 4, ... up to 4 x the server's CPUs (at least 4).
pub fn short_levels(s: &Settings) -> Vec<usize> {
    let top = (4 * s.server_cpus.len()).max(4);
    (0..)
        .map(|i| 1usize << i)
        .take_while(|&c| c <= top)
        .collect()
}

/// The arrival process `--arrival`/`--rate` ask for (A and C only).
pub fn arrival(run: &Run<'_>) -> (Arrival, Option<f64>) {
    match (run.s.arrival, run.s.rate) {
        (ArrivalKind::Open, Some(Rate::Absolute(r))) => (Arrival::Open { rate_qps: r }, None),
        (ArrivalKind::Open, Some(Rate::OfPeak(f))) => (
            Arrival::Open {
                rate_qps: f * peak_estimate(run),
            },
            Some(f),
        ),
        _ => (Arrival::Closed, None),
    }
}

/// Capacity estimate for `--rate 0.8x` outside the open experiment: the measured peak if A
/// ran, else server CPUs / serial mean latency.
fn peak_estimate(run: &Run<'_>) -> f64 {
    if let Some(c) = collapse_of(&run.report.rows_of("A")) {
        return c.peak.qps;
    }
    let mean = run
        .report
        .calibration
        .map(|c| c.mean_ms)
        .unwrap_or(1.0)
        .max(0.001);
    run.s.server_cpus.len() as f64 * 1000.0 / mean
}
