//! Prometheus `/metrics`: a collector that reads the shared state at scrape time, served by a
//! tiny HTTP/1.1 responder (one request per connection; `GET /metrics` or 404).
//!
//! Nothing is counted twice: the counters live in `stats`, the gauges are read from the pool
//! and the client registry, the histograms from `latency`. The collector only renders them
//! with `prometheus-client`, which enforces the naming rules (`_total`, unit suffixes). The
//! proxy's own families are tables in `metrics/families.rs`; the topology's families (roles, lag, exclusions, alerts) are in `metrics/topology.rs`, the
//! digests' and query rules' in `metrics/steer.rs`, the account directory's in
//! `metrics/accounts.rs`.

mod accounts;
mod families;
mod steer;
mod topology;

use std::fmt;
use std::net::SocketAddr;
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
use families::{Family, Reading, Scrape};

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

impl Collector for SluiceCollector {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let ctx = &*self.ctx;
        let scrape = Scrape::read(ctx);
        write_families(&mut e, &scrape, families::STATE)?;
        let s = &ctx.stats;
        for (name, help, n) in s.pipeline.rows().into_iter().chain(s.busy_poll.rows()) {
            counter(&mut e, name, help, n)?;
        }
        write_families(&mut e, &scrape, families::OUTCOMES)?;
        topology::encode(&mut e, ctx)?;
        steer::encode(&mut e, ctx)?;
        accounts::encode(&mut e, ctx)?;
        write_families(&mut e, &scrape, families::LATENCY)
    }
}

/// Writes each family of a table, in its order.
fn write_families(e: &mut DescriptorEncoder, scrape: &Scrape<'_>, table: &[Family]) -> fmt::Result {
    for f in table {
        let (name, help) = (f.name, f.help);
        match (f.read)(scrape) {
            Reading::Gauge(v) => gauge(e, name, help, v)?,
            Reading::Counter(v) => counter(e, name, help, v)?,
            Reading::Bytes(v) => {
                let m = e.encode_descriptor(name, help, Some(&Unit::Bytes), MetricType::Counter)?;
                ConstCounter::new(v).encode(m)?;
            }
            Reading::Gauges(label, values) => gauge_family(e, name, help, label, values)?,
            Reading::Counters(label, values) => counter_family(e, name, help, label, values)?,
            Reading::Histogram(snap) => histogram(e, name, help, &snap)?,
            Reading::Absent => {}
        }
    }
    Ok(())
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

    /// Every row of the tables is written once, in table order, with its help; the
    /// counters carry what `stats` holds.
    #[tokio::test]
    async fn a_scrape_writes_each_family_once() {
        use std::sync::atomic::Ordering::Relaxed;
        let config = crate::config::Config::from_toml_str(
            "server_cpus = 4\n[[users]]\nname = \"app\"\npassword = \"secret\"\n",
        )
        .unwrap();
        let handshake = crate::conn::client::HandshakeContext {
            server: Default::default(),
            version_override: None,
            rsa: Default::default(),
            sha2_cache: Default::default(),
            tls: None,
            auth_failures: Default::default(),
            accounts: crate::accounts::Directory::new(Arc::new(
                crate::conn::account_table::AccountTable::new(None),
            )),
        };
        let ctx = Context::new(config, handshake, Default::default(), None, None);
        ctx.stats.statements.fetch_add(7, Relaxed);
        ctx.stats.bytes_to_clients.fetch_add(1234, Relaxed);
        let mut registry = Registry::with_prefix("sluice");
        registry.register_collector(Box::new(SluiceCollector { ctx: ctx.clone() }));
        let mut body = String::new();
        prometheus_client::encoding::text::encode(&mut body, &registry).unwrap();

        // A unit adds its suffix to the name: `client_sent_bytes`, `queue_wait_seconds`.
        let helps: Vec<&str> = body.lines().filter(|l| l.starts_with("# HELP ")).collect();
        let mut last = 0;
        for table in [families::STATE, families::OUTCOMES, families::LATENCY] {
            // server_max_connections is absent until a pool reads it from a server.
            for f in table.iter().filter(|f| f.name != "server_max_connections") {
                let at: Vec<usize> = (0..helps.len())
                    .filter(|i| {
                        ["", "_bytes", "_seconds"].iter().any(|unit| {
                            helps[*i] == format!("# HELP sluice_{}{unit} {}", f.name, f.help)
                        })
                    })
                    .collect();
                assert_eq!(at.len(), 1, "{}: {at:?}\n{body}", f.name);
                assert!(at[0] >= last, "{} is out of table order", f.name);
                last = at[0];
            }
        }
        assert!(body.contains("\nsluice_statements_total 7\n"), "{body}");
        assert!(
            body.contains("\nsluice_client_sent_bytes_total 1234\n"),
            "{body}"
        );
        assert!(body.contains("\nsluice_server_cpus 4\n"), "{body}");
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
