//! Experiment E: does `pool_size = auto` find the knee, and follow it when the server loses a
//! CPU? CLIENT_THREADS clients through an in-process sluice at every fixed P in POOL_SIZES,
//! then with `pool_size = auto` while the server is re-pinned from 2 CPUs to 1 half-way, then
//! paired rounds of the best fixed P against a fresh auto. A sampler records QPS, the limit
//! and Threads_running every 250 ms into the timeline.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;

use super::run::{Experiment, Plan, Run, SLUICE_LEVEL_SETUP};
use crate::analysis::adaptive::e_findings;
use crate::measure::client::Live;
use crate::measure::conns::ConnCache;
use crate::measure::level::{Mode, Target};
use crate::measure::stats::mean;
use crate::measure::timeline::{sample, TimelineRow, SAMPLE};
use crate::settings::Settings;
use crate::targets::in_process::InProcessProxy;
use crate::workload::conn_opts;

/// In E's paired rounds, both configurations are measured from this long after sluice
/// started (the "within 10 s of start" for auto), so the two windows sit at the
/// same point of a run: a fixed P measured from 2 s would see an earlier phase of the
/// 512 clients' start-up than auto does.
const ROUND_START: Duration = Duration::from_secs(10);

/// Experiment E.
pub struct Adaptive;

#[async_trait(?Send)]
impl Experiment for Adaptive {
    fn name(&self) -> &'static str {
        "E (pool_size = auto)"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        if s.proxy_url.is_some() {
            return Plan::default();
        }
        let sweep = Plan::sluice_levels(s.pool_sizes.len(), s);
        let auto = Plan::each(1, s.adaptive, SLUICE_LEVEL_SETUP);
        let rounds = Plan::each(
            2 * s.adaptive_rounds,
            ROUND_START + s.window,
            SLUICE_LEVEL_SETUP,
        );
        sweep.then(auto).then(rounds)
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        adaptive(run).await
    }
}

/// How one E configuration runs.
#[derive(Clone, Copy, Debug)]
enum PoolCfg {
    Fixed(usize),
    Auto,
}

impl PoolCfg {
    fn name(self) -> String {
        match self {
            PoolCfg::Fixed(p) => format!("P={p}"),
            PoolCfg::Auto => "auto".into(),
        }
    }
}

/// Experiment E: the fixed-P sweep, auto with the re-pin, then the paired rounds.
async fn adaptive(run: &mut Run<'_>) -> Result<()> {
    if run.s.proxy_url.is_some() {
        run.progress
            .log("experiment E skipped: it needs the in-process sluice (PROXY_URL is set)");
        return Ok(());
    }
    let backend_addr = run.backend_addr()?;
    run.cache.close().await;
    // The server gets two CPUs for all of E and loses one mid-way through the auto run.
    let wide: Vec<usize> = run.s.host_cpus.iter().copied().take(2).collect();
    let repin = match run.server_pid {
        Some(pid) if wide.len() == 2 => {
            dbkit::affinity::pin_process(pid, &wide)?;
            Some(pid)
        }
        Some(_) => {
            run.report
                .notes
                .push("E: this machine has one CPU, so the server was not re-pinned".into());
            None
        }
        None => {
            run.report.notes.push(
                "E: the server is not a local process (docker or external): no re-pin".into(),
            );
            None
        }
    };
    let cpus_now = repin.map(|_| wide.len());
    if repin.is_some() && run.s.host_cpus.len() <= 2 {
        run.report.notes.push(format!(
            "E: this host has {} CPUs, so with the server on 2 of them loadgen and the in-process sluice share its CPUs",
            run.s.host_cpus.len()
        ));
    }
    let mut fixed_best: Option<(usize, f64)> = None;
    let result = async {
        for &p in &run.s.pool_sizes.clone() {
            let qps = adaptive_config(run, &backend_addr, PoolCfg::Fixed(p), None, cpus_now, None)
                .await?;
            if fixed_best.is_none_or(|(_, q)| qps > q) {
                fixed_best = Some((p, qps));
            }
        }
        let repin_plan = repin.map(|pid| (pid, run.s.adaptive / 2, wide[..1].to_vec()));
        adaptive_config(
            run,
            &backend_addr,
            PoolCfg::Auto,
            repin_plan,
            cpus_now,
            None,
        )
        .await?;
        if repin.is_some() {
            if let Some(pid) = run.server_pid {
                dbkit::affinity::pin_process(pid, &wide)?;
            }
        }
        // Paired rounds: the best fixed P and a fresh auto, alternating (ABBA), so host
        // drift and the sweep's luck of the draw cancel out of the comparison.
        if let Some((p, _)) = fixed_best {
            for round in 1..=run.s.adaptive_rounds {
                let mut order = [PoolCfg::Fixed(p), PoolCfg::Auto];
                if round % 2 == 0 {
                    order.reverse();
                }
                for cfg in order {
                    adaptive_config(run, &backend_addr, cfg, None, cpus_now, Some(round)).await?;
                }
            }
        }
        anyhow::Ok(())
    }
    .await;
    if let Some(pid) = repin {
        // Back where the run started, for whatever comes next.
        dbkit::affinity::pin_process(pid, &run.s.server_cpus)?;
    }
    result?;
    adaptive_meta(run);
    Ok(())
}

/// One E configuration: the level plus its timeline. Returns the level's QPS. In a
/// paired `round` (experiment id `E2`), auto and the fixed P are both measured from
/// [`ROUND_START`] after sluice started, auto having had that long to find its limit.
async fn adaptive_config(
    run: &mut Run<'_>,
    backend_addr: &str,
    cfg: PoolCfg,
    repin: Option<(u32, Duration, Vec<usize>)>,
    cpus_now: Option<usize>,
    round: Option<usize>,
) -> Result<f64> {
    let clients = run.s.client_threads;
    let max = run.s.pool_sizes.iter().copied().max().unwrap_or(64).max(1) as u32;
    let proxy = InProcessProxy::start_with(
        backend_addr,
        &run.s.loadgen_cpus,
        run.server_cpu_count,
        |c| match cfg {
            PoolCfg::Fixed(p) => {
                c.pool_size = sluice::config::PoolSize::Fixed(p as u32);
                c.max_backend_connections = c.max_backend_connections.max(p as u32);
            }
            PoolCfg::Auto => {
                c.pool_size = sluice::config::PoolSize::Auto;
                c.min_pool_size = 1;
                c.max_pool_size = max;
                c.max_backend_connections = c.max_backend_connections.max(max);
            }
        },
    )
    .await?;
    let mut ctx = run.ctx(&proxy.url(), Some(run.workload))?;
    let live = Arc::new(Live::counting());
    ctx.live = Some(live.clone());
    let experiment = if round.is_some() { "E2" } else { "E" };
    let mut spec = run.spec(experiment, Target::Proxy, Mode::Direct, clients);
    match (cfg, round) {
        (PoolCfg::Fixed(p), round) => {
            spec.proxy_pool = Some(p);
            spec.pool_mode = Some("fixed");
            if round.is_some() {
                spec.warmup = ROUND_START;
            }
        }
        (PoolCfg::Auto, None) => {
            spec.pool_mode = Some("auto");
            spec.warmup = Duration::ZERO;
            spec.window = run.s.adaptive;
        }
        (PoolCfg::Auto, Some(_)) => {
            spec.pool_mode = Some("auto");
            spec.warmup = ROUND_START;
        }
    }
    let name = match round {
        Some(r) => format!("round {r} {}", cfg.name()),
        None => cfg.name(),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = tokio::spawn(sample(
        conn_opts(&run.server_url)?,
        proxy.context(),
        live,
        stop.clone(),
        repin,
        cpus_now,
        name.clone(),
    ));
    let label = format!("E: {clients} clients, sluice {name}");
    let mut cache = ConnCache::default();
    let level = run.measure_row(&ctx, &spec, &label, &mut cache).await;
    stop.store(true, Ordering::Relaxed);
    cache.close().await;
    run.stop_proxy(proxy).await;
    let (mut samples, repinned) = sampler.await??;
    // Samples after the window closed show the drain, not the configuration.
    let end = (spec.warmup + spec.window).as_secs_f64() + SAMPLE.as_secs_f64() / 2.0;
    samples.retain(|s| s.t_s <= end);
    let mut row = level?;
    // The timeline's averages over the measured window (all of it for E's auto run).
    let from = spec.warmup.as_secs_f64();
    let inside: Vec<&TimelineRow> = samples.iter().filter(|s| s.t_s >= from).collect();
    row.threads_running_mean = mean(
        inside
            .iter()
            .filter_map(|s| s.threads_running.map(|t| t as f64)),
    );
    row.limit_mean = mean(inside.iter().map(|s| f64::from(s.limit)));
    if matches!(cfg, PoolCfg::Auto) && round.is_none() {
        row.backend_conns = samples.iter().map(|s| s.limit as usize).max().unwrap_or(0);
        if let Some(t) = repinned {
            run.report.meta("e_repin_at_s", format!("{t:.2}"));
        }
    }
    run.progress.log(format!(
        "{label:<28} {:>7.0} QPS  p50 {:>8.2} ms  p99 {:>8.2} ms  served {}/{}  limit {:.1}  Threads_running {:.1}",
        row.qps, row.p50_ms, row.p99_ms, row.clients_served, row.clients,
        row.limit_mean.unwrap_or(0.0), row.threads_running_mean.unwrap_or(0.0)
    ));
    let qps = row.qps;
    run.report.push(row)?;
    run.report.timeline.extend(samples);
    run.report.write_timeline()?;
    Ok(qps)
}

/// E's metadata, from the same findings the summary prints.
fn adaptive_meta(run: &mut Run<'_>) {
    let repin_s = run
        .report
        .meta_value("e_repin_at_s")
        .and_then(|v| v.parse().ok());
    let Some(f) = e_findings(
        &run.report.rows_of("E"),
        &run.report.rows_of("E2"),
        &run.report.timeline,
        repin_s,
    ) else {
        return;
    };
    if let (Some(r), Some(fixed_mean)) = (&f.rounds, f.fixed_mean) {
        run.report
            .meta("e_rounds_auto_ratio_vs_fixed", format!("{:.3}", r.ratio));
        run.report
            .meta("e_rounds_fixed_mean_qps", format!("{fixed_mean:.1}"));
        run.report.meta(
            "e_rounds_auto_reach_95pct_within_10s",
            format!("{}/{}", f.reached_within_10s(), f.reach.len()),
        );
    }
    let a = &f.auto;
    for (k, v) in [
        ("e_best_fixed_p", Some(f.best_p as f64)),
        ("e_best_fixed_qps", Some(f.best_qps)),
        ("e_auto_reach_95pct_s", a.reach_95_s),
        ("e_auto_steady_qps", a.steady_qps),
        (
            "e_auto_steady_qps_ratio_vs_best_fixed",
            a.steady_qps.map(|q| q / f.best_qps),
        ),
        ("e_auto_threads_running_mean", a.steady_threads_running),
        ("e_auto_limit_mean_before_repin", a.limit_before),
        ("e_auto_limit_mean_after_repin", a.limit_after),
        ("e_auto_follow_s", a.follow_s),
    ] {
        run.report.meta(
            k,
            v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.3}")),
        );
    }
}
