//! sysbench 1.0 as the load: its command lines ([`run_args`], [`admin_args`]), the wrapper
//! script that runs a workload's own script unchanged and counts each thread's events
//! ([`wrapper_script`]), one run as a child process pinned to loadgen's CPUs with the CPU of
//! the relay, the server and sysbench itself read from `/proc` over its timed span
//! ([`run`]), and the CSV rows made of what it printed ([`SysbenchRow`], [`IntervalRow`]).
//!
//! The timed span starts when sysbench prints `Threads started!` (every thread connected and
//! prepared its statements; sysbench's clock starts there) and ends when it starts its
//! final report (every event has finished: the span holds exactly the events it counts).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::resources::{cpus_allowed, pid_cpu_ns};
use super::stats::spread;
use super::sysbench_output::{self as output, Output, STARTED, THREAD_LINE};
use crate::programs::Program;

/// The percentile sysbench reports itself (`--percentile`); p95 comes from its histogram.
pub const REPORTED_PERCENTILE: u32 = 99;

/// Where and as whom sysbench connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbConn {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub password: String,
    pub db: String,
}

impl DbConn {
    /// The connection flags; the password as `***` when `masked`.
    pub fn args(&self, masked: bool) -> Vec<String> {
        vec![
            "--db-driver=mysql".into(),
            format!("--mysql-host={}", self.host),
            format!("--mysql-port={}", self.port),
            format!("--mysql-user={}", self.user),
            format!(
                "--mysql-password={}",
                if masked { "***" } else { &self.password }
            ),
            format!("--mysql-db={}", self.db),
        ]
    }
}

/// The tables every run works on (`sysbench prepare` made them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tables {
    pub count: u32,
    pub rows: u32,
}

impl Tables {
    fn args(&self) -> [String; 2] {
        [
            format!("--tables={}", self.count),
            format!("--table-size={}", self.rows),
        ]
    }
}

/// One timed run.
#[derive(Debug, Clone)]
pub struct Job<'a> {
    pub bin: &'a Path,
    /// The wrapper script ([`wrapper_script`]).
    pub script: &'a Path,
    pub conn: DbConn,
    pub tables: Tables,
    pub threads: usize,
    /// `--time`, whole seconds.
    pub time_s: u32,
    /// `--rand-seed`: the same key sequence for every target.
    pub seed: u64,
    /// CPUs sysbench runs on.
    pub cpus: &'a [usize],
    /// Where its stderr goes.
    pub dir: &'a Path,
}

/// The flags of a timed run, after the script (the password masked when `masked`).
pub fn run_args(job: &Job<'_>, masked: bool) -> Vec<String> {
    let mut args = job.conn.args(masked);
    args.extend(job.tables.args());
    args.extend([
        format!("--threads={}", job.threads),
        format!("--time={}", job.time_s),
        "--events=0".into(),
        "--report-interval=1".into(),
        format!("--percentile={REPORTED_PERCENTILE}"),
        "--histogram=on".into(),
        format!("--rand-seed={}", job.seed),
        "run".into(),
    ]);
    args
}

/// The flags of `prepare`, `prewarm` or `cleanup` (one thread per table).
pub fn admin_args(conn: &DbConn, tables: Tables, action: &str) -> Vec<String> {
    let mut args = vec!["oltp_read_write".to_string()];
    args.extend(conn.args(false));
    args.extend(tables.args());
    args.push(format!("--threads={}", tables.count.max(1)));
    args.push(action.into());
    args
}

/// A script that runs `workload`'s own script (`oltp_read_only`, ...) unchanged and, when a
/// thread ends, prints how many events it finished to stderr as `loadgen-thread <tid> <n>`:
/// sysbench itself only says the mean and standard deviation, and the run must say whether
/// every thread was served. An event that fails counts nowhere, as in sysbench.
pub fn wrapper_script(workload: &str) -> String {
    format!(
        "-- Written by loadgen sysbench: sysbench's own {workload} script, unchanged, plus a\n\
         -- count of each thread's finished events, printed to stderr when the thread ends.\n\
         require(\"{workload}\")\n\
         local workload_event = event\n\
         local workload_thread_done = thread_done\n\
         local events = 0\n\
         function event(...)\n\
         \x20  workload_event(...)\n\
         \x20  events = events + 1\n\
         end\n\
         function thread_done(...)\n\
         \x20  io.stderr:write(string.format(\"{THREAD_LINE} %d %d\\n\", sysbench.tid, events))\n\
         \x20  if workload_thread_done ~= nil then\n\
         \x20     return workload_thread_done(...)\n\
         \x20  end\n\
         end\n"
    )
}

/// sysbench, as loadgen finds and names it.
const SYSBENCH: Program = Program {
    name: "sysbench",
    flag: "--sysbench-bin",
    install: "`scripts/install-test-deps.sh`, apt-get install sysbench",
    version_arg: "--version",
};

/// The sysbench binary: `explicit` (`--sysbench-bin`), else `sysbench` on PATH.
pub fn find(explicit: Option<&Path>) -> Result<PathBuf, String> {
    SYSBENCH.find(explicit)
}

/// `sysbench --version`, e.g. `sysbench 1.0.20`.
pub fn version(bin: &Path) -> String {
    SYSBENCH.version(bin)
}

/// Processes whose CPU a run reads over its timed span.
#[derive(Debug, Clone, Copy, Default)]
pub struct Watch {
    /// The relay between sysbench and the server (none for direct).
    pub relay: Option<u32>,
    /// The server, when it is a local process.
    pub server: Option<u32>,
}

/// CPU used over a run's timed span, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuSpan {
    /// Wall time of the span.
    pub wall_s: f64,
    pub relay_ns: Option<u64>,
    pub server_ns: Option<u64>,
    pub sysbench_ns: Option<u64>,
}

/// A finished (or killed) run.
#[derive(Debug)]
pub struct Finished {
    pub stdout: String,
    pub stderr: String,
    /// Its exit status; `None` when it was killed for running over its time.
    pub status: Option<ExitStatus>,
    /// `None` when it never started or never reported.
    pub cpu: Option<CpuSpan>,
    /// The CPUs sysbench was pinned to, as the kernel said right after its start.
    pub cpus: String,
}

/// A child killed (SIGKILL) and reaped when dropped.
struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    fn kill(&mut self) {
        if let Some(child) = self.0.as_mut() {
            let _ = child.kill();
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// How long a run may take beyond `--time`: the threads' logins and statement prepares
/// before the clock starts, the last events and the disconnects after it stops.
fn allowance(threads: usize) -> Duration {
    Duration::from_secs(60) + Duration::from_millis(50) * threads as u32
}

/// Runs `job` and reads the CPU of `watch`'s processes (and sysbench's own) over its timed
/// span. A run that goes far beyond its time is killed (`status` is then `None`).
pub async fn run(job: &Job<'_>, watch: Watch) -> Result<Finished> {
    let err_path = job.dir.join("sysbench.err");
    let err = std::fs::File::create(&err_path)
        .with_context(|| format!("creating {}", err_path.display()))?;
    let mut cmd = std::process::Command::new(job.bin);
    cmd.arg(job.script)
        .args(run_args(job, false))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(err);
    let mut child = dbkit::spawn::spawn(
        cmd,
        dbkit::spawn::SpawnOptions {
            cpus: Some(job.cpus.to_vec()),
            new_process_group: true,
        },
    )
    .with_context(|| format!("starting {}", job.bin.display()))?;
    let pid = child.id();
    let cpus = cpus_allowed(pid);
    let stdout = child.stdout.take().context("sysbench's stdout")?;
    let mut guard = KillOnDrop(Some(child));
    let mut reader = tokio::task::spawn_blocking(move || read_and_sample(stdout, pid, watch));
    let limit = Duration::from_secs(job.time_s.into()) + allowance(job.threads);
    let (killed, read) = tokio::select! {
        read = &mut reader => (false, read),
        _ = tokio::time::sleep(limit) => {
            guard.kill();
            (true, reader.await)
        }
    };
    let (stdout, cpu) = read.context("reading sysbench's output")?;
    let status = match guard.0.take() {
        Some(mut child) if !killed => {
            Some(tokio::task::spawn_blocking(move || child.wait()).await??)
        }
        _ => None,
    };
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    Ok(Finished {
        stdout,
        stderr,
        status,
        cpu,
        cpus,
    })
}

/// Reads sysbench's stdout to its end, sampling the processes' CPU when its clock starts and
/// when its final report begins.
fn read_and_sample(
    stdout: std::process::ChildStdout,
    sysbench: u32,
    watch: Watch,
) -> (String, Option<CpuSpan>) {
    let sample = || {
        (
            Instant::now(),
            [watch.relay, watch.server, Some(sysbench)].map(|p| p.and_then(pid_cpu_ns)),
        )
    };
    let mut text = String::new();
    let (mut start, mut end) = (None, None);
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        if start.is_none() && line.trim() == STARTED {
            start = Some(sample());
        } else if start.is_some() && end.is_none() && output::is_report_start(line.trim()) {
            end = Some(sample());
        }
        text.push_str(&line);
        text.push('\n');
    }
    let cpu = match (start, end) {
        (Some((t0, a)), Some((t1, b))) => {
            let d = |i: usize| match (a[i], b[i]) {
                (Some(x), Some(y)) => Some(y.saturating_sub(x)),
                _ => None,
            };
            Some(CpuSpan {
                wall_s: (t1 - t0).as_secs_f64(),
                relay_ns: d(0),
                server_ns: d(1),
                sysbench_ns: d(2),
            })
        }
        _ => None,
    };
    (text, cpu)
}

/// Runs `sysbench <args>` to its end (prepare, prewarm, cleanup) on `cpus`; returns its
/// stdout, or an error with the end of its output.
pub async fn admin(bin: &Path, args: Vec<String>, cpus: &[usize]) -> Result<String> {
    let mut cmd = std::process::Command::new(bin);
    cmd.args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = dbkit::spawn::spawn(
        cmd,
        dbkit::spawn::SpawnOptions {
            cpus: Some(cpus.to_vec()),
            new_process_group: true,
        },
    )
    .with_context(|| format!("starting {}", bin.display()))?;
    let out = tokio::task::spawn_blocking(move || child.wait_with_output()).await??;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let both = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
        let tail: Vec<&str> = both.lines().rev().take(6).collect();
        let action = args.last().map(String::as_str).unwrap_or("");
        bail!(
            "sysbench {action} exited with {}: {}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        );
    }
    Ok(stdout)
}

/// Which level a row belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelKey {
    pub round: usize,
    pub workload: String,
    pub threads: usize,
    pub target: String,
}

/// One timed run: `sysbench.csv`. Rates and latencies are sysbench's own; a failed run
/// (`status = failed`) has zeros and empty latencies, and says why in `failure`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SysbenchRow {
    pub round: usize,
    pub workload: String,
    pub threads: usize,
    /// `direct`, `haproxy` or `sluice`.
    pub target: String,
    /// `ok` or `failed`.
    pub status: String,
    /// sysbench's `total time`: its clock, from the start to the last event's end.
    pub time_s: f64,
    pub transactions: u64,
    pub tps: f64,
    pub queries: u64,
    pub qps: f64,
    pub reads: u64,
    pub writes: u64,
    pub other: u64,
    /// sysbench's `ignored errors` (restarted events).
    pub errors: u64,
    pub reconnects: u64,
    /// Connections refused at the start (the run then aborts), and of those with 1040.
    pub refused: u64,
    pub refused_1040: u64,
    pub lat_avg_ms: Option<f64>,
    pub lat_max_ms: Option<f64>,
    /// From sysbench's histogram, by its own rule.
    pub p50_ms: Option<f64>,
    pub p95_ms: Option<f64>,
    /// sysbench's `99th percentile`.
    pub p99_ms: Option<f64>,
    /// Threads that finished at least one event, and the spread of their events.
    pub threads_served: usize,
    pub thread_events_min: u64,
    pub thread_events_median: f64,
    pub thread_events_max: u64,
    pub jain_index: f64,
    /// Process CPU (utime + stime) over the timed span per query, µs, and as % of a core.
    pub relay_cpu_us_per_query: Option<f64>,
    pub relay_cpu_pct: Option<f64>,
    pub server_cpu_us_per_query: Option<f64>,
    pub sysbench_cpu_us_per_query: Option<f64>,
    pub sysbench_cpu_pct: Option<f64>,
    /// The span the CPU was read over (loadgen's clock).
    pub cpu_window_s: Option<f64>,
    pub failure: String,
}

impl SysbenchRow {
    /// The row of a finished run.
    pub fn of(key: &LevelKey, done: &Finished) -> SysbenchRow {
        let out = output::parse(&done.stdout);
        let mut row = SysbenchRow {
            round: key.round,
            workload: key.workload.clone(),
            threads: key.threads,
            target: key.target.clone(),
            refused: out.refused_total(),
            refused_1040: out.refused_with(1040),
            ..SysbenchRow::default()
        };
        let failure = match (&out.summary, done.status) {
            (_, None) => Some("killed: sysbench ran far past its --time".to_string()),
            (Some(_), Some(s)) if !s.success() => Some(format!("sysbench exited with {s}")),
            _ => out.failure(),
        };
        if let Some(why) = failure {
            row.status = "failed".into();
            row.failure = why;
            return row;
        }
        row.status = "ok".into();
        row.fill(&out, done);
        row
    }

    fn fill(&mut self, out: &Output, done: &Finished) {
        let Some(s) = &out.summary else { return };
        self.time_s = s.total_time_s;
        (self.transactions, self.tps) = (s.transactions, s.tps);
        (self.queries, self.qps) = (s.queries, s.qps);
        (self.reads, self.writes, self.other) = (s.reads, s.writes, s.other);
        (self.errors, self.reconnects) = (s.ignored_errors, s.reconnects);
        self.lat_avg_ms = Some(s.lat_avg_ms);
        self.lat_max_ms = Some(s.lat_max_ms);
        self.p50_ms = output::percentile(&out.histogram, 50.0);
        self.p95_ms = output::percentile(&out.histogram, 95.0);
        self.p99_ms = s.percentile.map(|(_, v)| v);
        let spread = spread(&output::thread_events(&done.stderr, self.threads));
        self.threads_served = spread.served;
        self.thread_events_min = spread.min;
        self.thread_events_median = spread.median;
        self.thread_events_max = spread.max;
        self.jain_index = spread.jain;
        if let Some(cpu) = done.cpu {
            let per_query = |ns: Option<u64>| {
                ns.filter(|_| s.queries > 0)
                    .map(|ns| ns as f64 / 1e3 / s.queries as f64)
            };
            let pct = |ns: Option<u64>| {
                ns.filter(|_| cpu.wall_s > 0.0)
                    .map(|ns| ns as f64 / 1e9 / cpu.wall_s * 100.0)
            };
            self.relay_cpu_us_per_query = per_query(cpu.relay_ns);
            self.relay_cpu_pct = pct(cpu.relay_ns);
            self.server_cpu_us_per_query = per_query(cpu.server_ns);
            self.sysbench_cpu_us_per_query = per_query(cpu.sysbench_ns);
            self.sysbench_cpu_pct = pct(cpu.sysbench_ns);
            self.cpu_window_s = Some(cpu.wall_s);
        }
    }

    /// Whether the run finished with statistics.
    pub fn ok(&self) -> bool {
        self.status == "ok"
    }
}

/// One per-second line of a timed run: `sysbench_intervals.csv`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalRow {
    pub round: usize,
    pub workload: String,
    pub threads: usize,
    pub target: String,
    pub t_s: f64,
    pub threads_running: usize,
    pub tps: f64,
    pub qps: f64,
    pub reads_ps: f64,
    pub writes_ps: f64,
    pub other_ps: f64,
    /// sysbench's percentile of the second (`lat_pct`, 99) in ms.
    pub lat_pct: f64,
    pub lat_ms: f64,
    pub err_ps: f64,
    pub reconn_ps: f64,
}

/// The per-second rows of a finished run.
pub fn intervals(key: &LevelKey, stdout: &str) -> Vec<IntervalRow> {
    output::parse(stdout)
        .intervals
        .into_iter()
        .map(|i| IntervalRow {
            round: key.round,
            workload: key.workload.clone(),
            threads: key.threads,
            target: key.target.clone(),
            t_s: i.t_s,
            threads_running: i.threads,
            tps: i.tps,
            qps: i.qps,
            reads_ps: i.reads_ps,
            writes_ps: i.writes_ps,
            other_ps: i.other_ps,
            lat_pct: i.lat_pct,
            lat_ms: i.lat_ms,
            err_ps: i.err_ps,
            reconn_ps: i.reconn_ps,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    const POINT_SELECT_16: &str = include_str!("../../testdata/sysbench/point_select_16.out");
    const POINT_SELECT_16_ERR: &str = include_str!("../../testdata/sysbench/point_select_16.err");
    const REFUSED_1040: &str = include_str!("../../testdata/sysbench/refused_1040.out");

    fn key() -> LevelKey {
        LevelKey {
            round: 2,
            workload: "oltp_point_select".into(),
            threads: 16,
            target: "sluice".into(),
        }
    }

    fn conn() -> DbConn {
        DbConn {
            host: "127.0.0.1".into(),
            port: 4000,
            user: "sbtest_app".into(),
            password: "secret".into(),
            db: "loadgen_sbtest".into(),
        }
    }

    #[test]
    fn the_command_lines_name_every_option() {
        let job = Job {
            bin: Path::new("/usr/bin/sysbench"),
            script: Path::new("/tmp/x.lua"),
            conn: conn(),
            tables: Tables {
                count: 4,
                rows: 100_000,
            },
            threads: 64,
            time_s: 10,
            seed: 42,
            cpus: &[1],
            dir: Path::new("/tmp"),
        };
        let args = run_args(&job, true).join(" ");
        assert_eq!(
            args,
            "--db-driver=mysql --mysql-host=127.0.0.1 --mysql-port=4000 --mysql-user=sbtest_app \
             --mysql-password=*** --mysql-db=loadgen_sbtest --tables=4 --table-size=100000 \
             --threads=64 --time=10 --events=0 --report-interval=1 --percentile=99 \
             --histogram=on --rand-seed=42 run"
        );
        assert!(run_args(&job, false).contains(&"--mysql-password=secret".to_string()));
        let prepare = admin_args(&conn(), job.tables, "prepare");
        assert_eq!(prepare.first().map(String::as_str), Some("oltp_read_write"));
        assert_eq!(prepare.last().map(String::as_str), Some("prepare"));
        assert!(prepare.contains(&"--threads=4".to_string()));
    }

    #[test]
    fn the_wrapper_runs_the_workloads_own_script() {
        let lua = wrapper_script("oltp_read_only");
        assert!(lua.contains("require(\"oltp_read_only\")"), "{lua}");
        assert!(lua.contains("\"loadgen-thread %d %d\\n\""), "{lua}");
        assert!(lua.contains("return workload_thread_done(...)"), "{lua}");
        assert_eq!(lua.matches("function ").count(), 2, "{lua}");
    }

    fn finished(stdout: &str, stderr: &str, code: i32, cpu: Option<CpuSpan>) -> Finished {
        Finished {
            stdout: stdout.into(),
            stderr: stderr.into(),
            status: Some(ExitStatus::from_raw(code << 8)),
            cpu,
            cpus: "1".into(),
        }
    }

    #[test]
    fn a_row_holds_sysbenchs_numbers_and_the_cpu_per_query() {
        let cpu = CpuSpan {
            wall_s: 3.0,
            relay_ns: Some(3_105_360_000),
            server_ns: Some(1_000_000_000),
            sysbench_ns: None,
        };
        let row = SysbenchRow::of(
            &key(),
            &finished(POINT_SELECT_16, POINT_SELECT_16_ERR, 0, Some(cpu)),
        );
        assert!(row.ok(), "{row:?}");
        assert_eq!(
            (row.round, row.threads, row.target.as_str()),
            (2, 16, "sluice")
        );
        assert_eq!((row.queries, row.qps, row.errors), (103512, 34402.26, 0));
        assert_eq!(row.p99_ms, Some(1.32));
        assert!(row.p95_ms.unwrap() <= 1.32 && row.p50_ms.unwrap() <= row.p95_ms.unwrap());
        assert_eq!(row.threads_served, 16);
        assert!(row.jain_index > 0.99, "{row:?}");
        // 3.10536 s of relay CPU over 103,512 queries: 30 µs each, 103.5 % of a core.
        assert!((row.relay_cpu_us_per_query.unwrap() - 30.0).abs() < 1e-9);
        assert!((row.relay_cpu_pct.unwrap() - 103.512).abs() < 1e-9);
        assert!(row.server_cpu_us_per_query.unwrap() > 9.6);
        assert_eq!(row.sysbench_cpu_us_per_query, None);
        assert_eq!(row.cpu_window_s, Some(3.0));
        // Without the wrapper's lines, no thread counts as served.
        let bare = SysbenchRow::of(&key(), &finished(POINT_SELECT_16, "", 0, None));
        assert_eq!(
            (bare.threads_served, bare.relay_cpu_us_per_query),
            (0, None)
        );
        let per_second = intervals(&key(), POINT_SELECT_16);
        assert_eq!(per_second.len(), 3);
        assert_eq!(per_second[2].t_s, 3.0);
        assert_eq!(per_second[2].target, "sluice");
    }

    #[test]
    fn a_refused_or_killed_run_is_a_failed_row_that_says_why() {
        let refused = SysbenchRow::of(&key(), &finished(REFUSED_1040, "", 1, None));
        assert!(!refused.ok());
        assert_eq!((refused.refused, refused.refused_1040), (24, 24));
        assert_eq!((refused.queries, refused.p99_ms), (0, None));
        assert!(refused.failure.contains("error 1040"), "{refused:?}");
        let mut killed = finished(POINT_SELECT_16, "", 0, None);
        killed.status = None;
        let killed = SysbenchRow::of(&key(), &killed);
        assert_eq!(killed.status, "failed");
        assert!(killed.failure.starts_with("killed"), "{killed:?}");
        let crashed = SysbenchRow::of(&key(), &finished(POINT_SELECT_16, "", 1, None));
        assert_eq!(crashed.failure, "sysbench exited with exit status: 1");
    }
}
