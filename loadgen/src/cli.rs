//! Command line: subcommands and flags, each flag with an environment fallback.
//!
//! Parsing only checks each value on its own (clap value parsers, so `CONC_LEVELS=abc`
//! fails before anything starts); cross-flag checks live in [`crate::settings`].

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The sluice load generator: reproduces the connection-pool experiments.
#[derive(Debug, Parser)]
#[command(name = "loadgen", version, about)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
    /// Flags shared by every subcommand.
    #[command(flatten)]
    pub common: Common,
}

/// One subcommand per experiment, plus `bench` for all of them.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// The original study's experiments: calibration, A (curve), B (collapse), C (pool), the
    /// open loop and the proxy rows (`--all` adds S, D, E, F, overhead and sysbench).
    Bench {
        /// Short windows and fewer levels.
        #[arg(long)]
        quick: bool,
        /// Also experiments S (sessions), D (idle connections), E (pool_size = auto), F
        /// (admission control), overhead and sysbench.
        #[arg(long, env = "BENCH_ALL")]
        all: bool,
    },
    /// Serial single-connection latency of the query.
    Calibrate,
    /// Experiment A: one dedicated connection per client for each C in CONC_LEVELS.
    Curve,
    /// Experiment C: CLIENT_THREADS clients over an in-process fair pool of P connections.
    Pool,
    /// Open-loop experiment: Poisson arrivals at fractions of the measured peak, direct vs pool.
    Open,
    /// CLIENT_THREADS clients through sluice for each P in POOL_SIZES.
    Proxy,
    /// Relay cost: `SELECT 1` at 1 and 64 clients, direct, through the bare tokio
    /// relay, HAProxy in TCP mode and the sluice binary at P=4 and P=64, each relay a process
    /// of its own: QPS, p50/p99, process CPU and syscalls per query (`--cost-counts` adds
    /// instructions per query under valgrind).
    Overhead,
    /// sysbench itself drives oltp_point_select, oltp_read_only and oltp_read_write at several
    /// thread counts against direct MariaDB, HAProxy (mode tcp) and sluice with its defaults,
    /// in alternating rounds: QPS, p95/p99, errors and CPU per query as ratios to direct.
    Sysbench,
    /// Experiment D: 4 active clients while N idle connections (IDLE_LEVELS) are held open,
    /// directly at the server and through sluice.
    Idle,
    /// Experiment E: CLIENT_THREADS clients through sluice with `pool_size = auto` and with
    /// every fixed P in POOL_SIZES; the server is re-pinned from 2 CPUs to 1 mid-way through
    /// the auto run.
    Adaptive,
    /// Experiment F: CLIENT_THREADS closed-loop clients plus a Poisson stream at 1.5x the
    /// peak: direct, sluice with an unbounded queue, sluice with max_queue_wait.
    Admission,
    /// Experiment S: the knee workload as SQL text and as prepared statements, directly and
    /// through sluice (CLIENT_THREADS clients over P=4), with and without per-client session
    /// variables; counts the replays sluice needed.
    Sessions,
    /// Create and seed `reads_test`, then exit (keeps nothing running).
    Seed,
    /// Redraw the plots and rewrite summary.txt of a results folder from its CSVs and
    /// run_metadata.csv (nothing is measured; no server is started).
    Report {
        /// The run folder, e.g. results/20261130T055010Z-bench.
        dir: PathBuf,
    },
    /// The bare tokio relay as a process of its own (started by `overhead`; not for direct use).
    #[command(hide = true)]
    Relay {
        /// Where clients connect (`host:port`).
        #[arg(long)]
        listen: std::net::SocketAddr,
        /// The server it relays to (`host:port`).
        #[arg(long)]
        backend: String,
    },
    /// Soak: 10,000 idle + 512 active clients through a release `sluice` child process for
    /// 30 minutes; RSS, fds, backends and p99 every minute into soak.csv and soak.svg.
    Soak {
        /// 10 minutes instead of 30.
        #[arg(long)]
        short: bool,
        /// Minutes to run (overrides --short; at least 3, so there is a minute after the
        /// 2-minute warm-up to compare).
        #[arg(long, env = "SOAK_MINUTES", value_parser = clap::value_parser!(u32).range(3..=1440))]
        minutes: Option<u32>,
    },
}

impl Command {
    /// Short name, used as the default run-folder label.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Bench { quick: true, .. } => "quick",
            Command::Bench { quick: false, .. } => "bench",
            Command::Calibrate => "calibrate",
            Command::Curve => "curve",
            Command::Pool => "pool",
            Command::Open => "open",
            Command::Proxy => "proxy",
            Command::Overhead => "overhead",
            Command::Sysbench => "sysbench",
            Command::Idle => "idle",
            Command::Adaptive => "adaptive",
            Command::Admission => "admission",
            Command::Sessions => "sessions",
            Command::Seed => "seed",
            Command::Report { .. } => "report",
            Command::Relay { .. } => "relay",
            Command::Soak { .. } => "soak",
        }
    }
}

/// How `overhead` counts a relay's syscalls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SyscallCounterChoice {
    /// perf when it can count the syscall tracepoints here, else strace, else none.
    Auto,
    /// `perf stat` on the raw_syscalls:sys_enter tracepoint: counted in the kernel.
    Perf,
    /// `strace -c -f`: every syscall stops the relay for the tracer (much slower).
    Strace,
    /// Do not count syscalls.
    Off,
}

/// A sysbench workload: one of sysbench's own OLTP scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SysbenchWorkload {
    /// One primary-key SELECT per event, in autocommit.
    #[value(name = "oltp_point_select")]
    PointSelect,
    /// A read-only transaction: 10 point SELECTs and 4 range SELECTs in BEGIN ... COMMIT.
    #[value(name = "oltp_read_only")]
    ReadOnly,
    /// The read-only transaction plus 2 UPDATEs, a DELETE and an INSERT.
    #[value(name = "oltp_read_write")]
    ReadWrite,
}

impl SysbenchWorkload {
    /// Every workload, in the order a round runs them.
    pub const ALL: [SysbenchWorkload; 3] = [
        SysbenchWorkload::PointSelect,
        SysbenchWorkload::ReadOnly,
        SysbenchWorkload::ReadWrite,
    ];

    /// The script's name, as sysbench knows it.
    pub fn script(self) -> &'static str {
        match self {
            SysbenchWorkload::PointSelect => "oltp_point_select",
            SysbenchWorkload::ReadOnly => "oltp_read_only",
            SysbenchWorkload::ReadWrite => "oltp_read_write",
        }
    }
}

/// Where sysbench connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SysbenchTarget {
    /// The server itself: the reference every ratio is taken against.
    Direct,
    /// HAProxy in TCP mode with one thread.
    Haproxy,
    /// The sluice binary with its default settings.
    Sluice,
}

impl SysbenchTarget {
    /// Every target, in the order odd rounds run them.
    pub const ALL: [SysbenchTarget; 3] = [
        SysbenchTarget::Direct,
        SysbenchTarget::Haproxy,
        SysbenchTarget::Sluice,
    ];

    /// The `target` column.
    pub fn key(self) -> &'static str {
        match self {
            SysbenchTarget::Direct => "direct",
            SysbenchTarget::Haproxy => "haproxy",
            SysbenchTarget::Sluice => "sluice",
        }
    }
}

/// Which MySQL server to run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ServerKind {
    /// external if --mysql-url is set, else local if a server binary exists, else docker.
    Auto,
    /// A private mariadbd/mysqld in a temp dir.
    Local,
    /// A pinned mysql:8.0 container (needs a Docker engine).
    Docker,
    /// The server at --mysql-url; nothing is started or stopped.
    External,
}

/// Closed loop (each client waits for its answer) or open loop (Poisson arrivals).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ArrivalKind {
    /// Each client sends its next query as soon as the previous one answered.
    Closed,
    /// Poisson arrivals at --rate; latency counts from the intended start.
    Open,
}

/// Flags shared by every subcommand.
#[derive(Debug, Clone, Args)]
pub struct Common {
    /// Server backend.
    #[arg(long, env = "LOADGEN_SERVER", value_enum, default_value_t = ServerKind::Auto, global = true)]
    pub server: ServerKind,
    /// Server binary for --server local (default: mariadbd, then mysqld).
    #[arg(long, env = "SERVER_BIN", global = true)]
    pub server_bin: Option<PathBuf>,
    /// mysql://user:pass@host:port/db of an existing server (implies --server external).
    #[arg(long, env = "MYSQL_URL", global = true)]
    pub mysql_url: Option<String>,
    /// mysql://user:pass@host:port/db of an external sluice for the proxy experiment.
    #[arg(long, env = "PROXY_URL", global = true)]
    pub proxy_url: Option<String>,
    /// CPUs for the server, e.g. `0` or `0-1,4` (default: the first half of the cores).
    #[arg(long, env = "SERVER_CPUS", value_parser = parse_cpu_list, global = true)]
    pub server_cpus: Option<CpuList>,
    /// CPUs for loadgen itself (default: the cores the server does not use).
    #[arg(long, env = "LOADGEN_CPUS", value_parser = parse_cpu_list, global = true)]
    pub loadgen_cpus: Option<CpuList>,
    /// Directory that receives the `<UTC timestamp>-<label>/` run folder.
    #[arg(long, env = "OUT", default_value = "results", global = true)]
    pub out: PathBuf,
    /// Label appended to the run folder name (default: the subcommand).
    #[arg(long, env = "LABEL", global = true)]
    pub label: Option<String>,
    /// Rows scanned per query (the moving id window).
    #[arg(long, env = "SCAN_W", value_parser = parse_positive_u32, global = true)]
    pub scan_w: Option<u32>,
    /// Measured window per level, seconds.
    #[arg(long, env = "WINDOW_S", value_parser = parse_positive_secs, global = true)]
    pub window_s: Option<f64>,
    /// Warm-up before each window, seconds.
    #[arg(long, env = "WARMUP_S", value_parser = parse_nonnegative_secs, global = true)]
    pub warmup_s: Option<f64>,
    /// Offered concurrencies for experiment A, e.g. `1,2,4,8`.
    #[arg(long, env = "CONC_LEVELS", value_parser = parse_count_list, global = true)]
    pub conc_levels: Option<CountList>,
    /// Pool sizes for experiments C and proxy, e.g. `1,2,4,8`.
    #[arg(long, env = "POOL_SIZES", value_parser = parse_count_list, global = true)]
    pub pool_sizes: Option<CountList>,
    /// Client tasks in experiments C, open loop and proxy.
    #[arg(long, env = "CLIENT_THREADS", value_parser = parse_positive_usize, global = true)]
    pub client_threads: Option<usize>,
    /// Rows in `reads_test` (200000 reproduces the original study; smaller only for tests).
    #[arg(long, env = "ROWS", value_parser = parse_positive_u32, global = true)]
    pub rows: Option<u32>,
    /// Arrival process for `curve` and `pool`.
    #[arg(long, env = "ARRIVAL", value_enum, default_value_t = ArrivalKind::Closed, global = true)]
    pub arrival: ArrivalKind,
    /// Open-loop rate: queries/s (`900`) or a fraction of the measured peak (`0.8x`).
    #[arg(long, env = "RATE", value_parser = parse_rate, global = true)]
    pub rate: Option<Rate>,
    /// Open-loop experiment rates as fractions of the peak.
    #[arg(long, env = "OPEN_FRACTIONS", value_parser = parse_fraction_list, global = true)]
    pub open_fractions: Option<FractionList>,
    /// Pool size for the open-loop pool rows (default: the best P of experiment C, else
    /// the number of server CPUs).
    #[arg(long, env = "OPEN_POOL_SIZE", value_parser = parse_positive_usize, global = true)]
    pub open_pool_size: Option<usize>,
    /// Experiment D: idle connections held open at each level, e.g. `0,20,100`.
    #[arg(long, env = "IDLE_LEVELS", value_parser = parse_idle_levels, global = true)]
    pub idle_levels: Option<CountList>,
    /// Experiment E: seconds of the `pool_size = auto` run (the re-pin happens half-way).
    #[arg(long, env = "ADAPTIVE_S", value_parser = parse_positive_secs, global = true)]
    pub adaptive_s: Option<f64>,
    /// Experiment E: paired rounds of the best fixed P against a fresh auto, after the sweep.
    #[arg(long, env = "ADAPTIVE_ROUNDS", global = true)]
    pub adaptive_rounds: Option<usize>,
    /// Experiment F: sluice's max_queue_wait for the admission row, ms.
    #[arg(long, env = "MAX_QUEUE_WAIT_MS", value_parser = parse_positive_u32, global = true)]
    pub max_queue_wait_ms: Option<u32>,
    /// Experiment F: the open-loop stream's rate as a multiple of the peak QPS.
    #[arg(long, env = "ADMISSION_LOAD", value_parser = parse_rate_multiple, global = true)]
    pub admission_load: Option<f64>,
    /// Overhead: rounds of every target at every client count, one after the other (the
    /// summary gives each round's ratios and their range).
    #[arg(long, env = "OVERHEAD_ROUNDS", value_parser = clap::value_parser!(u32).range(1..=20), global = true)]
    pub overhead_rounds: Option<u32>,
    /// Overhead: also count each relay's instructions per query under valgrind's callgrind
    /// (about a minute per relay).
    #[arg(long, env = "COST_COUNTS", global = true)]
    pub cost_counts: bool,
    /// Overhead: queries per client count in each callgrind run (`--cost-counts`).
    #[arg(long, env = "COST_QUERIES", value_parser = clap::value_parser!(u64).range(100..=10_000_000), global = true)]
    pub cost_queries: Option<u64>,
    /// Overhead: how to count the relays' syscalls.
    #[arg(long, env = "SYSCALL_COUNTER", value_enum, default_value_t = SyscallCounterChoice::Auto, global = true)]
    pub syscall_counter: SyscallCounterChoice,
    /// Overhead and sysbench: the HAProxy binary (default: haproxy on PATH, in /usr/sbin or
    /// /usr/local/sbin).
    #[arg(long, env = "HAPROXY_BIN", global = true)]
    pub haproxy_bin: Option<PathBuf>,
    /// Overhead, sysbench and soak: the sluice binary (default: `sluice` next to loadgen's
    /// executable).
    #[arg(long, env = "SLUICE_BIN", global = true)]
    pub sluice_bin: Option<PathBuf>,
    /// sysbench: rounds of every workload, thread count and target; even rounds run the
    /// targets in reverse order. Default 3.
    #[arg(long, env = "SYSBENCH_ROUNDS", value_parser = clap::value_parser!(u32).range(1..=20), global = true)]
    pub sysbench_rounds: Option<u32>,
    /// sysbench: seconds of each measured run (its --time). Default 10.
    #[arg(long, env = "SYSBENCH_TIME", value_parser = clap::value_parser!(u32).range(1..=3600), global = true)]
    pub sysbench_time: Option<u32>,
    /// sysbench: seconds of the warm-up run before each measured run, on the same target and
    /// threads (its numbers are not kept; 0: none). Default 5.
    #[arg(long, env = "SYSBENCH_WARMUP", value_parser = clap::value_parser!(u32).range(0..=3600), global = true)]
    pub sysbench_warmup: Option<u32>,
    /// sysbench: workloads, comma-separated. Default all three.
    #[arg(
        long,
        env = "SYSBENCH_WORKLOADS",
        value_enum,
        value_delimiter = ',',
        global = true
    )]
    pub sysbench_workloads: Vec<SysbenchWorkload>,
    /// sysbench: thread counts, e.g. `16,64`. Default 16,64,256,1024.
    #[arg(long, env = "SYSBENCH_THREADS", value_parser = parse_count_list, global = true)]
    pub sysbench_threads: Option<CountList>,
    /// sysbench: targets, comma-separated; direct is required (every ratio is to it).
    /// Default all three.
    #[arg(
        long,
        env = "SYSBENCH_TARGETS",
        value_enum,
        value_delimiter = ',',
        global = true
    )]
    pub sysbench_targets: Vec<SysbenchTarget>,
    /// sysbench: tables to prepare (its --tables). Default 4.
    #[arg(long, env = "SYSBENCH_TABLES", value_parser = clap::value_parser!(u32).range(1..=64), global = true)]
    pub sysbench_tables: Option<u32>,
    /// sysbench: rows per table (its --table-size); keep the tables within the server's
    /// buffer pool. Default 100000.
    #[arg(long, env = "SYSBENCH_TABLE_SIZE", value_parser = clap::value_parser!(u32).range(1..=10_000_000), global = true)]
    pub sysbench_table_size: Option<u32>,
    /// sysbench: the sysbench binary (default: sysbench on PATH).
    #[arg(long, env = "SYSBENCH_BIN", global = true)]
    pub sysbench_bin: Option<PathBuf>,
    /// sysbench: flags sluice runs with beyond its listen, backend and user, space-separated;
    /// everything else stays at sluice's defaults.
    #[arg(
        long,
        env = "SYSBENCH_SLUICE_ARGS",
        default_value = "--pool-size auto",
        allow_hyphen_values = true,
        global = true
    )]
    pub sysbench_sluice_args: String,
    /// Seed for the query parameters.
    #[arg(long, env = "LOADGEN_SEED", default_value_t = 42, global = true)]
    pub seed: u64,
    /// Hide the progress bar.
    #[arg(long, env = "NO_PROGRESS", global = true)]
    pub no_progress: bool,
}

/// A validated, sorted CPU list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// A validated list of positive counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountList(pub Vec<usize>);

/// A validated list of positive fractions.
#[derive(Debug, Clone, PartialEq)]
pub struct FractionList(pub Vec<f64>);

/// An open-loop rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Queries per second.
    Absolute(f64),
    /// A fraction of the measured peak QPS.
    OfPeak(f64),
}

/// Parses `1,2,4` (positive integers, comma separated, no duplicates needed to be sorted).
pub fn parse_count_list(s: &str) -> Result<CountList, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        let n: usize = part
            .parse()
            .map_err(|_| format!("{part:?} is not a positive integer (expected e.g. 1,2,4)"))?;
        if n == 0 {
            return Err("0 is not allowed (every level needs at least one connection)".into());
        }
        out.push(n);
    }
    if out.is_empty() {
        return Err("the list is empty".into());
    }
    out.sort_unstable();
    out.dedup();
    Ok(CountList(out))
}

/// Parses `0,20,100` (idle connection counts: 0 allowed, sorted, duplicates dropped).
pub fn parse_idle_levels(s: &str) -> Result<CountList, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        out.push(part.parse::<usize>().map_err(|_| {
            format!("{part:?} is not a whole number of connections (expected e.g. 0,20,100)")
        })?);
    }
    out.sort_unstable();
    out.dedup();
    match out.last() {
        Some(&n) if n > 20_000 => Err(format!(
            "{n} idle connections is more than one loadgen can hold"
        )),
        _ => Ok(CountList(out)),
    }
}

/// Parses `0.8,0.95,1.2`.
pub fn parse_fraction_list(s: &str) -> Result<FractionList, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        let f: f64 = part
            .trim_end_matches('x')
            .parse()
            .map_err(|_| format!("{part:?} is not a number (expected e.g. 0.8,0.95,1.2)"))?;
        if !(f.is_finite() && f > 0.0) {
            return Err(format!("{part:?} must be a positive fraction of the peak"));
        }
        out.push(f);
    }
    Ok(FractionList(out))
}

/// Parses a CPU list such as `0`, `1,3` or `0-2,5`.
pub fn parse_cpu_list(s: &str) -> Result<CpuList, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("{part:?} is not a CPU number or range (expected e.g. 0 or 0-1,3)");
        match part.split_once('-') {
            Some((a, b)) => {
                let a: usize = a.trim().parse().map_err(|_| bad())?;
                let b: usize = b.trim().parse().map_err(|_| bad())?;
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err("the CPU list is empty".into());
    }
    out.sort_unstable();
    out.dedup();
    Ok(CpuList(out))
}

fn parse_rate_multiple(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('x').parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err(format!(
            "{s:?} is not a multiple of the peak (expected e.g. 1.5)"
        )),
    }
}

fn parse_positive_u32(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a positive integer")),
    }
}

fn parse_positive_usize(s: &str) -> Result<usize, String> {
    parse_positive_u32(s).map(|n| n as usize)
}

fn parse_positive_secs(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 3600.0 => Ok(v),
        Ok(_) => Err(format!(
            "{s:?} must be more than 0 and at most 3600 seconds"
        )),
        Err(_) => Err(format!("{s:?} is not a number of seconds")),
    }
}

fn parse_nonnegative_secs(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=3600.0).contains(&v) => Ok(v),
        Ok(_) => Err(format!("{s:?} must be between 0 and 3600 seconds")),
        Err(_) => Err(format!("{s:?} is not a number of seconds")),
    }
}

/// Parses `900` (queries/s) or `0.8x` (fraction of the measured peak).
pub fn parse_rate(s: &str) -> Result<Rate, String> {
    let s = s.trim();
    let (num, of_peak) = match s.strip_suffix('x') {
        Some(n) => (n, true),
        None => (s, false),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a rate (expected e.g. 900 or 0.8x)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("{s:?} must be positive"));
    }
    Ok(if of_peak {
        Rate::OfPeak(v)
    } else {
        Rate::Absolute(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_lists_are_sorted_and_reject_zero_and_words() {
        assert_eq!(parse_count_list("4,1,2,2").unwrap().0, vec![1, 2, 4]);
        assert!(parse_count_list("abc").unwrap_err().contains("abc"));
        assert!(parse_count_list("1,0,2").is_err());
        assert!(parse_count_list("").is_err());
        assert!(parse_count_list("-1").is_err());
    }

    #[test]
    fn cpu_lists_accept_ranges() {
        assert_eq!(parse_cpu_list("0-2,5").unwrap().0, vec![0, 1, 2, 5]);
        assert_eq!(parse_cpu_list("1").unwrap().0, vec![1]);
        assert!(parse_cpu_list("2-1").is_err());
        assert!(parse_cpu_list("x").is_err());
    }

    #[test]
    fn windows_must_be_positive() {
        assert!(parse_positive_secs("0").is_err());
        assert!(parse_positive_secs("abc").is_err());
        assert_eq!(parse_positive_secs("0.5"), Ok(0.5));
        assert_eq!(parse_nonnegative_secs("0"), Ok(0.0));
        assert!(parse_nonnegative_secs("-1").is_err());
    }

    #[test]
    fn rates_are_absolute_or_fractions_of_peak() {
        assert_eq!(parse_rate("900"), Ok(Rate::Absolute(900.0)));
        assert_eq!(parse_rate("0.8x"), Ok(Rate::OfPeak(0.8)));
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("fast").is_err());
        assert_eq!(parse_fraction_list("0.8,1.2x").unwrap().0, vec![0.8, 1.2]);
        assert!(parse_fraction_list("0.8,-1").is_err());
    }

    #[test]
    fn env_fallbacks_and_clap_errors() {
        use clap::Parser;
        let cli = Cli::try_parse_from(["loadgen", "curve", "--conc-levels", "1,2"]).unwrap();
        assert_eq!(cli.common.conc_levels, Some(CountList(vec![1, 2])));
        let err = Cli::try_parse_from(["loadgen", "curve", "--conc-levels", "abc"]).unwrap_err();
        assert!(err.to_string().contains("abc"), "{err}");
        let err = Cli::try_parse_from(["loadgen", "pool", "--pool-sizes", "0"]).unwrap_err();
        assert!(err.to_string().contains("0 is not allowed"), "{err}");
        let err = Cli::try_parse_from(["loadgen", "curve", "--window-s", "0"]).unwrap_err();
        assert!(err.to_string().contains("more than 0"), "{err}");
    }
}
