//! sysbench: the benchmark users run, driven by sysbench itself, side by side. For each
//! round, workload (`oltp_point_select`, `oltp_read_only`, `oltp_read_write`) and thread
//! count, sysbench runs against direct MariaDB, HAProxy in TCP mode with one thread and the
//! sluice binary with its defaults, in that order in odd rounds and the reverse in even ones,
//! each relay a fresh process for its level. Every level is a warm-up run (its numbers are
//! dropped) and then the measured run on the same target, whose QPS, latencies (p99 its own
//! `--percentile`, p95 from its histogram), errors and reconnects are sysbench's; the relay's,
//! the server's and sysbench's CPU come from `/proc` over the measured run. The server runs
//! on its CPUs, the relay and sysbench on loadgen's (MariaDB on CPU 0, the rest on CPU 1 on
//! two cores). The tables are prepared once ([`super::sysbench_setup`]); every ratio is
//! taken within a round ([`crate::analysis::sysbench`]).

use std::time::{Duration, Instant};

use anyhow::Result;
use async_trait::async_trait;

use super::run::{Experiment, Plan, Run};
use super::sysbench_setup::Setup;
use crate::analysis::sysbench::{order, ratio_rows};
use crate::analysis::sysbench_goals;
use crate::cli::{SysbenchTarget, SysbenchWorkload};
use crate::measure::monitor::kill_running_queries;
use crate::measure::sysbench::{self, DbConn, Finished, Job, LevelKey, SysbenchRow, Watch};
use crate::report::csv;
use crate::settings::Settings;
use crate::targets::sysbench_targets;

// What a level costs besides its runs' --time, estimated from the smoke runs in
// loadgen/README.md and rounded up.
/// Starting a relay and tearing it down.
const RELAY_SETUP: Duration = Duration::from_millis(300);
/// A sysbench run's own start and report, besides its threads' logins.
const RUN_SETUP: Duration = Duration::from_millis(200);
/// Each thread's login and statement prepares before the clock starts, and its disconnect.
const PER_THREAD: Duration = Duration::from_millis(3);
/// Preparing: sysbench's start, the indexes and the prewarm, plus the rows.
const PREPARE_SETUP: Duration = Duration::from_secs(3);
const PREPARE_ROWS_PER_S: f64 = 80_000.0;

/// The sysbench experiment.
pub struct Sysbench;

#[async_trait(?Send)]
impl Experiment for Sysbench {
    fn name(&self) -> &'static str {
        "sysbench"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        let sb = &s.sysbench;
        let runs_per_level = if sb.warmup_s > 0 { 2 } else { 1 };
        let timed = Duration::from_secs((sb.time_s + sb.warmup_s).into());
        let mut plan = Plan::fixed(
            PREPARE_SETUP
                + Duration::from_secs_f64(
                    f64::from(sb.tables) * f64::from(sb.table_size) / PREPARE_ROWS_PER_S,
                ),
        );
        for &threads in &sb.threads {
            for target in &sb.targets {
                let relay = match target {
                    SysbenchTarget::Direct => Duration::ZERO,
                    _ => RELAY_SETUP,
                };
                let setup = relay + (RUN_SETUP + PER_THREAD * threads as u32) * runs_per_level;
                plan = plan.then(Plan::each(sb.rounds * sb.workloads.len(), timed, setup));
            }
        }
        plan
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        let Some(setup) = Setup::prepare(run).await? else {
            return Ok(());
        };
        let s: &Settings = run.s;
        let sb = &s.sysbench;
        for round in 1..=sb.rounds {
            for &workload in &sb.workloads {
                for &threads in &sb.threads {
                    for target in order(round, &sb.targets) {
                        if sysbench_targets::missing(target, &setup.bins).is_some() {
                            continue;
                        }
                        let level = Level {
                            workload,
                            threads,
                            target,
                            round,
                        };
                        level.measure(run, &setup).await?;
                    }
                }
            }
        }
        let rows = &run.report.sysbench;
        csv::write_all(
            &run.report.dir.join(csv::SYSBENCH_RATIOS),
            &ratio_rows(rows),
        )?;
        for (k, v) in sysbench_goals::meta(rows) {
            run.report.meta(&k, v);
        }
        Ok(())
    }
}

/// One workload at one thread count through one target in one round.
struct Level {
    workload: SysbenchWorkload,
    threads: usize,
    target: SysbenchTarget,
    round: usize,
}

impl Level {
    fn label(&self, run: &Run<'_>) -> String {
        let round = match run.s.sysbench.rounds {
            1 => String::new(),
            _ => format!(" (round {})", self.round),
        };
        format!(
            "{} {} threads, {}{round}",
            self.workload.script(),
            self.threads,
            self.target.key()
        )
    }

    fn key(&self) -> LevelKey {
        LevelKey {
            round: self.round,
            workload: self.workload.script().into(),
            threads: self.threads,
            target: self.target.key().into(),
        }
    }

    /// Starts the target, runs the warm-up and the measured run, records the row.
    async fn measure(&self, run: &mut Run<'_>, setup: &Setup) -> Result<()> {
        let started = Instant::now();
        let backend = run.backend_addr()?;
        let user = format!("{}:{}", setup.direct.user, setup.direct.password);
        let s: &Settings = run.s;
        let launch = setup.launch(s, &backend, &user);
        let relay = sysbench_targets::start(self.target, &setup.bins, &launch).await?;
        if let Some(process) = &relay {
            let key = self.target.key();
            run.report
                .meta(&format!("sysbench_{key}_cpus"), process.cpus_allowed());
            if self.target == SysbenchTarget::Sluice {
                let shown = sysbench_targets::sluice_args_shown(&launch);
                run.report.meta("sysbench_sluice_args", shown);
            }
        }
        let conn = match &relay {
            Some(p) => DbConn {
                host: p.addr.ip().to_string(),
                port: p.addr.port(),
                ..setup.direct.clone()
            },
            None => setup.direct.clone(),
        };
        let script = setup.script(self.workload.script());
        let job = |time_s: u32, seed: u64| Job {
            bin: &setup.bin,
            script: &script,
            conn: conn.clone(),
            tables: setup.tables,
            threads: self.threads,
            time_s,
            seed,
            cpus: &s.loadgen_cpus,
            dir: setup.dir.path(),
        };
        let label = self.label(run);
        let span = Duration::from_secs((s.sysbench.warmup_s + s.sysbench.time_s).into());
        let ticker = run.progress.level(label.clone(), span);
        let mut warm_failure = None;
        if s.sysbench.warmup_s > 0 {
            let warm =
                sysbench::run(&job(s.sysbench.warmup_s, s.seed + 1), Watch::default()).await?;
            let row = SysbenchRow::of(&self.key(), &warm);
            warm_failure = (!row.ok()).then_some(row.failure);
        }
        let watch = Watch {
            relay: relay.as_ref().map(|p| p.pid),
            server: run.server_pid,
        };
        let done = sysbench::run(&job(s.sysbench.time_s, s.seed), watch).await;
        drop(ticker);
        drop(relay);
        kill_running_queries(&mut run.monitor).await;
        let done = done?;
        run.report.meta("sysbench_load_cpus", &done.cpus);
        let row = SysbenchRow::of(&self.key(), &done);
        match (row.ok(), warm_failure) {
            (false, _) => keep_output(run, self, &done)?,
            // The measured run's numbers stand; say that its warm-up did not.
            (true, Some(why)) => {
                let note = format!("sysbench: the warm-up run of {label} failed: {why}");
                run.progress.log(&note);
                run.report.notes.push(note);
            }
            (true, None) => {}
        }
        self.log(run, &label, &row, started);
        let intervals = sysbench::intervals(&self.key(), &done.stdout);
        run.report.push_sysbench(row, intervals)
    }

    fn log(&self, run: &Run<'_>, label: &str, row: &SysbenchRow, started: Instant) {
        let opt = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or("-".into());
        let line = match row.ok() {
            true => format!(
                "{label:<44} {:>8.0} QPS  p95 {:>8} ms  p99 {:>8} ms  errors {}  reconnects {}  served {}/{}  relay {} us/q  ({:.1} s)",
                row.qps,
                opt(row.p95_ms),
                opt(row.p99_ms),
                row.errors,
                row.reconnects,
                row.threads_served,
                row.threads,
                opt(row.relay_cpu_us_per_query),
                started.elapsed().as_secs_f64()
            ),
            false => format!("{label:<44} FAILED: {}", row.failure),
        };
        run.progress.log(line);
    }
}

/// A failed run's output, kept in the run folder (`sysbench_failed_<level>.txt`).
fn keep_output(run: &Run<'_>, level: &Level, done: &Finished) -> Result<()> {
    let name = format!(
        "sysbench_failed_{}_{}_{}_r{}.txt",
        level.workload.script(),
        level.threads,
        level.target.key(),
        level.round
    );
    let text = format!(
        "status: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        done.status, done.stdout, done.stderr
    );
    std::fs::write(run.report.dir.join(name), text)?;
    Ok(())
}
