//! The proxy rows: CLIENT_THREADS clients through a fresh in-process sluice for each pool size
//! P in POOL_SIZES, or through the external sluice at `--proxy-url`.

use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;

use super::run::{Experiment, Plan, Run};
use crate::measure::level::{Mode, Target};
use crate::settings::Settings;
use crate::targets::in_process::InProcessProxy;

/// The proxy rows.
pub struct Proxy;

#[async_trait(?Send)]
impl Experiment for Proxy {
    fn name(&self) -> &'static str {
        "proxy"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        if s.proxy_url.is_some() {
            Plan::levels(1, s)
        } else {
            Plan::sluice_levels(s.pool_sizes.len(), s)
        }
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        let clients = run.s.client_threads;
        if let Some(url) = run.s.proxy_url.clone() {
            let ctx = run.ctx(&url, Some(run.workload))?;
            let spec = run.spec("proxy", Target::Proxy, Mode::Direct, clients);
            let label = format!("proxy: {clients} clients, external");
            return run.measure_fresh(&ctx, spec, label).await;
        }
        let backend_addr = run.backend_addr()?;
        // Direct connections would sit idle on the server during the proxy rows.
        run.cache.close().await;
        for &p in &run.s.pool_sizes.clone() {
            let proxy =
                InProcessProxy::start(&backend_addr, p, &run.s.loadgen_cpus, run.server_cpu_count)
                    .await?;
            let mut spec = run.spec("proxy", Target::Proxy, Mode::Direct, clients);
            spec.proxy_pool = Some(p);
            spec.pool_mode = Some("fixed");
            let label = format!("sluice: {clients} clients, P={p}");
            run.measure_via(proxy, Some(run.workload), spec, label)
                .await?;
        }
        Ok(())
    }
}
