//! Experiment F: does `max_queue_wait` keep admitted latency bounded under overload?
//! CLIENT_THREADS closed-loop clients plus a Poisson stream at ADMISSION_LOAD x the peak on
//! CLIENT_THREADS/2 more connections: directly, through sluice with an unbounded queue, and
//! through sluice with `max_queue_wait`; it counts what admission control sheds.

use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;

use super::run::{Experiment, Plan, Run};
use crate::analysis::admission::{f_findings, shed_fraction};
use crate::measure::level::{Mode, Target};
use crate::settings::Settings;
use crate::targets::in_process::InProcessProxy;

/// Experiment F.
pub struct Admission;

#[async_trait(?Send)]
impl Experiment for Admission {
    fn name(&self) -> &'static str {
        "F (admission control)"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        if s.proxy_url.is_some() {
            return Plan::default();
        }
        // The peak, unbounded and max_queue_wait through sluice; direct under the overload.
        Plan::sluice_levels(3, s).then(Plan::levels(1, s))
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        admission(run).await
    }
}

/// Experiment F: the peak, then direct, unbounded and max_queue_wait under the overload.
async fn admission(run: &mut Run<'_>) -> Result<()> {
    if run.s.proxy_url.is_some() {
        run.progress
            .log("experiment F skipped: it needs the in-process sluice (PROXY_URL is set)");
        return Ok(());
    }
    let pool = admission_pool(run);
    let clients = run.s.client_threads;
    let open_n = (clients / 2).max(1);
    let backend_addr = run.backend_addr()?;
    // The peak is measured here, with the server pinned as for the overload rows (E ran
    // it on more CPUs): the closed-loop clients alone through sluice at the same P.
    let peak = admission_proxy_row(run, &backend_addr, pool, None, None).await?;
    let rate = run.s.admission_load * peak;
    run.report.meta("f_peak_qps", format!("{peak:.1}"));
    run.report.meta("f_pool_size", pool);
    run.report.meta("f_open_qps", format!("{rate:.1}"));

    let direct = run.ctx(&run.server_url, Some(run.workload))?;
    let mut spec = run.spec("F", Target::Direct, Mode::Direct, clients);
    spec.open_stream = Some((open_n, rate));
    let label = format!("F: {clients}+{open_n} open, direct");
    run.measure_fresh(&direct, spec, label).await?;
    for queue_wait in [None, Some(run.s.max_queue_wait)] {
        admission_proxy_row(run, &backend_addr, pool, Some((open_n, rate)), queue_wait).await?;
    }
    admission_meta(run);
    Ok(())
}

/// One F row through a fresh in-process sluice at `pool`: the closed-loop clients, plus
/// the open stream when given. Returns the row's QPS.
async fn admission_proxy_row(
    run: &mut Run<'_>,
    backend_addr: &str,
    pool: usize,
    open_stream: Option<(usize, f64)>,
    queue_wait: Option<Duration>,
) -> Result<f64> {
    let clients = run.s.client_threads;
    let proxy = InProcessProxy::start_with(
        backend_addr,
        &run.s.loadgen_cpus,
        run.server_cpu_count,
        |c| {
            c.pool_size = sluice::config::PoolSize::Fixed(pool as u32);
            c.max_backend_connections = c.max_backend_connections.max(pool as u32);
            // "Unbounded": nothing is timed out of the queue inside the window either.
            c.queue_timeout = Duration::from_secs(600);
            c.max_queue_wait = queue_wait;
        },
    )
    .await?;
    let mut spec = run.spec("F", Target::Proxy, Mode::Direct, clients);
    spec.open_stream = open_stream;
    spec.proxy_pool = Some(pool);
    spec.pool_mode = Some("fixed");
    spec.max_queue_wait_ms = queue_wait.map(|d| d.as_secs_f64() * 1e3);
    let target_ms = run.s.max_queue_wait.as_secs_f64() * 1e3;
    let label = match (open_stream, queue_wait) {
        (None, _) => format!("F: {clients} closed, sluice (peak)"),
        (Some((n, _)), None) => format!("F: {clients}+{n} open, sluice unbounded"),
        (Some((n, _)), Some(_)) => format!("F: {clients}+{n} open, sluice {target_ms:.0} ms"),
    };
    run.measure_via(proxy, Some(run.workload), spec, label)
        .await?;
    Ok(run.report.rows_of("F").last().map_or(0.0, |r| r.qps))
}

/// F's pool: the best fixed P of E when it ran, else twice the server's CPUs.
fn admission_pool(run: &Run<'_>) -> usize {
    run.report
        .best_fixed_e()
        .and_then(|r| r.pool_size)
        .unwrap_or(2 * run.s.server_cpus.len())
}

/// F's metadata, from the same findings the summary prints.
fn admission_meta(run: &mut Run<'_>) {
    let rows = run.report.rows_of("F");
    let Some(f) = f_findings(&rows) else { return };
    let Some(capped) = rows.iter().find(|r| r.max_queue_wait_ms.is_some()) else {
        return;
    };
    let (p99, shed, ratio) = (capped.p99_ms, shed_fraction(capped), capped.qps / f.peak);
    run.report.meta("f_admitted_p99_ms", format!("{p99:.2}"));
    run.report.meta("f_shed_fraction", format!("{shed:.4}"));
    run.report
        .meta("f_qps_ratio_vs_peak", format!("{ratio:.3}"));
}
