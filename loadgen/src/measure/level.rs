//! One measured level: spawn the clients on their connections, measure the window, merge
//! what every client saw into one CSV row ([`LevelResult`]).
//!
//! The clients themselves are in [`super::client`]; this module owns the level's clock, the
//! samples taken while it runs (CPU, memory, the server's threads) and the merge.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use mysql_async::Conn;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio::time::sleep_until;

use super::client::{self, client_task, Arrivals, ClientOutcome, Clock, LevelCtx, Pace};
use super::conns::ConnCache;
use super::monitor::{kill_running_queries, server_threads};
use super::resources::{pid_cpu_ns, rss_mib, CpuSample};
use super::stats;

/// How clients reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Each client owns one connection.
    Direct,
    /// Clients share P connections through a fair FIFO semaphore (the wait is measured).
    Pool(usize),
}

/// Closed loop or Poisson open loop at a total rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Next query right after the previous answer.
    Closed,
    /// Each client issues Poisson arrivals at `rate_qps / clients`.
    Open {
        /// Total offered rate, queries/s.
        rate_qps: f64,
    },
}

/// Where a level's clients connect, as the `target` column names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The server, each client on a connection of its own.
    Direct,
    /// The server, through loadgen's in-process fair pool (experiment C, the open loop).
    Pool,
    /// sluice (in-process or at `--proxy-url`), its backend over TCP.
    Proxy,
    /// A relay process of the overhead experiment (`relay`, `haproxy`, `haproxy_busy`,
    /// `sluice`, `sluice_serial`, `sluice_sleep`).
    Process(&'static str),
    /// Experiment S: directly or through sluice, as SQL text or as prepared statements,
    /// with or without per-client session state.
    Session {
        /// Through sluice rather than directly.
        sluice: bool,
        /// Prepared statements (binary protocol) rather than SQL text.
        prepared: bool,
        /// Each client first sets session state of its own.
        session_setup: bool,
    },
}

impl Target {
    /// The `target` column.
    pub fn name(self) -> &'static str {
        match self {
            Target::Direct => "direct",
            Target::Pool => "pool",
            Target::Proxy => "proxy",
            Target::Process(name) => name,
            Target::Session {
                sluice,
                prepared,
                session_setup,
            } => match (sluice, prepared, session_setup) {
                (false, false, false) => "direct-text",
                (false, true, false) => "direct-prepared",
                (false, false, true) => "direct-text+set",
                (false, true, true) => "direct-prepared+set",
                (true, false, false) => "sluice-text",
                (true, true, false) => "sluice-prepared",
                (true, false, true) => "sluice-text+set",
                (true, true, true) => "sluice-prepared+set",
            },
        }
    }

    /// Whether the load passes a sluice that runs in this process, whose threads' CPU per
    /// query the row reports (a relay process's CPU is `cpu_us_per_query`).
    pub fn relayed(self) -> bool {
        match self {
            Target::Direct | Target::Pool | Target::Process(_) => false,
            Target::Proxy => true,
            Target::Session { sluice, .. } => sluice,
        }
    }
}

/// What to run at one level.
#[derive(Debug, Clone)]
pub struct LevelSpec {
    /// CSV experiment id: `A`, `C`, `O`, `proxy`, `overhead`.
    pub experiment: &'static str,
    /// Where the clients connect (the `target` column).
    pub target: Target,
    /// Direct or pooled.
    pub mode: Mode,
    /// Client tasks (offered concurrency in a closed loop).
    pub clients: usize,
    /// Backend connections behind a proxy (only for `target = proxy`).
    pub proxy_pool: Option<usize>,
    /// Arrival process.
    pub arrival: Arrival,
    /// Fraction of the peak, for open-loop rows.
    pub rate_fraction: Option<f64>,
    /// Warm-up before the window.
    pub warmup: Duration,
    /// The measured window.
    pub window: Duration,
    /// Experiment D: idle connections held open at the target during the level.
    pub idle_conns: Option<usize>,
    /// Experiment F: an open-loop (Poisson) stream on its own connections next to the
    /// closed-loop clients: (connections, total rate in queries/s).
    pub open_stream: Option<(usize, f64)>,
    /// `fixed` or `auto` for rows through sluice (the `pool_mode` column).
    pub pool_mode: Option<&'static str>,
    /// sluice's `max_queue_wait` in force, ms (experiment F).
    pub max_queue_wait_ms: Option<f64>,
    /// Overhead: the relay process whose CPU the row reports per query.
    pub relay_pid: Option<u32>,
    /// Overhead: the local server's process, whose CPU the row reports per query.
    pub server_pid: Option<u32>,
    /// Overhead: the round (1, 2, ...).
    pub round: Option<usize>,
}

/// One CSV row: every metric of one level. Column meanings are in `results/README.md`.
/// Columns a CSV lacks (one written before they existed) read as their default.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LevelResult {
    pub experiment: String,
    pub target: String,
    pub arrival: String,
    pub clients: usize,
    pub backend_conns: usize,
    pub pool_size: Option<usize>,
    pub rate_fraction: Option<f64>,
    pub offered_qps: Option<f64>,
    pub warmup_s: f64,
    pub window_s: f64,
    pub queries: u64,
    pub errors: u64,
    pub qps: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// Clients that finished at least one query in the window (closed-loop clients only
    /// when an open stream runs beside them: its connections share one stream).
    pub clients_served: usize,
    pub client_queries_min: u64,
    pub client_queries_median: f64,
    pub client_queries_max: u64,
    pub jain_index: f64,
    pub inflight_at_close: usize,
    pub oldest_inflight_ms: f64,
    pub p99_with_inflight_ms: f64,
    pub littles_l: f64,
    pub littles_ratio: f64,
    pub threads_connected: Option<u64>,
    pub threads_running: Option<u64>,
    pub loadgen_cpu_us_per_query: f64,
    pub loadgen_cpu_pct: f64,
    pub loadgen_rss_mib: f64,
    pub proxy_cpu_us_per_query: Option<f64>,
    /// Experiment D: idle connections held open at the target (empty elsewhere).
    pub idle_conns: Option<usize>,
    /// `knee`, `point_select` or `select1`.
    pub workload: String,
    /// `fixed` or `auto` through sluice; empty for direct and in-process pool rows.
    pub pool_mode: Option<String>,
    /// Experiment F: the open-loop stream's connections (empty elsewhere).
    pub open_clients: Option<usize>,
    /// Statements refused with ERR 9002 (sluice's admission control) in the window.
    pub shed: u64,
    /// Statements finished in the window: answered + errors + shed.
    pub attempts: u64,
    /// sluice's `max_queue_wait`, ms (experiment F).
    pub max_queue_wait_ms: Option<f64>,
    /// p99 of the closed-loop clients' answered queries (experiment F).
    pub p99_closed_ms: Option<f64>,
    /// p99 of the open-loop stream's answered queries, from their scheduled arrival.
    pub p99_open_ms: Option<f64>,
    /// Experiment E: mean of Threads_running sampled every 250 ms over the window.
    pub threads_running_mean: Option<f64>,
    /// Experiment E: mean concurrency limit over the window (auto: as it moved).
    pub limit_mean: Option<f64>,
    /// Standard error of `qps`, from the QPS of about one-second slices of the window (the
    /// noise the recommendation compares pool sizes with). Empty in CSVs from before it.
    pub qps_se: Option<f64>,
    /// Overhead: CPU (utime + stime from /proc/<pid>/stat) of the relay process over the
    /// window, per answered query, µs.
    pub cpu_us_per_query: Option<f64>,
    /// Overhead: the local server's process CPU over the window, per answered query, µs.
    pub server_cpu_us_per_query: Option<f64>,
    /// Overhead: the relay's syscalls per query, counted in a separate window.
    pub syscalls_per_query: Option<f64>,
    /// Overhead: QPS while the syscalls were counted (against `qps`: the counter's cost).
    pub syscall_window_qps: Option<f64>,
    /// Overhead (`--cost-counts`): the relay's user-space instructions per query under
    /// callgrind, idle cost subtracted (round 1's rows).
    pub instructions_per_query: Option<f64>,
    /// Overhead: the round.
    pub round: Option<usize>,
}

/// Runs one level. `monitor` is a direct server connection opened before any load;
/// `cache` holds this target's idle connections between levels.
pub async fn run_level(
    ctx: &LevelCtx,
    spec: &LevelSpec,
    monitor: &mut Conn,
    cache: &mut ConnCache,
) -> Result<LevelResult> {
    let ctx = Arc::new(ctx.clone());
    let running = spawn(&ctx, spec, cache).await?;
    let window = measure(&running, spec, ctx.workload.is_some(), monitor).await;
    let merged = merge(running).await?;
    cache.put_back(merged.conns);
    Ok(row(&ctx, spec, &merged.totals, &window))
}

/// A level whose clients are running.
struct Running {
    tasks: Vec<JoinHandle<ClientOutcome>>,
    clock: Arc<Clock>,
    /// F's shared Poisson stream, whose arrivals never taken are unfinished too.
    stream: Option<Arc<Mutex<Arrivals>>>,
    /// Connections the server sees for the load.
    backend_conns: usize,
}

/// Takes the connections, builds each client's lane and pace, and starts the clients.
async fn spawn(ctx: &Arc<LevelCtx>, spec: &LevelSpec, cache: &mut ConnCache) -> Result<Running> {
    let open_clients = spec.open_stream.map_or(0, |(n, _)| n);
    let (backend_conns, pool) = match spec.mode {
        Mode::Direct => (spec.clients + open_clients, None),
        Mode::Pool(p) => (p, Some(p)),
    };
    let conns = cache.take(&ctx.load, backend_conns).await?;
    let lanes = client::lanes(conns, pool, spec.clients);
    let own_pace = match spec.arrival {
        Arrival::Closed => Pace::Closed,
        Arrival::Open { rate_qps } => Pace::Own(rate_qps / spec.clients as f64),
    };
    let base = Instant::now();
    let clock = Arc::new(Clock {
        base,
        t0: base + spec.warmup,
        t1: base + spec.warmup + spec.window,
        slices: client::slices_for(spec.window),
    });
    let stream = spec
        .open_stream
        .map(|(_, rate)| Arc::new(Mutex::new(Arrivals::new(base, rate, ctx.seed ^ 0xF))));
    let mut tasks = Vec::with_capacity(spec.clients + open_clients);
    for (id, lane) in lanes.into_iter().enumerate() {
        // Experiment F: the last `open_clients` lanes carry the Poisson stream.
        let (pace, open) = match &stream {
            Some(s) if id >= spec.clients => (Pace::Shared(s.clone()), true),
            _ => (own_pace.clone(), false),
        };
        let (ctx, clock) = (ctx.clone(), clock.clone());
        tasks.push(tokio::spawn(async move {
            let mut o = client_task(id, lane, ctx, clock, pace).await;
            o.open = open;
            o
        }));
    }
    Ok(Running {
        tasks,
        clock,
        stream,
        backend_conns,
    })
}

/// What was sampled while the clients ran.
struct Window {
    /// `(loadgen ns, in-process proxy ns)` of CPU over the window.
    cpu_ns: (u64, u64),
    /// CPU of the relay process and of the server over the window, ns.
    relay_cpu_ns: Option<u64>,
    server_cpu_ns: Option<u64>,
    threads_connected: Option<u64>,
    threads_running: Option<u64>,
    rss_mib: f64,
}

/// Waits out the warm-up and the window, sampling CPU, the server's threads mid-window and
/// memory at the close; then cancels our statements still running on the server.
async fn measure(run: &Running, spec: &LevelSpec, knee: bool, monitor: &mut Conn) -> Window {
    let clock = &run.clock;
    let others = |pid: Option<u32>| pid.and_then(pid_cpu_ns);
    sleep_until(clock.t0.into()).await;
    let cpu_start = CpuSample::now();
    let (relay0, server0) = (others(spec.relay_pid), others(spec.server_pid));
    sleep_until((clock.t0 + spec.window / 2).into()).await;
    let (threads_connected, threads_running) = server_threads(monitor).await;
    sleep_until(clock.t1.into()).await;
    let cpu_end = CpuSample::now();
    let (relay1, server1) = (others(spec.relay_pid), others(spec.server_pid));
    let spent = |a: Option<u64>, b: Option<u64>| a.zip(b).map(|(a, b)| b.saturating_sub(a));
    let (rss_mib, _) = rss_mib();
    // Everything still running is already accounted for (at its age now); cancel it so the
    // drain takes milliseconds instead of the server's whole backlog.
    if knee {
        kill_running_queries(monitor).await;
    }
    Window {
        cpu_ns: cpu_end.since(&cpu_start),
        relay_cpu_ns: spent(relay0, relay1),
        server_cpu_ns: spent(server0, server1),
        threads_connected,
        threads_running,
        rss_mib,
    }
}

/// Every client's samples, merged.
struct Totals {
    hist: Histogram<u64>,
    /// The closed-loop clients' and the open stream's answers apart (experiment F).
    closed_hist: Histogram<u64>,
    open_hist: Histogram<u64>,
    /// Answered queries per closed-loop client.
    counts: Vec<u64>,
    queries: u64,
    errors: u64,
    shed: u64,
    unfinished_us: Vec<u64>,
    /// Answered queries per slice of the window, all clients.
    slices: Vec<u64>,
    backend_conns: usize,
}

/// The totals, and the connections for the next level.
struct Merged {
    totals: Totals,
    conns: Vec<Conn>,
}

/// Waits for every client and merges their histograms and counters.
async fn merge(run: Running) -> Result<Merged> {
    let mut t = Totals {
        hist: stats::new_histogram(),
        closed_hist: stats::new_histogram(),
        open_hist: stats::new_histogram(),
        counts: Vec::with_capacity(run.tasks.len()),
        queries: 0,
        errors: 0,
        shed: 0,
        unfinished_us: Vec::new(),
        slices: vec![0; run.clock.slices],
        backend_conns: run.backend_conns,
    };
    let mut lanes = Vec::with_capacity(run.tasks.len());
    for task in run.tasks {
        let o = task.await.context("a client task panicked")?;
        t.hist.add(&o.hist).context("merging histograms")?;
        if o.open {
            t.open_hist.add(&o.hist).context("merging histograms")?;
        } else {
            t.closed_hist.add(&o.hist).context("merging histograms")?;
        }
        // The open stream's connections are interchangeable lanes for one stream of
        // arrivals: "clients served" and the spread are about the closed-loop clients.
        if !o.open {
            t.counts.push(o.done);
        }
        t.queries += o.done;
        t.errors += o.errors;
        t.shed += o.shed;
        t.unfinished_us.extend(o.unfinished_us);
        for (sum, n) in t.slices.iter_mut().zip(&o.slices) {
            *sum += n;
        }
        lanes.push(o.lane);
    }
    if let Some(mut a) = run.stream.as_ref().and_then(|s| s.lock().ok()) {
        while a.before(run.clock.t1) {
            let due = a.take();
            t.unfinished_us.push(client::us(run.clock.t1 - due));
        }
    }
    Ok(Merged {
        totals: t,
        conns: client::into_conns(lanes),
    })
}

/// The CSV row of a level.
fn row(ctx: &LevelCtx, spec: &LevelSpec, t: &Totals, w: &Window) -> LevelResult {
    let open_clients = spec.open_stream.map_or(0, |(n, _)| n);
    let queries = t.queries;
    let window_s = spec.window.as_secs_f64();
    let qps = queries as f64 / window_s;
    let lat = stats::latency(&t.hist);
    let spread = stats::spread(&t.counts);
    let (inflight, oldest) = stats::unfinished(&t.unfinished_us);
    let littles = stats::littles(qps, lat.mean_ms, spec.clients);
    let (loadgen_ns, proxy_ns) = w.cpu_ns;
    let per_query_us = |ns: u64| {
        if queries == 0 {
            0.0
        } else {
            ns as f64 / 1000.0 / queries as f64
        }
    };
    LevelResult {
        experiment: spec.experiment.to_string(),
        target: spec.target.name().to_string(),
        arrival: match (spec.arrival, spec.open_stream) {
            (Arrival::Closed, Some(_)) => "closed+open".into(),
            (Arrival::Closed, None) => "closed".into(),
            (Arrival::Open { .. }, _) => "open".into(),
        },
        clients: spec.clients + open_clients,
        backend_conns: spec.proxy_pool.unwrap_or(t.backend_conns),
        pool_size: match spec.mode {
            Mode::Pool(p) => Some(p),
            Mode::Direct => spec.proxy_pool,
        },
        rate_fraction: spec.rate_fraction,
        offered_qps: match (spec.arrival, spec.open_stream) {
            (Arrival::Open { rate_qps }, _) => Some(rate_qps),
            (Arrival::Closed, Some((_, rate))) => Some(rate),
            (Arrival::Closed, None) => None,
        },
        warmup_s: spec.warmup.as_secs_f64(),
        window_s,
        queries,
        errors: t.errors,
        qps,
        p50_ms: lat.p50_ms,
        p90_ms: lat.p90_ms,
        p99_ms: lat.p99_ms,
        p999_ms: lat.p999_ms,
        max_ms: lat.max_ms,
        mean_ms: lat.mean_ms,
        clients_served: spread.served,
        client_queries_min: spread.min,
        client_queries_median: spread.median,
        client_queries_max: spread.max,
        jain_index: spread.jain,
        inflight_at_close: inflight,
        oldest_inflight_ms: oldest,
        p99_with_inflight_ms: stats::quantile_with_unfinished(&t.hist, &t.unfinished_us, 0.99),
        littles_l: littles.l,
        littles_ratio: littles.ratio,
        threads_connected: w.threads_connected,
        threads_running: w.threads_running,
        loadgen_cpu_us_per_query: per_query_us(loadgen_ns),
        loadgen_cpu_pct: loadgen_ns as f64 / 1e9 / window_s * 100.0,
        loadgen_rss_mib: w.rss_mib,
        proxy_cpu_us_per_query: spec.target.relayed().then(|| per_query_us(proxy_ns)),
        idle_conns: spec.idle_conns,
        workload: match &ctx.workload {
            Some(w) => w.mix.label().to_string(),
            None => "select1".into(),
        },
        pool_mode: spec.pool_mode.map(String::from),
        open_clients: spec.open_stream.map(|(n, _)| n),
        shed: t.shed,
        attempts: queries + t.errors + t.shed,
        max_queue_wait_ms: spec.max_queue_wait_ms,
        p99_closed_ms: spec
            .open_stream
            .map(|_| stats::latency(&t.closed_hist).p99_ms),
        p99_open_ms: spec
            .open_stream
            .map(|_| stats::latency(&t.open_hist).p99_ms),
        threads_running_mean: None,
        limit_mean: None,
        qps_se: Some(stats::qps_se(&t.slices, window_s)),
        cpu_us_per_query: w.relay_cpu_ns.map(per_query_us),
        server_cpu_us_per_query: w.server_cpu_ns.map(per_query_us),
        syscalls_per_query: None,
        syscall_window_qps: None,
        instructions_per_query: None,
        round: spec.round,
    }
}
