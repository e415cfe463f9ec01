//! Overhead: `SELECT 1` at 1 and 64 clients, directly, through a bare TCP relay (the floor any
//! proxy pays on this host) and through an in-process sluice (backend over TCP, and over the
//! server's Unix socket when it has one). sluice's pool size equals the clients, so there is
//! no pool queueing and the difference from direct is the relay alone.

use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;
use mysql_async::prelude::Queryable;

use super::run::{Experiment, Plan, Run};
use crate::measure::conns::ConnCache;
use crate::measure::level::{Mode, Target};
use crate::settings::Settings;
use crate::targets::in_process::InProcessProxy;
use crate::targets::relay_floor::RelayFloor;

/// Client counts measured.
const CLIENTS: [usize; 2] = [1, 64];

/// The overhead experiment.
pub struct Overhead;

#[async_trait(?Send)]
impl Experiment for Overhead {
    fn name(&self) -> &'static str {
        "overhead"
    }

    fn plan(&self, s: &Settings, _: Duration) -> Plan {
        // Direct and the relay, then sluice and sluice over the socket, at each client count.
        Plan::levels(2 * CLIENTS.len(), s).then(Plan::sluice_levels(2 * CLIENTS.len(), s))
    }

    async fn run(&self, run: &mut Run<'_>) -> Result<()> {
        let backend_addr = run.backend_addr()?;
        let direct = run.ctx(&run.server_url, None)?;
        // With a local server, sluice also reaches it over its Unix socket (one TCP leg fewer).
        let unix_backend = local_socket(&mut run.monitor)
            .await
            .map(|p| format!("unix:{p}"));
        // [direct, bare relay, sluice, sluice over the socket] p50 at 1 client, and
        // relay / sluice / sluice-over-socket CPU per query at 64.
        let mut p50 = [None; 4];
        let mut cpu64 = [None, None, None];
        for clients in CLIENTS {
            let spec = run.spec("overhead", Target::Direct, Mode::Direct, clients);
            run.measure(
                &direct,
                spec,
                format!("SELECT 1: {clients} clients, direct"),
            )
            .await?;
            run.cache.close().await;
            let direct_p50 = run.report.rows.last().map(|r| r.p50_ms).unwrap_or(0.0);

            let floor = RelayFloor::start(&backend_addr, &run.s.loadgen_cpus).await?;
            let url = run
                .server_url
                .replacen(&backend_addr, &floor.addr().to_string(), 1);
            let via_floor = run.ctx(&url, None)?;
            let spec = run.spec("overhead", Target::Relay, Mode::Direct, clients);
            let mut cache = ConnCache::default();
            let r = run
                .measure_with(
                    &via_floor,
                    spec,
                    format!("SELECT 1: {clients} clients, bare TCP relay"),
                    &mut cache,
                )
                .await;
            cache.close().await;
            drop(floor);
            r?;
            let floor_row = run.report.rows.last();
            let floor_p50 = floor_row.map(|r| r.p50_ms).unwrap_or(0.0);
            let floor_cpu = floor_row.and_then(|r| r.proxy_cpu_us_per_query);

            let mut sluice = [None, None];
            let backends = [Some(backend_addr.clone()), unix_backend.clone()];
            for (i, backend) in backends.iter().enumerate() {
                let Some(backend) = backend else { continue };
                let (target, label) = match i {
                    0 => (Target::Proxy, "sluice"),
                    _ => (Target::ProxyUnix, "sluice, backend on the Unix socket"),
                };
                sluice[i] = Some(overhead_sluice(run, backend, clients, target, label).await?);
            }
            if clients == 1 {
                p50 = [
                    Some(direct_p50),
                    Some(floor_p50),
                    sluice[0].map(|r| r.0),
                    sluice[1].map(|r| r.0),
                ];
            } else {
                cpu64 = [
                    floor_cpu,
                    sluice[0].and_then(|r| r.1),
                    sluice[1].and_then(|r| r.1),
                ];
            }
        }
        let minus = |a: Option<f64>, b: Option<f64>| a.zip(b).map(|(a, b)| a - b);
        let meta = [
            ("overhead_direct_p50_ms_1_client", p50[0]),
            ("overhead_relay_p50_ms_1_client", p50[1]),
            ("overhead_sluice_p50_ms_1_client", p50[2]),
            ("overhead_added_p50_ms_1_client", minus(p50[2], p50[0])),
            (
                "overhead_relay_added_p50_ms_1_client",
                minus(p50[1], p50[0]),
            ),
            (
                "overhead_sluice_over_relay_p50_ms_1_client",
                minus(p50[2], p50[1]),
            ),
            ("overhead_sluice_unix_p50_ms_1_client", p50[3]),
            (
                "overhead_sluice_unix_added_p50_ms_1_client",
                minus(p50[3], p50[0]),
            ),
            ("overhead_relay_cpu_us_per_query_64_clients", cpu64[0]),
            ("overhead_sluice_cpu_us_per_query_64_clients", cpu64[1]),
            (
                "overhead_sluice_over_relay_cpu_us_per_query_64_clients",
                minus(cpu64[1], cpu64[0]),
            ),
            ("overhead_sluice_unix_cpu_us_per_query_64_clients", cpu64[2]),
        ];
        for (key, value) in meta {
            if let Some(v) = value {
                run.report.meta(key, format!("{v:.4}"));
            }
        }
        Ok(())
    }
}

/// One overhead row through an in-process sluice at `backend` with P = clients (no pool
/// queueing, so the difference from direct is the relay alone). Returns p50 (ms) and
/// sluice's CPU per query (µs).
async fn overhead_sluice(
    run: &mut Run<'_>,
    backend: &str,
    clients: usize,
    target: Target,
    label: &str,
) -> Result<(f64, Option<f64>)> {
    let proxy = InProcessProxy::start(backend, clients, &run.s.loadgen_cpus).await?;
    let mut spec = run.spec("overhead", target, Mode::Direct, clients);
    spec.proxy_pool = Some(clients);
    spec.pool_mode = Some("fixed");
    let label = format!("SELECT 1: {clients} clients, {label}");
    run.measure_via(proxy, None, spec, label).await?;
    let last = run.report.rows.last();
    Ok((
        last.map(|r| r.p50_ms).unwrap_or(0.0),
        last.and_then(|r| r.proxy_cpu_us_per_query),
    ))
}

/// The server's Unix socket, when it has one this process can reach (a local server).
async fn local_socket(monitor: &mut mysql_async::Conn) -> Option<String> {
    let path: Option<String> = monitor.query_first("SELECT @@socket").await.ok().flatten();
    path.filter(|p| std::path::Path::new(p).exists())
}
