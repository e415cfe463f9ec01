//! The open loop: Poisson arrivals at fractions of the measured peak, all direct rows, then all
//! rows through the in-process pool at the best P of C. Latency counts from the intended start.

use std::time::Duration;

use anyhow::{Context, Result};
use async_trait::async_trait;

use super::curve::{ensure_curve, short_levels};
use super::run::{Experiment, Plan, Run};
use crate::analysis::curve::collapse_of;
use crate::analysis::pool::best_pool;
use crate::measure::level::{Arrival, Mode, Target};
use crate::settings::Settings;

/// The open-loop experiment.
pub struct OpenLoop {
    /// Whether a curve runs before it in the same run (else it measures a short one).
    pub after_curve: bool,
}

#[async_trait(?Send)]
impl Experiment for OpenLoop {
    fn name(&self) -> &'static str {
        "open loop"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        let own = Plan::levels(2 * s.open_fractions.len(), s);
        if self.after_curve {
            own
        } else {
            Plan::levels(short_levels(s).len(), s).then(own)
        }
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        ensure_curve(run).await?;
        let peak = collapse_of(&run.report.rows_of("A"))
            .map(|c| c.peak.qps)
            .context("no peak measured")?;
        let pool_size = run
            .s
            .open_pool_size
            .or_else(|| best_pool(&run.report.rows_of("C")).and_then(|r| r.pool_size))
            .unwrap_or(run.s.server_cpus.len());
        run.report.meta("open_pool_size", pool_size);
        run.report.meta("open_peak_qps", format!("{peak:.1}"));
        let ctx = run.ctx(&run.server_url, Some(run.workload))?;
        let clients = run.s.client_threads;
        // All direct rows, then all pool rows: the connection cache then grows and shrinks once.
        for (target, mode) in [
            (Target::Direct, Mode::Direct),
            (Target::Pool, Mode::Pool(pool_size)),
        ] {
            for &f in &run.s.open_fractions.clone() {
                let mut spec = run.spec("O", target, mode, clients);
                spec.arrival = Arrival::Open { rate_qps: f * peak };
                spec.rate_fraction = Some(f);
                run.measure(&ctx, spec, format!("open: {f:.2}x peak, {}", target.name()))
                    .await?;
            }
        }
        Ok(())
    }
}
