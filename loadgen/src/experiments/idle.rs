//! Experiment D, the original study's idle connections: for each workload (the knee query,
//! then a point-select mix) and each N in IDLE_LEVELS (default 0..1500), N connections log in
//! and stay idle while 4 clients run it; directly at the server, then through sluice (where
//! idle clients hold no server connection at all).

use std::time::Duration;

use anyhow::{Context, Result};
use async_trait::async_trait;

use super::run::{Experiment, Plan, Run};
use crate::measure::conns::{close_conns, open_conns};
use crate::measure::level::{Mode, Target};
use crate::settings::Settings;
use crate::workload::{Mix, Workload};

/// Active clients, as in the original study (a pool of 4).
const IDLE_ACTIVE_CLIENTS: usize = 4;
/// The workloads of the active clients.
const IDLE_MIXES: [Mix; 2] = [Mix::Knee, Mix::PointSelect];

/// Experiment D.
pub struct Idle;

#[async_trait(?Send)]
impl Experiment for Idle {
    fn name(&self) -> &'static str {
        "D (idle connections)"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        let targets = if cfg!(feature = "proxy") { 2 } else { 1 };
        let levels = targets * IDLE_MIXES.len() * s.idle_levels.len();
        // Every level also opens its idle connections (planned at 1 ms each).
        let opened: usize = s.idle_levels.iter().sum::<usize>() * targets * IDLE_MIXES.len();
        Plan::levels(levels, s).then(Plan::fixed(Duration::from_millis(opened as u64)))
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        let server = run.server_url.clone();
        idle_at(run, Target::Direct, &server, None).await?;
        #[cfg(feature = "proxy")]
        {
            let backend_addr = run.backend_addr()?;
            let proxy = crate::targets::in_process::InProcessProxy::start(
                &backend_addr,
                IDLE_ACTIVE_CLIENTS,
                &run.s.loadgen_cpus,
                run.server_cpu_count,
            )
            .await?;
            let r = idle_at(run, Target::Proxy, &proxy.url(), Some(IDLE_ACTIVE_CLIENTS)).await;
            run.stop_proxy(proxy).await;
            r?;
        }
        Ok(())
    }
}

async fn idle_at(run: &mut Run<'_>, target: Target, url: &str, pool: Option<usize>) -> Result<()> {
    for mix in IDLE_MIXES {
        let workload = Workload {
            mix,
            ..run.workload
        };
        idle_levels(run, target, url, pool, workload).await?;
    }
    Ok(())
}

async fn idle_levels(
    run: &mut Run<'_>,
    target: Target,
    url: &str,
    pool: Option<usize>,
    workload: Workload,
) -> Result<()> {
    let ctx = run.ctx(url, Some(workload))?;
    run.cache.close().await;
    for &n in &run.s.idle_levels.clone() {
        let idle = open_conns(&ctx.load, n)
            .await
            .with_context(|| format!("opening {n} idle connections to {}", target.name()))?;
        let mut spec = run.spec("D", target, Mode::Direct, IDLE_ACTIVE_CLIENTS);
        spec.idle_conns = Some(n);
        spec.proxy_pool = pool;
        spec.pool_mode = pool.map(|_| "fixed");
        let label = format!(
            "D: {IDLE_ACTIVE_CLIENTS} active {}, {n} idle, {}",
            workload.mix.label(),
            target.name()
        );
        let r = run.measure_fresh(&ctx, spec, label).await;
        close_conns(idle).await;
        r?;
    }
    Ok(())
}
