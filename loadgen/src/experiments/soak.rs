//! `loadgen soak`: the long run of issue 6. A release `sluice` runs as a child process (so its
//! memory and descriptors are its own, read from `/proc/<pid>`); 10,000 idle clients log in
//! through it and stay, while 512 active clients run the query in a closed loop. Every
//! minute one row goes to `soak.csv`: sluice's RSS and open fds, its backend connections and
//! clients (from `/metrics`), the active clients' QPS, p50 and p99, and errors so far. The
//! end draws `soak.svg` and checks: RSS growth after warm-up <= 5 %, a flat fd count, no errors.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use hdrhistogram::Histogram;
use mysql_async::prelude::Queryable;
use mysql_async::Opts;
use rand::SeedableRng;

use super::run::{Experiment, Plan, Run};
use crate::analysis::soak::Verdict;
use crate::measure::conns::{close_conns, open_conns};
use crate::measure::timeline::SoakSample;
use crate::report::plots;
use crate::settings::Settings;
use crate::targets::sluice_child::{metric_sum, proc_fds, proc_rss_mib, SluiceChild};
use crate::workload::{self, Workload};

/// Idle clients held open for the whole run.
pub const IDLE_CLIENTS: usize = 10_000;
/// Active clients in the closed loop.
pub const ACTIVE_CLIENTS: usize = 512;
/// Execution slots when OPEN_POOL_SIZE is not given: the knee of experiment A on the
/// two-core reference machine (README).
const SOAK_POOL: usize = 8;

/// How long and how often.
#[derive(Debug, Clone, Copy)]
pub struct SoakPlan {
    pub minutes: u32,
    pub sample_every: Duration,
    pub pool: usize,
}

impl SoakPlan {
    pub fn new(short: bool, pool: usize) -> SoakPlan {
        SoakPlan {
            minutes: if short { 10 } else { 30 },
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
    /// 10 minutes instead of 30.
    pub short: bool,
}

#[async_trait(?Send)]
impl Experiment for Soak {
    fn name(&self) -> &'static str {
        "soak"
    }

    fn plan(&self, _: &Settings) -> Plan {
        Plan::each(1, SoakPlan::new(self.short, 0).duration())
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        soak(run, self.short).await
    }
}

/// Runs the soak against the run's server.
async fn soak(run: &mut Run<'_>, short: bool) -> Result<()> {
    let plan = SoakPlan::new(short, run.s.open_pool_size.unwrap_or(SOAK_POOL));
    let limit = dbkit::raise_nofile_limit();
    let need = (IDLE_CLIENTS + ACTIVE_CLIENTS + 256) as u64;
    if limit < need {
        bail!("RLIMIT_NOFILE is {limit}; the soak needs {need} (raise the hard limit, e.g. `ulimit -Hn 20000`)");
    }
    let backend = run.backend_addr()?;
    let max_clients = IDLE_CLIENTS + ACTIVE_CLIENTS + 500;
    let sluice = SluiceChild::start(&backend, plan.pool, max_clients, &run.report.dir).await?;
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
    let opts = workload::conn_opts(&sluice.url())?;
    run.progress.log(format!(
        "soak: opening {IDLE_CLIENTS} idle clients through sluice (pid {})",
        sluice.pid
    ));
    let idle = open_conns(&opts, IDLE_CLIENTS)
        .await
        .context("opening the idle clients")?;
    run.progress.log(format!(
        "soak: {ACTIVE_CLIENTS} active clients for {} min (pool {})",
        plan.minutes, plan.pool
    ));
    let load = ActiveLoad::start(&opts, run.workload, run.s.seed).await?;
    let mut csv = csv::Writer::from_path(run.report.dir.join("soak.csv"))?;
    csv.write_record([
        "minute", "rss_mib", "fds", "backends", "clients", "qps", "p50_ms", "p99_ms", "errors",
    ])?;
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut last = Instant::now();
    for i in 1..=plan.minutes {
        tokio::time::sleep_until((started + plan.sample_every * i).into()).await;
        let (count, hist) = load.take_interval();
        let secs = last.elapsed().as_secs_f64();
        last = Instant::now();
        let metrics = sluice.metrics().await.unwrap_or_default();
        let sample = SoakSample {
            minute: started.elapsed().as_secs_f64() / 60.0,
            rss_mib: proc_rss_mib(sluice.pid),
            fds: proc_fds(sluice.pid),
            backends: metric_sum(&metrics, "sluice_backends{"),
            clients: metric_sum(&metrics, "sluice_clients{"),
            qps: count as f64 / secs,
            p50_ms: hist.value_at_quantile(0.50) as f64 / 1000.0,
            p99_ms: hist.value_at_quantile(0.99) as f64 / 1000.0,
            errors: load.errors.load(Ordering::Relaxed),
        };
        csv.write_record(row(&sample))?;
        csv.flush()?;
        run.progress.log(format!(
            "soak minute {:.1}: rss {:.1} MiB, fds {}, backends {}, clients {}, {:.0} qps, p99 {:.1} ms, errors {}",
            sample.minute, sample.rss_mib, sample.fds, sample.backends, sample.clients,
            sample.qps, sample.p99_ms, sample.errors
        ));
        samples.push(sample);
    }
    let errors = load.stop().await;
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
    plots::soak(&run.report.dir.join("soak.svg"), &samples)?;
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

/// The active clients: each owns a connection and a histogram (µs) that the sampler swaps
/// out once a minute, so no per-query message is sent anywhere.
struct ActiveLoad {
    stop: Arc<AtomicBool>,
    errors: Arc<AtomicU64>,
    hists: Vec<Arc<Mutex<Interval>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// One client's queries and latencies since the last sample.
type Interval = (u64, Histogram<u64>);

fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

impl ActiveLoad {
    async fn start(opts: &Opts, workload: Workload, seed: u64) -> Result<ActiveLoad> {
        let conns = crate::measure::conns::open_conns(opts, ACTIVE_CLIENTS)
            .await
            .context("opening the active clients")?;
        let stop = Arc::new(AtomicBool::new(false));
        let errors = Arc::new(AtomicU64::new(0));
        let mut hists = Vec::new();
        let mut tasks = Vec::new();
        for (i, mut conn) in conns.into_iter().enumerate() {
            let hist = Arc::new(Mutex::new((0u64, new_hist())));
            hists.push(hist.clone());
            let (stop, errors, opts) = (stop.clone(), errors.clone(), opts.clone());
            tasks.push(tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed.wrapping_add(i as u64));
                while !stop.load(Ordering::Relaxed) {
                    let q = workload.query(&mut rng);
                    let t0 = Instant::now();
                    match conn.query_drop(q).await {
                        Ok(()) => {
                            let us = t0.elapsed().as_micros() as u64;
                            let mut h = hist.lock().unwrap_or_else(|p| p.into_inner());
                            h.0 += 1;
                            let _ = h.1.record(us.max(1));
                        }
                        Err(e) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            tracing::warn!("soak client {i}: {e}");
                            match workload::connect(&opts).await {
                                Ok(c) => conn = c,
                                Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                            }
                        }
                    }
                }
                let _ = conn.disconnect().await;
            }));
        }
        Ok(ActiveLoad {
            stop,
            errors,
            hists,
            tasks,
        })
    }

    /// Queries and latencies since the last call.
    fn take_interval(&self) -> (u64, Histogram<u64>) {
        let mut merged = new_hist();
        let mut count = 0;
        for h in &self.hists {
            let mut h = h.lock().unwrap_or_else(|p| p.into_inner());
            count += std::mem::take(&mut h.0);
            let _ = merged.add(&h.1);
            h.1.reset();
        }
        (count, merged)
    }

    /// Stops the clients; returns the errors seen.
    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
        self.errors.load(Ordering::Relaxed)
    }
}
