//! Load acceptance: 512 clients with session variables or prepared statements
//! stay multiplexed over P=4 without pinning, and `KILL QUERY` through sluice is prompt.
//! Sizes are fixed; timings here are limits against hangs, not performance assertions.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{Conn, OptsBuilder};
use sluice::stats::PinReason;
use sluice::ProxyHandle;
use tokio::sync::Barrier;

use crate::harness::*;

const CLIENTS: usize = 512;
const POOL: u32 = 4;
/// Backends allowed beyond the pool size (a replacement racing a close, the control
/// connection for KILL).
const SLACK: u32 = 4;

/// Samples the pool's open backend count until stopped; returns the highest seen.
fn watch_open_backends(proxy: &ProxyHandle) -> (Arc<AtomicBool>, tokio::task::JoinHandle<u32>) {
    let stop = Arc::new(AtomicBool::new(false));
    let ctx = proxy.context().clone();
    let flag = stop.clone();
    let task = tokio::spawn(async move {
        let mut max = 0;
        while !flag.load(Ordering::Relaxed) {
            max = max.max(ctx.pool.snapshot().open);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        max.max(ctx.pool.snapshot().open)
    });
    (stop, task)
}

fn assert_no_pins(proxy: &ProxyHandle) {
    for reason in PinReason::ALL {
        assert_eq!(
            proxy.context().stats.pins_by(*reason),
            0,
            "a session was pinned for {reason}"
        );
    }
}

/// Connects client `i` after a short stagger, so 512 connections ramp in over about a second.
async fn ramp_connect(opts: mysql_async::Opts, i: usize) -> Conn {
    tokio::time::sleep(Duration::from_millis(2 * i as u64)).await;
    let mut last = None;
    // A connect may be refused while the accept backlog is full; retry briefly.
    for _ in 0..5 {
        match Conn::new(opts.clone()).await {
            Ok(c) => return c,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("client {i} cannot connect: {last:?}");
}

const MODES: [&str; 8] = [
    "ANSI_QUOTES",
    "STRICT_ALL_TABLES",
    "NO_ZERO_DATE",
    "PIPES_AS_CONCAT",
    "IGNORE_SPACE",
    "NO_BACKSLASH_ESCAPES",
    "HIGH_NOT_PRECEDENCE",
    "NO_UNSIGNED_SUBTRACTION",
];

/// Client `i`'s own sql_mode (256 distinct sets) and time zone (96 distinct offsets).
fn session_of(i: usize) -> (BTreeSet<&'static str>, String) {
    let modes = MODES
        .iter()
        .enumerate()
        .filter(|(b, _)| (i % 256) >> b & 1 == 1)
        .map(|(_, m)| *m)
        .collect();
    let hours = (i % 24) as i32 - 11;
    let minutes = (i / 24 % 4) * 15;
    (modes, format!("{hours:+03}:{minutes:02}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_variables_of_512_clients_stay_multiplexed_without_pins() {
    fresh_db("t_acc_vars").await;
    let mut d = direct(Some("t_acc_vars")).await;
    d.query_drop("CREATE TABLE kv (id INT PRIMARY KEY, v INT)")
        .await
        .unwrap();
    d.query_drop("INSERT INTO kv SELECT seq, seq * 3 FROM seq_1_to_100")
        .await
        .unwrap();
    d.disconnect().await.unwrap();
    let mut cfg = config(POOL);
    cfg.queue_timeout = Duration::from_secs(30);
    let proxy = start(cfg).await;
    let (stop, watcher) = watch_open_backends(&proxy);
    let all_in = Arc::new(Barrier::new(CLIENTS));
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let opts = opts(&proxy, "app", "secret", Some("t_acc_vars"));
        let all_in = all_in.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = ramp_connect(opts, i).await;
            let (modes, tz) = session_of(i);
            let mode_list = modes.iter().copied().collect::<Vec<_>>().join(",");
            c.query_drop("SET NAMES utf8mb4").await.unwrap();
            c.query_drop(format!(
                "SET SESSION sql_mode = '{mode_list}', time_zone = '{tz}'"
            ))
            .await
            .unwrap();
            // Everyone is connected before the hammering starts: 512 sessions at once.
            all_in.wait().await;
            for round in 0..12 {
                let id = (i * 7 + round) % 100 + 1;
                let v: Option<i64> = c
                    .query_first(format!("SELECT v FROM kv WHERE id = {id}"))
                    .await
                    .unwrap();
                assert_eq!(v, Some(id as i64 * 3), "client {i}");
                if round % 4 == 3 {
                    let (mode, zone, cs): (String, String, String) = c
                        .query_first("SELECT @@sql_mode, @@time_zone, @@character_set_client")
                        .await
                        .unwrap()
                        .unwrap();
                    let got: BTreeSet<&str> = mode.split(',').filter(|m| !m.is_empty()).collect();
                    assert_eq!(got, modes, "client {i} reads back its own sql_mode");
                    assert_eq!(zone, tz, "client {i} reads back its own time_zone");
                    assert_eq!(cs, "utf8mb4", "client {i}");
                }
            }
            c.disconnect().await.unwrap();
        }));
    }
    for t in tasks {
        t.await.expect("client task");
    }
    stop.store(true, Ordering::Relaxed);
    let max_open = watcher.await.unwrap();
    eprintln!("{CLIENTS} clients with session variables, P={POOL}: at most {max_open} backends");
    assert!(
        max_open <= POOL + SLACK,
        "{max_open} backend connections for {CLIENTS} clients over P={POOL}"
    );
    assert_no_pins(&proxy);
    proxy.shutdown().await;
}

const STATEMENTS: [&str; 5] = [
    "SELECT ? + 1",
    "SELECT CONCAT('s', ?)",
    "SELECT ? * 2, ?",
    "SELECT COUNT(*) FROM seq_1_to_50 WHERE seq <= ?",
    "SELECT UPPER(?), LENGTH(?)",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_of_512_clients_respect_the_per_backend_cap() {
    // A private server, so its global prepared-statement count is sluice's alone.
    let server = private_server().await;
    let cap = 3u32;
    let mut cfg = config_for_local(&server, POOL);
    cfg.max_prepared_statements_per_backend = cap;
    cfg.queue_timeout = Duration::from_secs(30);
    let proxy = start(cfg).await;
    let (stop, watcher) = watch_open_backends(&proxy);
    let mut most_prepared = 0u32;
    let addr = proxy.local_addr();
    let mut tasks = Vec::new();
    for i in 0..CLIENTS {
        let opts = OptsBuilder::default()
            .ip_or_hostname(addr.ip().to_string())
            .tcp_port(addr.port())
            .user(Some("app"))
            .pass(Some("secret"))
            .db_name(Some(dbkit::server::BENCH_DB))
            .prefer_socket(false)
            // The driver's own statement cache: each client prepares each statement once.
            .stmt_cache_size(16)
            .into();
        tasks.push(tokio::spawn(async move {
            let mut c = ramp_connect(opts, i).await;
            for round in 0..10 {
                let n = (i * 10 + round) as i64;
                let s = format!("c{i}r{round}");
                match round % 5 {
                    0 => {
                        let v: Option<i64> = c.exec_first(STATEMENTS[0], (n,)).await.unwrap();
                        assert_eq!(v, Some(n + 1));
                    }
                    1 => {
                        let v: Option<String> = c.exec_first(STATEMENTS[1], (&s,)).await.unwrap();
                        assert_eq!(v, Some(format!("s{s}")));
                    }
                    2 => {
                        let v: Option<(i64, String)> =
                            c.exec_first(STATEMENTS[2], (n, &s)).await.unwrap();
                        assert_eq!(v, Some((n * 2, s.clone())));
                    }
                    3 => {
                        let k = n % 50 + 1;
                        let v: Option<i64> = c.exec_first(STATEMENTS[3], (k,)).await.unwrap();
                        assert_eq!(v, Some(k));
                    }
                    _ => {
                        let v: Option<(String, i64)> =
                            c.exec_first(STATEMENTS[4], (&s, &s)).await.unwrap();
                        assert_eq!(v, Some((s.to_uppercase(), s.len() as i64)));
                    }
                }
            }
            c.disconnect().await.unwrap();
        }));
    }
    // Meanwhile, the server's own count of prepared statements stays within cap × backends.
    let mut admin = Conn::new(
        OptsBuilder::default()
            .ip_or_hostname(server.addr().ip().to_string())
            .tcp_port(server.addr().port())
            .user(Some(dbkit::server::BENCH_USER))
            .pass(Some(dbkit::server::BENCH_PASSWORD))
            .prefer_socket(false),
    )
    .await
    .expect("direct connection to the private server");
    while tasks.iter().any(|t| !t.is_finished()) {
        let row: Option<(String, u32)> = admin
            .query_first("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'")
            .await
            .unwrap();
        let n = row.map_or(0, |(_, n)| n);
        most_prepared = most_prepared.max(n);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for t in tasks {
        t.await.expect("client task");
    }
    stop.store(true, Ordering::Relaxed);
    let max_open = watcher.await.unwrap();
    assert!(max_open <= POOL + SLACK, "{max_open} backends");
    let mut per_backend = Vec::new();
    proxy
        .context()
        .pool
        .for_each_idle(|b| per_backend.push(b.stmts.len()));
    assert!(
        !per_backend.is_empty(),
        "idle backends remain after the run"
    );
    assert!(
        per_backend.iter().all(|&n| n <= cap as usize),
        "prepared statements per idle backend {per_backend:?} exceed the cap {cap}"
    );
    let most = most_prepared;
    eprintln!(
        "{CLIENTS} clients, P={POOL}: at most {max_open} backends, {most} server-side statements, \
         idle backends hold {per_backend:?}"
    );
    assert!(most > 0, "the server saw the prepared statements");
    // An evicted statement's COM_STMT_CLOSE (which has no response) goes out with that
    // backend's next write, so for a moment the server may hold one more than the cap.
    assert!(
        most <= (cap + 1) * max_open,
        "the server held {most} prepared statements at once on {max_open} backends"
    );
    assert_no_pins(&proxy);
    admin.disconnect().await.unwrap();
    proxy.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_through_sluice_interrupts_a_sleep_promptly() {
    let proxy = start(config(2)).await;
    let mut victim = connect(&proxy, None).await;
    let id: u32 = victim
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(id, victim.id(), "CONNECTION_ID() is sluice's handshake id");
    let sleeper = tokio::spawn(async move {
        let started = Instant::now();
        let r: Result<Option<i64>, _> = victim.query_first("SELECT SLEEP(10)").await;
        (victim, r, started.elapsed())
    });
    // Let the SLEEP reach the backend.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut killer = connect(&proxy, None).await;
    let kill_at = Instant::now();
    killer.query_drop(format!("KILL QUERY {id}")).await.unwrap();
    let (mut victim, result, ran_for) = tokio::time::timeout(Duration::from_secs(15), sleeper)
        .await
        .expect("the victim's query returns")
        .unwrap();
    let after_kill = kill_at.elapsed();
    eprintln!("KILL QUERY: the SLEEP returned {after_kill:?} after the kill ({result:?})");
    match &result {
        // MariaDB ends an interrupted SLEEP with 1 (or, in some versions, error 1317).
        Ok(v) => assert_eq!(*v, Some(1), "interrupted SLEEP returns 1"),
        Err(e) => assert_eq!(code_of(e), Some(1317), "{e}"),
    }
    assert!(
        after_kill < Duration::from_secs(1) && ran_for < Duration::from_secs(2),
        "KILL QUERY took {after_kill:?} (the query ran {ran_for:?})"
    );
    // Only the query died: the session goes on, with the same id.
    let again: u32 = victim
        .query_first("SELECT CONNECTION_ID()")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(again, id);
    victim.disconnect().await.unwrap();
    killer.disconnect().await.unwrap();
    proxy.shutdown().await;
}
