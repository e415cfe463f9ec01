//! Overhead (relay cost): what relaying a `SELECT 1` costs, side by side in one run: direct,
//! the bare tokio relay (the floor), HAProxy in TCP mode with one thread (the plain C relay)
//! and the sluice binary at P=4 and P=64, each pool size first with pipelining off
//! (`--pipeline-depth 1`, target `sluice_serial`) and then as it ships, at 1 and 64 clients.
//!
//! Two more rows, at 1 client only, are about sluice's `backend_busy_poll` (the wait for a
//! lone statement's reply polls the socket instead of sleeping in `epoll_wait`, which on a
//! virtual machine spares the halted vCPU's wake-up): HAProxy with `busy-polling`
//! (target `haproxy_busy`, right after HAProxy), the same trade made by the C relay and
//! always on, so the fair anchor for the technique; and sluice P=4 with `--backend-busy-poll
//! 0` (target `sluice_sleep`, right after sluice P=4), what busy polling saves. Busy polling
//! only matters when a process would otherwise sleep between replies, so at 64 clients they
//! would only lengthen the run ([`Relay::runs_at`]). Both are pinned like every relay, so
//! HAProxy busy-polling spins on the CPU the load runs on: the trade as it falls on this
//! host. The relay-cost goal stays judged on plain HAProxy and pipelined sluice; these rows give
//! informative lines only ([`relay_cost::busy_poll`]).
//!
//! Every relay is a process of its own, pinned to loadgen's CPUs (the server keeps its own:
//! MariaDB on CPU 0, relay and load on CPU 1 on two cores), started fresh for each level and
//! torn down after it, so the CPU per query of each is utime + stime of one process over the
//! window, counted the same way for all. After each relay's timed window a separate window on
//! the same process and connections counts its syscalls ([`super::overhead_cost`]), so the
//! counter never slows the timed one; `--cost-counts` adds instructions per query under
//! callgrind after the rounds (not for the two busy-polling rows:
//! [`Relay::counts_instructions`]). `--overhead-rounds` repeats the whole sequence, every
//! other round backwards so that drift within a round favours no relay; ratios are only ever
//! taken within a round.

use std::time::{Duration, Instant};

use anyhow::Result;
use async_trait::async_trait;

use super::overhead_cost::{self, Tools};
use super::run::{Experiment, Plan, Run};
use crate::analysis::relay_cost::{self, CLIENTS};
use crate::measure::conns::ConnCache;
use crate::measure::level::{Mode, Target};
use crate::measure::monitor::kill_running_queries;
use crate::settings::Settings;
use crate::targets::relays::{self, Launch, Relay};

/// Starting a relay process, its clients' logins through it, the syscall counter's start
/// and stop, tearing it down.
const RELAY_LEVEL_SETUP: Duration = Duration::from_millis(1500);

/// The overhead experiment.
pub struct Overhead;

#[async_trait(?Send)]
impl Experiment for Overhead {
    fn name(&self) -> &'static str {
        "overhead"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        let direct = CLIENTS.len() * s.overhead_rounds;
        // Each relay at each client count it runs at ([`Relay::runs_at`]).
        let relays = Relay::levels_per_round() * s.overhead_rounds;
        Plan::levels(direct, s)
            .then(Plan::each(relays, s.warmup + s.window, RELAY_LEVEL_SETUP))
            .then(overhead_cost::plan(s, relays))
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        let tools = Tools::find(run)?;
        for round in 1..=run.s.overhead_rounds {
            // Even rounds run backwards, direct last (`Relay::in_round` says why).
            let backwards = round.is_multiple_of(2);
            for clients in CLIENTS {
                if !backwards {
                    direct_level(run, clients, round).await?;
                }
                for relay in Relay::in_round(round).filter(|r| r.runs_at(clients)) {
                    if tools.bins.missing(relay).is_none() {
                        relay_level(run, &tools, relay, clients, round).await?;
                    }
                }
                if backwards {
                    direct_level(run, clients, round).await?;
                }
            }
        }
        if run.s.cost_counts {
            overhead_cost::instructions(run, &tools).await?;
        }
        let rows = run.report.rows_of("overhead");
        for (k, v) in relay_cost::meta(&rows) {
            run.report.meta(&k, v);
        }
        Ok(())
    }
}

/// One direct level: the baseline the relays' added latency is measured from.
async fn direct_level(run: &mut Run<'_>, clients: usize, round: usize) -> Result<()> {
    let direct = run.ctx(&run.server_url, None)?;
    let mut spec = run.spec("overhead", Target::Direct, Mode::Direct, clients);
    spec.server_pid = run.server_pid;
    spec.round = Some(round);
    let label = format!(
        "SELECT 1: {clients} clients, direct{}",
        round_suffix(run, round)
    );
    run.measure(&direct, spec, label).await?;
    run.cache.close().await;
    Ok(())
}

/// One level through a fresh `relay` process: the timed window, then its syscalls counted
/// in a window of their own on the same process and connections.
async fn relay_level(
    run: &mut Run<'_>,
    tools: &Tools,
    relay: Relay,
    clients: usize,
    round: usize,
) -> Result<()> {
    let backend = run.backend_addr()?;
    let launch = Launch {
        backend: &backend,
        max_clients: clients,
        cpus: &run.s.loadgen_cpus,
        dir: tools.dir.path(),
        under: None,
        server_cpus: run.server_cpu_count,
    };
    let process = relays::start(relay, &tools.bins, &launch).await?;
    run.report.meta(
        &format!("overhead_{}_cpus", relay.key()),
        process.cpus_allowed(),
    );
    let url = run
        .server_url
        .replacen(&backend, &process.addr.to_string(), 1);
    let ctx = run.ctx(&url, None)?;
    let mut spec = run.spec(
        "overhead",
        Target::Process(relay.target()),
        Mode::Direct,
        clients,
    );
    spec.proxy_pool = relay.pool();
    spec.pool_mode = relay.pool().map(|_| "fixed");
    spec.relay_pid = Some(process.pid);
    spec.server_pid = run.server_pid;
    spec.round = Some(round);
    let label = format!(
        "SELECT 1: {clients} clients, {}{}",
        relay.label(),
        round_suffix(run, round)
    );
    let started = Instant::now();
    let mut cache = ConnCache::default();
    let measured = run.measure_row(&ctx, &spec, &label, &mut cache).await;
    let counted = match (&measured, &tools.counter) {
        (Ok(_), Ok(counter)) => Some(
            overhead_cost::syscall_window(
                run,
                &ctx,
                &spec,
                &mut cache,
                counter,
                &process,
                tools.dir.path(),
            )
            .await,
        ),
        _ => None,
    };
    cache.close().await;
    drop(process);
    kill_running_queries(&mut run.monitor).await;
    let mut row = measured?;
    let mut line = None;
    match counted {
        Some(Ok(window)) => {
            row.syscalls_per_query = window.per_query();
            row.syscall_window_qps = Some(window.qps());
            let counter = tools.counter.as_ref().map(|c| c.name()).unwrap_or("");
            line = Some(format!(
                "  syscalls: {:.2} per query ({counter}; {:.0} QPS while counting, {:.2}x the timed window)",
                row.syscalls_per_query.unwrap_or(0.0),
                window.qps(),
                window.qps() / row.qps.max(1e-9)
            ));
            run.report.syscalls.extend(window.rows(&row, counter));
            run.report.write_syscalls()?;
        }
        Some(Err(e)) => {
            let note = format!(
                "overhead: counting {}'s syscalls at {clients} clients failed: {e:#}",
                relay.label()
            );
            line = Some(note.clone());
            run.report.notes.push(note);
        }
        None => {}
    }
    run.record(&label, row, started)?;
    if let Some(line) = line {
        run.progress.log(line);
    }
    Ok(())
}

/// ` (round 2)` when there are several rounds.
fn round_suffix(run: &Run<'_>, round: usize) -> String {
    if run.s.overhead_rounds > 1 {
        format!(" (round {round})")
    } else {
        String::new()
    }
}
