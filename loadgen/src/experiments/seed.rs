//! Creates and seeds `reads_test` when it is missing or has the wrong row count, then warms the
//! buffer pool: the first step of every command that runs the knee query.

use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;

use super::run::{Experiment, Plan, Run};
use crate::settings::Settings;
use crate::workload;

/// Prepares the table.
pub struct Seed;

#[async_trait(?Send)]
impl Experiment for Seed {
    fn name(&self) -> &'static str {
        "seed"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        // Seeding is planned at 50,000 rows/s (a local server seeds faster); warming takes
        // under a second.
        Plan::fixed(Duration::from_secs(1) + Duration::from_secs_f64(f64::from(s.rows) / 50_000.0))
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        run.progress.log(format!(
            "preparing {} ({} rows)...",
            workload::TABLE,
            run.s.rows
        ));
        let seed = workload::prepare(&mut run.monitor, run.s.rows).await?;
        run.progress.log(format!(
            "{} in {:.1} s; warmed the buffer pool in {:.1} s",
            seed.action, seed.seed_secs, seed.warm_secs
        ));
        run.report.notes.push(seed.action.clone());
        run.report.meta("seed_action", &seed.action);
        run.report
            .meta("seed_secs", format!("{:.2}", seed.seed_secs));
        run.report
            .meta("warm_secs", format!("{:.2}", seed.warm_secs));
        Ok(())
    }
}
