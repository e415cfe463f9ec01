//! `loadgen soak`: the long run of issue 6. A release `sluice` runs as a child process (so its
//! memory and descriptors are its own, read from `/proc/<pid>`); 10,000 idle clients log in
//! through it and stay, while 512 active clients run the query in a closed loop. Every
//! minute one row goes to `soak.csv`: sluice's RSS and open fds, its backend connections and
//! clients (from `/metrics`), the active clients' QPS, p50 and p99, and errors so far. The
//! end draws `soak.svg` and checks: RSS growth after warm-up <= 5 %, a flat fd count, no errors.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use mysql_async::prelude::Queryable;
use mysql_async::Opts;
use rand::SeedableRng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::experiments::Run;
use crate::workload::{self, Workload};

/// Idle clients held open for the whole run.
pub const IDLE_CLIENTS: usize = 10_000;
/// Active clients in the closed loop.
pub const ACTIVE_CLIENTS: usize = 512;
/// Execution slots when OPEN_POOL_SIZE is not given: the knee of experiment A on the
/// two-core reference machine (README).
const SOAK_POOL: usize = 8;
/// Samples (minutes) before the baseline: pools, buffers and allocator arenas settle.
const WARMUP_SAMPLES: usize = 2;
/// Allowed RSS growth after warm-up.
const MAX_RSS_GROWTH: f64 = 0.05;
/// Allowed spread of the fd count after warm-up (backends may come and go by a few).
const FD_SLACK: f64 = 0.01;

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

/// One row of `soak.csv`.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub minute: f64,
    pub rss_mib: f64,
    pub fds: u64,
    pub backends: u64,
    pub clients: u64,
    pub qps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub errors: u64,
}

impl Run<'_> {
    /// Runs the soak against the run's server.
    pub async fn soak(&mut self, short: bool) -> Result<()> {
        let plan = SoakPlan::new(short, self.s.open_pool_size.unwrap_or(SOAK_POOL));
        let limit = dbkit::raise_nofile_limit();
        let need = (IDLE_CLIENTS + ACTIVE_CLIENTS + 256) as u64;
        if limit < need {
            bail!("RLIMIT_NOFILE is {limit}; the soak needs {need} (raise the hard limit, e.g. `ulimit -Hn 20000`)");
        }
        let backend = dbkit::TestServer::from_url(&self.server_url)
            .map(|t| format!("{}:{}", t.host, t.port))
            .map_err(anyhow::Error::msg)?;
        let sluice = SluiceChild::start(&backend, plan.pool, &self.report.dir).await?;
        self.report.meta("soak_minutes", plan.minutes);
        self.report.meta("soak_idle_clients", IDLE_CLIENTS);
        self.report.meta("soak_active_clients", ACTIVE_CLIENTS);
        self.report.meta("soak_pool_size", plan.pool);
        self.report.meta("soak_sluice_bin", sluice.bin.display());
        self.report.meta("soak_sluice_pid", sluice.pid);
        let result = self.soak_with(&sluice, plan).await;
        sluice.stop().await;
        result
    }

    async fn soak_with(&mut self, sluice: &SluiceChild, plan: SoakPlan) -> Result<()> {
        let opts = workload::conn_opts(&sluice.url())?;
        self.progress.log(format!(
            "soak: opening {IDLE_CLIENTS} idle clients through sluice (pid {})",
            sluice.pid
        ));
        let idle = crate::measure::conns::open_conns(&opts, IDLE_CLIENTS)
            .await
            .context("opening the idle clients")?;
        self.progress.log(format!(
            "soak: {ACTIVE_CLIENTS} active clients for {} min (pool {})",
            plan.minutes, plan.pool
        ));
        let load = ActiveLoad::start(&opts, self.workload, self.s.seed).await?;
        let mut csv = csv::Writer::from_path(self.report.dir.join("soak.csv"))?;
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
            let sample = Sample {
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
            self.progress.log(format!(
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
        crate::measure::conns::close_conns(idle).await;
        let verdict = Verdict::of(&samples, errors + idle_errors);
        crate::report::plots::soak(&self.report.dir.join("soak.svg"), &samples)?;
        for line in verdict.lines(idle_errors) {
            self.progress.log(format!("soak: {line}"));
            self.report.notes.push(line);
        }
        self.report.meta(
            "soak_rss_growth_pct",
            format!("{:.2}", verdict.rss_growth * 100.0),
        );
        self.report.meta(
            "soak_fd_spread_pct",
            format!("{:.2}", verdict.fd_spread * 100.0),
        );
        self.report.meta("soak_errors", verdict.errors);
        self.report.meta("soak_passed", verdict.passed());
        if !verdict.passed() {
            bail!("soak failed its checks (see summary.txt)");
        }
        Ok(())
    }
}

fn row(s: &Sample) -> [String; 9] {
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

/// The checks at the end of a soak.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub baseline_rss: f64,
    pub final_rss: f64,
    /// (final - baseline) / baseline.
    pub rss_growth: f64,
    /// (max - min) / min of the fd count after warm-up.
    pub fd_spread: f64,
    pub errors: u64,
}

impl Verdict {
    pub fn of(samples: &[Sample], errors: u64) -> Verdict {
        let after: &[Sample] = samples.get(WARMUP_SAMPLES - 1..).unwrap_or(samples);
        let baseline_rss = after.first().map(|s| s.rss_mib).unwrap_or(0.0);
        let final_rss = after.last().map(|s| s.rss_mib).unwrap_or(0.0);
        let fds = after.iter().map(|s| s.fds);
        let (lo, hi) = (fds.clone().min().unwrap_or(0), fds.max().unwrap_or(0));
        Verdict {
            baseline_rss,
            final_rss,
            rss_growth: if baseline_rss > 0.0 {
                (final_rss - baseline_rss) / baseline_rss
            } else {
                0.0
            },
            fd_spread: if lo > 0 {
                (hi - lo) as f64 / lo as f64
            } else {
                0.0
            },
            errors,
        }
    }

    pub fn passed(&self) -> bool {
        self.rss_growth <= MAX_RSS_GROWTH && self.fd_spread <= FD_SLACK && self.errors == 0
    }

    fn lines(&self, idle_errors: u64) -> Vec<String> {
        let mark = |ok: bool| if ok { "PASS" } else { "FAIL" };
        vec![
            format!(
                "{} RSS after warm-up {:.1} -> {:.1} MiB ({:+.2} %, limit {:.0} %)",
                mark(self.rss_growth <= MAX_RSS_GROWTH),
                self.baseline_rss,
                self.final_rss,
                self.rss_growth * 100.0,
                MAX_RSS_GROWTH * 100.0
            ),
            format!(
                "{} open fds spread after warm-up {:.2} % (limit {:.0} %)",
                mark(self.fd_spread <= FD_SLACK),
                self.fd_spread * 100.0,
                FD_SLACK * 100.0
            ),
            format!(
                "{} errors: {} (of which idle clients failing a final ping: {idle_errors})",
                mark(self.errors == 0),
                self.errors
            ),
        ]
    }
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

/// The release `sluice` binary running as a child process.
struct SluiceChild {
    child: tokio::process::Child,
    pid: u32,
    bin: PathBuf,
    listen: SocketAddr,
    metrics: SocketAddr,
}

impl SluiceChild {
    async fn start(backend: &str, pool: usize, dir: &Path) -> Result<SluiceChild> {
        let bin = sluice_bin()?;
        let (listen, metrics) = (free_addr()?, free_addr()?);
        let log = std::fs::File::create(dir.join("sluice.log"))?;
        let child = tokio::process::Command::new(&bin)
            .args(["--listen", &listen.to_string()])
            .args(["--backend", backend])
            .args(["--user", "bench:bench"])
            .args(["--pool-size", &pool.to_string()])
            .args(["--max-backend-connections", &(pool * 2).to_string()])
            .args([
                "--max-client-connections",
                &(IDLE_CLIENTS + ACTIVE_CLIENTS + 500).to_string(),
            ])
            .args(["--metrics-listen", &metrics.to_string()])
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = child.id().context("sluice exited at once")?;
        let mut me = SluiceChild {
            child,
            pid,
            bin,
            listen,
            metrics,
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while tokio::net::TcpStream::connect(listen).await.is_err() {
            if let Ok(Some(status)) = me.child.try_wait() {
                bail!("sluice exited with {status} (see sluice.log)");
            }
            if Instant::now() > deadline {
                bail!("sluice did not listen on {listen} within 15 s");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(me)
    }

    fn url(&self) -> String {
        format!("mysql://bench:bench@{}/bench", self.listen)
    }

    /// The `/metrics` text.
    async fn metrics(&self) -> Result<String> {
        let mut s = tokio::net::TcpStream::connect(self.metrics).await?;
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: sluice\r\nConnection: close\r\n\r\n")
            .await?;
        let mut body = String::new();
        tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut body)).await??;
        Ok(body)
    }

    /// SIGTERM (sluice drains and exits), then a kill if it lingers.
    async fn stop(mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.pid as libc::pid_t, libc::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// `SLUICE_BIN`, else `sluice` next to this executable (`just soak` builds both).
fn sluice_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("SLUICE_BIN") {
        return Ok(PathBuf::from(p));
    }
    let me = std::env::current_exe()?;
    let bin = me.with_file_name("sluice");
    if !bin.exists() {
        bail!(
            "no sluice binary at {}; build it with `cargo build --release -p sluice` or set SLUICE_BIN",
            bin.display()
        );
    }
    Ok(bin)
}

fn free_addr() -> Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// `VmRSS` of `pid` in MiB.
fn proc_rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

/// Open file descriptors of `pid`.
fn proc_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count() as u64)
        .unwrap_or(0)
}

/// Sum of every sample of a metric family in Prometheus text (`prefix` includes the `{`).
pub fn metric_sum(text: &str, prefix: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next())
        .filter_map(|v| v.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(minute: f64, rss: f64, fds: u64) -> Sample {
        Sample {
            minute,
            rss_mib: rss,
            fds,
            ..Sample::default()
        }
    }

    #[test]
    fn growth_is_measured_from_the_end_of_the_warm_up() {
        let samples = [
            sample(1.0, 50.0, 10_000),
            sample(2.0, 100.0, 10_600),
            sample(3.0, 103.0, 10_620),
            sample(4.0, 104.0, 10_610),
        ];
        let v = Verdict::of(&samples, 0);
        assert_eq!(v.baseline_rss, 100.0);
        assert!((v.rss_growth - 0.04).abs() < 1e-9);
        assert!(v.fd_spread < 0.01);
        assert!(v.passed());
        let grown = Verdict::of(
            &[
                samples[0].clone(),
                samples[1].clone(),
                sample(3.0, 106.0, 10_600),
            ],
            0,
        );
        assert!(!grown.passed(), "6 % growth fails");
        assert!(!Verdict::of(&samples, 1).passed(), "one error fails");
    }

    #[test]
    fn metric_families_are_summed() {
        let text = "# HELP sluice_backends x\nsluice_backends{state=\"idle\"} 3\nsluice_backends{state=\"in_use\"} 5\nsluice_backends_max 64\n";
        assert_eq!(metric_sum(text, "sluice_backends{"), 8);
        assert_eq!(metric_sum(text, "sluice_clients{"), 0);
    }
}
