//! SHOW SERVERS and /metrics in front of a real dbkit [`Cluster`] (a primary and two GTID
//! replicas): each server's role, lag, GTID position, check state and why it is excluded,
//! and the alerts (a writable replica, split brain), as an operator sees them.
//!
//! sluice logs in to the servers with the cluster's application account and monitors them
//! with its monitor account (SLAVE MONITOR only); neither is root.

mod common;
use common::{blocking, cluster_with, WAIT};

use std::collections::HashMap;
use std::time::{Duration, Instant};

use dbkit::replication::{Threads, APP_PASSWORD, APP_USER, MONITOR_PASSWORD, MONITOR_USER};
use dbkit::Cluster;
use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder, Row};
use sluice::config::{Endpoint, PoolSize, ReadWriteSplit, Secret, UserConfig};
use sluice::{Config, Proxy, ProxyHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn config(cluster: &Cluster) -> Config {
    let addrs: Vec<String> = (0..cluster.len())
        .map(|i| cluster.addr(i).to_string())
        .collect();
    let mut cfg = Config::for_backend(addrs[0].clone(), "app", "secret");
    cfg.servers = addrs.iter().map(|a| Endpoint::parse(a)).collect();
    cfg.users[0].backend_user = Some(APP_USER.into());
    cfg.users[0].backend_password = Some(Secret::new(APP_PASSWORD.into()));
    cfg.monitor_user = Some(MONITOR_USER.into());
    cfg.monitor_password = Some(Secret::new(MONITOR_PASSWORD.into()));
    cfg.monitor_interval = Duration::from_millis(100);
    cfg.read_write_split = ReadWriteSplit::On;
    cfg.pool_size = PoolSize::Fixed(2);
    cfg.admin_listen = Some("127.0.0.1:0".parse().unwrap());
    cfg.metrics_listen = Some("127.0.0.1:0".parse().unwrap());
    cfg.admin_users = vec![UserConfig::new("admin", "s3cret")];
    cfg
}

async fn admin(proxy: &ProxyHandle) -> Conn {
    let addr = proxy.admin_addr().expect("admin console is on");
    let opts = OptsBuilder::default()
        .ip_or_hostname(addr.ip().to_string())
        .tcp_port(addr.port())
        .user(Some("admin"))
        .pass(Some("s3cret"))
        .prefer_socket(false)
        .max_allowed_packet(Some(64 << 20))
        .wait_timeout(Some(28800))
        .stmt_cache_size(0);
    Conn::new(opts).await.expect("admin login")
}

type Line = HashMap<String, Option<String>>;

async fn show_servers(a: &mut Conn) -> Vec<Line> {
    let rows: Vec<Row> = a.query("SHOW SERVERS").await.expect("SHOW SERVERS");
    rows.into_iter()
        .map(|row| {
            let names: Vec<String> = row
                .columns_ref()
                .iter()
                .map(|c| c.name_str().into_owned())
                .collect();
            let values: Vec<Option<String>> = (0..names.len())
                .map(|i| row.get::<Option<String>, _>(i).flatten())
                .collect();
            names.into_iter().zip(values).collect()
        })
        .collect()
}

fn cell<'a>(line: &'a Line, name: &str) -> Option<&'a str> {
    line.get(name).and_then(|v| v.as_deref())
}

/// The topology rows (one per configured server), in server order.
fn server_rows(lines: &[Line]) -> Vec<&Line> {
    let mut v: Vec<&Line> = lines
        .iter()
        .filter(|l| cell(l, "state").is_some_and(|s| s.starts_with("server_")))
        .collect();
    v.sort_by_key(|l| cell(l, "server").and_then(|s| s.parse::<u32>().ok()));
    v
}

fn alerts(lines: &[Line]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| cell(l, "state") == Some("alert"))
        .filter_map(|l| cell(l, "alert").map(str::to_string))
        .collect()
}

/// Polls SHOW SERVERS until `pred` holds; panics with the last answer.
async fn until(a: &mut Conn, what: &str, pred: impl Fn(&[Line]) -> bool) -> Vec<Line> {
    let deadline = Instant::now() + WAIT;
    loop {
        let lines = show_servers(a).await;
        if pred(&lines) {
            return lines;
        }
        if Instant::now() > deadline {
            panic!("{what}: not seen within {WAIT:?}; last SHOW SERVERS: {lines:#?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn roles(lines: &[Line]) -> Vec<String> {
    server_rows(lines)
        .iter()
        .map(|l| cell(l, "role").unwrap_or("").to_string())
        .collect()
}

async fn metrics(proxy: &ProxyHandle) -> String {
    let addr = proxy.metrics_addr().expect("metrics on");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: sluice\r\n\r\n")
        .await
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// The value of the one sample whose name and labels contain every fragment.
fn sample(body: &str, name: &str, labels: &[&str]) -> Option<f64> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| labels.iter().all(|f| l.contains(f)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_servers_and_metrics_follow_roles_lag_exclusions_and_alerts() {
    let cluster = cluster_with(&["INSERT INTO app.t VALUES (1)"]).await;
    let proxy = Proxy::bind(config(&cluster)).await.expect("sluice starts");
    let mut a = admin(&proxy).await;

    // Healthy: one writer, two replicas, their lag and GTID positions; no alert.
    let lines = until(&mut a, "roles", |l| {
        roles(l) == ["writer", "replica", "replica"] && alerts(l).is_empty()
    })
    .await;
    let rows = server_rows(&lines);
    let primary_pos = blocking(|| cluster.gtid_binlog_pos(0)).expect("binlog pos");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(cell(row, "state"), Some("server_up"), "{row:?}");
        assert_eq!(
            cell(row, "backend"),
            Some(cluster.addr(i).to_string().as_str())
        );
        assert_eq!(cell(row, "excluded"), None, "{row:?}");
        assert_eq!(cell(row, "lag_s"), Some("0"), "{row:?}");
        let pos = cell(row, "gtid_position").expect("a GTID position");
        assert!(
            pos.contains(primary_pos.trim()),
            "server {i} at {pos}, primary at {primary_pos}"
        );
    }
    // The pools' rows carry the server index too, and the identity rows stay.
    let pool_states: Vec<(&str, &str)> = lines
        .iter()
        .filter(|l| cell(l, "state") == Some("backend_up"))
        .filter_map(|l| Some((cell(l, "server")?, cell(l, "backend")?)))
        .collect();
    assert_eq!(pool_states.len(), 3, "{lines:#?}");

    let body = metrics(&proxy).await;
    let s0 = "server=\"0\"";
    assert_eq!(
        sample(&body, "sluice_server_role", &[s0, "role=\"writer\""]),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        sample(
            &body,
            "sluice_server_role",
            &["server=\"1\"", "role=\"replica\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &body,
            "sluice_server_role",
            &["server=\"1\"", "role=\"writer\""]
        ),
        Some(0.0)
    );
    assert_eq!(sample(&body, "sluice_writer_present", &[]), Some(1.0));
    assert_eq!(
        sample(
            &body,
            "sluice_server_excluded",
            &["server=\"2\"", "reason=\"none\""]
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(&body, "sluice_server_lag_seconds", &["server=\"1\""]),
        Some(0.0)
    );
    assert_eq!(
        sample(&body, "sluice_server_up", &["server=\"2\""]),
        Some(1.0)
    );
    assert!(sample(&body, "sluice_monitor_rounds_total", &[]).is_some_and(|r| r >= 1.0));
    assert_eq!(
        sample(&body, "sluice_topology_alerts", &["kind=\"split_brain\""]),
        Some(0.0)
    );

    // Reads through sluice (the split is on) are counted by the server that ran them, and
    // the routing counters name server, route and why.
    let mut c = Conn::new(
        OptsBuilder::default()
            .ip_or_hostname("127.0.0.1")
            .tcp_port(proxy.local_addr().port())
            .user(Some("app"))
            .pass(Some("secret"))
            .prefer_socket(false)
            // Set, so the driver sends no SELECT of its own at connect.
            .max_allowed_packet(Some(64 << 20))
            .wait_timeout(Some(28800)),
    )
    .await
    .expect("client through sluice");
    for _ in 0..10 {
        let n: u64 = c
            .query_first("SELECT COUNT(*) FROM app.t")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, 1);
    }
    c.query_drop("INSERT INTO app.t VALUES (2)").await.unwrap();
    let body = metrics(&proxy).await;
    let replica_reads: f64 = ["server=\"1\"", "server=\"2\""]
        .iter()
        .filter_map(|s| sample(&body, "sluice_reads_total", &[s]))
        .sum();
    assert_eq!(replica_reads, 10.0, "{body}");
    let routed_reads: f64 = ["server=\"1\"", "server=\"2\""]
        .iter()
        .filter_map(|s| sample(&body, "sluice_routed_total", &[s, "route=\"replica\""]))
        .sum();
    assert_eq!(routed_reads, 10.0, "{body}");
    assert!(
        sample(&body, "sluice_routed_total", &[s0, "route=\"writer\""]).is_some_and(|n| n >= 1.0),
        "the INSERT went to the writer: {body}"
    );
    assert!(sample(&body, "sluice_ryw_fallbacks_total", &[]).is_some());
    c.disconnect().await.unwrap();

    // A stopped SQL thread: excluded, with its reason, in both places.
    blocking(|| cluster.stop_replication(1, Threads::Sql)).expect("STOP SLAVE SQL_THREAD");
    let lines = until(&mut a, "replica 1 excluded", |l| {
        roles(l).get(1).map(String::as_str) == Some("excluded")
    })
    .await;
    let row = server_rows(&lines)[1];
    assert_eq!(cell(row, "excluded"), Some("SQL thread stopped"), "{row:?}");
    assert_eq!(
        cell(row, "lag_s"),
        None,
        "lag NULL is unknown, never 0: {row:?}"
    );
    let body = metrics(&proxy).await;
    assert_eq!(
        sample(
            &body,
            "sluice_server_excluded",
            &["server=\"1\"", "reason=\"sql_thread_stopped\""]
        ),
        Some(1.0),
        "{body}"
    );
    assert_eq!(
        sample(
            &body,
            "sluice_server_role",
            &["server=\"1\"", "role=\"excluded\""]
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&body, "sluice_server_lag_seconds", &["server=\"1\""]),
        None,
        "no lag sample while it is unknown"
    );
    blocking(|| cluster.start_replication(1, Threads::Sql)).expect("START SLAVE SQL_THREAD");
    until(&mut a, "replica 1 back", |l| {
        roles(l) == ["writer", "replica", "replica"]
    })
    .await;

    // read_only=OFF on a replica: excluded, and an alert names it.
    blocking(|| cluster.set_read_only(2, false)).expect("read_only=0");
    let lines = until(&mut a, "writable replica alert", |l| {
        alerts(l)
            .iter()
            .any(|a| a.contains("server 2") && a.contains("read_only=OFF"))
    })
    .await;
    assert_eq!(
        cell(server_rows(&lines)[2], "excluded"),
        Some("read_only=OFF while replicating")
    );
    let body = metrics(&proxy).await;
    assert_eq!(
        sample(
            &body,
            "sluice_topology_alerts",
            &["kind=\"writable_replica\""]
        ),
        Some(1.0),
        "{body}"
    );

    // It stops replicating too: a second writable server that replicates from nobody is
    // split brain. The alert is shown; whether writes wait or stay with the agreed writer is
    // the roles' rule, so only the alert and the rival's exclusion are checked here.
    blocking(|| cluster.stop_replication(2, Threads::Both)).expect("STOP SLAVE");
    let lines = until(&mut a, "split brain alert", |l| {
        alerts(l).iter().any(|a| a.contains("split brain"))
    })
    .await;
    // Never two writers: the rival is excluded (or, if a check of the agreed writer failed
    // just then, the roles changed hands and the old writer is the rival).
    let writers = roles(&lines).iter().filter(|r| *r == "writer").count();
    assert!(writers <= 1, "{lines:#?}");
    let rivals = server_rows(&lines)
        .iter()
        .filter_map(|l| cell(l, "excluded"))
        .filter(|why| why.contains("competing writer"))
        .count();
    assert!(rivals > 0 || writers == 0, "{lines:#?}");
    let body = metrics(&proxy).await;
    let split = sample(&body, "sluice_topology_alerts", &["kind=\"split_brain\""]).unwrap_or(0.0)
        + sample(
            &body,
            "sluice_topology_alerts",
            &["kind=\"ambiguous_writers\""],
        )
        .unwrap_or(0.0);
    assert_eq!(split, 1.0, "{body}");
    // Within one scrape: writer_present is 1 exactly when some server has the writer role.
    let writer_present = sample(&body, "sluice_writer_present", &[]).expect("writer_present");
    let writer_roles: f64 = (0..3)
        .filter_map(|i| {
            let server = format!("server=\"{i}\"");
            sample(&body, "sluice_server_role", &[&server, "role=\"writer\""])
        })
        .sum();
    assert_eq!(writer_present, writer_roles, "{body}");

    drop(a);
    proxy.shutdown().await;
    drop(cluster);
}
