//! Experiment S: what transparency costs. Real applications set session variables and use
//! prepared statements on every connection; sluice carries both between backends instead of
//! pinning (replaying the variables, re-preparing statements lazily). This measures the knee
//! workload as SQL text and as prepared statements, directly over P connections and through
//! sluice with CLIENT_THREADS clients over P = 4, with and without per-client session state,
//! and counts how often a statement needed a replay round trip first.

use std::sync::atomic::{AtomicU64, Ordering};

use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;

use super::run::{Experiment, Plan, Run};
use crate::measure::client::LevelCtx;
use crate::measure::level::{Mode, Target};
use crate::settings::Settings;
use crate::targets::in_process::InProcessProxy;

/// The pool size of the transparency acceptance (512 clients over P = 4).
pub const SESSIONS_P: usize = 4;

const fn variant(sluice: bool, prepared: bool, session_setup: bool) -> Target {
    Target::Session {
        sluice,
        prepared,
        session_setup,
    }
}

/// Directly over P connections: text, then prepared statements.
const DIRECT: [Target; 2] = [variant(false, false, false), variant(false, true, false)];

/// Through sluice: text and prepared, without and then with per-client session state.
const THROUGH_SLUICE: [Target; 4] = [
    variant(true, false, false),
    variant(true, true, false),
    variant(true, false, true),
    variant(true, true, true),
];

/// Experiment S.
pub struct Sessions;

#[async_trait(?Send)]
impl Experiment for Sessions {
    fn name(&self) -> &'static str {
        "S (sessions)"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        Plan::levels(DIRECT.len(), s).then(Plan::sluice_levels(THROUGH_SLUICE.len(), s))
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        let p = SESSIONS_P;
        for target in DIRECT {
            let ctx = variant_ctx(run, &run.server_url.clone(), target)?;
            let spec = run.spec("S", target, Mode::Direct, p);
            let label = format!("{}: {p} connections", target.name());
            run.measure_fresh(&ctx, spec, label).await?;
        }
        let backend_addr = run.backend_addr()?;
        let clients = run.s.client_threads;
        for target in THROUGH_SLUICE {
            // A fresh sluice per row, so its counters describe this row alone.
            let proxy =
                InProcessProxy::start(&backend_addr, p, &run.s.loadgen_cpus, run.server_cpu_count)
                    .await?;
            let ctx = variant_ctx(run, &proxy.url(), target)?;
            let mut spec = run.spec("S", target, Mode::Direct, clients);
            spec.proxy_pool = Some(p);
            spec.pool_mode = Some("fixed");
            let label = format!("{}: {clients} clients, P={p}", target.name());
            let r = run.measure_fresh(&ctx, spec, label).await;
            if let Some(c) = proxy.context() {
                let stats = &c.stats;
                let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
                let (statements, replays) = (get(&stats.statements), get(&stats.replays));
                let pins: u64 = sluice::stats::PinReason::ALL
                    .iter()
                    .map(|r| stats.pins_by(*r))
                    .sum();
                let key = |what: &str| format!("sessions_{}_{what}", target.name());
                run.report.meta(&key("statements"), statements);
                run.report.meta(&key("replays"), replays);
                run.report.meta(
                    &key("replays_per_statement"),
                    format!("{:.4}", replays as f64 / statements.max(1) as f64),
                );
                run.report.meta(&key("pins"), pins);
                run.report
                    .meta(&key("backends_opened"), get(&stats.backend_connects));
            }
            run.stop_proxy(proxy).await;
            r?;
        }
        Ok(())
    }
}

fn variant_ctx(run: &Run<'_>, url: &str, target: Target) -> Result<LevelCtx> {
    let mut ctx = run.ctx(url, Some(run.workload))?;
    if let Target::Session {
        prepared,
        session_setup,
        ..
    } = target
    {
        ctx.prepared = prepared;
        ctx.session_setup = session_setup;
    }
    Ok(ctx)
}
