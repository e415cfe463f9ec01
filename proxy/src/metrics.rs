//! Prometheus `/metrics`: a collector that reads the shared state at scrape time, served by a
//! tiny HTTP/1.1 responder (one request per connection; `GET /metrics` or 404).
//!
//! Nothing is counted twice: the counters live in `stats`, the gauges are read from the pool
//! and the client registry, the histograms from `latency`. The collector only renders them
//! with `prometheus-client`, which enforces the naming rules (`_total`, unit suffixes). The
//! topology's families (roles, lag, exclusions, alerts) are in `metrics/topology.rs`.

mod topology;

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::context::Context;
use crate::latency::Snapshot;
use crate::registry::ClientPhase;
use crate::stats::LimitReason;
use crate::stats::{
    BackendCloseReason, ClientCloseReason, ConnectFailure, PinReason, RecycleOutcome,
};

/// Histogram bucket upper bounds in µs: 50 µs to 30 s.
const BUCKETS_US: &[u64] = &[
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000,
];
/// A request head larger than this is not a scrape.
const MAX_REQUEST: usize = 8 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds the endpoint on `addr` and serves it until shutdown; returns the bound address.
pub async fn spawn(ctx: Arc<Context>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let mut registry = Registry::with_prefix("sluice");
    registry.register_collector(Box::new(SluiceCollector { ctx: ctx.clone() }));
    let registry = Arc::new(registry);
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                r = listener.accept() => r,
                _ = ctx.shutdown.cancelled() => return,
            };
            match accepted {
                Ok((socket, _)) => {
                    tokio::spawn(serve(registry.clone(), socket));
                }
                Err(e) => {
                    tracing::warn!("metrics accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    tracing::info!(%local, "metrics endpoint listening");
    Ok(local)
}

async fn serve(registry: Arc<Registry>, mut socket: TcpStream) {
    let Ok(Some(head)) = tokio::time::timeout(REQUEST_TIMEOUT, read_head(&mut socket)).await else {
        return;
    };
    let response = respond(&registry, &head);
    let _ = tokio::time::timeout(REQUEST_TIMEOUT, socket.write_all(&response)).await;
    let _ = socket.shutdown().await;
}

/// Reads up to the blank line that ends the request head. `None` if the peer closes first
/// or sends too much.
async fn read_head(socket: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(String::from_utf8_lossy(&buf[..end]).into_owned());
        }
        if buf.len() > MAX_REQUEST {
            return None;
        }
    }
}

/// The whole HTTP response for one request head.
fn respond(registry: &Registry, head: &str) -> Vec<u8> {
    let mut lines = head.lines();
    let mut request = lines.next().unwrap_or("").split_whitespace();
    let (method, target) = (request.next().unwrap_or(""), request.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if method != "GET" || path != "/metrics" {
        return http(
            404,
            "Not Found",
            "text/plain; charset=utf-8",
            b"not found: sluice serves GET /metrics\n",
        );
    }
    let openmetrics = lines.any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("accept") && v.contains("application/openmetrics-text")
        })
    });
    let mut body = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut body, registry) {
        tracing::warn!("metrics encoding failed: {e}");
        return http(
            500,
            "Internal Server Error",
            "text/plain; charset=utf-8",
            b"metrics encoding failed\n",
        );
    }
    let content_type = if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    };
    http(200, "OK", content_type, body.as_bytes())
}

fn http(code: u16, reason: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// Renders the proxy's state on each scrape.
struct SluiceCollector {
    ctx: Arc<Context>,
}

impl fmt::Debug for SluiceCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SluiceCollector")
    }
}

const PHASES: [ClientPhase; 5] = [
    ClientPhase::Login,
    ClientPhase::Idle,
    ClientPhase::Waiting,
    ClientPhase::Active,
    ClientPhase::IdleInTransaction,
];

impl Collector for SluiceCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let ctx = &*self.ctx;
        let s = &ctx.stats;
        let snap = ctx.pool.snapshot();
        let clients = ctx.registry.all();

        let mut by_phase = [0i64; PHASES.len()];
        let mut pinned = vec![0i64; PinReason::ALL.len()];
        for c in &clients {
            if let Some(i) = PHASES.iter().position(|p| *p == c.phase()) {
                by_phase[i] += 1;
            }
            if let Some(i) = c
                .pin()
                .and_then(|r| PinReason::ALL.iter().position(|x| *x == r))
            {
                pinned[i] += 1;
            }
        }
        let phases = PHASES.iter().map(|p| p.label()).zip(by_phase);
        gauge_family(
            &mut e,
            "clients",
            "Client sessions by state",
            "state",
            phases,
        )?;
        let in_use = i64::from(snap.open.saturating_sub(snap.idle + snap.to_reset));
        let backends = [
            ("idle", i64::from(snap.idle)),
            ("to_reset", i64::from(snap.to_reset)),
            ("in_use", in_use),
        ];
        gauge_family(
            &mut e,
            "backends",
            "Open backend connections by state",
            "state",
            backends,
        )?;
        let pins = PinReason::ALL.iter().map(|r| r.label()).zip(pinned);
        gauge_family(
            &mut e,
            "pinned_sessions",
            "Sessions pinned to their backend, by reason",
            "reason",
            pins,
        )?;
        let held: Vec<(&str, i64)> = crate::pool::Hold::all()
            .map(|h| {
                let n = snap
                    .pinned_by
                    .iter()
                    .find(|(x, _)| *x == h)
                    .map_or(0, |x| x.1);
                (h.label(), i64::from(n))
            })
            .collect();
        gauge_family(
            &mut e,
            "pinned_backends",
            "Backend connections pinned sessions hold between statements, by reason",
            "reason",
            held,
        )?;
        gauge(
            &mut e,
            "pinned_backends_max",
            "Backend connections pinned sessions may hold: max_backend_connections - pool_size",
            i64::from(snap.pinned_max),
        )?;
        if let Some(n) = snap.max_open_from_server {
            gauge(
                &mut e,
                "server_max_connections",
                "The backend's max_connections, from which max_backend_connections = auto is derived",
                i64::from(n),
            )?;
        }
        if let Some(n) = ctx.pool.slots().server_cpus(ctx.config().server_cpus) {
            gauge(
                &mut e,
                "server_cpus",
                "The backend's CPUs (server_cpus), which tell pipelining when it is saturated",
                i64::from(n),
            )?;
        }
        gauge(
            &mut e,
            "backend_up",
            "1 while the backend server accepts connections, 0 during an outage",
            i64::from(ctx.pool.backend_up()),
        )?;
        let failures = ConnectFailure::ALL
            .iter()
            .map(|r| (r.label(), s.connect_failures_by(*r)));
        counter_family(
            &mut e,
            "backend_connect_failures",
            "Failed backend connects, by kind",
            "kind",
            failures,
        )?;
        gauge(
            &mut e,
            "backends_max",
            "max_backend_connections in force",
            i64::from(snap.max_open),
        )?;
        gauge(
            &mut e,
            "pool_size",
            "Execution slots (pool_size in force)",
            i64::from(snap.pool_size),
        )?;
        gauge(
            &mut e,
            "pool_limit",
            "Concurrency limit in force (pool_size = auto moves it; fixed pool_size otherwise)",
            i64::from(snap.pool_size),
        )?;
        gauge(
            &mut e,
            "pool_auto",
            "1 while pool_size = auto sizes the pool",
            i64::from(ctx.limit.get().auto),
        )?;
        gauge(
            &mut e,
            "slots_in_use",
            "Execution slots held",
            i64::from(snap.slots_in_use),
        )?;
        gauge(
            &mut e,
            "queue_length",
            "Statements waiting for an execution slot",
            snap.waiting as i64,
        )?;
        gauge(
            &mut e,
            "paused",
            "1 while the admin console has paused the proxy",
            i64::from(*ctx.paused.borrow()),
        )?;

        counter(
            &mut e,
            "clients_accepted",
            "Client connections accepted",
            s.clients_accepted.load(Relaxed),
        )?;
        counter(
            &mut e,
            "statements",
            "Statements received from clients",
            s.statements.load(Relaxed),
        )?;
        for (name, help, n) in s.pipeline.rows().into_iter().chain(s.busy_poll.rows()) {
            counter(&mut e, name, help, n)?;
        }
        counter(
            &mut e,
            "queue_timeouts",
            "Statements that got error 9001 after queue_timeout",
            s.queue_timeouts.load(Relaxed),
        )?;
        counter(
            &mut e,
            "pin_refusals",
            "Statements refused with 9005: they would have pinned and no pinned place freed up within pin_wait",
            s.pin_refusals.load(Relaxed),
        )?;
        counter(
            &mut e,
            "pin_overflows",
            "Sessions that pinned after their statement ran while every pinned place was taken",
            s.pin_overflows.load(Relaxed),
        )?;
        counter(
            &mut e,
            "backend_connects",
            "Backend connections opened",
            s.backend_connects.load(Relaxed),
        )?;
        counter(
            &mut e,
            "control_connects",
            "Control connections opened for login-time default-database checks",
            s.control_connects.load(Relaxed),
        )?;
        counter(
            &mut e,
            "replays",
            "Session-state replays onto a backend",
            s.replays.load(Relaxed),
        )?;
        let errors = [
            ("sent_to_client", s.client_errors.load(Relaxed)),
            ("backend_connect", s.backend_connect_errors.load(Relaxed)),
            ("queue_timeout", s.queue_timeouts.load(Relaxed)),
        ];
        counter_family(&mut e, "errors", "Errors by kind", "kind", errors)?;
        let closes = ClientCloseReason::ALL
            .iter()
            .map(|r| (r.label(), s.client_closes_by(*r)));
        counter_family(
            &mut e,
            "client_disconnects",
            "Client sessions ended, by reason",
            "reason",
            closes,
        )?;
        let closes = BackendCloseReason::ALL
            .iter()
            .map(|r| (r.label(), s.backend_closes_by(*r)));
        counter_family(
            &mut e,
            "backend_disconnects",
            "Backend connections closed, by reason",
            "reason",
            closes,
        )?;
        let pins = PinReason::ALL.iter().map(|r| (r.label(), s.pins_by(*r)));
        counter_family(&mut e, "pins", "Sessions pinned, by reason", "reason", pins)?;
        let recycles = RecycleOutcome::ALL
            .iter()
            .map(|r| (r.label(), s.recycles_by(*r)));
        counter_family(
            &mut e,
            "recycles",
            "Backends returned to the pool, by decision",
            "outcome",
            recycles,
        )?;
        let limits = LimitReason::ALL
            .iter()
            .map(|r| (r.label(), s.limit_changes_by(*r)));
        counter_family(
            &mut e,
            "pool_limit_changes",
            "pool_size = auto limit changes, by reason",
            "reason",
            limits,
        )?;
        {
            let m = e.encode_descriptor(
                "client_sent",
                "Bytes relayed to clients",
                Some(&Unit::Bytes),
                MetricType::Counter,
            )?;
            ConstCounter::new(s.bytes_to_clients.load(Relaxed)).encode(m)?;
        }

        topology::encode(&mut e, ctx)?;

        let queue_wait = ctx.latency.queue_wait.snapshot();
        histogram(
            &mut e,
            "queue_wait",
            "Wait for an execution slot and a ready backend",
            &queue_wait,
        )?;
        let backend_time = ctx.latency.backend_time.snapshot();
        histogram(
            &mut e,
            "backend_time",
            "Statement time on the backend, response relay included",
            &backend_time,
        )?;
        Ok(())
    }
}

fn gauge(e: &mut DescriptorEncoder, name: &str, help: &str, v: i64) -> fmt::Result {
    let m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    ConstGauge::new(v).encode(m)
}

fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, v: u64) -> fmt::Result {
    let m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    ConstCounter::new(v).encode(m)
}

fn gauge_family<'a>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: impl IntoIterator<Item = (&'a str, i64)>,
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (value, v) in values {
        let labels = [(label, value)];
        ConstGauge::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn counter_family<'a>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    label: &str,
    values: impl IntoIterator<Item = (&'a str, u64)>,
) -> fmt::Result {
    let mut m = e.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (value, v) in values {
        let labels = [(label, value)];
        ConstCounter::new(v).encode(m.encode_family(&labels)?)?;
    }
    Ok(())
}

fn histogram(e: &mut DescriptorEncoder, name: &str, help: &str, snap: &Snapshot) -> fmt::Result {
    let counts = snap.buckets(BUCKETS_US);
    let bounds = BUCKETS_US
        .iter()
        .map(|us| *us as f64 / 1e6)
        .chain(std::iter::once(f64::MAX));
    let buckets: Vec<(f64, u64)> = bounds.zip(counts).collect();
    let mut m = e.encode_descriptor(name, help, Some(&Unit::Seconds), MetricType::Histogram)?;
    m.encode_histogram::<()>(snap.sum_us() as f64 / 1e6, snap.count(), &buckets, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_is_served() {
        let registry = Registry::default();
        let ok = String::from_utf8(respond(&registry, "GET /metrics HTTP/1.1\r\nHost: x")).unwrap();
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4"),
            "{ok}"
        );
        assert!(ok.ends_with("# EOF\n"), "{ok}");
        let om = String::from_utf8(respond(
            &registry,
            "GET /metrics?x=1 HTTP/1.1\r\nAccept: application/openmetrics-text",
        ))
        .unwrap();
        assert!(
            om.contains("Content-Type: application/openmetrics-text"),
            "{om}"
        );
        for head in [
            "GET / HTTP/1.1",
            "POST /metrics HTTP/1.1",
            "",
            "GET /metricsx HTTP/1.0",
        ] {
            let r = String::from_utf8(respond(&registry, head)).unwrap();
            assert!(r.starts_with("HTTP/1.1 404 Not Found\r\n"), "{head:?}: {r}");
        }
    }

    #[test]
    fn content_length_matches_the_body() {
        let r = http(200, "OK", "text/plain", b"abc\n");
        let text = String::from_utf8(r).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains("Content-Length: 4"));
        assert_eq!(body, "abc\n");
    }
}
