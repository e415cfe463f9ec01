//! What every experiment shares: the [`Experiment`] trait, the run's context ([`Run`]) and the
//! ways to measure one level (on the cached direct connections, on connections of its own, or
//! through a fresh in-process sluice). An experiment is a type of its own that implements the
//! trait; nothing here knows any experiment.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use async_trait::async_trait;
use mysql_async::Conn;

use crate::measure::client::LevelCtx;
use crate::measure::conns::ConnCache;
use crate::measure::level::{run_level, Arrival, LevelResult, LevelSpec, Mode, Target};
#[cfg(feature = "proxy")]
use crate::measure::monitor::kill_running_queries;
use crate::progress::Progress;
use crate::report::Report;
use crate::settings::Settings;
use crate::workload::{conn_opts, Workload};

/// One experiment: what it plans to take, and how it runs.
#[async_trait(?Send)]
pub trait Experiment {
    /// Short name, for the plan printed at start and the progress display.
    fn name(&self) -> &'static str;

    /// The wall time it plans with these settings, when one serial query takes `query`
    /// (assumed until the calibration measures it).
    fn plan(&self, s: &Settings, query: Duration) -> Plan;

    /// Runs it: rows, metadata and notes go to `run.report`.
    async fn run(&self, run: &mut Run<'_>) -> Result<()>;
}

/// What a level costs besides its warm-up and window, by how its clients connect: opening
/// and trimming connections, the mid-window monitor query, cancelling what is still running
/// at the close, the merge. Estimated from the smoke runs in loadgen/README.md, rounded up.
pub const DIRECT_LEVEL_SETUP: Duration = Duration::from_millis(1000);
/// The same through a fresh in-process sluice: its start, 512 client logins through it, the
/// clients' half-second wait for answers after the close, its stop.
pub const SLUICE_LEVEL_SETUP: Duration = Duration::from_millis(2500);

/// The wall time an experiment plans.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Plan {
    /// Measured levels.
    pub levels: u32,
    /// Warm-ups plus windows of those levels.
    pub measured: Duration,
    /// Everything else it waits for: level setups and drains, proxy starts, serial queries.
    pub fixed: Duration,
}

impl Plan {
    /// `levels` levels of one warm-up and one window each, on direct or pooled connections.
    pub fn levels(levels: usize, s: &Settings) -> Plan {
        Plan::each(levels, s.warmup + s.window, DIRECT_LEVEL_SETUP)
    }

    /// `levels` levels of one warm-up and one window each, each through a fresh sluice.
    pub fn sluice_levels(levels: usize, s: &Settings) -> Plan {
        Plan::each(levels, s.warmup + s.window, SLUICE_LEVEL_SETUP)
    }

    /// `levels` levels of `each` (warm-up included) plus `setup` each.
    pub fn each(levels: usize, each: Duration, setup: Duration) -> Plan {
        let levels = u32::try_from(levels).unwrap_or(u32::MAX);
        Plan {
            levels,
            measured: each * levels,
            fixed: setup * levels,
        }
    }

    /// Only fixed time (serial queries, seeding).
    pub fn fixed(fixed: Duration) -> Plan {
        Plan {
            fixed,
            ..Plan::default()
        }
    }

    /// The two plans one after the other.
    pub fn then(self, other: Plan) -> Plan {
        Plan {
            levels: self.levels + other.levels,
            measured: self.measured + other.measured,
            fixed: self.fixed + other.fixed,
        }
    }

    /// All of it.
    pub fn total(&self) -> Duration {
        self.measured + self.fixed
    }
}

/// Shared state of one run's experiments.
pub struct Run<'a> {
    /// Validated settings.
    pub s: &'a Settings,
    /// Progress bar and log.
    pub progress: &'a Progress,
    /// Results so far.
    pub report: &'a mut Report,
    /// Direct server URL.
    pub server_url: String,
    /// Monitor connection, opened before any load.
    pub monitor: Conn,
    /// The query generator.
    pub workload: Workload,
    /// Idle direct connections between levels.
    pub cache: ConnCache,
    /// The local server's pid (experiment E re-pins it); `None` for docker and external.
    pub server_pid: Option<u32>,
    /// How many CPUs the server runs on, when loadgen started it (pinned to `server_cpus`):
    /// sluice is told (`server_cpus`), since MySQL Community does not say. `None` for an
    /// external server, whose CPUs sluice learns where the server reports them.
    pub server_cpu_count: Option<u32>,
}

impl Run<'_> {
    /// Options and query generator for load at `url`; `None` sends `SELECT 1`.
    pub fn ctx(&self, url: &str, workload: Option<Workload>) -> Result<LevelCtx> {
        Ok(LevelCtx {
            load: conn_opts(url)?,
            workload,
            seed: self.s.seed,
            live: None,
            prepared: false,
            session_setup: false,
        })
    }

    /// A closed-loop level with the run's warm-up and window.
    pub fn spec(
        &self,
        experiment: &'static str,
        target: Target,
        mode: Mode,
        clients: usize,
    ) -> LevelSpec {
        LevelSpec {
            experiment,
            target,
            mode,
            clients,
            proxy_pool: None,
            arrival: Arrival::Closed,
            rate_fraction: None,
            warmup: self.s.warmup,
            window: self.s.window,
            idle_conns: None,
            open_stream: None,
            pool_mode: None,
            max_queue_wait_ms: None,
            relay_pid: None,
            server_pid: None,
            round: None,
        }
    }

    /// The server's `host:port`, for a proxy or relay in front of it.
    pub fn backend_addr(&self) -> Result<String> {
        dbkit::TestServer::from_url(&self.server_url)
            .map(|t| format!("{}:{}", t.host, t.port))
            .map_err(anyhow::Error::msg)
    }

    /// Measures one level on the direct-connection cache.
    pub async fn measure(&mut self, ctx: &LevelCtx, spec: LevelSpec, label: String) -> Result<()> {
        let mut cache = std::mem::take(&mut self.cache);
        let r = self.measure_with(ctx, spec, label, &mut cache).await;
        self.cache = cache;
        r
    }

    /// [`measure_with`](Self::measure_with) on connections of its own, closed afterwards.
    pub async fn measure_fresh(
        &mut self,
        ctx: &LevelCtx,
        spec: LevelSpec,
        label: String,
    ) -> Result<()> {
        let mut cache = ConnCache::default();
        let r = self.measure_with(ctx, spec, label, &mut cache).await;
        cache.close().await;
        r
    }

    /// One level through an in-process sluice, which is stopped afterwards.
    #[cfg(feature = "proxy")]
    pub async fn measure_via(
        &mut self,
        proxy: crate::targets::in_process::InProcessProxy,
        workload: Option<Workload>,
        spec: LevelSpec,
        label: String,
    ) -> Result<()> {
        let ctx = self.ctx(&proxy.url(), workload)?;
        let r = self.measure_fresh(&ctx, spec, label).await;
        self.stop_proxy(proxy).await;
        r
    }

    /// Stops an in-process sluice, then cancels what its backends were still running on the
    /// server (statements dispatched from its queue after the window closed), so the next
    /// level starts on an idle server.
    #[cfg(feature = "proxy")]
    pub async fn stop_proxy(&mut self, proxy: crate::targets::in_process::InProcessProxy) {
        proxy.stop().await;
        kill_running_queries(&mut self.monitor).await;
    }

    /// Measures one level on `cache`, logs its line and records its row.
    pub async fn measure_with(
        &mut self,
        ctx: &LevelCtx,
        spec: LevelSpec,
        label: String,
        cache: &mut ConnCache,
    ) -> Result<()> {
        let started = Instant::now();
        let row = self.measure_row(ctx, &spec, &label, cache).await?;
        self.record(&label, row, started)
    }

    /// Logs a measured level's line (`started` is when its measurement began) and records
    /// its row.
    pub fn record(&mut self, label: &str, row: LevelResult, started: Instant) -> Result<()> {
        self.progress.log(format!(
            "{label:<28} {:>7.0} QPS  p50 {:>8.2} ms  p99 {:>8.2} ms  served {}/{}  inflight {}  errors {}  ({:.1} s)",
            row.qps, row.p50_ms, row.p99_ms, row.clients_served, row.clients, row.inflight_at_close, row.errors,
            started.elapsed().as_secs_f64()
        ));
        self.report.push(row)
    }

    /// Measures one level on `cache` with the progress bar running, and returns its row
    /// without logging or recording it.
    pub async fn measure_row(
        &mut self,
        ctx: &LevelCtx,
        spec: &LevelSpec,
        label: &str,
        cache: &mut ConnCache,
    ) -> Result<LevelResult> {
        let _ticker = self
            .progress
            .level(label.to_string(), spec.warmup + spec.window);
        run_level(ctx, spec, &mut self.monitor, cache)
            .await
            .with_context(|| format!("level {label}"))
    }
}
