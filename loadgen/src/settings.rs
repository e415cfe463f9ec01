//! The validated run settings: CLI values + defaults + cross-flag checks, done once before
//! anything starts (no server, no connection, no output folder yet).

use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{
    ArrivalKind, Cli, Command, Common, Rate, ServerKind, SysbenchTarget, SysbenchWorkload,
    SyscallCounterChoice,
};

/// Default rows in `reads_test` (as in the original study).
pub const DEFAULT_ROWS: u32 = 200_000;
/// Default rows scanned per query.
pub const DEFAULT_SCAN_W: u32 = 20_000;
/// Experiment D's default idle connections (the original study's 0..1500).
pub const DEFAULT_IDLE_LEVELS: &[usize] = &[0, 20, 100, 500, 1000, 1500];
/// Default client tasks for C, open loop and proxy.
pub const DEFAULT_CLIENT_THREADS: usize = 512;
/// Overhead's default queries per client count in a callgrind run: enough for steady counts,
/// planned at 10 s per relay under valgrind (`overhead_cost::VALGRIND_QPS`).
pub const DEFAULT_COST_QUERIES: u64 = 20_000;

/// The sysbench experiment's default thread counts.
pub const DEFAULT_SYSBENCH_THREADS: &[usize] = &[16, 64, 256, 1024];

/// The sysbench experiment's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SysbenchSettings {
    /// Rounds of every workload, thread count and target.
    pub rounds: usize,
    /// Seconds of each measured run, and of the warm-up run before it.
    pub time_s: u32,
    pub warmup_s: u32,
    pub workloads: Vec<SysbenchWorkload>,
    /// Thread counts, ascending.
    pub threads: Vec<usize>,
    /// Targets, direct first.
    pub targets: Vec<SysbenchTarget>,
    /// The prepared tables.
    pub tables: u32,
    pub table_size: u32,
    /// An explicit sysbench binary.
    pub bin: Option<PathBuf>,
    /// sluice's flags beyond its listen, backend and user.
    pub sluice_args: Vec<String>,
}

impl SysbenchSettings {
    /// Defaults, then the flags, checked.
    fn from_common(c: &Common) -> Result<SysbenchSettings, String> {
        let pick = |given: &[SysbenchTarget]| -> Vec<SysbenchTarget> {
            SysbenchTarget::ALL
                .into_iter()
                .filter(|t| given.is_empty() || given.contains(t))
                .collect()
        };
        let targets = pick(&c.sysbench_targets);
        if !targets.contains(&SysbenchTarget::Direct) {
            return Err(
                "--sysbench-targets must include direct: every ratio is taken against it".into(),
            );
        }
        let workloads = SysbenchWorkload::ALL
            .into_iter()
            .filter(|w| c.sysbench_workloads.is_empty() || c.sysbench_workloads.contains(w))
            .collect();
        let threads = c
            .sysbench_threads
            .clone()
            .map(|l| l.0)
            .unwrap_or_else(|| DEFAULT_SYSBENCH_THREADS.to_vec());
        if threads.iter().any(|&t| t > 10_000) {
            return Err("--sysbench-threads above 10000 is more than one sysbench can run".into());
        }
        let sluice_args: Vec<String> = c
            .sysbench_sluice_args
            .split_whitespace()
            .map(str::to_string)
            .collect();
        for own in ["--listen", "--backend", "--user", "--config"] {
            if sluice_args
                .iter()
                .any(|a| a == own || a.starts_with(&format!("{own}=")))
            {
                return Err(format!(
                    "--sysbench-sluice-args may not set {own}: loadgen sets sluice's listen address, backend and user"
                ));
            }
        }
        Ok(SysbenchSettings {
            rounds: c.sysbench_rounds.unwrap_or(3) as usize,
            time_s: c.sysbench_time.unwrap_or(10),
            warmup_s: c.sysbench_warmup.unwrap_or(5),
            workloads,
            threads,
            targets,
            tables: c.sysbench_tables.unwrap_or(4),
            table_size: c.sysbench_table_size.unwrap_or(100_000),
            bin: c.sysbench_bin.clone(),
            sluice_args,
        })
    }
}

/// Everything a run needs, validated.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The subcommand.
    pub command: Command,
    /// `bench --quick`.
    pub quick: bool,
    /// `bench --all`.
    pub all: bool,
    /// Requested backend (auto is resolved when the backend starts).
    pub server: ServerKind,
    /// Explicit server binary.
    pub server_bin: Option<PathBuf>,
    /// External server URL.
    pub mysql_url: Option<String>,
    /// External sluice URL.
    pub proxy_url: Option<String>,
    /// CPUs the server is pinned to.
    pub server_cpus: Vec<usize>,
    /// CPUs loadgen pins itself to; also the runtime's worker count.
    pub loadgen_cpus: Vec<usize>,
    /// CPUs this process may use at start.
    pub host_cpus: Vec<usize>,
    /// Parent directory of the run folder.
    pub out: PathBuf,
    /// Run folder label.
    pub label: String,
    /// Rows scanned per query.
    pub scan_w: u32,
    /// Rows in the table.
    pub rows: u32,
    /// Measured window per level.
    pub window: Duration,
    /// Warm-up per level.
    pub warmup: Duration,
    /// Experiment A levels.
    pub conc_levels: Vec<usize>,
    /// Experiment C / proxy pool sizes.
    pub pool_sizes: Vec<usize>,
    /// Client tasks in C, open loop and proxy.
    pub client_threads: usize,
    /// Arrival process for `curve`/`pool`.
    pub arrival: ArrivalKind,
    /// Open-loop rate for `curve`/`pool`.
    pub rate: Option<Rate>,
    /// Open-loop experiment fractions of the peak.
    pub open_fractions: Vec<f64>,
    /// Pool size for the open-loop pool rows.
    pub open_pool_size: Option<usize>,
    /// Experiment D: idle connections held open at each level.
    pub idle_levels: Vec<usize>,
    /// Experiment E: length of the `auto` run.
    pub adaptive: Duration,
    /// Experiment E: paired rounds of best fixed P against auto.
    pub adaptive_rounds: usize,
    /// Experiment F: max_queue_wait of the admission row.
    pub max_queue_wait: Duration,
    /// Experiment F: open-loop rate as a multiple of the peak.
    pub admission_load: f64,
    /// Overhead: rounds of every target at every client count.
    pub overhead_rounds: usize,
    /// Overhead: also count instructions per query under callgrind.
    pub cost_counts: bool,
    /// Overhead: queries per client count in a callgrind run.
    pub cost_queries: u64,
    /// Overhead: how syscalls are counted.
    pub syscall_counter: SyscallCounterChoice,
    /// Overhead: an explicit HAProxy binary.
    pub haproxy_bin: Option<PathBuf>,
    /// Overhead and soak: an explicit sluice binary.
    pub sluice_bin: Option<PathBuf>,
    /// The sysbench experiment.
    pub sysbench: SysbenchSettings,
    /// RNG seed.
    pub seed: u64,
    /// Show the progress bar.
    pub progress: bool,
}

impl Settings {
    /// Applies defaults and checks the flags against each other and this machine.
    pub fn from_cli(cli: Cli, host_cpus: Vec<usize>) -> Result<Settings, String> {
        let c = cli.common;
        let sysbench = SysbenchSettings::from_common(&c)?;
        let quick = matches!(cli.command, Command::Bench { quick: true, .. });
        let all = matches!(cli.command, Command::Bench { all: true, .. });
        let (server_cpus, loadgen_cpus) = resolve_cpus(
            c.server_cpus.clone().map(|l| l.0),
            c.loadgen_cpus.clone().map(|l| l.0),
            &host_cpus,
        )?;
        check_server_flags(&c)?;
        let rows = c.rows.unwrap_or(DEFAULT_ROWS);
        let scan_w = c.scan_w.unwrap_or(DEFAULT_SCAN_W);
        if scan_w > rows {
            return Err(format!(
                "SCAN_W ({scan_w}) cannot exceed the table's rows ({rows})"
            ));
        }
        let window = c.window_s.unwrap_or(if quick { 2.0 } else { 8.0 });
        let warmup = c.warmup_s.unwrap_or(if quick { 1.0 } else { 2.0 });
        let (conc_levels, pool_sizes, client_threads) = levels(&c, quick, server_cpus.len())?;
        check_arrival(&c)?;
        let open_fractions = c
            .open_fractions
            .map(|f| f.0)
            .unwrap_or_else(|| vec![0.8, 0.95, 1.2]);
        let label = c.label.unwrap_or_else(|| cli.command.name().to_string());
        if label.is_empty() || label.contains(['/', '\\']) {
            return Err(format!(
                "--label {label:?} must be a plain folder-name suffix"
            ));
        }
        Ok(Settings {
            command: cli.command,
            quick,
            all,
            server: c.server,
            server_bin: c.server_bin,
            mysql_url: c.mysql_url,
            proxy_url: c.proxy_url,
            server_cpus,
            loadgen_cpus,
            host_cpus,
            out: c.out,
            label,
            scan_w,
            rows,
            window: Duration::from_secs_f64(window),
            warmup: Duration::from_secs_f64(warmup),
            conc_levels,
            pool_sizes,
            client_threads,
            arrival: c.arrival,
            rate: c.rate,
            open_fractions,
            open_pool_size: c.open_pool_size,
            idle_levels: c
                .idle_levels
                .map(|l| l.0)
                .unwrap_or_else(|| DEFAULT_IDLE_LEVELS.to_vec()),
            adaptive: Duration::from_secs_f64(c.adaptive_s.unwrap_or(if quick {
                12.0
            } else {
                40.0
            })),
            adaptive_rounds: c.adaptive_rounds.unwrap_or(if quick { 1 } else { 3 }),
            max_queue_wait: Duration::from_millis(u64::from(c.max_queue_wait_ms.unwrap_or(200))),
            admission_load: c.admission_load.unwrap_or(1.5),
            overhead_rounds: c.overhead_rounds.unwrap_or(1) as usize,
            cost_counts: c.cost_counts,
            cost_queries: c.cost_queries.unwrap_or(DEFAULT_COST_QUERIES),
            syscall_counter: c.syscall_counter,
            haproxy_bin: c.haproxy_bin,
            sluice_bin: c.sluice_bin,
            sysbench,
            seed: c.seed,
            progress: !c.no_progress,
        })
    }

    /// Whether the run includes the sysbench experiment.
    pub fn runs_sysbench(&self) -> bool {
        matches!(
            self.command,
            Command::Sysbench | Command::Bench { all: true, .. }
        )
    }

    /// The server-side prepared statements sysbench holds at once when every thread runs
    /// straight at the server: each thread prepares each of oltp_read_write's 9 statements
    /// on every table, plus BEGIN and COMMIT (MariaDB's default cap, 16382, is below that
    /// at 1024 threads on 4 tables). `None` when the run has no sysbench.
    pub fn prepared_statements_needed(&self) -> Option<u64> {
        let sb = &self.sysbench;
        let threads = *sb.threads.iter().max()? as u64;
        self.runs_sysbench()
            .then(|| threads * (9 * u64::from(sb.tables) + 2))
    }

    /// The largest number of connections any experiment opens at once (plus monitor).
    pub fn max_connections_needed(&self) -> usize {
        let most = self
            .conc_levels
            .iter()
            .chain(&self.pool_sizes)
            .copied()
            .chain([self.client_threads, 64])
            // sysbench straight at the server: one connection per thread.
            .chain(self.sysbench.threads.iter().copied())
            // Experiment D: the idle connections plus its 4 active clients.
            .chain(self.idle_levels.iter().map(|n| n + 4))
            .max()
            .unwrap_or(1);
        most + 16
    }
}

/// 1, 2, 4, ... up to 64 on a server with at most 4 cores; up to 16 × cores beyond.
pub fn default_pool_sizes(server_cores: usize) -> Vec<usize> {
    let top = (16 * server_cores).max(64);
    (0..)
        .map(|i| 1usize << i)
        .take_while(|&p| p <= top)
        .collect()
}

/// `--server`, `--mysql-url` and `--proxy-url` agree, and the URLs parse.
fn check_server_flags(c: &Common) -> Result<(), String> {
    match (c.server, &c.mysql_url) {
        (ServerKind::External, None) => {
            return Err("--server external needs --mysql-url mysql://user:pass@host:port/db".into())
        }
        (ServerKind::Local | ServerKind::Docker, Some(_)) => {
            return Err(format!(
                "--mysql-url names an existing server, which conflicts with --server {:?}",
                c.server
            ))
        }
        _ => {}
    }
    for (flag, url) in [("--mysql-url", &c.mysql_url), ("--proxy-url", &c.proxy_url)] {
        if let Some(url) = url {
            dbkit::TestServer::from_url(url).map_err(|e| format!("{flag}: {e}"))?;
        }
    }
    Ok(())
}

/// Experiment A's concurrency levels, the pool sizes and the client tasks, defaulted and
/// checked against what one loadgen can drive.
fn levels(
    c: &Common,
    quick: bool,
    server_cpus: usize,
) -> Result<(Vec<usize>, Vec<usize>, usize), String> {
    let conc_levels = c.conc_levels.clone().map(|l| l.0).unwrap_or_else(|| {
        if quick {
            vec![1, 4, 16, 64, 512]
        } else {
            (0..10).map(|i| 1usize << i).collect()
        }
    });
    let pool_sizes = c.pool_sizes.clone().map(|l| l.0).unwrap_or_else(|| {
        if quick {
            vec![1, 4, 16]
        } else {
            default_pool_sizes(server_cpus)
        }
    });
    let client_threads = c.client_threads.unwrap_or(DEFAULT_CLIENT_THREADS);
    let most = conc_levels
        .iter()
        .chain(&pool_sizes)
        .max()
        .copied()
        .unwrap_or(1);
    if most.max(client_threads) > 20_000 {
        return Err("more than 20000 connections is beyond what one loadgen can drive".into());
    }
    Ok((conc_levels, pool_sizes, client_threads))
}

/// `--rate` is given exactly when the arrivals are open.
fn check_arrival(c: &Common) -> Result<(), String> {
    match (c.arrival, c.rate) {
        (ArrivalKind::Open, None) => Err("--arrival open needs --rate (e.g. 900 or 0.8x)".into()),
        (ArrivalKind::Closed, Some(_)) => Err("--rate only applies to --arrival open".into()),
        _ => Ok(()),
    }
}

/// Server: the first half of the host's CPUs (at least one); loadgen: the rest (or all,
/// on a single-CPU host). Explicit lists must name CPUs this process may use.
pub fn resolve_cpus(
    server: Option<Vec<usize>>,
    loadgen: Option<Vec<usize>>,
    host: &[usize],
) -> Result<(Vec<usize>, Vec<usize>), String> {
    let show = |v: &[usize]| {
        v.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    for (flag, list) in [("--server-cpus", &server), ("--loadgen-cpus", &loadgen)] {
        if let Some(list) = list {
            if let Some(bad) = list.iter().find(|c| !host.contains(c)) {
                return Err(format!(
                    "{flag} names CPU {bad}, but this machine lets us use only CPUs {} ({} in all)",
                    show(host),
                    host.len()
                ));
            }
        }
    }
    let half = (host.len() / 2).max(1);
    let server = server.unwrap_or_else(|| host[..half].to_vec());
    if server.len() > host.len() {
        return Err(format!(
            "--server-cpus asks for {} CPUs but only {} exist",
            server.len(),
            host.len()
        ));
    }
    let loadgen = loadgen.unwrap_or_else(|| {
        let rest: Vec<usize> = host
            .iter()
            .copied()
            .filter(|c| !server.contains(c))
            .collect();
        if rest.is_empty() {
            host.to_vec()
        } else {
            rest
        }
    });
    Ok((server, loadgen))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn settings(args: &[&str]) -> Result<Settings, String> {
        let mut all = vec!["loadgen"];
        all.extend_from_slice(args);
        Settings::from_cli(
            Cli::try_parse_from(all).map_err(|e| e.to_string())?,
            vec![0, 1],
        )
    }

    #[test]
    fn defaults_match_the_seed_on_two_cores() {
        let s = settings(&["bench"]).unwrap();
        assert_eq!(s.server_cpus, vec![0]);
        assert_eq!(s.loadgen_cpus, vec![1]);
        assert_eq!(s.conc_levels, vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512]);
        assert_eq!(s.pool_sizes, vec![1, 2, 4, 8, 16, 32, 64]);
        assert_eq!((s.scan_w, s.rows, s.client_threads), (20_000, 200_000, 512));
        assert_eq!(s.window, Duration::from_secs(8));
        assert_eq!(s.warmup, Duration::from_secs(2));
        assert_eq!(s.label, "bench");
        assert_eq!(settings(&["bench", "--quick"]).unwrap().label, "quick");
        assert_eq!(settings(&["curve"]).unwrap().label, "curve");
    }

    #[test]
    fn too_many_server_cpus_is_one_clear_error() {
        let err = settings(&["bench", "--server-cpus", "0-3"]).unwrap_err();
        assert!(err.contains("CPU 2") && err.contains("2 in all"), "{err}");
        let err = settings(&["bench", "--loadgen-cpus", "7"]).unwrap_err();
        assert!(err.contains("--loadgen-cpus"), "{err}");
    }

    #[test]
    fn single_cpu_hosts_share_the_cpu() {
        assert_eq!(resolve_cpus(None, None, &[0]).unwrap(), (vec![0], vec![0]));
        assert_eq!(
            resolve_cpus(None, None, &[0, 1, 2, 3]).unwrap(),
            (vec![0, 1], vec![2, 3])
        );
    }

    #[test]
    fn conflicting_flags_are_rejected() {
        assert!(settings(&["bench", "--server", "external"]).is_err());
        assert!(settings(&[
            "bench",
            "--server",
            "local",
            "--mysql-url",
            "mysql://a@b:1/c"
        ])
        .is_err());
        assert!(settings(&["bench", "--mysql-url", "http://x"]).is_err());
        assert!(settings(&["curve", "--arrival", "open"]).is_err());
        assert!(settings(&["curve", "--rate", "100"]).is_err());
        assert!(settings(&["curve", "--arrival", "open", "--rate", "0.8x"]).is_ok());
        assert!(settings(&["bench", "--scan-w", "300000"]).is_err());
        assert!(settings(&["bench", "--label", "a/b"]).is_err());
    }

    #[test]
    fn sysbench_defaults_and_checks() {
        let s = settings(&["sysbench"]).unwrap().sysbench;
        assert_eq!((s.rounds, s.time_s, s.warmup_s), (3, 10, 5));
        assert_eq!(s.threads, [16, 64, 256, 1024]);
        assert_eq!(s.workloads, SysbenchWorkload::ALL);
        assert_eq!(s.targets, SysbenchTarget::ALL);
        assert_eq!((s.tables, s.table_size), (4, 100_000));
        assert_eq!(s.sluice_args, ["--pool-size", "auto"]);
        let s = settings(&[
            "sysbench",
            "--sysbench-workloads",
            "oltp_read_write,oltp_point_select",
            "--sysbench-targets",
            "sluice,direct",
            "--sysbench-threads",
            "64,16",
            "--sysbench-sluice-args",
            "--pool-size 4 --pipeline-depth 1",
        ])
        .unwrap();
        let sb = &s.sysbench;
        assert_eq!(
            sb.workloads,
            [SysbenchWorkload::PointSelect, SysbenchWorkload::ReadWrite]
        );
        assert_eq!(sb.targets, [SysbenchTarget::Direct, SysbenchTarget::Sluice]);
        assert_eq!(sb.threads, [16, 64]);
        assert_eq!(
            sb.sluice_args,
            ["--pool-size", "4", "--pipeline-depth", "1"]
        );
        assert_eq!(s.label, "sysbench");
        // Direct at 1024 threads needs a server that takes them all, and their statements.
        let full = settings(&["sysbench"]).unwrap();
        assert_eq!(full.prepared_statements_needed(), Some(1024 * 38));
        assert_eq!(
            settings(&["bench"]).unwrap().prepared_statements_needed(),
            None
        );
        assert!(settings(&["bench", "--all"])
            .unwrap()
            .prepared_statements_needed()
            .is_some());
        assert!(
            settings(&["sysbench", "--sysbench-threads", "3000"])
                .unwrap()
                .max_connections_needed()
                > 3000
        );
        let err = settings(&["sysbench", "--sysbench-targets", "sluice"]).unwrap_err();
        assert!(err.contains("must include direct"), "{err}");
        let err =
            settings(&["sysbench", "--sysbench-sluice-args", "--listen 1.2.3.4:5"]).unwrap_err();
        assert!(err.contains("may not set --listen"), "{err}");
        assert!(settings(&["sysbench", "--sysbench-workloads", "oltp_insert"]).is_err());
        assert!(settings(&["sysbench", "--sysbench-time", "0"]).is_err());
        assert!(settings(&["sysbench", "--sysbench-rounds", "0"]).is_err());
    }

    #[test]
    fn pool_sizes_grow_with_server_cores() {
        assert_eq!(default_pool_sizes(1).last(), Some(&64));
        assert_eq!(default_pool_sizes(8).last(), Some(&128));
    }
}
