//! loadgen: the sluice load generator and experiment harness.
//!
//! # Layout (each module uses only modules below it; `just cycles` checks there are no cycles)
//! - [`experiments`]: one experiment to a file, each implementing [`experiments::run::Experiment`]
//!   (calibration, A, C, the open loop, proxy, overhead, D, S, E, F, the soak), and
//!   [`experiments::for_command`], what each subcommand runs.
//! - [`report`]: the run's results and everything written from them: CSVs, `summary.txt` (one
//!   section to a file), `run_metadata.csv`, SVG plots.
//! - [`analysis`]: pure functions over measured rows: the collapse and knee, the best pool, E's
//!   rounds, the soak's verdict.
//! - [`targets`]: the servers (local via dbkit, docker via bollard, external), the in-process
//!   sluice, and the relays overhead runs as processes of their own: the sluice binary,
//!   HAProxy and the bare tokio relay.
//! - [`measure`]: one level (spawn, measure, merge) of clients on their connections, the
//!   statistics, calibration, timelines, and loadgen's own CPU and memory.
//! - [`workload`]: the table, seeding, the query, connection options.
//! - [`programs`]: finding the external programs (sysbench, HAProxy) and their versions.
//! - [`settings`], validated once before anything starts, from the [`cli`] flags (with env
//!   fallbacks); [`progress`]: the progress bar and log.

// Built without the in-process sluice, the helpers only its experiments use lie idle.
#![cfg_attr(not(feature = "proxy"), allow(dead_code))]

mod analysis;
mod cli;
mod experiments;
mod measure;
mod programs;
mod progress;
mod report;
mod settings;
mod targets;
mod workload;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Parser;
use mysql_async::prelude::Queryable;

use crate::experiments::run::{Experiment, Run};
use crate::progress::Progress;
use crate::report::Report;
use crate::settings::Settings;
use crate::targets::servers::Backend;

/// How a run ended.
enum Outcome {
    Done,
    Interrupted,
}

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    if let cli::Command::Report { dir } = &cli.command {
        return rewrite_report(dir);
    }
    if let cli::Command::Relay { listen, backend } = &cli.command {
        return targets::relay_floor::serve_process(*listen, backend.clone());
    }
    let host_cpus = dbkit::affinity::thread_cpus(0)
        .unwrap_or_else(|_| (0..dbkit::affinity::online_cpus()).collect());
    let settings = match Settings::from_cli(cli, host_cpus) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("loadgen: {e}");
            return ExitCode::from(2);
        }
    };
    // Pin before the runtime exists so every worker thread inherits the mask.
    if let Err(e) = dbkit::affinity::pin_current_thread(&settings.loadgen_cpus) {
        eprintln!(
            "loadgen: pinning to CPUs {:?} failed: {e}",
            settings.loadgen_cpus
        );
        return ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(settings.loadgen_cpus.len())
        .thread_name("loadgen-rt")
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("loadgen: building the runtime failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(run(settings));
    // Client tasks of an interrupted level may still be parked on dead sockets.
    rt.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Interrupted) => ExitCode::from(130),
        Err(e) => {
            eprintln!("loadgen: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `loadgen report <dir>`: no server, no runtime; prints the new summary.
fn rewrite_report(dir: &std::path::Path) -> ExitCode {
    match report::rewrite(dir) {
        Ok((summary, plots)) => {
            println!("{summary}");
            eprintln!(
                "loadgen: rewrote {} and drew {} from its CSVs",
                dir.join(report::SUMMARY).display(),
                if plots.is_empty() {
                    "no plots".to_string()
                } else {
                    plots.join(", ")
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("loadgen: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
async fn shutdown_signal() -> &'static str {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return "SIGINT";
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

async fn run(s: Settings) -> Result<Outcome> {
    let started = Instant::now();
    // Registered first: from here on a signal never kills us before the teardown.
    let signal = shutdown_signal();
    tokio::pin!(signal);
    tokio::task::yield_now().await;

    let list = experiments::for_command(&s.command);
    let query = experiments::ASSUMED_QUERY;
    let steps = list
        .iter()
        .zip(experiments::plans(&list, &s, query))
        .map(|(e, p)| (e.name().to_string(), p.total()))
        .collect();
    let progress = Progress::new(experiments::SERVER_START, steps, s.progress);
    let mut report = Report::create(&s.out, &s.label)?;
    progress.log(format!(
        "loadgen: writing results to {}",
        report.dir.display()
    ));
    for line in experiments::describe(&list, &s, query) {
        progress.log(line);
    }

    // Starting a local server blocks for a few seconds; if a signal arrives meanwhile, let
    // the start finish and tear the server down, so nothing is left behind.
    let start = Backend::start(&s);
    tokio::pin!(start);
    let backend = tokio::select! {
        b = &mut start => b?,
        sig = &mut signal => {
            progress.log(format!("{sig}: stopping after the server start finishes"));
            if let Ok(b) = start.await {
                b.teardown().await?;
            }
            return Ok(Outcome::Interrupted);
        }
    };
    progress.log(format!(
        "server: {} at {}",
        backend.kind(),
        redact(&backend.url())
    ));
    fill_static_meta(&mut report, &s, &backend);

    let outcome = {
        let body = experiments_body(&s, &list, &backend, &mut report, &progress);
        tokio::pin!(body);
        tokio::select! {
            r = &mut body => r.map(|()| Outcome::Done),
            sig = &mut signal => {
                progress.log(format!("{sig}: interrupted, tearing down"));
                Ok(Outcome::Interrupted)
            }
        }
    };
    progress.finish();
    report.meta(
        "duration_s",
        format!("{:.1}", started.elapsed().as_secs_f64()),
    );
    report.meta("completed", matches!(outcome, Ok(Outcome::Done)));
    report.meta("host_loadavg_at_end", loadavg());
    report::headline::headline_meta(&mut report);
    let (_, peak_rss) = measure::resources::rss_mib();
    report.meta("loadgen_peak_rss_mib", format!("{peak_rss:.1}"));
    let written = report::finish(&report);
    let teardown = backend.teardown().await;
    written.context("writing the report")?;
    teardown.context("tearing the server down")?;
    eprintln!("loadgen: results in {}", report.dir.display());
    if let Ok(summary) = std::fs::read_to_string(report.dir.join(report::SUMMARY)) {
        if matches!(outcome, Ok(Outcome::Done)) {
            println!("{summary}");
        }
    }
    outcome
}

async fn experiments_body(
    s: &Settings,
    list: &[Box<dyn Experiment>],
    backend: &Backend,
    report: &mut Report,
    progress: &Progress,
) -> Result<()> {
    let server_url = backend.url();
    // The monitor connection exists before any load, so it never competes for a slot.
    let monitor = workload::connect(&workload::conn_opts(&server_url)?).await?;
    let mut run = Run {
        s,
        progress,
        report,
        server_url,
        monitor,
        workload: workload::Workload {
            rows: s.rows,
            scan_w: s.scan_w,
            mix: workload::Mix::Knee,
        },
        cache: measure::conns::ConnCache::default(),
        server_pid: backend.local_pid(),
        server_cpu_count: backend
            .is_pinned()
            .then(|| s.server_cpus.len().max(1) as u32),
    };
    let result = execute(&mut run, list).await;
    run.cache.close().await;
    let _ = run.monitor.disconnect().await;
    result
}

/// Records the server's version, then runs each experiment in turn.
async fn execute(run: &mut Run<'_>, list: &[Box<dyn Experiment>]) -> Result<()> {
    let version: Option<String> = run.monitor.query_first("SELECT VERSION()").await?;
    run.report
        .meta("server_version", version.unwrap_or_default());
    let mut replanned = false;
    for (i, experiment) in list.iter().enumerate() {
        run.progress.start_step(i);
        experiment.run(run).await?;
        // The rest of the plan, at the query cost the calibration measured.
        if let (Some(cal), false) = (run.report.calibration, replanned) {
            let query = Duration::from_secs_f64(cal.mean_ms.max(0.001) / 1e3);
            let planned: Vec<Duration> = experiments::plans(list, run.s, query)
                .iter()
                .map(|p| p.total())
                .collect();
            run.progress.replan(&planned);
            replanned = true;
        }
    }
    Ok(())
}

fn redact(url: &str) -> String {
    match dbkit::TestServer::from_url(url) {
        Ok(t) => format!("mysql://{}:***@{}:{}", t.user, t.host, t.port),
        Err(_) => "(unparsable URL)".into(),
    }
}

fn join(v: &[usize]) -> String {
    v.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn fill_static_meta(report: &mut Report, s: &Settings, backend: &Backend) {
    report.meta("started_utc", report::results::utc_stamp());
    report.meta("loadgen_version", env!("CARGO_PKG_VERSION"));
    report.meta("command", s.command.name());
    report.meta("quick", s.quick);
    report.meta("all", s.all);
    for (k, v) in backend.describe() {
        report.meta(&k, v);
    }
    report.meta("arch", std::env::consts::ARCH);
    report.meta("host_cores", s.host_cpus.len());
    report.meta("cpu_model", cpu_model());
    report.meta(
        "kernel",
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim(),
    );
    report.meta(
        "server_cpus",
        if backend.is_pinned() {
            join(&s.server_cpus)
        } else {
            "not pinned (external)".into()
        },
    );
    // What sluice is told the server runs on (its `server_cpus`; see `Run::server_cpu_count`).
    report.meta(
        "sluice_server_cpus",
        if backend.is_pinned() {
            s.server_cpus.len().max(1).to_string()
        } else {
            "auto".into()
        },
    );
    report.meta("loadgen_cpus", join(&s.loadgen_cpus));
    report.meta("loadgen_worker_threads", s.loadgen_cpus.len());
    report.meta("rows", s.rows);
    report.meta("scan_w", s.scan_w);
    report.meta("query", workload::QUERY_SHAPE);
    report.meta("window_s", s.window.as_secs_f64());
    report.meta("warmup_s", s.warmup.as_secs_f64());
    report.meta("conc_levels", join(&s.conc_levels));
    report.meta("pool_sizes", join(&s.pool_sizes));
    report.meta("client_threads", s.client_threads);
    report.meta("idle_levels", join(&s.idle_levels));
    report.meta(
        "open_fractions",
        s.open_fractions
            .iter()
            .map(|f| f.to_string())
            .collect::<Vec<_>>()
            .join(","),
    );
    report.meta("git_commit", git_commit());
    report.meta("host_loadavg_at_start", loadavg());
}

/// `/proc/loadavg`'s first three fields: other work on the host skews every number.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// `git rev-parse HEAD` (+ `-dirty`), or why it is unknown.
fn git_commit() -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match run(&["rev-parse", "HEAD"]) {
        Some(head) => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{head}-dirty")
            } else {
                head
            }
        }
        None => "unknown (no commit yet)".into(),
    }
}
