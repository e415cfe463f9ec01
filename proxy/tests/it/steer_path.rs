//! Digests, query rules and per-user limits on the statement path, end to end against the
//! real MariaDB: sysbench's statements counted as performance_schema counts them, a table
//! that stays at its bound under unique statements, prepared statements digested by their
//! text, a block that never reaches the server (its general log), a rule's gate of 2 under
//! 100 clients, and per-user limits at login, at COM_CHANGE_USER and per statement.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::*;
use mysql_async::{ChangeUserOpts, Conn};
use sluice::classify::{digest, Quoting};
use sluice::config::{Secret, UserConfig};
use sluice::{Config, ProxyHandle};

use crate::admin::{admin, admin_config, cell, num, rows};
use crate::harness::*;

/// A config for sluice in front of `backend` with its console on, user `app` mapped to the
/// application account, and `rules` (TOML `[[rules]]` tables) appended.
fn config_with_rules(backend: &str, pool_size: u32, rules: &str) -> Config {
    let file = format!(
        "backend = \"{backend}\"\nlisten = \"127.0.0.1:0\"\npool_size = {pool_size}\n\
         queue_timeout = \"10s\"\nadmin_listen = \"127.0.0.1:0\"\n\n\
         [[users]]\nname = \"app\"\npassword = \"secret\"\n\
         backend_user = \"{APP_USER}\"\nbackend_password = \"{APP_PASSWORD}\"\n\n\
         [[admin_users]]\nname = \"admin\"\npassword = \"s3cret\"\n{rules}"
    );
    Config::from_toml_str(&file).expect("a valid config")
}

async fn app(proxy: &ProxyHandle, db: Option<&str>) -> Conn {
    Conn::new(opts_at(proxy.local_addr(), "app", "secret", db))
        .await
        .expect("app logs in through sluice")
}

/// A digest text as both sides can be compared: performance_schema quotes every name,
/// upper-cases keywords, spaces every token and writes a list as `(...)`; sluice keeps the
/// text's own case and quoting and writes a list of values as `(?+)`.
fn comparable(text: &str) -> String {
    text.replace("(?+)", "(...)")
        .replace("DISTINCTROW", "DISTINCT")
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '`')
        .collect::<String>()
        .to_uppercase()
}

async fn sysbench(args: &[String]) -> String {
    let out = tokio::process::Command::new("sysbench")
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .expect("sysbench runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "sysbench {args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// sysbench oltp_read_write (8 threads, 5 s) through sluice on a server with
/// performance_schema on: SHOW DIGESTS has the same statement shapes as
/// events_statements_summary_by_digest, with counts within 1 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sysbench_digests_match_performance_schemas() {
    let server = private_server_with(vec![
        "--performance-schema=ON".into(),
        "--performance-schema-digests-size=2000".into(),
    ])
    .await;
    let bench = opts_at(
        server.addr(),
        dbkit::server::BENCH_USER,
        dbkit::server::BENCH_PASSWORD,
        None,
    );
    let mut root = Conn::new(bench).await.expect("privileged connection");
    root.query_drop("CREATE DATABASE t_sb").await.unwrap();
    let mut cfg = config_with_rules(&server.addr().to_string(), 4, "");
    cfg.max_backend_connections = sluice::config::BackendLimit::Fixed(32);
    let proxy = start(cfg).await;
    let addr = proxy.local_addr();
    let common = |phase: &str, extra: &[&str]| {
        let mut a: Vec<String> = [
            "oltp_read_write".to_string(),
            format!("--mysql-host={}", addr.ip()),
            format!("--mysql-port={}", addr.port()),
            "--mysql-user=app".into(),
            "--mysql-password=secret".into(),
            "--mysql-db=t_sb".into(),
            "--tables=2".into(),
            "--table-size=1000".into(),
            // Text statements, literals and all, as performance_schema digests them.
            "--db-ps-mode=disable".into(),
        ]
        .to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        a.push(phase.to_string());
        a
    };
    sysbench(&common("prepare", &[])).await;
    // Both sides start counting here.
    root.query_drop("TRUNCATE TABLE performance_schema.events_statements_summary_by_digest")
        .await
        .unwrap();
    let mut a = admin(&proxy).await;
    a.query_drop("RESET DIGESTS").await.unwrap();
    let out = sysbench(&common("run", &["--threads=8", "--time=5"])).await;
    assert!(out.contains("transactions:"), "{out}");

    let mut ours: BTreeMap<String, u64> = BTreeMap::new();
    for r in rows(&mut a, "SHOW DIGESTS").await {
        let text = cell(&r, "digest_text").unwrap_or("");
        if cell(&r, "schema") == Some("t_sb") && text.contains("sbtest") {
            *ours.entry(comparable(text)).or_default() += num(&r, "count");
        }
    }
    let theirs_rows: Vec<(String, u64)> = root
        .query(
            "SELECT DIGEST_TEXT, COUNT_STAR FROM performance_schema.events_statements_summary_by_digest \
             WHERE SCHEMA_NAME = 't_sb' AND DIGEST_TEXT LIKE '%sbtest%'",
        )
        .await
        .unwrap();
    let mut theirs: BTreeMap<String, u64> = BTreeMap::new();
    for (text, count) in theirs_rows {
        *theirs.entry(comparable(&text)).or_default() += count;
    }
    let only = |a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>| {
        a.keys()
            .filter(|k| !b.contains_key(*k))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert!(
        only(&ours, &theirs).is_empty() && only(&theirs, &ours).is_empty(),
        "the same statement shapes; only sluice's: {:?}, only performance_schema's: {:?}\n\
         sluice: {ours:#?}\nperformance_schema: {theirs:#?}",
        only(&ours, &theirs),
        only(&theirs, &ours),
    );
    assert!(ours.len() >= 9, "sysbench's shapes: {ours:#?}");
    for (shape, n) in &ours {
        let m = theirs[shape];
        assert!(
            *n > 0 && n.abs_diff(m) * 100 <= m,
            "{shape}: sluice {n}, performance_schema {m}"
        );
    }
    sysbench(&common("cleanup", &[])).await;
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// 100,000 statements, each of its own shape (a generated column name: no literal the
/// normaliser could take out), into a 100-row table: it stays at 100 rows, counts every
/// eviction, and its rows and overflow row together count every statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_statements_keep_the_table_at_its_bound() {
    const STATEMENTS: u64 = 100_000;
    const CLIENTS: u64 = 8;
    let mut cfg = admin_config(4);
    cfg.digest_table_size = 100;
    let proxy = start(cfg).await;
    let mut a = admin(&proxy).await;
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(connect(&proxy, None).await);
    }
    a.query_drop("RESET DIGESTS").await.unwrap();
    let before = stat(&mut a, "digests_evicted").await;
    let runs = clients.into_iter().enumerate().map(|(k, mut c)| {
        tokio::spawn(async move {
            let k = k as u64;
            for i in (k..STATEMENTS).step_by(CLIENTS as usize) {
                c.query_drop(format!("SELECT 1 AS c_{i}")).await.unwrap();
            }
            c
        })
    });
    let clients = futures_util::future::join_all(runs).await;
    assert_eq!(stat(&mut a, "digests").await, 100);
    let evicted = stat(&mut a, "digests_evicted").await - before;
    assert_eq!(
        evicted,
        STATEMENTS - 100,
        "one eviction per new shape past the bound"
    );
    let all = rows(&mut a, "SHOW DIGESTS").await;
    assert_eq!(all.len(), 101, "100 rows and the overflow row");
    let overflow = all.last().unwrap();
    assert_eq!(cell(overflow, "digest"), None);
    let counted: u64 = all.iter().map(|r| num(r, "count")).sum();
    assert_eq!(counted, STATEMENTS, "every statement is counted somewhere");
    assert_eq!(num(overflow, "count"), STATEMENTS - 100);
    drop(clients);
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

async fn stat(a: &mut Conn, name: &str) -> u64 {
    rows(a, "SHOW STATS")
        .await
        .iter()
        .find(|r| cell(r, "stat") == Some(name))
        .map(|r| num(r, "value"))
        .unwrap_or_else(|| panic!("no {name} in SHOW STATS"))
}

/// A prepared statement is digested by its text, once, at PREPARE: every execution counts
/// in the one row of its shape, which the same text sent with literals shares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_are_digested_by_their_text() {
    let proxy = start(admin_config(2)).await;
    let mut a = admin(&proxy).await;
    let mut c = connect(&proxy, None).await;
    a.query_drop("RESET DIGESTS").await.unwrap();
    let stmt = c.prep("SELECT ? + 1 AS p").await.unwrap();
    for i in 0..20 {
        let v: Option<i64> = c.exec_first(&stmt, (i,)).await.unwrap();
        assert_eq!(v, Some(i + 1));
    }
    c.query_drop("SELECT 41 + 1 AS p").await.unwrap();
    let all = rows(&mut a, "SHOW DIGESTS").await;
    let shape = all
        .iter()
        .filter(|r| cell(r, "digest_text") == Some("SELECT ? + ? AS p"))
        .collect::<Vec<_>>();
    assert_eq!(shape.len(), 1, "one row for the shape: {all:?}");
    assert_eq!(num(shape[0], "count"), 21, "20 executions and the query");
    assert_eq!(num(shape[0], "rows_sent"), 21);
    let id = digest(b"SELECT 41 + 1 AS p", Quoting::Backslash).id;
    assert_eq!(cell(shape[0], "digest"), Some(id.to_string().as_str()));
    c.close(stmt).await.unwrap();
    drop(c);
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

const NO_DROPS: &str = "
[[rules]]
name = \"no drops\"
match_digest = \"(?i)^DROP TABLE\"
error = \"DROP TABLE is not allowed through sluice; ask the DBA team\"
log = true
";

/// An `error` rule: the client gets 1148 with the rule's message, the statement never
/// reaches the server (its general log), and its digest records an error with no server
/// time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_rule_blocks_drop_table_before_the_server() {
    let server =
        private_server_with(vec!["--general-log=1".into(), "--log-output=TABLE".into()]).await;
    let mut root = Conn::new(opts_at(
        server.addr(),
        dbkit::server::BENCH_USER,
        dbkit::server::BENCH_PASSWORD,
        None,
    ))
    .await
    .unwrap();
    root.query_drop("CREATE DATABASE t_block").await.unwrap();
    root.query_drop("CREATE TABLE t_block.keep (id INT)")
        .await
        .unwrap();
    let proxy = start(config_with_rules(&server.addr().to_string(), 2, NO_DROPS)).await;
    let mut c = app(&proxy, Some("t_block")).await;
    let err = c.query_drop("DROP TABLE keep").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1148), "{err}");
    assert_eq!(state_of(&err).as_deref(), Some("42000"));
    assert!(
        err.to_string()
            .contains("DROP TABLE is not allowed through sluice; ask the DBA team"),
        "{err}"
    );
    // The session goes on, and what is not blocked reaches the server.
    c.query_drop("SELECT 'marker-after-the-block'")
        .await
        .unwrap();
    // The patterns are put together on the server: this query's own text (which the
    // general log has too) does not match them.
    let logged = |like: &'static str| {
        format!("SELECT COUNT(*) FROM mysql.general_log WHERE argument LIKE CONCAT('{like}', '%')")
    };
    let marker: u64 = root
        .query_first(logged("SELECT ''marker-after"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(marker, 1, "the general log sees what reaches the server");
    let drops: u64 = root
        .query_first(logged("DROP TABLE keep"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(drops, 0, "the DROP never reached the server");
    let tables: u64 = root
        .query_first(
            "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 't_block'",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tables, 1);
    let mut a = admin(&proxy).await;
    let listed = rows(&mut a, "SHOW RULES").await;
    assert_eq!(
        (num(&listed[0], "hits"), num(&listed[0], "blocked")),
        (1, 1)
    );
    assert_eq!(num(&listed[0], "logged"), 1);
    let all = rows(&mut a, "SHOW DIGESTS").await;
    let blocked = all
        .iter()
        .find(|r| cell(r, "digest_text") == Some("DROP TABLE keep"))
        .expect("the blocked statement's row");
    assert_eq!((num(blocked, "count"), num(blocked, "errors")), (1, 1));
    assert_eq!(num(blocked, "server_us"), 0, "sluice answered it");
    drop(c);
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

const THROTTLE: &str = "
[[rules]]
name = \"throttled\"
match_digest = \"AS throttled$\"
max_concurrency = 2
";

/// `max_concurrency = 2` on a slow shape while 100 clients send it: the server never runs
/// more than 2 of them at once (PROCESSLIST, sampled), every one runs (FIFO within
/// queue_timeout), and another shape keeps its pace meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rules_gate_keeps_two_running_and_others_unslowed() {
    const CLIENTS: usize = 100;
    let mut cfg = config_with_rules(&backend_addr(), 8, THROTTLE);
    cfg.max_backend_connections = sluice::config::BackendLimit::Fixed(32);
    let proxy = start(cfg).await;
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        clients.push(app(&proxy, None).await);
    }
    let done = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (done, most) = (done.clone(), most.clone());
        tokio::spawn(async move {
            let mut watcher = direct(None).await;
            let mut samples = 0u64;
            while !done.load(Ordering::Relaxed) {
                let n: u64 = watcher
                    .query_first(
                        "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                         WHERE INFO LIKE 'SELECT SLEEP(0.05) AS throttled'",
                    )
                    .await
                    .unwrap()
                    .unwrap();
                most.fetch_max(n, Ordering::Relaxed);
                samples += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            samples
        })
    };
    let started = Instant::now();
    let runs = clients.into_iter().map(|mut c| {
        tokio::spawn(async move {
            c.query_drop("SELECT SLEEP(0.05) AS throttled").await?;
            Ok::<_, mysql_async::Error>(c)
        })
    });
    let throttled = tokio::spawn(futures_util::future::join_all(runs));
    // Meanwhile another shape, from another client, is not held up by the gate.
    let mut other = app(&proxy, None).await;
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let t = Instant::now();
        let v: Option<u32> = other
            .query_first(format!("SELECT {i} AS unthrottled"))
            .await
            .unwrap();
        assert_eq!(v, Some(i));
        slowest = slowest.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let results = throttled.await.unwrap();
    let took = started.elapsed();
    done.store(true, Ordering::Relaxed);
    let samples = sampler.await.unwrap();
    for r in &results {
        assert!(
            matches!(r, Ok(Ok(_))),
            "every throttled statement runs: {r:?}"
        );
    }
    let most = most.load(Ordering::Relaxed);
    assert!(
        most <= 2,
        "at most 2 at once on the server, saw {most} ({samples} samples)"
    );
    assert!(most >= 1 && samples > 10, "{most} in {samples} samples");
    assert!(
        took >= Duration::from_millis(50 * CLIENTS as u64 / 2),
        "two at a time: {took:?}"
    );
    assert!(
        slowest < Duration::from_millis(500),
        "another shape waits for no throttled one: {slowest:?}"
    );
    let mut a = admin(&proxy).await;
    let listed = rows(&mut a, "SHOW RULES").await;
    assert_eq!(num(&listed[0], "hits"), CLIENTS as u64);
    assert!(num(&listed[0], "throttled") > 0, "{listed:?}");
    assert_eq!(num(&listed[0], "queue_timeouts"), 0);
    assert_eq!(
        (num(&listed[0], "running"), num(&listed[0], "queued")),
        (0, 0)
    );
    drop(results);
    a.disconnect().await.unwrap();
    proxy.shutdown().await;
}

/// A user mapped to the application account, with its own limits.
fn user(name: &str, max_clients: Option<u32>, max_concurrency: Option<u32>) -> UserConfig {
    let mut u = UserConfig::new(name, &format!("{name}-pw"));
    u.backend_user = Some(APP_USER.into());
    u.backend_password = Some(Secret::new(APP_PASSWORD.into()));
    u.max_client_connections = max_clients;
    u.max_concurrency = max_concurrency;
    u
}

async fn login(proxy: &ProxyHandle, name: &str) -> Result<Conn, mysql_async::Error> {
    Conn::new(opts_at(
        proxy.local_addr(),
        name,
        &format!("{name}-pw"),
        None,
    ))
    .await
}

/// `max_client_connections`: a login beyond it gets 1226 with MySQL's text, other users
/// log in as before, a COM_CHANGE_USER to a user at its limit is refused and leaves the
/// session its old user, and a client that leaves makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_client_limit_refuses_logins_and_change_user() {
    let mut cfg = config(2);
    cfg.users = vec![user("capped", Some(2), None), user("other", None, None)];
    let proxy = start(cfg).await;
    let registry = &proxy.context().registry;
    let first = login(&proxy, "capped").await.unwrap();
    let mut second = login(&proxy, "capped").await.unwrap();
    let err = login(&proxy, "capped").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1226), "{err}");
    assert_eq!(state_of(&err).as_deref(), Some("42000"));
    assert!(
        err.to_string().contains(
            "User 'capped' has exceeded the 'max_client_connections' resource (current value: 2)"
        ),
        "{err}"
    );
    let mut other = login(&proxy, "other").await.expect("other users log in");
    assert_eq!(
        other.query_first::<u8, _>("SELECT 1").await.unwrap(),
        Some(1)
    );
    other.query_drop("SET @mine = 'kept'").await.unwrap();
    let err = other
        .change_user(
            ChangeUserOpts::new()
                .with_user(Some("capped".into()))
                .with_pass(Some("capped-pw".into())),
        )
        .await
        .unwrap_err();
    assert_eq!(code_of(&err), Some(1226), "{err}");
    assert_eq!(
        (
            registry.user_clients("capped"),
            registry.user_clients("other")
        ),
        (2, 1)
    );
    // The refused session is still `other`'s, with its state.
    let mine: Option<String> = other.query_first("SELECT @mine").await.unwrap();
    assert_eq!(mine.as_deref(), Some("kept"));
    assert_eq!(
        second.query_first::<u8, _>("SELECT 2").await.unwrap(),
        Some(2)
    );
    drop(first);
    let ok = eventually(Duration::from_secs(5), || {
        registry.user_clients("capped") == 1
    })
    .await;
    assert!(ok, "a client that left no longer counts");
    let third = login(&proxy, "capped").await.expect("room again");
    drop((second, third, other));
    proxy.shutdown().await;
}

/// A user's `max_concurrency`: beyond it its statements queue, and after queue_timeout get
/// 1226 without running; other users' statements run meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_concurrency_limit_queues_its_statements_only() {
    let mut cfg = config(4);
    cfg.users = vec![user("single", None, Some(1)), user("other", None, None)];
    cfg.queue_timeout = Duration::from_millis(300);
    let proxy = start(cfg).await;
    let mut busy = login(&proxy, "single").await.unwrap();
    let mut waits = login(&proxy, "single").await.unwrap();
    let mut other = login(&proxy, "other").await.unwrap();
    let sleeping = tokio::spawn(async move {
        busy.query_drop("SELECT SLEEP(1)").await.unwrap();
        busy
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = Instant::now();
    assert_eq!(
        other.query_first::<u8, _>("SELECT 3").await.unwrap(),
        Some(3)
    );
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "other users run at once"
    );
    let t = Instant::now();
    let err = waits.query_drop("SELECT 4").await.unwrap_err();
    assert_eq!(code_of(&err), Some(1226), "{err}");
    assert!(
        err.to_string().contains(
            "User 'single' has exceeded the 'max_concurrency' resource (current value: 1)"
        ),
        "{err}"
    );
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "it waited queue_timeout first"
    );
    let busy = sleeping.await.unwrap();
    assert_eq!(
        waits.query_first::<u8, _>("SELECT 5").await.unwrap(),
        Some(5)
    );
    drop((busy, waits, other));
    proxy.shutdown().await;
}
