//! Experiment C, the pool fix: CLIENT_THREADS clients over an in-process fair FIFO pool of P
//! connections, for each P in POOL_SIZES (latency includes the wait to borrow).

use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;

use super::curve::arrival;
use super::run::{Experiment, Plan, Run};
use crate::measure::level::{Mode, Target};
use crate::settings::Settings;

/// Experiment C.
pub struct Pool;

#[async_trait(?Send)]
impl Experiment for Pool {
    fn name(&self) -> &'static str {
        "C (pool)"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        Plan::levels(s.pool_sizes.len(), s)
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        let ctx = run.ctx(&run.server_url, Some(run.workload))?;
        let (arrival, fraction) = arrival(run);
        let clients = run.s.client_threads;
        for &p in &run.s.pool_sizes.clone() {
            let mut spec = run.spec("C", Target::Pool, Mode::Pool(p), clients);
            spec.arrival = arrival;
            spec.rate_fraction = fraction;
            run.measure(&ctx, spec, format!("C: {clients} clients, P={p}"))
                .await?;
        }
        Ok(())
    }
}
