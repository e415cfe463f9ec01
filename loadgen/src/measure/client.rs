//! One client of a level: its way to a connection (its own, or a turn at the in-process fair
//! pool), how it paces its statements (closed loop, its own Poisson stream, or a stream shared
//! with other connections), and what it measured.
//!
//! Every client is a tokio task with its own `Histogram` and counters, so nothing is shared on
//! the hot path; [`super::level`] merges them once the window has closed. A query counts when
//! it *finishes* inside the window; one still unfinished when the window closes is reported
//! with its age at that instant instead of being silently dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Semaphore;
use tokio::time::sleep_until;

use super::stats;
use crate::workload::{connect, Stmt, Workload};

/// Where and what to query.
#[derive(Debug, Clone)]
pub struct LevelCtx {
    /// Options for load connections (server or proxy).
    pub load: Opts,
    /// The query generator; `None` sends `SELECT 1`.
    pub workload: Option<Workload>,
    /// RNG seed.
    pub seed: u64,
    /// Counters published while the level runs, for samplers that cannot wait for the merge.
    pub live: Option<Arc<Live>>,
    /// Send the workload as prepared statements (binary protocol) instead of SQL text.
    pub prepared: bool,
    /// Each client first sets session state of its own (`SET NAMES utf8mb4` and one of four
    /// time zones), as real applications do, so a pooler must carry it between backends.
    pub session_setup: bool,
}

/// What a level publishes while it runs: E's timeline reads the answered count every 250 ms,
/// the soak reads the counts and the latencies once a minute. Each client records into its own
/// slot, so the only contention is with the sampler's rare swap.
#[derive(Debug, Default)]
pub struct Live {
    /// Queries answered so far (warm-up included).
    pub answered: AtomicU64,
    /// Queries failed so far (warm-up included).
    pub failed: AtomicU64,
    /// Per client: answered latencies (µs) since the last [`Live::take_latency`]; empty when
    /// only counts are kept.
    latency: Vec<Mutex<Histogram<u64>>>,
}

impl Live {
    /// Counts only.
    pub fn counting() -> Live {
        Live::default()
    }

    /// Counts, and the latencies of `clients` clients.
    pub fn with_latency(clients: usize) -> Live {
        Live {
            latency: (0..clients)
                .map(|_| Mutex::new(stats::new_histogram()))
                .collect(),
            ..Live::default()
        }
    }

    /// Every client's latencies since the last call, merged; the slots start afresh.
    pub fn take_latency(&self) -> Histogram<u64> {
        let mut merged = stats::new_histogram();
        for slot in &self.latency {
            let mut h = slot.lock().unwrap_or_else(|p| p.into_inner());
            let _ = merged.add(&*h);
            h.reset();
        }
        merged
    }

    fn answer(&self, client: usize, latency_us: u64) {
        self.answered.fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = self.latency.get(client) {
            slot.lock()
                .unwrap_or_else(|p| p.into_inner())
                .saturating_record(latency_us);
        }
    }
}

/// A closed-loop client whose statement was shed (sluice's ERR 9002) backs off before its
/// next one, as a client honouring a "retry shortly" error would: exponentially from this,
/// with jitter, up to [`SHED_BACKOFF_MAX`]. A fixed short pause would turn 512 shed clients
/// into a retry storm that measures the storm, not the admission control.
const SHED_BACKOFF: Duration = Duration::from_millis(50);
const SHED_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// sluice's "overloaded, retry shortly" error.
const ER_SHED: u16 = 9002;

/// How one query went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Ok,
    Failed,
    /// Refused by sluice's admission control (ERR 9002).
    Shed,
}

/// The pool of experiment C: P connections behind a FIFO semaphore.
pub struct SharedPool {
    permits: Semaphore,
    idle: Mutex<Vec<Option<Conn>>>,
}

/// A client's way to a connection.
pub enum Lane {
    Own(Option<Conn>),
    Shared(Arc<SharedPool>),
}

impl Lane {
    /// Runs one query: `Some(answer)`, or `None` when it was given up: still waiting for a
    /// pooled connection when the window closed, or still unanswered [`ABANDON_AFTER`] later.
    /// Either way it is reported as unfinished at its age at the close, and waiting for it
    /// would only delay the next level.
    async fn run(&mut self, stmt: &Stmt, opts: &Opts, close: Instant) -> Option<Answer> {
        let give_up = close + ABANDON_AFTER;
        match self {
            Lane::Own(slot) => run_until(slot, stmt, opts, give_up).await,
            Lane::Shared(pool) => {
                // tokio's Semaphore is FIFO: the longest waiter gets the next connection.
                let permit = tokio::select! {
                    p = pool.permits.acquire() => p.ok()?,
                    _ = sleep_until(close.into()) => return None,
                };
                let mut slot = pool.idle.lock().ok().and_then(|mut v| v.pop()).flatten();
                let ok = run_until(&mut slot, stmt, opts, give_up).await;
                if let Ok(mut idle) = pool.idle.lock() {
                    idle.push(slot);
                }
                drop(permit);
                ok
            }
        }
    }
}

/// How long after the window closes a client still waits for an answer. Statements running
/// on the server are cancelled at the close and answer within milliseconds, so their
/// connections stay usable for the next level; what is still unanswered after this waits in
/// a proxy's queue, and with 512 clients queued behind a few slots that queue would take
/// (clients x query time / slots) to drain, several seconds a level at 10 ms a query.
pub const ABANDON_AFTER: Duration = Duration::from_millis(500);

/// [`run_on`], unless `give_up` comes first: then the connection is dropped mid-statement
/// (its state is unknown; the next query reconnects) and the query counts as unfinished.
async fn run_until(
    slot: &mut Option<Conn>,
    stmt: &Stmt,
    opts: &Opts,
    give_up: Instant,
) -> Option<Answer> {
    let answer = tokio::select! {
        a = run_on(slot, stmt, opts) => Some(a),
        _ = sleep_until(give_up.into()) => None,
    };
    if answer.is_none() {
        *slot = None;
    }
    answer
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
pub struct ClientOutcome {
    /// Latencies of its answered queries in the window, µs.
    pub hist: Histogram<u64>,
    /// Answered queries in the window.
    pub done: u64,
    /// Failed queries in the window.
    pub errors: u64,
    /// Queries refused with ERR 9002 in the window.
    pub shed: u64,
    /// Ages at window close of its requests still unfinished then, µs.
    pub unfinished_us: Vec<u64>,
    /// Answered queries in each slice of the window.
    pub slices: Vec<u64>,
    /// Its connection (or pool handle), handed back for the next level.
    pub lane: Lane,
    /// Part of an open-loop stream next to closed-loop clients (experiment F).
    pub open: bool,
}

/// A level's timeline: clients start at `base`, the window runs from `t0` to `t1`.
pub struct Clock {
    pub base: Instant,
    pub t0: Instant,
    pub t1: Instant,
    /// The window is cut into this many equal slices for the QPS noise.
    pub slices: usize,
}

impl Clock {
    /// The slice of the window that `t` (inside it) falls in.
    fn slice_of(&self, t: Instant) -> usize {
        let window = (self.t1 - self.t0).as_secs_f64();
        let at = t.saturating_duration_since(self.t0).as_secs_f64();
        if window <= 0.0 {
            return 0;
        }
        ((at / window * self.slices as f64) as usize).min(self.slices.saturating_sub(1))
    }
}

/// Slices of a window: about one a second, at least 2 (so there is a spread) and at most
/// 120 (so a long window does not cost a vector per client).
pub fn slices_for(window: Duration) -> usize {
    (window.as_secs_f64().round() as usize).clamp(2, 120)
}

/// A duration in whole µs (saturating).
pub fn us(d: Duration) -> u64 {
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
pub struct Arrivals {
    next: Instant,
    rate: f64,
    rng: StdRng,
}

impl Arrivals {
    /// A stream of `rate` arrivals per second from `start`.
    pub fn new(start: Instant, rate: f64, seed: u64) -> Arrivals {
        let mut rng = StdRng::seed_from_u64(seed);
        let next = start + exp_interval(&mut rng, rate);
        Arrivals { next, rate, rng }
    }

    /// Whether the next arrival is due before `t`.
    pub fn before(&self, t: Instant) -> bool {
        self.next < t
    }

    /// The next arrival's due time.
    pub fn take(&mut self) -> Instant {
        let due = self.next;
        self.next += exp_interval(&mut self.rng, self.rate);
        due
    }
}

/// How a client paces its statements.
#[derive(Clone)]
pub enum Pace {
    /// The next one as soon as the last answered.
    Closed,
    /// Its own Poisson stream at this rate (experiment B's open loop).
    Own(f64),
    /// The next arrival of a stream shared with other connections (experiment F).
    Shared(Arc<Mutex<Arrivals>>),
}

/// Runs one client from `clock.base` until the window closes.
pub async fn client_task(
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
        slices: vec![0; clock.slices],
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
        if let Some(live) = &ctx.live {
            match ok {
                Some(Answer::Ok) => live.answer(id, us(end - due).max(1)),
                Some(Answer::Failed) => {
                    live.failed.fetch_add(1, Ordering::Relaxed);
                }
                _ => {}
            }
        }
        if end >= clock.t0 {
            match ok {
                Some(Answer::Ok) => {
                    out.hist.saturating_record(us(end - due).max(1));
                    out.done += 1;
                    if let Some(n) = out.slices.get_mut(clock.slice_of(end)) {
                        *n += 1;
                    }
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

/// One lane per client: its own connection (`pool = None`), or a turn at a fair pool of
/// the given connections shared by `clients` clients.
pub fn lanes(conns: Vec<Conn>, pool: Option<usize>, clients: usize) -> Vec<Lane> {
    match pool {
        None => conns.into_iter().map(|c| Lane::Own(Some(c))).collect(),
        Some(p) => {
            let pool = Arc::new(SharedPool {
                permits: Semaphore::new(p),
                idle: Mutex::new(conns.into_iter().map(Some).collect()),
            });
            (0..clients).map(|_| Lane::Shared(pool.clone())).collect()
        }
    }
}

/// The connections the lanes held, once every client has finished: for the next level.
pub fn into_conns(lanes: Vec<Lane>) -> Vec<Conn> {
    let mut conns = Vec::new();
    let mut shared: Option<Arc<SharedPool>> = None;
    for lane in lanes {
        match lane {
            Lane::Own(Some(c)) => conns.push(c),
            Lane::Own(None) => {}
            Lane::Shared(p) => shared = Some(p),
        }
    }
    if let Some(pool) = shared.and_then(|p| Arc::try_unwrap(p).ok()) {
        conns.extend(
            pool.idle
                .into_inner()
                .unwrap_or_default()
                .into_iter()
                .flatten(),
        );
    }
    conns
}
