//! The overhead experiment's counted costs, which repeat where its timings drift by tens of
//! percent: each relay's syscalls per query, in a window of their own right after its timed
//! one ([`syscall_window`]), and with `--cost-counts` its user-space instructions per query
//! under callgrind ([`instructions`]); plus the tools they need ([`Tools`]).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use mysql_async::prelude::Queryable;
use mysql_async::Conn;

use super::run::{Plan, Run};
use crate::analysis::relay_cost::{key_of, CLIENTS};
use crate::measure::callgrind::{self, Callgrind};
use crate::measure::client::{LevelCtx, Live};
use crate::measure::conns::{close_conns, open_conns, ConnCache};
use crate::measure::level::{LevelResult, LevelSpec};
use crate::measure::monitor::kill_running_queries;
use crate::measure::syscalls::{Counter, SyscallCounts, SyscallRow};
use crate::settings::Settings;
use crate::targets::process::RelayProcess;
use crate::targets::relays::{self, Binaries, Launch, Relay};
use crate::targets::{haproxy, sluice_child};
use crate::workload::conn_opts;

/// The syscall window's warm-up (the connections are already warm from the timed window).
const SYSCALL_WARMUP: Duration = Duration::from_millis(300);
/// How long syscalls are counted (shorter when the run's windows are).
const SYSCALL_WINDOW: Duration = Duration::from_secs(2);
/// The load runs this much longer than the count, so the counter's start and stop fall
/// inside it.
const SYSCALL_MARGIN: Duration = Duration::from_millis(700);
/// callgrind: the queries each client runs before the counters are zeroed (sluice opens its
/// backends, every cache fills), and the idle stretch measured after: as long as the queries
/// took, within these bounds.
const WARM_QUERIES_PER_CLIENT: u64 = 20;
const IDLE_MIN: Duration = Duration::from_millis(250);
const IDLE: Duration = Duration::from_secs(1);
/// callgrind: planned at this many queries per second under valgrind (below what sluice and
/// the byte pipes run at under it), plus the start.
const VALGRIND_QPS: u64 = 2000;
const VALGRIND_START: Duration = Duration::from_secs(5);

/// What the overhead experiment works with, found once before it measures.
pub struct Tools {
    /// HAProxy and the sluice binary, or why each is missing (its rows are left out).
    pub bins: Binaries,
    /// How syscalls are counted, or why they are not.
    pub counter: Result<Counter, String>,
    /// The relays' configs and logs, the counters' files.
    pub dir: tempfile::TempDir,
}

impl Tools {
    /// Finds the binaries and the syscall counter, records them in the metadata and notes
    /// what is missing.
    pub fn find(run: &mut Run<'_>) -> Result<Tools> {
        let s = run.s;
        let bins = Binaries {
            haproxy: haproxy::find(s.haproxy_bin.as_deref()),
            sluice: sluice_child::sluice_bin(s.sluice_bin.as_deref()).map_err(|e| e.to_string()),
        };
        let counter = Counter::detect(s.syscall_counter);
        let r = &mut run.report;
        r.meta(
            "overhead_pinning",
            format!(
                "relays and load on CPUs {:?}, server on CPUs {:?}",
                s.loadgen_cpus, s.server_cpus
            ),
        );
        r.meta("overhead_rounds", s.overhead_rounds);
        if let Ok(me) = std::env::current_exe() {
            r.meta("overhead_relay_bin", format!("{} relay", me.display()));
        }
        match &bins.haproxy {
            Ok(bin) => {
                r.meta("overhead_haproxy_bin", bin.display());
                r.meta("overhead_haproxy_version", haproxy::version(bin));
                let cfg = |busy| {
                    haproxy::config("127.0.0.1:<free port>", "<server host:port>", busy)
                        .lines()
                        .map(str::trim)
                        .collect::<Vec<_>>()
                        .join("; ")
                };
                r.meta("overhead_haproxy_config", cfg(false));
                r.meta("overhead_haproxy_busy_config", cfg(true));
            }
            Err(why) => r
                .notes
                .push(format!("overhead: HAProxy not measured: {why}")),
        }
        if cfg!(debug_assertions) {
            r.notes.push(
                "overhead: WARNING: loadgen is a debug build, so the bare tokio relay (loadgen relay) \
                 runs unoptimised; measure with --release (just overhead does)"
                    .into(),
            );
        }
        match &bins.sluice {
            Ok(bin) => {
                r.meta("overhead_sluice_bin", bin.display());
                r.meta("overhead_sluice_serial_args", Relay::SERIAL_ARGS.join(" "));
                r.meta("overhead_sluice_sleep_args", Relay::SLEEP_ARGS.join(" "));
                r.meta(
                    "overhead_sluice_undigested_args",
                    Relay::UNDIGESTED_ARGS.join(" "),
                );
                if bin.components().any(|c| c.as_os_str() == "debug") {
                    r.notes.push(format!(
                        "overhead: WARNING: {} looks like a debug build; its numbers are not sluice's",
                        bin.display()
                    ));
                }
                if let Some(stale) = stale_sluice(bin) {
                    r.notes.push(stale);
                }
            }
            Err(why) => r
                .notes
                .push(format!("overhead: sluice not measured: {why}")),
        }
        match &counter {
            Ok(c) => {
                r.meta("overhead_syscall_counter", c.label());
                let (_, count) = syscall_timing(s);
                r.meta("overhead_syscall_window_s", count.as_secs_f64());
            }
            Err(why) => r
                .notes
                .push(format!("overhead: syscalls not counted: {why}")),
        }
        for note in r.notes.iter().filter(|n| n.starts_with("overhead:")) {
            run.progress.log(note);
        }
        let dir = tempfile::Builder::new()
            .prefix("loadgen-overhead-")
            .tempdir()
            .context("creating the overhead experiment's temp dir")?;
        Ok(Tools { bins, counter, dir })
    }
}

/// A note when the sluice binary is older than a file under `proxy/src` (a rebuilt loadgen
/// would otherwise measure the old sluice); nothing when the sources are not here.
fn stale_sluice(bin: &Path) -> Option<String> {
    let built = std::fs::metadata(bin).and_then(|m| m.modified()).ok()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../proxy/src");
    let newest = newest_mtime(&src)?;
    (newest > built).then(|| {
        format!(
            "overhead: WARNING: {} is older than proxy/src: it may not be the sluice you changed \
             (rebuild it with `cargo build --release -p sluice`; `just overhead` does)",
            bin.display()
        )
    })
}

fn newest_mtime(dir: &Path) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let t = if path.is_dir() {
            newest_mtime(&path)
        } else {
            entry.metadata().and_then(|m| m.modified()).ok()
        };
        newest = newest.max(t);
    }
    newest
}

/// The syscall window's warm-up and count, within the run's own.
fn syscall_timing(s: &Settings) -> (Duration, Duration) {
    (SYSCALL_WARMUP.min(s.warmup), SYSCALL_WINDOW.min(s.window))
}

/// What the counted costs add to the plan: a syscall window after each of `relay_levels`
/// timed ones, and the callgrind runs with `--cost-counts`.
pub fn plan(s: &Settings, relay_levels: usize) -> Plan {
    let mut fixed = Duration::ZERO;
    if s.syscall_counter != crate::cli::SyscallCounterChoice::Off {
        let (warm, count) = syscall_timing(s);
        fixed += (warm + count + SYSCALL_MARGIN) * relay_levels as u32;
    }
    if s.cost_counts {
        let per_clients = |clients: u64| {
            let queries = s.cost_queries + clients * WARM_QUERIES_PER_CLIENT;
            Duration::from_secs_f64(queries as f64 / VALGRIND_QPS as f64) + IDLE
        };
        let per_relay = VALGRIND_START
            + CLIENTS
                .iter()
                .map(|&c| per_clients(c as u64))
                .sum::<Duration>();
        let counted = Relay::ALL.iter().filter(|r| r.counts_instructions());
        fixed += per_relay * counted.count() as u32;
    }
    Plan::fixed(fixed)
}

/// Syscalls counted over a window, and the queries answered in it.
pub struct SyscallWindow {
    pub counts: SyscallCounts,
    pub queries: u64,
    pub seconds: f64,
}

impl SyscallWindow {
    /// Syscalls per answered query.
    pub fn per_query(&self) -> Option<f64> {
        (self.queries > 0).then(|| self.counts.total as f64 / self.queries as f64)
    }

    /// QPS while counting.
    pub fn qps(&self) -> f64 {
        self.queries as f64 / self.seconds.max(1e-9)
    }

    /// `overhead_syscalls.csv` rows for the level `row`: the total, then each syscall.
    pub fn rows(&self, row: &LevelResult, counter: &str) -> Vec<SyscallRow> {
        let per = |n: u64| n as f64 / self.queries.max(1) as f64;
        let named: u64 = self.counts.by_name.iter().map(|(_, n)| n).sum();
        let other = self.counts.total.saturating_sub(named);
        std::iter::once(("total".to_string(), self.counts.total))
            .chain(self.counts.by_name.iter().cloned())
            .chain((other > 0).then(|| ("other".to_string(), other)))
            .map(|(syscall, calls)| SyscallRow {
                round: row.round.unwrap_or(1),
                target: row.target.clone(),
                pool_size: row.pool_size,
                clients: row.clients,
                counter: counter.to_string(),
                syscall,
                calls,
                queries: self.queries,
                per_query: per(calls),
            })
            .collect()
    }
}

/// Counts `process`'s syscalls while the level `spec` runs again on `cache`'s connections:
/// the counter is switched on after a short warm-up, and the queries answered while it is on
/// are read from the clients' live counter at the moments it goes on and off.
pub async fn syscall_window(
    run: &mut Run<'_>,
    ctx: &LevelCtx,
    spec: &LevelSpec,
    cache: &mut ConnCache,
    counter: &Counter,
    process: &RelayProcess,
    dir: &Path,
) -> Result<SyscallWindow> {
    let (warm, count) = syscall_timing(run.s);
    let live = Arc::new(Live::counting());
    let mut ctx = ctx.clone();
    ctx.live = Some(live.clone());
    let mut spec = spec.clone();
    (spec.warmup, spec.window) = (warm, count + SYSCALL_MARGIN);
    (spec.relay_pid, spec.server_pid) = (None, None);
    let counting = async {
        tokio::time::sleep(warm).await;
        let on = counter.start(process.pid, dir).await?;
        let (a0, t0) = (live.answered.load(Ordering::Relaxed), Instant::now());
        tokio::time::sleep(count).await;
        let (a1, t1) = (live.answered.load(Ordering::Relaxed), Instant::now());
        let counts = on.stop().await?;
        Ok::<_, anyhow::Error>(SyscallWindow {
            counts,
            queries: a1 - a0,
            seconds: (t1 - t0).as_secs_f64(),
        })
    };
    let label = format!("syscalls: {} clients", spec.clients);
    let (level, counted) = tokio::join!(run.measure_row(&ctx, &spec, &label, cache), counting);
    level?;
    counted
}

/// `--cost-counts`: each relay under callgrind, at each client count: instructions for
/// `cost_queries` queries, less the idle rate, per query. Written to round 1's rows. The
/// busy-polling rows (HAProxy busy-polling, sluice with busy polling off) are not counted:
/// a polling process's count measures how long it waited, and one that never sleeps has no
/// idle rate to subtract ([`Relay::counts_instructions`]); their counterparts' are.
pub async fn instructions(run: &mut Run<'_>, tools: &Tools) -> Result<()> {
    let version = match callgrind::available() {
        Ok(v) => v,
        Err(why) => {
            let note = format!("overhead: instructions not counted: {why}");
            run.progress.log(&note);
            run.report.notes.push(note);
            return Ok(());
        }
    };
    run.report.meta("overhead_valgrind", version);
    run.report
        .meta("overhead_callgrind_queries", run.s.cost_queries);
    let backend = run.backend_addr()?;
    for relay in Relay::ALL {
        if tools.bins.missing(relay).is_some() || !relay.counts_instructions() {
            continue;
        }
        let dir = tools.dir.path().join(format!("callgrind-{}", relay.key()));
        std::fs::create_dir_all(&dir)?;
        let launch = Launch {
            backend: &backend,
            max_clients: CLIENTS[1],
            cpus: &run.s.loadgen_cpus,
            dir: tools.dir.path(),
            under: Some(callgrind::valgrind_args(&dir)),
            server_cpus: run.server_cpu_count,
        };
        let process = relays::start(relay, &tools.bins, &launch)
            .await
            .with_context(|| format!("starting {} under valgrind", relay.label()))?;
        let url = run
            .server_url
            .replacen(&backend, &process.addr.to_string(), 1);
        let cg = Callgrind::new(process.pid, &dir);
        let mut result = Ok(());
        for clients in CLIENTS {
            let est = Duration::from_secs(run.s.cost_queries / VALGRIND_QPS + 2);
            let _bar = run.progress.level(
                format!("callgrind: {clients} clients, {}", relay.label()),
                est,
            );
            result = count_one(run, relay, clients, &url, &cg).await;
            if result.is_err() {
                break;
            }
        }
        // Politely, so valgrind removes its FIFOs.
        process.stop(Duration::from_secs(10)).await;
        kill_running_queries(&mut run.monitor).await;
        result?;
    }
    run.report.rewrite("overhead")
}

/// One relay at one client count under callgrind.
async fn count_one(
    run: &mut Run<'_>,
    relay: Relay,
    clients: usize,
    url: &str,
    cg: &Callgrind,
) -> Result<()> {
    let opts = conn_opts(url)?;
    let mut conns = open_conns(&opts, clients).await?;
    let measured = async {
        run_queries(&mut conns, clients as u64 * WARM_QUERIES_PER_CLIENT).await?;
        cg.zero().await?;
        let t = Instant::now();
        let queries = run_queries(&mut conns, run.s.cost_queries).await?;
        let busy = t.elapsed().as_secs_f64();
        let total = cg.dump().await?;
        cg.zero().await?;
        let t = Instant::now();
        tokio::time::sleep(Duration::from_secs_f64(busy).clamp(IDLE_MIN, IDLE)).await;
        let idle = cg.dump().await? as f64 / t.elapsed().as_secs_f64();
        Ok::<_, anyhow::Error>((queries, busy, total, idle))
    }
    .await;
    close_conns(conns).await;
    let (queries, busy, total, idle) = measured?;
    let ipq = callgrind::per_query(total, queries, idle, busy);
    let key = relay.key();
    let r = &mut run.report;
    r.meta(
        &format!("overhead_{key}_callgrind_qps_{clients}_clients"),
        format!("{:.0}", queries as f64 / busy),
    );
    r.meta(
        &format!("overhead_{key}_callgrind_idle_ir_per_s_{clients}_clients"),
        format!("{idle:.0}"),
    );
    if let Some(row) = r.rows.iter_mut().find(|row| {
        row.experiment == "overhead"
            && row.round.unwrap_or(1) == 1
            && row.clients == clients
            && key_of(row) == key
    }) {
        row.instructions_per_query = ipq;
    }
    run.progress.log(format!(
        "callgrind: {} at {clients} client{}: {:.0} instructions per query ({queries} queries at {:.0} QPS under valgrind; idle {:.0}/s)",
        relay.label(),
        if clients == 1 { "" } else { "s" },
        ipq.unwrap_or(0.0),
        queries as f64 / busy,
        idle
    ));
    Ok(())
}

/// Runs `total` `SELECT 1`s spread evenly over `conns`, all clients at once; returns how many.
async fn run_queries(conns: &mut [Conn], total: u64) -> Result<u64> {
    let each = total.div_ceil(conns.len().max(1) as u64);
    futures_util::future::try_join_all(conns.iter_mut().map(|c| async move {
        for _ in 0..each {
            c.query_drop("SELECT 1").await?;
        }
        Ok::<_, mysql_async::Error>(())
    }))
    .await
    .context("a query under callgrind failed")?;
    Ok(each * conns.len() as u64)
}
