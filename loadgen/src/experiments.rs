//! The experiments: calibration, A (curve), B (collapse, derived), C (pool), open loop,
//! proxy and overhead. Each level's row goes to the report as soon as it is measured.

use std::time::Duration;

use anyhow::{Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use rand::SeedableRng;

use crate::cli::{ArrivalKind, Command, Rate};
use crate::measure::client::LevelCtx;
use crate::measure::conns::ConnCache;
use crate::measure::level::{run_level, Arrival, LevelSpec, Mode, Target};
use crate::progress::Progress;
use crate::report::summary::{best_pool, collapse_of};
use crate::report::Report;
use crate::settings::Settings;
use crate::workload::{self, conn_opts, Mix, Workload};

/// Experiment D: idle connections held open while the active clients run (the seed study's
/// 0..1500).
pub const IDLE_LEVELS: &[usize] = &[0, 20, 100, 500, 1000, 1500];
/// Experiment D: active clients, as in the seed study (a pool of 4).
const IDLE_ACTIVE_CLIENTS: usize = 4;
/// Experiment D: the workloads of the active clients.
const IDLE_MIXES: [Mix; 2] = [Mix::Knee, Mix::PointSelect];

/// Serial queries in the calibration (the issue asks for at least 500).
const CALIBRATION_QUERIES: u64 = 500;
/// Levels of experiment S (none without the in-process proxy).
#[cfg(feature = "proxy")]
const SESSION_LEVELS: usize = crate::sessions::LEVELS;
#[cfg(not(feature = "proxy"))]
const SESSION_LEVELS: usize = 0;

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
}

/// Seconds the progress bar should plan for this command.
pub fn planned(s: &Settings) -> Duration {
    let per = s.warmup + s.window;
    let levels = match s.command {
        Command::Bench { .. } => {
            s.conc_levels.len()
                + 3 * s.pool_sizes.len()
                + 2 * s.open_fractions.len()
                + 3
                + SESSION_LEVELS
        }
        Command::Adaptive => s.pool_sizes.len(),
        Command::Admission => 3 + 4,
        Command::Curve => s.conc_levels.len(),
        Command::Pool | Command::Proxy => s.pool_sizes.len(),
        Command::Open => 2 * s.open_fractions.len() + 4,
        Command::Overhead => 4,
        Command::Idle => 2 * IDLE_MIXES.len() * IDLE_LEVELS.len(),
        Command::Sessions => SESSION_LEVELS,
        Command::Calibrate | Command::Seed => 0,
        Command::Soak { short } => return crate::soak::SoakPlan::new(short, 0).duration(),
    };
    let auto = match s.command {
        Command::Bench { .. } | Command::Adaptive => s.adaptive,
        _ => Duration::ZERO,
    };
    per * levels as u32 + auto
}

impl Run<'_> {
    /// Runs the settings' subcommand.
    pub async fn execute(&mut self) -> Result<()> {
        let version: Option<String> = self.monitor.query_first("SELECT VERSION()").await?;
        self.report
            .meta("server_version", version.unwrap_or_default());
        if !matches!(self.s.command, Command::Overhead) {
            self.progress.log(format!(
                "preparing {} ({} rows)...",
                workload::TABLE,
                self.s.rows
            ));
            let seed = workload::prepare(&mut self.monitor, self.s.rows).await?;
            self.progress.log(format!(
                "{} in {:.1} s; warmed the buffer pool in {:.1} s",
                seed.action, seed.seed_secs, seed.warm_secs
            ));
            self.report.notes.push(seed.action.clone());
            self.report.meta("seed_action", &seed.action);
            self.report
                .meta("seed_secs", format!("{:.2}", seed.seed_secs));
            self.report
                .meta("warm_secs", format!("{:.2}", seed.warm_secs));
        }
        match self.s.command {
            Command::Seed => {}
            Command::Calibrate => self.calibrate().await?,
            Command::Curve => {
                self.calibrate().await?;
                self.curve(&self.s.conc_levels.clone()).await?;
            }
            Command::Pool => {
                self.calibrate().await?;
                self.pool().await?;
            }
            Command::Open => {
                self.calibrate().await?;
                self.open_loop().await?;
            }
            Command::Proxy => self.proxy().await?,
            Command::Overhead => self.overhead().await?,
            Command::Idle => self.idle().await?,
            Command::Sessions => self.sessions().await?,
            Command::Adaptive => {
                self.calibrate().await?;
                self.adaptive().await?;
            }
            Command::Admission => {
                self.calibrate().await?;
                self.admission().await?;
            }
            Command::Soak { short } => self.soak(short).await?,
            Command::Bench { .. } => {
                self.calibrate().await?;
                self.curve(&self.s.conc_levels.clone()).await?;
                self.pool().await?;
                self.open_loop().await?;
                self.proxy().await?;
                self.sessions().await?;
                self.adaptive().await?;
                self.admission().await?;
            }
        }
        Ok(())
    }

    pub(crate) fn ctx(&self, url: &str, workload: Option<Workload>) -> Result<LevelCtx> {
        Ok(LevelCtx {
            load: conn_opts(url)?,
            workload,
            seed: self.s.seed,
            completed: None,
            prepared: false,
            session_setup: false,
        })
    }

    /// Experiment D, the seed's idle-connections study: for each workload (the knee query,
    /// then a point-select mix) and each N in IDLE_LEVELS, N connections log in and stay idle
    /// while 4 clients run it; directly at the server, then through sluice (where idle
    /// clients hold no server connection at all).
    async fn idle(&mut self) -> Result<()> {
        let server = self.server_url.clone();
        self.idle_at(Target::Direct, &server, None).await?;
        #[cfg(feature = "proxy")]
        {
            let backend_addr = dbkit::TestServer::from_url(&self.server_url)
                .map(|t| format!("{}:{}", t.host, t.port))
                .map_err(anyhow::Error::msg)?;
            let proxy = crate::targets::in_process::InProcessProxy::start(
                &backend_addr,
                IDLE_ACTIVE_CLIENTS,
                &self.s.loadgen_cpus,
            )
            .await?;
            let r = self
                .idle_at(Target::Proxy, &proxy.url(), Some(IDLE_ACTIVE_CLIENTS))
                .await;
            proxy.stop().await;
            r?;
        }
        Ok(())
    }

    async fn idle_at(&mut self, target: Target, url: &str, pool: Option<usize>) -> Result<()> {
        for mix in IDLE_MIXES {
            let workload = Workload {
                mix,
                ..self.workload
            };
            self.idle_levels(target, url, pool, workload).await?;
        }
        Ok(())
    }

    async fn idle_levels(
        &mut self,
        target: Target,
        url: &str,
        pool: Option<usize>,
        workload: Workload,
    ) -> Result<()> {
        let ctx = self.ctx(url, Some(workload))?;
        self.cache.close().await;
        for &n in IDLE_LEVELS {
            let idle = crate::measure::conns::open_conns(&ctx.load, n)
                .await
                .with_context(|| format!("opening {n} idle connections to {}", target.name()))?;
            let mut spec = self.spec("D", target, Mode::Direct, IDLE_ACTIVE_CLIENTS);
            spec.idle_conns = Some(n);
            spec.proxy_pool = pool;
            spec.pool_mode = pool.map(|_| "fixed");
            let label = format!(
                "D: {IDLE_ACTIVE_CLIENTS} active {}, {n} idle, {}",
                workload.mix.label(),
                target.name()
            );
            let r = self.measure_fresh(&ctx, spec, label).await;
            crate::measure::conns::close_conns(idle).await;
            r?;
        }
        Ok(())
    }

    async fn calibrate(&mut self) -> Result<()> {
        let mut conn = workload::connect(&conn_opts(&self.server_url)?).await?;
        let mut rng = rand::rngs::StdRng::seed_from_u64(self.s.seed);
        let cal =
            workload::calibrate(&mut conn, self.workload, CALIBRATION_QUERIES, &mut rng).await?;
        let _ = conn.disconnect().await;
        self.progress.log(format!(
            "calibration: serial p50 {:.2} ms, p99 {:.2} ms over {} queries",
            cal.p50_ms, cal.p99_ms, cal.queries
        ));
        self.report.meta("calibration_queries", cal.queries);
        self.report
            .meta("calibration_p50_ms", format!("{:.3}", cal.p50_ms));
        self.report
            .meta("calibration_p99_ms", format!("{:.3}", cal.p99_ms));
        self.report
            .meta("calibration_mean_ms", format!("{:.3}", cal.mean_ms));
        self.report.calibration = Some(cal);
        Ok(())
    }

    /// Capacity estimate for `--rate 0.8x` outside the open experiment: the measured peak
    /// if A ran, else server CPUs / serial mean latency.
    fn peak_estimate(&self) -> f64 {
        let a = self.report.rows_of("A");
        if let Some((peak, ..)) = collapse_of(&a) {
            return peak.qps;
        }
        let mean = self
            .report
            .calibration
            .map(|c| c.mean_ms)
            .unwrap_or(1.0)
            .max(0.001);
        self.s.server_cpus.len() as f64 * 1000.0 / mean
    }

    fn arrival(&self) -> (Arrival, Option<f64>) {
        match (self.s.arrival, self.s.rate) {
            (ArrivalKind::Open, Some(Rate::Absolute(r))) => (Arrival::Open { rate_qps: r }, None),
            (ArrivalKind::Open, Some(Rate::OfPeak(f))) => (
                Arrival::Open {
                    rate_qps: f * self.peak_estimate(),
                },
                Some(f),
            ),
            _ => (Arrival::Closed, None),
        }
    }

    /// Measures one level on the direct-connection cache.
    async fn measure(&mut self, ctx: &LevelCtx, spec: LevelSpec, label: String) -> Result<()> {
        let mut cache = std::mem::take(&mut self.cache);
        let r = self.measure_with(ctx, spec, label, &mut cache).await;
        self.cache = cache;
        r
    }

    /// [`measure_with`](Self::measure_with) on connections of its own, closed afterwards.
    pub(crate) async fn measure_fresh(
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
    pub(crate) async fn measure_via(
        &mut self,
        proxy: crate::targets::in_process::InProcessProxy,
        workload: Option<Workload>,
        spec: LevelSpec,
        label: String,
    ) -> Result<()> {
        let ctx = self.ctx(&proxy.url(), workload)?;
        let r = self.measure_fresh(&ctx, spec, label).await;
        proxy.stop().await;
        r
    }

    pub(crate) async fn measure_with(
        &mut self,
        ctx: &LevelCtx,
        spec: LevelSpec,
        label: String,
        cache: &mut ConnCache,
    ) -> Result<()> {
        let _ticker = self
            .progress
            .level(label.clone(), spec.warmup + spec.window);
        let started = std::time::Instant::now();
        let row = run_level(ctx, &spec, &mut self.monitor, cache)
            .await
            .with_context(|| format!("level {label}"))?;
        self.progress.log(format!(
            "{label:<28} {:>7.0} QPS  p50 {:>8.2} ms  p99 {:>8.2} ms  served {}/{}  inflight {}  errors {}  ({:.1} s)",
            row.qps, row.p50_ms, row.p99_ms, row.clients_served, row.clients, row.inflight_at_close, row.errors,
            started.elapsed().as_secs_f64()
        ));
        self.report.push(row)
    }

    pub(crate) fn spec(
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
        }
    }

    /// Experiment A at the given levels.
    pub(crate) async fn curve(&mut self, levels: &[usize]) -> Result<()> {
        let ctx = self.ctx(&self.server_url, Some(self.workload))?;
        let (arrival, fraction) = self.arrival();
        for &c in levels {
            let mut spec = self.spec("A", Target::Direct, Mode::Direct, c);
            spec.arrival = arrival;
            spec.rate_fraction = fraction;
            self.measure(&ctx, spec, format!("A: C={c} direct")).await?;
        }
        Ok(())
    }

    /// Experiment C: CLIENT_THREADS clients over P pooled connections.
    async fn pool(&mut self) -> Result<()> {
        let ctx = self.ctx(&self.server_url, Some(self.workload))?;
        let (arrival, fraction) = self.arrival();
        let clients = self.s.client_threads;
        for &p in &self.s.pool_sizes.clone() {
            let mut spec = self.spec("C", Target::Pool, Mode::Pool(p), clients);
            spec.arrival = arrival;
            spec.rate_fraction = fraction;
            self.measure(&ctx, spec, format!("C: {clients} clients, P={p}"))
                .await?;
        }
        Ok(())
    }

    /// Runs a short curve when this run has none yet, so the peak is known: it sits near the
    /// server's core count.
    pub(crate) async fn ensure_curve(&mut self) -> Result<()> {
        if self.report.rows_of("A").is_empty() {
            let top = (4 * self.s.server_cpus.len()).max(4);
            let levels: Vec<usize> = (0..)
                .map(|i| 1usize << i)
                .take_while(|&c| c <= top)
                .collect();
            self.curve(&levels).await?;
        }
        Ok(())
    }

    /// Open loop at fractions of the measured peak, direct and through the pool.
    async fn open_loop(&mut self) -> Result<()> {
        self.ensure_curve().await?;
        let peak = collapse_of(&self.report.rows_of("A"))
            .map(|(p, ..)| p.qps)
            .context("no peak measured")?;
        let pool_size = self
            .s
            .open_pool_size
            .or_else(|| best_pool(&self.report.rows_of("C")).and_then(|r| r.pool_size))
            .unwrap_or(self.s.server_cpus.len());
        self.report.meta("open_pool_size", pool_size);
        self.report.meta("open_peak_qps", format!("{peak:.1}"));
        let ctx = self.ctx(&self.server_url, Some(self.workload))?;
        let clients = self.s.client_threads;
        // All direct rows, then all pool rows: the connection cache then grows and shrinks once.
        for (target, mode) in [
            (Target::Direct, Mode::Direct),
            (Target::Pool, Mode::Pool(pool_size)),
        ] {
            for &f in &self.s.open_fractions.clone() {
                let mut spec = self.spec("O", target, mode, clients);
                spec.arrival = Arrival::Open { rate_qps: f * peak };
                spec.rate_fraction = Some(f);
                self.measure(&ctx, spec, format!("open: {f:.2}x peak, {}", target.name()))
                    .await?;
            }
        }
        Ok(())
    }

    #[cfg(feature = "proxy")]
    async fn proxy(&mut self) -> Result<()> {
        let clients = self.s.client_threads;
        if let Some(url) = self.s.proxy_url.clone() {
            let ctx = self.ctx(&url, Some(self.workload))?;
            let spec = self.spec("proxy", Target::Proxy, Mode::Direct, clients);
            let label = format!("proxy: {clients} clients, external");
            return self.measure_fresh(&ctx, spec, label).await;
        }
        let backend_addr = dbkit::TestServer::from_url(&self.server_url)
            .map(|t| format!("{}:{}", t.host, t.port))
            .map_err(anyhow::Error::msg)?;
        // Direct connections would sit idle on the server during the proxy rows.
        self.cache.close().await;
        for &p in &self.s.pool_sizes.clone() {
            let proxy = crate::targets::in_process::InProcessProxy::start(
                &backend_addr,
                p,
                &self.s.loadgen_cpus,
            )
            .await?;
            let mut spec = self.spec("proxy", Target::Proxy, Mode::Direct, clients);
            spec.proxy_pool = Some(p);
            spec.pool_mode = Some("fixed");
            let label = format!("sluice: {clients} clients, P={p}");
            self.measure_via(proxy, Some(self.workload), spec, label)
                .await?;
        }
        Ok(())
    }

    #[cfg(not(feature = "proxy"))]
    async fn proxy(&mut self) -> Result<()> {
        self.progress
            .log("proxy experiment skipped: loadgen was built without the `proxy` feature");
        Ok(())
    }

    #[cfg(feature = "proxy")]
    async fn overhead(&mut self) -> Result<()> {
        let server = dbkit::TestServer::from_url(&self.server_url).map_err(anyhow::Error::msg)?;
        let backend_addr = format!("{}:{}", server.host, server.port);
        let direct = self.ctx(&self.server_url, None)?;
        // With a local server, sluice also reaches it over its Unix socket (one TCP leg fewer).
        let unix_backend = local_socket(&mut self.monitor)
            .await
            .map(|p| format!("unix:{p}"));
        // [direct, bare relay, sluice, sluice over the socket] p50 at 1 client, and
        // relay / sluice / sluice-over-socket CPU per query at 64.
        let mut p50 = [None; 4];
        let mut cpu64 = [None, None, None];
        for clients in [1usize, 64] {
            let spec = self.spec("overhead", Target::Direct, Mode::Direct, clients);
            self.measure(
                &direct,
                spec,
                format!("SELECT 1: {clients} clients, direct"),
            )
            .await?;
            self.cache.close().await;
            let direct_p50 = self.report.rows.last().map(|r| r.p50_ms).unwrap_or(0.0);

            let floor =
                crate::targets::relay_floor::RelayFloor::start(&backend_addr, &self.s.loadgen_cpus)
                    .await?;
            let url = self
                .server_url
                .replacen(&backend_addr, &floor.addr().to_string(), 1);
            let via_floor = self.ctx(&url, None)?;
            let spec = self.spec("overhead", Target::Relay, Mode::Direct, clients);
            let mut cache = ConnCache::default();
            let r = self
                .measure_with(
                    &via_floor,
                    spec,
                    format!("SELECT 1: {clients} clients, bare TCP relay"),
                    &mut cache,
                )
                .await;
            cache.close().await;
            drop(floor);
            r?;
            let floor_row = self.report.rows.last();
            let floor_p50 = floor_row.map(|r| r.p50_ms).unwrap_or(0.0);
            let floor_cpu = floor_row.and_then(|r| r.proxy_cpu_us_per_query);

            let mut sluice = [None, None];
            let backends = [Some(backend_addr.clone()), unix_backend.clone()];
            for (i, backend) in backends.iter().enumerate() {
                let Some(backend) = backend else { continue };
                let (target, label) = match i {
                    0 => (Target::Proxy, "sluice"),
                    _ => (Target::ProxyUnix, "sluice, backend on the Unix socket"),
                };
                sluice[i] = Some(
                    self.overhead_sluice(backend, clients, target, label)
                        .await?,
                );
            }
            if clients == 1 {
                p50 = [
                    Some(direct_p50),
                    Some(floor_p50),
                    sluice[0].map(|r| r.0),
                    sluice[1].map(|r| r.0),
                ];
            } else {
                cpu64 = [
                    floor_cpu,
                    sluice[0].and_then(|r| r.1),
                    sluice[1].and_then(|r| r.1),
                ];
            }
        }
        let minus = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
        let meta = [
            ("overhead_direct_p50_ms_1_client", p50[0]),
            ("overhead_relay_p50_ms_1_client", p50[1]),
            ("overhead_sluice_p50_ms_1_client", p50[2]),
            ("overhead_added_p50_ms_1_client", minus(p50[2], p50[0])),
            (
                "overhead_relay_added_p50_ms_1_client",
                minus(p50[1], p50[0]),
            ),
            (
                "overhead_sluice_over_relay_p50_ms_1_client",
                minus(p50[2], p50[1]),
            ),
            ("overhead_sluice_unix_p50_ms_1_client", p50[3]),
            (
                "overhead_sluice_unix_added_p50_ms_1_client",
                minus(p50[3], p50[0]),
            ),
            ("overhead_relay_cpu_us_per_query_64_clients", cpu64[0]),
            ("overhead_sluice_cpu_us_per_query_64_clients", cpu64[1]),
            (
                "overhead_sluice_over_relay_cpu_us_per_query_64_clients",
                minus(cpu64[1], cpu64[0]),
            ),
            ("overhead_sluice_unix_cpu_us_per_query_64_clients", cpu64[2]),
        ];
        for (key, value) in meta {
            if let Some(v) = value {
                self.report.meta(key, format!("{v:.4}"));
            }
        }
        Ok(())
    }

    /// One overhead row through an in-process sluice at `backend` with P = clients (no pool
    /// queueing, so the difference from direct is the relay alone). Returns p50 (ms) and
    /// sluice's CPU per query (µs).
    #[cfg(feature = "proxy")]
    async fn overhead_sluice(
        &mut self,
        backend: &str,
        clients: usize,
        target: Target,
        label: &str,
    ) -> Result<(f64, Option<f64>)> {
        let proxy = crate::targets::in_process::InProcessProxy::start(
            backend,
            clients,
            &self.s.loadgen_cpus,
        )
        .await?;
        let mut spec = self.spec("overhead", target, Mode::Direct, clients);
        spec.proxy_pool = Some(clients);
        spec.pool_mode = Some("fixed");
        let label = format!("SELECT 1: {clients} clients, {label}");
        self.measure_via(proxy, None, spec, label).await?;
        let last = self.report.rows.last();
        Ok((
            last.map(|r| r.p50_ms).unwrap_or(0.0),
            last.and_then(|r| r.proxy_cpu_us_per_query),
        ))
    }

    #[cfg(not(feature = "proxy"))]
    async fn sessions(&mut self) -> Result<()> {
        self.progress
            .log("experiment S skipped: loadgen was built without the `proxy` feature");
        Ok(())
    }

    #[cfg(not(feature = "proxy"))]
    async fn overhead(&mut self) -> Result<()> {
        anyhow::bail!("`overhead` needs loadgen built with the `proxy` feature")
    }
}

/// The server's Unix socket, when it has one this process can reach (a local server).
#[cfg(feature = "proxy")]
async fn local_socket(monitor: &mut mysql_async::Conn) -> Option<String> {
    use mysql_async::prelude::Queryable;
    let path: Option<String> = monitor.query_first("SELECT @@socket").await.ok().flatten();
    path.filter(|p| std::path::Path::new(p).exists())
}

const UNDEFINED: &str = "undefined (no query finished in the window)";

fn ratio_text(a: f64, b: f64) -> String {
    if a > 0.0 && b > 0.0 {
        format!("{:.3}", a / b)
    } else {
        UNDEFINED.into()
    }
}

/// Headline numbers for `run_metadata.csv`, from whatever rows exist.
pub fn headline_meta(report: &mut Report) {
    let a = report.rows_of("A");
    let collapse = collapse_of(&a);
    let c = report.rows_of("C");
    let best = best_pool(&c).cloned();
    let clients_c = c.first().map(|r| r.clients);
    let direct_same =
        clients_c.and_then(|n| a.iter().find(|r| r.clients == n).map(|r| (*r).clone()));
    let biggest = report
        .rows
        .iter()
        .filter(|r| r.experiment == "A" || r.experiment == "C")
        .max_by_key(|r| r.clients)
        .cloned();
    if let Some((peak, worst, q, p)) = collapse {
        report.meta("peak_c", peak.clients);
        report.meta("peak_qps", format!("{:.1}", peak.qps));
        report.meta("peak_p99_ms", format!("{:.2}", peak.p99_ms));
        report.meta("max_c", worst.clients);
        report.meta("max_c_qps", format!("{:.1}", worst.qps));
        report.meta("max_c_p99_ms", format!("{:.2}", worst.p99_ms));
        let defined = worst.queries > 0;
        report.meta(
            "collapse_qps_ratio_peak_over_max_c",
            if defined {
                format!("{q:.3}")
            } else {
                UNDEFINED.into()
            },
        );
        report.meta(
            "collapse_p99_ratio_max_c_over_peak",
            if defined {
                format!("{p:.2}")
            } else {
                UNDEFINED.into()
            },
        );
        report.meta(
            "collapse_p99_with_inflight_ratio_max_c_over_peak",
            ratio_text(worst.p99_with_inflight_ms, peak.p99_with_inflight_ms),
        );
    }
    if let Some(best) = best {
        report.meta("best_pool_size", best.pool_size.unwrap_or(0));
        report.meta("best_pool_qps", format!("{:.1}", best.qps));
        report.meta("best_pool_p99_ms", format!("{:.2}", best.p99_ms));
        if let Some(d) = direct_same {
            report.meta("best_pool_qps_ratio_vs_direct", ratio_text(best.qps, d.qps));
            report.meta(
                "best_pool_p99_ratio_direct_over_pool",
                ratio_text(d.p99_ms, best.p99_ms),
            );
            report.meta(
                "best_pool_p99_with_inflight_ratio_direct_over_pool",
                ratio_text(d.p99_with_inflight_ms, best.p99_with_inflight_ms),
            );
        }
    }
    if let Some(b) = biggest {
        report.meta("loadgen_clients_at_max", b.clients);
        report.meta(
            "loadgen_cpu_us_per_query_at_max",
            format!("{:.2}", b.loadgen_cpu_us_per_query),
        );
        report.meta(
            "loadgen_cpu_pct_at_max",
            format!("{:.1}", b.loadgen_cpu_pct),
        );
        report.meta(
            "loadgen_rss_mib_at_max",
            format!("{:.1}", b.loadgen_rss_mib),
        );
    }
}
