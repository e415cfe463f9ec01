//! `loadgen soak`: the long run that looks for leaks. A release `sluice` runs as a child
//! process (so its memory and descriptors are its own, read from `/proc/<pid>`); 10,000 idle
//! clients log in through it and stay, while 512 active clients run the query in a closed
//! loop. Every minute one row goes to `soak.csv`: sluice's RSS and open fds, its backend
//! connections and clients (from `/metrics`), the active clients' QPS, p50 and p99, and errors
//! so far. The end draws `soak.svg` and checks: RSS growth after warm-up <= 5 %, a flat fd
//! count, no errors.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use mysql_async::prelude::Queryable;

use super::run::{Experiment, Plan, Run};
use crate::analysis::soak::Verdict;
use crate::measure::client::Live;
use crate::measure::conns::{close_conns, open_conns, ConnCache};
use crate::measure::level::{run_level, Mode, Target};
use crate::measure::timeline::SoakSample;
use crate::progress::Progress;
use crate::settings::Settings;
use crate::targets::sluice_child::{metric_sum, proc_fds, proc_rss_mib, sluice_bin, SluiceChild};

/// Idle clients held open for the whole run.
pub const IDLE_CLIENTS: usize = 10_000;
/// Active clients in the closed loop.
pub const ACTIVE_CLIENTS: usize = 512;
/// Execution slots when OPEN_POOL_SIZE is not given: the knee of experiment A on the
/// two-core reference machine (README).
const SOAK_POOL: usize = 8;

/// The active clients' level runs this much past the last sample.
const LAST_SAMPLE_SLACK: Duration = Duration::from_secs(2);

/// How long and how often.
#[derive(Debug, Clone, Copy)]
pub struct SoakPlan {
    pub minutes: u32,
    pub sample_every: Duration,
    pub pool: usize,
}

impl SoakPlan {
    pub fn new(minutes: u32, pool: usize) -> SoakPlan {
        SoakPlan {
            minutes,
            sample_every: Duration::from_secs(60),
            pool,
        }
    }

    /// Planned time, for the progress bar.
    pub fn duration(&self) -> Duration {
        self.sample_every * self.minutes
    }
}

/// The soak.
pub struct Soak {
    /// How long: 30 minutes, 10 with `--short`, or `--minutes`.
    pub minutes: u32,
}

#[async_trait(?Send)]
impl Experiment for Soak {
    fn name(&self) -> &'static str {
        "soak"
    }

    fn plan(&self, _: &Settings, _: Duration) -> Plan {
        // Plus opening the 10,000 idle clients (about 1 ms each).
        let open = Duration::from_millis(IDLE_CLIENTS as u64);
        Plan::each(1, SoakPlan::new(self.minutes, 0).duration(), open)
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        soak(run, self.minutes).await
    }
}

/// Runs the soak against the run's server.
async fn soak(run: &mut Run<'_>, minutes: u32) -> Result<()> {
    let plan = SoakPlan::new(minutes, run.s.open_pool_size.unwrap_or(SOAK_POOL));
    let limit = dbkit::raise_nofile_limit();
    let need = (IDLE_CLIENTS + ACTIVE_CLIENTS + 256) as u64;
    if limit < need {
        bail!("RLIMIT_NOFILE is {limit}; the soak needs {need} (raise the hard limit, e.g. `ulimit -Hn 20000`)");
    }
    let backend = run.backend_addr()?;
    let max_clients = IDLE_CLIENTS + ACTIVE_CLIENTS + 500;
    let bin = sluice_bin(run.s.sluice_bin.as_deref())?;
    let sluice = SluiceChild::start(bin, &backend, plan.pool, max_clients, &run.report.dir).await?;
    run.report.meta("soak_minutes", plan.minutes);
    run.report.meta("soak_idle_clients", IDLE_CLIENTS);
    run.report.meta("soak_active_clients", ACTIVE_CLIENTS);
    run.report.meta("soak_pool_size", plan.pool);
    run.report.meta("soak_sluice_bin", sluice.bin.display());
    run.report.meta("soak_sluice_pid", sluice.pid);
    let result = soak_with(run, &sluice, plan).await;
    sluice.stop().await;
    result
}

async fn soak_with(run: &mut Run<'_>, sluice: &SluiceChild, plan: SoakPlan) -> Result<()> {
    let mut ctx = run.ctx(&sluice.url(), Some(run.workload))?;
    run.progress.log(format!(
        "soak: opening {IDLE_CLIENTS} idle clients through sluice (pid {})",
        sluice.pid
    ));
    let idle = open_conns(&ctx.load, IDLE_CLIENTS)
        .await
        .context("opening the idle clients")?;
    run.progress.log(format!(
        "soak: {ACTIVE_CLIENTS} active clients for {} min (pool {})",
        plan.minutes, plan.pool
    ));
    // The active clients are one closed-loop level over the whole run; the minutes are read
    // from its live counters while it runs.
    let mut cache = ConnCache::default();
    let active = cache
        .take(&ctx.load, ACTIVE_CLIENTS)
        .await
        .context("opening the active clients")?;
    cache.put_back(active);
    let live = Arc::new(Live::with_latency(ACTIVE_CLIENTS));
    ctx.live = Some(live.clone());
    let mut spec = run.spec("soak", Target::Proxy, Mode::Direct, ACTIVE_CLIENTS);
    spec.warmup = Duration::ZERO;
    // A little past the last sample, so the load still runs when it is taken.
    spec.window = plan.duration() + LAST_SAMPLE_SLACK;
    let csv_path = run.report.dir.join("soak.csv");
    let _ticker = run.progress.level("soak".into(), spec.window);
    let (level, samples) = tokio::join!(
        run_level(&ctx, &spec, &mut run.monitor, &mut cache),
        minutes(plan, sluice, &live, &csv_path, run.progress)
    );
    cache.close().await;
    // Failures over the whole run (the level's window covers it all, from the first query).
    let errors = level?.errors;
    let samples = samples?;
    // The idle clients must still be alive after the whole run: ping a sample of them.
    let mut idle_errors = 0u64;
    let mut idle = idle;
    for conn in idle.iter_mut().step_by(IDLE_CLIENTS / 100) {
        if conn.ping().await.is_err() {
            idle_errors += 1;
        }
    }
    close_conns(idle).await;
    let verdict = Verdict::of(&samples, errors + idle_errors);
    // soak.svg is drawn with the other plots when the run's report is written.
    run.report.soak = samples;
    for line in verdict.lines(idle_errors) {
        run.progress.log(format!("soak: {line}"));
        run.report.notes.push(line);
    }
    run.report.meta(
        "soak_rss_growth_pct",
        format!("{:.2}", verdict.rss_growth * 100.0),
    );
    run.report.meta(
        "soak_fd_spread_pct",
        format!("{:.2}", verdict.fd_spread * 100.0),
    );
    run.report.meta("soak_errors", verdict.errors);
    run.report.meta("soak_passed", verdict.passed());
    if !verdict.passed() {
        bail!("soak failed its checks (see summary.txt)");
    }
    Ok(())
}

/// Once a minute: sluice's RSS, fds, backends and clients, and the active clients' QPS,
/// p50, p99 and errors so far, into `soak.csv` and the log.
async fn minutes(
    plan: SoakPlan,
    sluice: &SluiceChild,
    live: &Live,
    csv_path: &Path,
    progress: &Progress,
) -> Result<Vec<SoakSample>> {
    let mut csv = csv::Writer::from_path(csv_path)?;
    csv.write_record([
        "minute", "rss_mib", "fds", "backends", "clients", "qps", "p50_ms", "p99_ms", "errors",
    ])?;
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut last = Instant::now();
    for i in 1..=plan.minutes {
        tokio::time::sleep_until((started + plan.sample_every * i).into()).await;
        let hist = live.take_latency();
        let secs = last.elapsed().as_secs_f64();
        last = Instant::now();
        let metrics = sluice.metrics().await.unwrap_or_default();
        let sample = SoakSample {
            minute: started.elapsed().as_secs_f64() / 60.0,
            rss_mib: proc_rss_mib(sluice.pid),
            fds: proc_fds(sluice.pid),
            backends: metric_sum(&metrics, "sluice_backends{"),
            clients: metric_sum(&metrics, "sluice_clients{"),
            qps: hist.len() as f64 / secs,
            p50_ms: hist.value_at_quantile(0.50) as f64 / 1000.0,
            p99_ms: hist.value_at_quantile(0.99) as f64 / 1000.0,
            errors: live.failed.load(Ordering::Relaxed),
        };
        csv.write_record(row(&sample))?;
        csv.flush()?;
        progress.log(format!(
            "soak minute {:.1}: rss {:.1} MiB, fds {}, backends {}, clients {}, {:.0} qps, p99 {:.1} ms, errors {}",
            sample.minute, sample.rss_mib, sample.fds, sample.backends, sample.clients,
            sample.qps, sample.p99_ms, sample.errors
        ));
        samples.push(sample);
    }
    Ok(samples)
}

fn row(s: &SoakSample) -> [String; 9] {
    [
        format!("{:.2}", s.minute),
        format!("{:.1}", s.rss_mib),
        s.fds.to_string(),
        s.backends.to_string(),
        s.clients.to_string(),
        format!("{:.0}", s.qps),
        format!("{:.2}", s.p50_ms),
        format!("{:.2}", s.p99_ms),
        s.errors.to_string(),
    ]
}
