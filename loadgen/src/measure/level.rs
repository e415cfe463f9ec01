//! One measured level: open the connections, start the clients, measure a window, drain.
//!
//! Every client is a tokio task with its own `Histogram` and counters (no shared state on
//! the hot path); results are merged once at the end. A query counts when it *finishes*
//! inside the window. Requests still unfinished when the window closes are reported with
//! their age at that instant instead of being silently dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use hdrhistogram::Histogram;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::time::sleep_until;

use crate::measure::resources::{rss_mib, CpuSample};
use crate::measure::stats;
use crate::workload::{connect, Stmt, Workload};

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

/// What to run at one level.
#[derive(Debug, Clone)]
pub struct LevelSpec {
    /// CSV experiment id: `A`, `C`, `O`, `proxy`, `overhead`.
    pub experiment: &'static str,
    /// `direct`, `pool` or `proxy`.
    pub target: &'static str,
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
}

/// Where and what to query.
#[derive(Debug, Clone)]
pub struct LevelCtx {
    /// Options for load connections (server or proxy).
    pub load: Opts,
    /// The query generator; `None` sends `SELECT 1`.
    pub workload: Option<Workload>,
    /// RNG seed.
    pub seed: u64,
    /// Bumped on every answered query, for timelines sampled while the level runs.
    pub completed: Option<Arc<AtomicU64>>,
    /// Send the workload as prepared statements (binary protocol) instead of SQL text.
    pub prepared: bool,
    /// Each client first sets session state of its own (`SET NAMES utf8mb4` and one of four
    /// time zones), as real applications do, so a pooler must carry it between backends.
    pub session_setup: bool,
}

/// A closed-loop client whose statement was shed (sluice's ERR 9002) backs off before its
/// next one, as a client honouring a "retry shortly" error would: exponentially from this,
/// with jitter, up to [`SHED_BACKOFF_MAX`]. A fixed short pause would turn 512 shed clients
/// into a retry storm that measures the storm, not the admission control.
const SHED_BACKOFF: Duration = Duration::from_millis(50);
const SHED_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// sluice's "overloaded, retry shortly" error.
const ER_SHED: u16 = 9002;

/// One CSV row: every metric of one level. Column meanings are in `results/README.md`.
#[derive(Debug, Clone, Default, Serialize)]
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
}

/// How one query went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Ok,
    Failed,
    /// Refused by sluice's admission control (ERR 9002).
    Shed,
}

/// The pool of experiment C: P connections behind a FIFO semaphore.
struct SharedPool {
    permits: Semaphore,
    idle: Mutex<Vec<Option<Conn>>>,
}

/// A client's way to a connection.
enum Lane {
    Own(Option<Conn>),
    Shared(Arc<SharedPool>),
}

impl Lane {
    /// Runs one query: `Some(answer)`, or `None` still waiting for a pooled connection when the window closed (given up: it
    /// is reported as unfinished, and running it would only delay the next level).
    async fn run(&mut self, stmt: &Stmt, opts: &Opts, close: Instant) -> Option<Answer> {
        match self {
            Lane::Own(slot) => Some(run_on(slot, stmt, opts).await),
            Lane::Shared(pool) => {
                // tokio's Semaphore is FIFO: the longest waiter gets the next connection.
                let permit = tokio::select! {
                    p = pool.permits.acquire() => p.ok()?,
                    _ = sleep_until(close.into()) => return None,
                };
                let mut slot = pool.idle.lock().ok().and_then(|mut v| v.pop()).flatten();
                let ok = run_on(&mut slot, stmt, opts).await;
                if let Ok(mut idle) = pool.idle.lock() {
                    idle.push(slot);
                }
                drop(permit);
                Some(ok)
            }
        }
    }
}

async fn run_on(slot: &mut Option<Conn>, stmt: &Stmt, opts: &Opts) -> Answer {
    if slot.is_none() {
        match connect(opts).await {
            Ok(c) => *slot = Some(c),
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Answer::Failed;
            }
        }
    }
    let Some(conn) = slot.as_mut() else {
        return Answer::Failed;
    };
    let result = match stmt {
        Stmt::Text(sql) => conn.query_drop(sql).await,
        Stmt::Prepared(sql, params) => conn.exec_drop(*sql, params.clone()).await,
    };
    match result {
        Ok(()) => Answer::Ok,
        Err(mysql_async::Error::Server(e)) if e.code == ER_SHED => Answer::Shed,
        Err(mysql_async::Error::Server(_)) => Answer::Failed,
        Err(_) => {
            // The connection is broken; the next query reconnects.
            *slot = None;
            Answer::Failed
        }
    }
}

/// What one client measured.
struct ClientOutcome {
    hist: Histogram<u64>,
    done: u64,
    errors: u64,
    shed: u64,
    unfinished_us: Vec<u64>,
    lane: Lane,
    /// Part of an open-loop stream next to closed-loop clients (experiment F).
    open: bool,
}

struct Clock {
    base: Instant,
    t0: Instant,
    t1: Instant,
}

fn us(d: Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

/// Exponential inter-arrival time for a Poisson process of `rate` per second.
fn exp_interval(rng: &mut StdRng, rate: f64) -> Duration {
    let u: f64 = rng.gen_range(f64::EPSILON..1.0);
    Duration::from_secs_f64(-u.ln() / rate)
}

/// The pause after the `streak`-th shed in a row: half the exponential cap plus up to the
/// other half at random ("equal jitter"), so shed clients spread their retries out.
fn shed_backoff(rng: &mut StdRng, streak: u32) -> Duration {
    let cap = SHED_BACKOFF
        .saturating_mul(1 << streak.min(16))
        .min(SHED_BACKOFF_MAX);
    cap / 2 + cap.mul_f64(rng.gen_range(0.0..0.5))
}

/// One Poisson stream served by a group of connections (F's open loop): each arrival goes
/// to whichever connection is free first, as requests do in an application's connection
/// pool, so an arrival waits behind another only when every connection is busy.
pub(crate) struct Arrivals {
    next: Instant,
    rate: f64,
    rng: StdRng,
}

impl Arrivals {
    fn new(start: Instant, rate: f64, seed: u64) -> Arrivals {
        let mut rng = StdRng::seed_from_u64(seed);
        let next = start + exp_interval(&mut rng, rate);
        Arrivals { next, rate, rng }
    }

    fn take(&mut self) -> Instant {
        let due = self.next;
        self.next += exp_interval(&mut self.rng, self.rate);
        due
    }
}

/// How a client paces its statements.
#[derive(Clone)]
enum Pace {
    /// The next one as soon as the last answered.
    Closed,
    /// Its own Poisson stream at this rate (experiment B's open loop).
    Own(f64),
    /// The next arrival of a stream shared with other connections (experiment F).
    Shared(Arc<Mutex<Arrivals>>),
}

async fn client_task(
    id: usize,
    mut lane: Lane,
    ctx: Arc<LevelCtx>,
    clock: Arc<Clock>,
    pace: Pace,
) -> ClientOutcome {
    let mut rng = StdRng::seed_from_u64(ctx.seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut out = ClientOutcome {
        hist: stats::new_histogram(),
        done: 0,
        errors: 0,
        shed: 0,
        unfinished_us: Vec::new(),
        lane: Lane::Own(None),
        open: false,
    };
    if ctx.session_setup {
        if let Lane::Own(Some(conn)) = &mut lane {
            let set = format!("SET NAMES utf8mb4, time_zone = '+0{}:00'", id % 4);
            if conn.query_drop(set).await.is_err() {
                out.errors += 1;
            }
        }
    }
    let mut next = match pace {
        Pace::Own(rate) => clock.base + exp_interval(&mut rng, rate),
        _ => clock.base,
    };
    let mut shed_streak = 0;
    loop {
        let now = Instant::now();
        if now >= clock.t1 {
            break;
        }
        // Latency is measured from when the request was due: its start in a closed loop,
        // its scheduled arrival in an open loop (so a backlog is never hidden).
        let due = match &pace {
            Pace::Closed => now,
            Pace::Own(rate) => {
                if next >= clock.t1 {
                    break;
                }
                let due = next;
                next += exp_interval(&mut rng, *rate);
                due
            }
            Pace::Shared(arrivals) => match arrivals.lock() {
                Ok(mut a) if a.next < clock.t1 => a.take(),
                _ => break,
            },
        };
        if due > now {
            sleep_until(due.into()).await;
        }
        let stmt = match &ctx.workload {
            Some(w) if ctx.prepared => w.prepared(&mut rng),
            Some(w) => Stmt::Text(w.query(&mut rng)),
            None => Stmt::Text("SELECT 1".to_string()),
        };
        let ok = lane.run(&stmt, &ctx.load, clock.t1).await;
        let end = Instant::now();
        if end > clock.t1 || ok.is_none() {
            out.unfinished_us
                .push(us(clock.t1.saturating_duration_since(due)));
            break;
        }
        if ok == Some(Answer::Ok) {
            if let Some(c) = &ctx.completed {
                c.fetch_add(1, Ordering::Relaxed);
            }
        }
        if end >= clock.t0 {
            match ok {
                Some(Answer::Ok) => {
                    out.hist.saturating_record(us(end - due).max(1));
                    out.done += 1;
                }
                Some(Answer::Shed) => out.shed += 1,
                _ => out.errors += 1,
            }
        }
        if ok == Some(Answer::Shed) && matches!(pace, Pace::Closed) {
            let pause = shed_backoff(&mut rng, shed_streak);
            shed_streak += 1;
            sleep_until((Instant::now() + pause).min(clock.t1).into()).await;
        } else {
            shed_streak = 0;
        }
    }
    // Open loop: arrivals due before the window closed that never even started (a shared
    // stream's leftovers are counted once, by `run_level`).
    if let Pace::Own(rate) = pace {
        while next < clock.t1 {
            out.unfinished_us.push(us(clock.t1 - next));
            next += exp_interval(&mut rng, rate);
        }
    }
    out.lane = lane;
    out
}

/// Threads_connected and Threads_running right now (None if the monitor failed).
async fn server_threads(monitor: &mut Conn) -> (Option<u64>, Option<u64>) {
    let rows: Vec<(String, String)> = monitor
        .query("SHOW GLOBAL STATUS WHERE Variable_name IN ('Threads_connected', 'Threads_running')")
        .await
        .unwrap_or_default();
    let get = |name: &str| {
        rows.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.parse().ok())
    };
    (get("Threads_connected"), get("Threads_running"))
}

/// `KILL QUERY` every statement of ours still running on the server (by its text, so it
/// also reaches the backend connections of a proxy). No client starts a query after the
/// window closes, so these are exactly the unfinished ones.
async fn kill_running_queries(monitor: &mut Conn) {
    // Give clients that were between queries a moment to notice the window closed.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let ids: Vec<u64> = monitor
        .query(
            "SELECT ID FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID() \
             AND COMMAND = 'Query' AND INFO LIKE 'SELECT id, val FROM reads_test WHERE%'",
        )
        .await
        .unwrap_or_default();
    for id in ids {
        // ER_NO_SUCH_THREAD when it just finished: fine.
        let _ = monitor.query_drop(format!("KILL QUERY {id}")).await;
    }
}

/// Opens `n` connections, a few dozen at a time.
pub async fn open_conns(opts: &Opts, n: usize) -> Result<Vec<Conn>> {
    stream::iter(0..n)
        .map(|_| connect(opts))
        .buffer_unordered(32)
        .try_collect()
        .await
}

/// Closes connections politely (a dropped `Conn` leaves "Aborted connection" noise).
pub async fn close_conns(conns: Vec<Conn>) {
    stream::iter(conns)
        .for_each_concurrent(64, |c| async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.disconnect()).await;
        })
        .await;
}

/// Idle load connections kept between levels of one target, so a sweep does not reconnect
/// hundreds of clients per level. Each level first trims or tops it up to exactly the
/// count it needs, so the server never sees spare connections during a window.
#[derive(Default)]
pub struct ConnCache {
    conns: Vec<Conn>,
}

impl ConnCache {
    async fn take(&mut self, opts: &Opts, n: usize) -> Result<Vec<Conn>> {
        if self.conns.len() > n {
            let surplus = self.conns.split_off(n);
            close_conns(surplus).await;
        }
        let missing = n - self.conns.len();
        let fresh = open_conns(opts, missing)
            .await
            .with_context(|| format!("opening {missing} connections"))?;
        let mut conns = std::mem::take(&mut self.conns);
        conns.extend(fresh);
        Ok(conns)
    }

    /// Closes every cached connection.
    pub async fn close(&mut self) {
        close_conns(std::mem::take(&mut self.conns)).await;
    }
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
    let open_clients = spec.open_stream.map_or(0, |(n, _)| n);
    let backend_conns = match spec.mode {
        Mode::Direct => spec.clients + open_clients,
        Mode::Pool(p) => p,
    };
    let conns = cache.take(&ctx.load, backend_conns).await?;
    let mut lanes: Vec<Lane> = match spec.mode {
        Mode::Direct => conns.into_iter().map(|c| Lane::Own(Some(c))).collect(),
        Mode::Pool(p) => {
            let pool = Arc::new(SharedPool {
                permits: Semaphore::new(p),
                idle: Mutex::new(conns.into_iter().map(Some).collect()),
            });
            (0..spec.clients)
                .map(|_| Lane::Shared(pool.clone()))
                .collect()
        }
    };
    let own_pace = match spec.arrival {
        Arrival::Closed => Pace::Closed,
        Arrival::Open { rate_qps } => Pace::Own(rate_qps / spec.clients as f64),
    };
    let base = Instant::now();
    let clock = Arc::new(Clock {
        base,
        t0: base + spec.warmup,
        t1: base + spec.warmup + spec.window,
    });
    let stream = spec
        .open_stream
        .map(|(_, rate)| Arc::new(Mutex::new(Arrivals::new(base, rate, ctx.seed ^ 0xF))));
    let mut tasks = Vec::with_capacity(spec.clients + open_clients);
    for (id, lane) in lanes.drain(..).enumerate() {
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

    sleep_until(clock.t0.into()).await;
    let cpu_start = CpuSample::now();
    sleep_until((clock.t0 + spec.window / 2).into()).await;
    let (threads_connected, threads_running) = server_threads(monitor).await;
    sleep_until(clock.t1.into()).await;
    let cpu_end = CpuSample::now();
    let (rss, _) = rss_mib();
    // Everything still running is already accounted for (at its age now); cancel it so the
    // drain takes milliseconds instead of the server's whole backlog.
    if ctx.workload.is_some() {
        kill_running_queries(monitor).await;
    }

    let mut hist = stats::new_histogram();
    let (mut closed_hist, mut open_hist) = (stats::new_histogram(), stats::new_histogram());
    let mut counts = Vec::with_capacity(spec.clients);
    let mut errors = 0;
    let mut queries: u64 = 0;
    let mut shed = 0;
    let mut unfinished = Vec::new();
    let mut leftover: Vec<Conn> = Vec::new();
    let mut shared: Option<Arc<SharedPool>> = None;
    for task in tasks {
        let o = task.await.context("a client task panicked")?;
        hist.add(&o.hist).context("merging histograms")?;
        if o.open {
            open_hist.add(&o.hist).context("merging histograms")?;
        } else {
            closed_hist.add(&o.hist).context("merging histograms")?;
        }
        // The open stream's connections are interchangeable lanes for one stream of
        // arrivals: "clients served" and the spread are about the closed-loop clients.
        if !o.open {
            counts.push(o.done);
        }
        queries += o.done;
        errors += o.errors;
        shed += o.shed;
        unfinished.extend(o.unfinished_us);
        match o.lane {
            Lane::Own(Some(c)) => leftover.push(c),
            Lane::Own(None) => {}
            Lane::Shared(p) => shared = Some(p),
        }
    }
    if let Some(mut a) = stream.as_ref().and_then(|s| s.lock().ok()) {
        while a.next < clock.t1 {
            let due = a.take();
            unfinished.push(us(clock.t1 - due));
        }
    }
    if let Some(pool) = shared.and_then(|p| Arc::try_unwrap(p).ok()) {
        leftover.extend(
            pool.idle
                .into_inner()
                .unwrap_or_default()
                .into_iter()
                .flatten(),
        );
    }
    cache.conns = leftover;

    let window_s = spec.window.as_secs_f64();
    let qps = queries as f64 / window_s;
    let lat = stats::latency(&hist);
    let spread = stats::spread(&counts);
    let (inflight, oldest) = stats::unfinished(&unfinished);
    let littles = stats::littles(qps, lat.mean_ms, spec.clients);
    let (loadgen_ns, proxy_ns) = cpu_end.since(&cpu_start);
    let per_query_us = |ns: u64| {
        if queries == 0 {
            0.0
        } else {
            ns as f64 / 1000.0 / queries as f64
        }
    };
    Ok(LevelResult {
        experiment: spec.experiment.to_string(),
        target: spec.target.to_string(),
        arrival: match (spec.arrival, spec.open_stream) {
            (Arrival::Closed, Some(_)) => "closed+open".into(),
            (Arrival::Closed, None) => "closed".into(),
            (Arrival::Open { .. }, _) => "open".into(),
        },
        clients: spec.clients + open_clients,
        backend_conns: spec.proxy_pool.unwrap_or(backend_conns),
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
        errors,
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
        p99_with_inflight_ms: stats::quantile_with_unfinished(&hist, &unfinished, 0.99),
        littles_l: littles.l,
        littles_ratio: littles.ratio,
        threads_connected,
        threads_running,
        loadgen_cpu_us_per_query: per_query_us(loadgen_ns),
        loadgen_cpu_pct: loadgen_ns as f64 / 1e9 / window_s * 100.0,
        loadgen_rss_mib: rss,
        proxy_cpu_us_per_query: (matches!(spec.target, "relay")
            || spec.target.starts_with("proxy")
            || spec.target.starts_with("sluice"))
        .then(|| per_query_us(proxy_ns)),
        idle_conns: spec.idle_conns,
        workload: match &ctx.workload {
            Some(w) => w.mix.label().to_string(),
            None => "select1".into(),
        },
        pool_mode: spec.pool_mode.map(String::from),
        open_clients: spec.open_stream.map(|(n, _)| n),
        shed,
        attempts: queries + errors + shed,
        max_queue_wait_ms: spec.max_queue_wait_ms,
        p99_closed_ms: spec
            .open_stream
            .map(|_| stats::latency(&closed_hist).p99_ms),
        p99_open_ms: spec.open_stream.map(|_| stats::latency(&open_hist).p99_ms),
        threads_running_mean: None,
        limit_mean: None,
    })
}
