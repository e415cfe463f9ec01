//! Experiment S: what transparency costs. Real applications set session variables and use
//! prepared statements on every connection; sluice carries both between backends instead of
//! pinning (replaying the variables, re-preparing statements lazily). This measures the knee
//! workload as SQL text and as prepared statements, directly over P connections and through
//! sluice with CLIENT_THREADS clients over P = 4, with and without per-client session state,
//! and counts how often a statement needed a replay round trip first.

use anyhow::Result;

use crate::experiments::Run;
use crate::measure::client::LevelCtx;
use crate::measure::level::{Mode, Target};

/// The pool size of the transparency acceptance (512 clients over P = 4).
pub const SESSIONS_P: usize = 4;

/// One row of the experiment: where, which protocol, whether clients set session state.
struct Variant {
    target: Target,
    prepared: bool,
    session_setup: bool,
}

const DIRECT: [Variant; 2] = [
    Variant {
        target: Target::Session {
            sluice: false,
            prepared: false,
            session_setup: false,
        },
        prepared: false,
        session_setup: false,
    },
    Variant {
        target: Target::Session {
            sluice: false,
            prepared: true,
            session_setup: false,
        },
        prepared: true,
        session_setup: false,
    },
];

const THROUGH_SLUICE: [Variant; 4] = [
    Variant {
        target: Target::Session {
            sluice: true,
            prepared: false,
            session_setup: false,
        },
        prepared: false,
        session_setup: false,
    },
    Variant {
        target: Target::Session {
            sluice: true,
            prepared: true,
            session_setup: false,
        },
        prepared: true,
        session_setup: false,
    },
    Variant {
        target: Target::Session {
            sluice: true,
            prepared: false,
            session_setup: true,
        },
        prepared: false,
        session_setup: true,
    },
    Variant {
        target: Target::Session {
            sluice: true,
            prepared: true,
            session_setup: true,
        },
        prepared: true,
        session_setup: true,
    },
];

/// Levels this experiment runs, for the progress bar.
pub const LEVELS: usize = DIRECT.len() + THROUGH_SLUICE.len();

impl Run<'_> {
    pub(crate) async fn sessions(&mut self) -> Result<()> {
        let p = SESSIONS_P;
        for v in &DIRECT {
            let ctx = self.variant_ctx(&self.server_url.clone(), v)?;
            let spec = self.spec("S", v.target, Mode::Direct, p);
            let label = format!("{}: {p} connections", v.target.name());
            self.measure_fresh(&ctx, spec, label).await?;
        }
        let backend_addr = dbkit::TestServer::from_url(&self.server_url)
            .map(|t| format!("{}:{}", t.host, t.port))
            .map_err(anyhow::Error::msg)?;
        let clients = self.s.client_threads;
        for v in &THROUGH_SLUICE {
            // A fresh sluice per row, so its counters describe this row alone.
            let proxy = crate::targets::in_process::InProcessProxy::start(
                &backend_addr,
                p,
                &self.s.loadgen_cpus,
            )
            .await?;
            let ctx = self.variant_ctx(&proxy.url(), v)?;
            let mut spec = self.spec("S", v.target, Mode::Direct, clients);
            spec.proxy_pool = Some(p);
            spec.pool_mode = Some("fixed");
            let label = format!("{}: {clients} clients, P={p}", v.target.name());
            let r = self.measure_fresh(&ctx, spec, label).await;
            if let Some(c) = proxy.context() {
                let stats = &c.stats;
                let get =
                    |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
                let (statements, replays) = (get(&stats.statements), get(&stats.replays));
                let pins: u64 = sluice::stats::PinReason::ALL
                    .iter()
                    .map(|r| stats.pins_by(*r))
                    .sum();
                let key = |what: &str| format!("sessions_{}_{what}", v.target.name());
                self.report.meta(&key("statements"), statements);
                self.report.meta(&key("replays"), replays);
                self.report.meta(
                    &key("replays_per_statement"),
                    format!("{:.4}", replays as f64 / statements.max(1) as f64),
                );
                self.report.meta(&key("pins"), pins);
                self.report
                    .meta(&key("backends_opened"), get(&stats.backend_connects));
            }
            proxy.stop().await;
            r?;
        }
        Ok(())
    }

    fn variant_ctx(&self, url: &str, v: &Variant) -> Result<LevelCtx> {
        let mut ctx = self.ctx(url, Some(self.workload))?;
        ctx.prepared = v.prepared;
        ctx.session_setup = v.session_setup;
        Ok(ctx)
    }
}
